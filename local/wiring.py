"""Local event wiring: what AWS event-source mappings, S3 notifications, SNS subscriptions and
Lambda's asynchronous invocations do, for functions behind RIE endpoints.

One thread per source, each invoking through a per-function lock, because an RIE serves one
invocation at a time (a second concurrent request crashes it):

* the sender queues -> ack/forward/reply-sender, and ``attachment-events`` (S3 ObjectCreated under
  attachments/) -> attachment-extractor: SQS batches with ``ReportBatchItemFailures``
  (:func:`poll_queue_once`: only successes are deleted), one batch at a time per function, within
  the MaximumConcurrency the deploy gives their event sources;
* ``wiring-ses-feedback`` -> inbound-handler: the SNS envelope becomes the SNS event Lambda gets;
* ``wiring-invocations`` -> the function named in the message: what SES's receipt-rule Lambda
  action does (an asynchronous invocation), fed by the SMTP ingress and ``email-handler inject``.

A failed invocation leaves its message to the queue's visibility timeout and redrive policy (DLQ
after the configured receives), as on AWS. Nothing is dropped without a log line saying why.

Lambda's account concurrency (local/concurrency.py): at most the account's limit of
invocations run at once across the functions; one more is throttled. A throttled SQS batch returns
to its queue like a failed one (a receive counted, so the redrive policy applies); a throttled
asynchronous invocation goes back to its queue with a delay that doubles from 1 s to 5 minutes, for
up to 6 hours, without using up its attempts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.aws import s3, sqs
from common.aws.sts import account_id
from common.runtime.clock import iso_z
from common.runtime.log import get_logger
from common.store import layout
from deploy import resources
from deploy.config import Config
from deploy.functions import BY_NAME, FUNCTIONS
from deploy.lambdas import alias_arn
from deploy.triggers import source_queue
from local import rie
from local.concurrency import AccountConcurrency, ThrottledError, requeue_throttled
from local.events import sns_event, sqs_event
from local.provision import ASYNC_ATTEMPTS, wiring_queue
from local.rie import InvokeError

Invoke = Callable[[dict[str, Any]], Any]
log = get_logger("wiring")


@dataclass
class BatchResult:
    received: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    error: str = ""
    throttled: bool = False


def poll_queue_once(
    queue: str,
    queue_arn: str,
    invoke: Invoke,
    batch_size: int = 10,
    wait_s: int = 0,
    visibility_s: int | None = None,
    region: str = "us-east-1",
    api: Any = None,
) -> BatchResult:
    """One turn of an SQS event-source mapping with ``ReportBatchItemFailures``; ``api`` is the SQS
    client it polls with (Lambda's mapping uses the function's execution role)."""
    messages = sqs.receive(queue, max_messages=batch_size, wait_s=wait_s, visibility_s=visibility_s, api=api)
    result = BatchResult(received=len(messages))
    if not messages:
        return result
    ids = [m["MessageId"] for m in messages]
    try:
        response = invoke(sqs_event(messages, queue_arn, region))
    except Exception as exc:  # a function error (or a throttle) fails the whole batch, as on AWS
        result.failed, result.error = ids, f"{type(exc).__name__}: {exc}"
        result.throttled = isinstance(exc, ThrottledError)
        return result
    reported = response.get("batchItemFailures") if isinstance(response, dict) else None
    failed_ids = {str(f.get("itemIdentifier")) for f in reported or [] if isinstance(f, dict)}
    if reported is None or not failed_ids <= set(ids):
        # Lambda treats a malformed or foreign batchItemFailures as a failure of the whole batch.
        if reported is not None:
            result.failed, result.error = ids, "batchItemFailures names ids outside the batch"
            return result
        failed_ids = set()
    handles = [m["ReceiptHandle"] for m in messages if m["MessageId"] not in failed_ids]
    sqs.delete(queue, handles, api=api)
    result.deleted = [i for i in ids if i not in failed_ids]
    result.failed = [i for i in ids if i in failed_ids]
    return result


class Endpoint:
    """One function's RIE endpoint; every invocation holds its lock (the RIE is single-concurrency)
    and, with ``account`` set, one of the account's concurrent executions (or is throttled)."""

    def __init__(
        self,
        function: str,
        url: str,
        invoke: Callable[[str, Any, float], Any] | None = None,
        account: AccountConcurrency | None = None,
    ) -> None:

        self.function, self.url = function, url
        self.timeout_s = BY_NAME[function].timeout_s + 30
        self._invoke = invoke or rie.invoke
        self.lock = threading.Lock()
        self.account = account

    def __call__(self, event: dict[str, Any]) -> Any:
        with self.lock:
            if self.account is None:
                return self._invoke(self.url, event, self.timeout_s)
            with self.account.slot(self.function):
                return self._invoke(self.url, event, self.timeout_s)


