"""The embedded AWS emulator: a real moto server, in this process (no Docker) or in its own.

``python -m local.emulator [-H HOST] [-p PORT]`` runs the same server as ``moto_server`` with
fidelity fixes and two measured speed-ups (:func:`patch_moto`); the compose image and the load tests use it.
Every way of starting it serves through local.guard (no CORS, no foreign Origin, the admin's
token for ``/moto-api``) and binds a loopback address unless told ``allow_remote``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from email.utils import getaddresses
from typing import Any
from urllib.parse import unquote

from cli.command import EMULATOR_PORT
from common.errors import ConfigError
from local import fresh, iam, motoadapter
from local.fresh import account_details, put_account_details, sent_last_24_hours
from local.guard import Guard, is_loopback
from local.iam import SES_SANDBOX
from local.rie import wait_for_port


def route_cache() -> None:
    """Route requests without listing moto's package directory each time.

    moto's werkzeug app asks ``backends.list_of_moto_modules()`` for every request, which lists the
    package directory and stats its ~200 entries: about a third of the emulator's CPU under the
    sender load tests (cProfile of moto 5.2.5). The directory does not change while the server
    runs, so the list is computed once.
    """
    backends = motoadapter.moto_backends()

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def sqs_retention_check() -> None:
    """Check a received message's retention period without rebuilding every queue attribute.

    moto's ReceiveMessage calls ``get_queue_attributes`` once per returned message, and that counts
    the visible messages of the whole queue each time: O(batch x depth) clock reads per receive,
    the largest single cost in the emulator under the chaos test (py-spy, moto 5.2.5). Reading
    the one attribute it needs gives the same answer.
    """

    sqs_models = motoadapter.sqs_models()

    def is_valid(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    sqs_models.SQSBackend.is_message_valid_based_on_retention_period = is_valid


def dynamodb_atomic() -> None:
    """Make each DynamoDB request atomic, as the real service is.

    moto's server handles requests on threads and its DynamoDB backend checks a
    ConditionExpression and applies the write without a lock, so two concurrent conditional
    writes can both pass the same condition. DynamoDB never allows that, and the idempotency
    records and the shared rate limiter rely on it (seen here: two senders claimed overlapping
    rate slots). One lock around every DynamoDB action restores it; the backend is CPU-bound
    under the GIL anyway, so nothing is lost.
    """

    dynamodb_responses = motoadapter.dynamodb_responses()

    lock = threading.Lock()
    original = dynamodb_responses.DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        # IAM (signature and policies, when enforced) is checked before taking the lock: it reads no table.
        try:
            self._authenticate_and_authorize_normal_action()
        except Exception as denied:
            return _error_response(self, denied)
        self.authorized = True
        with lock:
            return original(self)

    dynamodb_responses.DynamoHandler.call_action = call_action


def _error_response(handler: Any, error: Any) -> Any:
    """What moto's call_action answers for an HTTPException raised by its auth hook."""
    from werkzeug.exceptions import HTTPException

    if not isinstance(error, HTTPException):
        raise error
    status, headers, body = handler._transform_response(
        handler.response_headers, (error.description, {"status": error.code})
    )
    headers, body = handler._enrich_response(headers, body)
    return status, headers, body


def sesv2_suppression_options() -> None:
    """SESv2 PutConfigurationSetSuppressionOptions, which moto 5.2.5 does not implement (404).

    The deploy sets a configuration set's suppression options (SES DG, configuration set-level
    suppression); moto already stores and returns ``SuppressionOptions`` in GetConfigurationSet, so
    the call only has to store them, as SES does (NotFoundException for an unknown set)."""

    urls = motoadapter.sesv2_urls()
    sesv2_responses = motoadapter.sesv2_responses()

    def put_configuration_set_suppression_options(self: Any) -> str:
        name = unquote(self.path.rstrip("/").split("/")[-2])
        config_set = self.sesv2_backend.get_configuration_set(configuration_set_name=name)
        config_set.suppression_options = {
            "SuppressedReasons": list(json.loads(self.body or "{}").get("SuppressedReasons", []))
        }
        return "{}"

    sesv2_responses.SESV2Response.put_configuration_set_suppression_options = (
        put_configuration_set_suppression_options
    )
    urls.url_paths["{0}/v2/email/configuration-sets/(?P<ConfigurationSetName>[^/]+)/suppression-options$"] = (
        sesv2_responses.SESV2Response.dispatch
    )


