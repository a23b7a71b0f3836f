"""Lambda concurrency as AWS documents it, for the local modes: the account's limit, reservations,
``GetAccountSettings``, and the throttling of invocations by the local wiring (local/wiring.py).

The rules, each from the page it cites:

* "Concurrent executions | 1,000" is the default quota, and "New AWS accounts have reduced
  concurrency and memory quotas. AWS raises these quotas automatically based on your usage."
  (Lambda quotas, https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html). The
  page gives no figure for a reduced account; 10 is what new accounts are widely reported to get
  (and the "[10]"/"[50]" minimums they report), so the fresh-account model has 10.
* "You can reserve up to the Unreserved account concurrency value that is shown, minus 100 for
  functions that don't have reserved concurrency." (Configuring reserved concurrency,
  https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html). So a reservation
  that would leave fewer than 100 unreserved is refused: on a 10-concurrency account, every one.
  Accounts with reduced quotas have been seen to report lower minimums; the model holds the
  documented 100, the stricter figure.
* Throttled asynchronous invocations (SES's receipt-rule action, SNS): "For throttling errors (429)
  and system errors (500-series), Lambda returns the event to the queue and attempts to run the
  function again for up to 6 hours by default. The retry interval increases exponentially from 1
  second after the first attempt to a maximum of 5 minutes." (How Lambda handles errors and retries
  with asynchronous invocation,
  https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html). Throttles do
  not use up the two retries that function errors get.
* A throttled SQS batch (the senders' and the extractor's event sources): the batch is not
  processed and its messages stay in the queue, hidden until their visibility timeout ends; each
  receive counts towards the queue's ``maxReceiveCount``, which is why AWS advises a
  ``maxReceiveCount`` of at least 5 for a Lambda event source (Using Lambda with Amazon SQS,
  https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html). The page does not say whether
  Lambda's poller holds back while throttled; the model receives and returns, the stricter reading.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from common.aws import client
from common.errors import EmailHandlerError
from local import motoadapter

DEFAULT_CONCURRENCY = 1000
FRESH_CONCURRENCY = 10
MIN_UNRESERVED = 100
ASYNC_MAX_AGE_S = 6 * 3600
ASYNC_MAX_INTERVAL_S = 300
# Lambda's own storage quotas, as GetAccountSettings reports them (the quotas page: 75 GB of code
# storage; deployment package 50 MB zipped, 250 MB unzipped).
TOTAL_CODE_SIZE = 75 * 1024**3
CODE_SIZE_ZIPPED = 50 * 1024**2
CODE_SIZE_UNZIPPED = 250 * 1024**2
THROTTLE_KEY = "_throttled"  # what a re-queued asynchronous invocation carries: {"count", "since"}


class ThrottledError(EmailHandlerError):
    """TooManyRequestsException: the account has no concurrency left for this invocation."""


# The emulator's account: the default quota, or a fresh account's (local.fresh.set_fresh sets it).
_LIMIT = [DEFAULT_CONCURRENCY]


def set_account_limit(limit: int) -> None:
    _LIMIT[0] = limit


def account_limit() -> int:
    return _LIMIT[0]


def unreserved(limit: int, reservations: list[int]) -> int:
    return limit - sum(reservations)


def check_reservation(limit: int, others: list[int], wanted: int) -> str:
    """Why Lambda refuses reserving ``wanted`` beside the ``others`` reservations ('' when it may):
    what is left unreserved must stay at the documented minimum, unless nothing is taken from it."""
    left = unreserved(limit, [*others, wanted])
    if wanted > 0 and left < MIN_UNRESERVED:
        return (
            "Specified ReservedConcurrentExecutions for function decreases account's "
            f"UnreservedConcurrentExecution below its minimum value of [{MIN_UNRESERVED}]."
        )
    return ""


def account_settings(limit: int, reservations: list[int], code_sizes: list[int]) -> dict[str, Any]:
    """The body of GetAccountSettings."""
    return {
        "AccountLimit": {
            "TotalCodeSize": TOTAL_CODE_SIZE,
            "CodeSizeUnzipped": CODE_SIZE_UNZIPPED,
            "CodeSizeZipped": CODE_SIZE_ZIPPED,
            "ConcurrentExecutions": limit,
            "UnreservedConcurrentExecutions": unreserved(limit, reservations),
        },
        "AccountUsage": {"TotalCodeSize": sum(code_sizes), "FunctionCount": len(code_sizes)},
    }


def retry_delay(throttles: int) -> int:
    """Seconds before the ``throttles``-th retry of a throttled asynchronous invocation: 1 s after the
    first, doubling, at most 5 minutes."""
    return min(ASYNC_MAX_INTERVAL_S, 2 ** max(0, throttles - 1))


def requeue_throttled(body: dict[str, Any], now: float | None = None) -> tuple[str, int] | None:
    """The body and delay with which a throttled asynchronous invocation goes back to its queue, or
    None once it is 6 hours old (Lambda then discards it, or sends it to an on-failure destination)."""
    now = time.time() if now is None else now
    state = body.get(THROTTLE_KEY)
    if not isinstance(state, dict):
        state = {}
    count, since = int(state.get("count", 0)) + 1, float(state.get("since", now))
    if now - since >= ASYNC_MAX_AGE_S:
        return None
    # SQS caps DelaySeconds at 15 minutes; 5 minutes is within it.
    return json.dumps({**body, THROTTLE_KEY: {"count": count, "since": since}}), retry_delay(count)


class AccountConcurrency:
    """At most ``limit`` invocations at once across every function of the account; one more is
    throttled (no waiting: Lambda answers 429 at once)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running = 0
        self._lock = threading.Lock()
        self.peak = 0
        self.throttles: Counter[str] = Counter()

    @classmethod
    def of_account(cls, api: Any = None) -> AccountConcurrency:
        """The limit the account reports (Lambda GetAccountSettings), as the wiring stands in for
        Lambda's own scaling; the default quota when the emulator does not answer."""

        try:
            settings = (api or client("lambda")).get_account_settings()
            return cls(int(settings["AccountLimit"]["ConcurrentExecutions"]))
        except Exception:  # an emulator without the call (LocalStack): Lambda's default quota
            return cls(DEFAULT_CONCURRENCY)

    @property
    def running(self) -> int:
        return self._running

    @contextmanager
    def slot(self, function: str) -> Iterator[None]:
        with self._lock:
            if self._running >= self.limit:
                self.throttles[function] += 1
                raise ThrottledError(
                    f"Rate Exceeded: {function} throttled, {self._running} of the account's "
                    f"{self.limit} concurrent executions in use"
                )
            self._running += 1
            self.peak = max(self.peak, self._running)
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1