@dataclass(frozen=True, slots=True)
class Drop:
    """A queue message that invokes nothing: deleted, and logged with why."""

    reason: str
    expected: bool = False  # logged at INFO (S3's own test event), otherwise WARNING


# Translators: queue message body -> (function, event), or a Drop.
Route = tuple[str, dict[str, Any]] | Drop


def sns_route(body: dict[str, Any]) -> Route:
    if body.get("Type") != "Notification" or "Message" not in body:
        return Drop(f"SNS message of type {body.get('Type')!r} carries no notification")
    return "inbound-handler", sns_event(
        str(body["Message"]),
        str(body.get("TopicArn", "")),
        str(body.get("MessageId", "")),
        str(body.get("Subject") or ""),
    )


def invocation_route(body: dict[str, Any]) -> Route:
    function = body.get("function")
    if function not in BY_NAME or not isinstance(body.get("event"), dict):
        return Drop(f"asynchronous invocation for unknown function {function!r}")
    return str(function), body["event"]


@dataclass
class Source:
    queue: str
    route: Callable[[dict[str, Any]], Route] | None = None  # None: an SQS event-source mapping (senders)
    function: str = ""  # the consumer of a sender queue
    api: Any = None  # the SQS client it polls with (None: this process's, the local admin)


def role_sqs(credentials: dict[str, str], region: str) -> Any:
    """An SQS client holding a role session's credentials (endpoint: AWS_ENDPOINT_URL, as every client)."""
    import boto3

    return boto3.session.Session(
        aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
    ).client("sqs", region_name=region)