def ses_sandbox() -> None:
    """SES's sandbox, switched by ``local.iam.SES_SANDBOX`` (off: moto's account sends to anyone).

    In the sandbox SES sends only to verified identities (an address, or its domain) and refuses
    the rest with MessageRejected "Email address is not verified. The following identities failed
    the check in region ...: <address>" (SES DG, "Request production access"); sesv2 GetAccount,
    which moto 5.2.5 lacks, says ``ProductionAccessEnabled`` false. The IAM side (SES also
    authorises the send against each recipient's identity) is in local.iam."""

    ses_exceptions = motoadapter.ses_exceptions()
    ses_models = motoadapter.ses_models()
    urls = motoadapter.sesv2_urls()
    sesv2_responses = motoadapter.sesv2_responses()

    def refuse_unverified(backend: Any, recipients: list[str]) -> None:
        if not SES_SANDBOX["on"]:
            return
        failed = [a for _, a in getaddresses(recipients) if a and not backend._is_verified_address(a)]
        if failed:
            raise ses_exceptions.MessageRejectedError(
                "Email address is not verified. The following identities failed the check in "
                f"region {backend.region_name.upper()}: {', '.join(failed)}"
            )

    send_raw, send = ses_models.SESBackend.send_raw_email, ses_models.SESBackend.send_email

    def send_raw_email(self: Any, source: str, destinations: list[str], raw_data: str) -> Any:
        refuse_unverified(self, list(destinations))
        return send_raw(self, source, destinations, raw_data)

    def send_email(
        self: Any, source: str, subject: str, body: str, destinations: dict[str, list[str]]
    ) -> Any:
        refuse_unverified(self, [a for addresses in destinations.values() for a in addresses])
        return send(self, source, subject, body, destinations)

    def get_account(self: Any) -> str:
        details = account_details()
        return json.dumps(
            {
                **({"Details": details} if details else {}),
                "ProductionAccessEnabled": not SES_SANDBOX["on"],
                "SendingEnabled": True,
                "EnforcementStatus": "HEALTHY",
                "DedicatedIpAutoWarmupEnabled": False,
                "SendQuota": {
                    "Max24HourSend": 200.0 if SES_SANDBOX["on"] else 50000.0,
                    "MaxSendRate": 1.0 if SES_SANDBOX["on"] else 14.0,
                    "SentLast24Hours": float(sent_last_24_hours()),
                },
            }
        )

    ses_models.SESBackend.send_raw_email = send_raw_email
    ses_models.SESBackend.send_email = send_email

    def put_account_details_(self: Any) -> str:
        put_account_details(json.loads(self.body or "{}"))
        return "{}"

    sesv2_responses.SESV2Response.get_account = get_account
    sesv2_responses.SESV2Response.put_account_details = put_account_details_
    urls.url_paths["{0}/v2/email/account$"] = sesv2_responses.SESV2Response.dispatch
    urls.url_paths["{0}/v2/email/account/details$"] = sesv2_responses.SESV2Response.dispatch


def ses_event_destination_names() -> None:
    """An event destination's name is unique within its configuration set, as SES has it
    (CreateConfigurationSetEventDestination: EventDestinationAlreadyExists "the event destination
    already exists" for that set); moto 5.2.5 keeps one name space for the whole account, so a second
    deployment's set (prd beside local, one account) could not have its own "feedback" destination."""
    ses_exceptions = motoadapter.ses_exceptions()
    ses_models = motoadapter.ses_models()

    def create_configuration_set_event_destination(
        self: Any, configuration_set_name: str, event_destination: dict[str, Any]
    ) -> None:
        if self.config_sets.get(configuration_set_name) is None:
            raise ses_exceptions.ConfigurationSetDoesNotExist("Invalid Configuration Set Name.")
        current = self.config_set_event_destination.get(configuration_set_name) or {}
        if current.get("Name") == event_destination["Name"]:
            raise ses_exceptions.EventDestinationAlreadyExists("Duplicate Event destination Name.")
        self.config_set_event_destination[configuration_set_name] = event_destination
        self.event_destinations[event_destination["Name"]] = 1

    ses_models.SESBackend.create_configuration_set_event_destination = (
        create_configuration_set_event_destination
    )


def sqs_message_characters() -> None:
    """Refuse a message body SQS refuses: a character outside XML 1.0's set (SendMessage and
    SendMessageBatch: InvalidMessageContents). moto 5.2.5 stores anything, so a body with U+FFFF from
    a stranger's subject passed every local test and failed on AWS."""

    sqs_exceptions = motoadapter.sqs_exceptions()
    sqs_models = motoadapter.sqs_models()

    outside = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
    original = sqs_models.SQSBackend._validate_message

    def validate(self: Any, queue: Any, message_body: str, *args: Any, **kwargs: Any) -> None:
        if outside.search(message_body):
            raise sqs_exceptions.SQSException(
                "InvalidMessageContents",
                "Invalid characters found. Valid unicode characters are #x9 | "
                "#xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
            )
        original(self, queue, message_body, *args, **kwargs)

    sqs_models.SQSBackend._validate_message = validate