def install() -> None:
    """Into moto (called by local.fresh.install): GetAccountSettings, which moto 5.2.5 answers
    with 404, and the reservation rule above on PutFunctionConcurrency."""
    urls = motoadapter.awslambda_urls()
    awslambda_exceptions = motoadapter.awslambda_exceptions()
    awslambda_models = motoadapter.awslambda_models()
    awslambda_responses = motoadapter.awslambda_responses()

    def reservations(backend: Any, but: str = "") -> list[int]:
        return [
            int(f.reserved_concurrency)
            for f in backend.list_functions()
            if f.reserved_concurrency and f.function_name != but and not but.endswith(f":{f.function_name}")
        ]

    original = awslambda_models.LambdaBackend.put_function_concurrency

    def put_function_concurrency(self: Any, function_name: str, reserved_concurrency: str) -> str:
        refused = check_reservation(
            account_limit(), reservations(self, function_name), int(reserved_concurrency)
        )
        if refused:
            raise awslambda_exceptions.InvalidParameterValueException(refused)
        return str(original(self, function_name, reserved_concurrency))

    def get_account_settings(self: Any) -> str:
        functions = self.backend.list_functions()
        sizes = [int(getattr(f, "code_size", 0) or 0) for f in functions]
        return json.dumps(account_settings(account_limit(), reservations(self.backend), sizes))

    awslambda_models.LambdaBackend.put_function_concurrency = put_function_concurrency
    awslambda_responses.LambdaResponse.get_account_settings = get_account_settings
    urls.url_paths["{0}/(?P<api_version>[^/]+)/account-settings/?$"] = (
        awslambda_responses.LambdaResponse.dispatch
    )