class Wiring:
    """Start with :meth:`start`; every source polls until :meth:`stop`.

    ``roles`` (function -> credentials of its role session) makes each sender queue be polled with its
    sender's role, as Lambda's event-source mapping polls with the function's execution role: a role
    without sqs:ReceiveMessage or sqs:DeleteMessage fails here as it would on AWS. The other sources
    stand in for AWS services and the local tooling, which use this process's (admin) credentials."""

    def __init__(
        self,
        cfg: Config,
        endpoints: dict[str, Endpoint],
        visibility_s: int | None = None,
        batch_size: int = 10,
        report: Callable[[str], None] | None = None,
        roles: dict[str, dict[str, str]] | None = None,
        account: AccountConcurrency | None = None,
    ) -> None:
        self.cfg, self.endpoints, self.visibility_s, self.batch_size = (
            cfg,
            endpoints,
            visibility_s,
            batch_size,
        )
        # The account's concurrency, shared by every function the wiring invokes (None: unlimited).
        self.account = account
        for endpoint in endpoints.values():
            endpoint.account = endpoint.account or account
        self.report = report or (lambda line: None)
        roles = roles or {}
        # The SQS event sources AWS has: the senders' queues and the attachment queue S3 notifies.
        self.sources = [
            Source(
                source_queue(cfg, f),
                function=f.name,
                api=role_sqs(roles[f.name], cfg.region) if f.name in roles else None,
            )
            for f in FUNCTIONS
            if f.batch_concurrency
        ] + [
            Source(wiring_queue(cfg, "ses-feedback"), sns_route),
            Source(wiring_queue(cfg, "invocations"), invocation_route),
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.last_poll: dict[str, float] = {}  # the last poll that worked
        self.failing: dict[str, str] = {}  # queue -> why its polls fail (cleared by the next that works)

    def start(self) -> Wiring:
        for source in self.sources:
            thread = threading.Thread(
                target=self._run, args=(source,), name=f"wiring:{source.queue}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)

    def healthy(self) -> bool:
        """Every source has polled successfully, none is failing now, and every thread is running."""
        return (
            bool(self._threads)
            and all(t.is_alive() for t in self._threads)
            and not self.failing
            and all(s.queue in self.last_poll for s in self.sources)
        )

    def _run(self, source: Source) -> None:
        arn = resources.queue_arn(self.cfg, source.queue)
        while not self._stop.is_set():
            try:
                if source.route is None:
                    self._batch(source, arn)
                else:
                    self._messages(source)
                self.last_poll[source.queue] = time.monotonic()
                if self.failing.pop(source.queue, None) is not None:
                    self.report(f"{source.function or source.queue}: polling {source.queue} works again")
            except (
                Exception
            ) as exc:  # a denied role, the emulator restarting: keep the wiring alive and say so
                error = f"{type(exc).__name__}: {exc}"
                if self.failing.get(source.queue) != error:  # once per distinct error, not every 2 s
                    self.report(f"{source.function or source.queue}: cannot poll {source.queue}: {error}")
                self.failing[source.queue] = error
                log.error(
                    "wiring poll failed",
                    extra={"queue": source.queue, "function": source.function or None, "error": error},
                )
                self._stop.wait(2)

    def _record(
        self,
        request_id: str,
        function: str,
        receives: int,
        result: Any = None,
        error: Exception | None = None,
    ) -> None:
        """Lambda's invocation record for an asynchronous invocation (the shape its destinations get),
        kept under layout.local_invocation(<SQS message id>) for `email-handler inject` to read."""

        if error is None:
            condition, response = "Success", result
        else:
            condition = "RetriesExhausted" if receives >= ASYNC_ATTEMPTS else "RetryPending"
            response = (
                error.payload
                if isinstance(error, InvokeError)
                else {"errorType": type(error).__name__, "errorMessage": str(error)}
            )
        record = {
            "version": "1.0",
            "timestamp": iso_z(millis=True),
            "requestContext": {
                "requestId": request_id,
                "functionArn": alias_arn(self.cfg, account_id(), function),
                "condition": condition,
                "approximateInvokeCount": receives,
                "maximumAttempts": ASYNC_ATTEMPTS,
            },
            "responseContext": {"statusCode": 200, **({"functionError": "Unhandled"} if error else {})},
            "responsePayload": response,
        }
        try:
            s3.put(
                self.cfg.bucket,
                layout.local_invocation(request_id),
                json.dumps(record, default=str).encode(),
                "application/json",
            )
        except Exception as exc:  # the record is a convenience: never let it stop the wiring
            log.warning("invocation record not written", extra={"error": f"{type(exc).__name__}: {exc}"})

    def _batch(self, source: Source, arn: str) -> None:
        endpoint = self.endpoints[source.function]
        result = poll_queue_once(
            source.queue,
            arn,
            endpoint,
            batch_size=self.batch_size,
            wait_s=1,
            visibility_s=self.visibility_s,
            region=self.cfg.region,
            api=source.api,
        )
        if not result.received:
            return
        outcome = (
            "ok"
            if not result.failed
            else "throttled: back to the queue after its visibility timeout"
            if result.throttled
            else f"{len(result.failed)} failed" + (f" ({result.error})" if result.error else "")
        )
        self.report(f"{source.function} <- {result.received} message(s) from {source.queue}: {outcome}")
        if result.failed:
            log.warning(
                "batch records failed",
                extra={
                    "queue": source.queue,
                    "function": source.function,
                    "failed": result.failed,
                    "error": result.error or None,
                },
            )

    def _messages(self, source: Source) -> None:
        assert source.route is not None
        messages = sqs.receive(source.queue, max_messages=10, wait_s=1, visibility_s=self.visibility_s)
        done = []
        for m in messages:
            try:
                routed = source.route(json.loads(m["Body"]))
            except (json.JSONDecodeError, AttributeError) as exc:
                routed = Drop(f"message body is not a JSON object ({exc})")
            if isinstance(routed, Drop):
                (log.info if routed.expected else log.warning)(
                    "wiring message dropped",
                    extra={"queue": source.queue, "reason": routed.reason, "sqs_message_id": m["MessageId"]},
                )
                done.append(m["ReceiptHandle"])
                continue
            function, event = routed
            receives = int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
            try:
                result = self.endpoints[function](event)
            except ThrottledError as exc:
                self._throttled(source, m, function, exc)
                done.append(m["ReceiptHandle"])
                continue
            except Exception as exc:  # left for the visibility timeout: retried, then the DLQ
                self.report(f"{function} <- {source.queue}: failed (receive {receives}): {exc}")
                log.warning(
                    "invocation failed",
                    extra={
                        "queue": source.queue,
                        "function": function,
                        "receive_count": receives,
                        "error": f"{type(exc).__name__}: {exc}",
                    },
                )
                self._record(m["MessageId"], function, receives, error=exc)
                continue
            status = result.get("status", "ok") if isinstance(result, dict) else "ok"
            self.report(f"{function} <- {source.queue}: {status}")
            self._record(m["MessageId"], function, receives, result=result)
            done.append(m["ReceiptHandle"])
        if done:
            sqs.delete(source.queue, done)

    def _throttled(self, source: Source, message: dict[str, Any], function: str, exc: Exception) -> None:
        """An asynchronous invocation Lambda throttled: back to its queue as a new message, delayed, so
        the queue's receives (the function-error attempts) are not used up; dropped, and logged, at 6
        hours."""
        again = requeue_throttled(json.loads(message["Body"]))
        if again is None:
            log.error(
                "asynchronous invocation dropped: throttled for 6 hours",
                extra={"queue": source.queue, "function": function, "sqs_message_id": message["MessageId"]},
            )
            self.report(f"{function} <- {source.queue}: dropped after 6 hours of throttling")
            return
        body, delay = again
        sqs.send(source.queue, body, delay_s=delay)
        log.info(
            "invocation throttled",
            extra={"queue": source.queue, "function": function, "retry_in_s": delay, "error": str(exc)},
        )
        self.report(f"{function} <- {source.queue}: throttled, retried in {delay} s")