def dynamodb_read_key_sizes() -> None:
    """Refuse an over-long key on GetItem, BatchGetItem, UpdateItem and DeleteItem as DynamoDB does
    (ValidationException: partition key over 2,048 bytes, sort key over 1,024); moto checks PutItem only."""
    dynamodb_models = motoadapter.dynamodb_models()

    for name in ("get_item", "update_item", "delete_item"):
        original = getattr(dynamodb_models.DynamoDBBackend, name)

        def checked(
            self: Any,
            table_name: str,
            key: dict[str, Any],
            *args: Any,
            _original: Any = original,
            **kwargs: Any,
        ) -> Any:
            self.get_table(table_name)._validate_key_sizes(key)
            return _original(self, table_name, key, *args, **kwargs)

        setattr(dynamodb_models.DynamoDBBackend, name, checked)


@functools.cache  # once per process: the patches wrap what they replace
def patch_moto() -> None:
    """What the embedded server changes in moto: fidelity fixes and two measured speed-ups."""

    dynamodb_atomic()
    dynamodb_read_key_sizes()
    sqs_message_characters()
    sesv2_suppression_options()
    ses_event_destination_names()
    ses_sandbox()
    fresh.install()  # inert until an account is modelled as fresh (local/fresh.py)
    route_cache()
    sqs_retention_check()


class RemoteHostError(ConfigError):
    """The emulator was asked to listen beyond this machine without ``--allow-remote``."""


class EmbeddedMoto:
    """moto's server on a thread of this process; ``iam=True``: it enforces IAM (local.iam), its
    admin is the ``local-admin`` user.

    It binds its socket in the caller's thread, so a taken port raises ``OSError`` at once: moto's
    own ``ThreadedMotoServer`` binds in its server thread and waits for an event that thread never
    sets when the bind fails, so ``start()`` hung for ever and signals could not stop it.

    A ``host`` other than a loopback address is refused unless ``allow_remote``: the emulator holds
    every key and every mail, and anyone who reaches it can read them with the admin's token.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = EMULATOR_PORT,
        iam: bool = True,
        account: str = "default",
        allow_remote: bool = False,
    ):

        if not (allow_remote or is_loopback(host)):
            raise RemoteHostError(
                f"the emulator would listen on {host}, reachable from other machines; it holds every key "
                "and mail of the stack. Use 127.0.0.1, or say --allow-remote if you mean it"
            )
        self.host, self.port, self.iam, self.account = host, port, iam, account
        self._server: Any = None
        self._thread: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> EmbeddedMoto:

        server_app = motoadapter.server_app()
        create_backend_app = server_app.create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request drowns everything else

        patch_moto()
        iam.set_enforced(self.iam)
        fresh.set_fresh(self.account == "fresh")
        self._server = make_server(
            self.host,
            self.port,
            Guard(
                server_app.DomainDispatcherApplication(create_backend_app),
                self.port,
                check_host=is_loopback(self.host),
            ),
            threaded=True,
            request_handler=server_app.MotoRequestHandler,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            if self._thread is not None and self._thread.is_alive():  # shutdown() waits for serve_forever
                self._server.shutdown()
                self._thread.join(10)
            self._server.server_close()
            self._server = self._thread = None


class MotoProcess:
    """A moto server in its own process: for load (chaos test, benchmark), where sharing the
    caller's GIL with the emulator would measure the GIL instead of the code."""

    def __init__(self, port: int, host: str = "127.0.0.1", iam: bool = True):
        self.host, self.port, self.iam = host, port, iam
        self._proc: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> MotoProcess:

        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "local.emulator",
                "-H",
                self.host,
                "-p",
                str(self.port),
                "--iam",
                "on" if self.iam else "off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.host, timeout=60, proc=self._proc)
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
            self._proc = None


def main(argv: list[str] | None = None) -> None:

    parser = argparse.ArgumentParser(description="moto server with the route cache and enforced IAM")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=EMULATOR_PORT)
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on a host other than loopback (the compose image: 0.0.0.0 inside its container)",
    )
    # The compose file sets IAM (default on there; `make up IAM=off`); unset, nothing is enforced.
    parser.add_argument(
        "--iam",
        choices=["on", "off"],
        default=os.environ.get("IAM", "off").lower() or "off",
        help="enforce IAM (default: $IAM, else off); the admin is the local-admin user",
    )
    parser.add_argument(
        "--account",
        choices=["default", "fresh"],
        default="default",
        help="fresh: model a new AWS account (local/fresh.py)",
    )
    args = parser.parse_args(argv)
    try:
        server = EmbeddedMoto(
            args.host, args.port, iam=args.iam == "on", account=args.account, allow_remote=args.allow_remote
        ).start()
    except (RemoteHostError, OSError) as exc:
        sys.exit(f"[emulator] {exc}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # docker stop, MotoProcess.stop
    try:
        server._thread.join()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
