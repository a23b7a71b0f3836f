"""boto3 client access. One module per AWS service lives beside this file; callers import each
as a namespace (``s3.get``, ``sqs.send``): the module is the API.

boto3 itself honours ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>``, so the
same code talks to AWS, a moto server or LocalStack with no custom variables.
boto3 is imported lazily: a cold start pays for it only when a client is needed. Every client comes
from one boto3 session, so botocore's loader reads each data file (endpoints, partitions, retry
rules, a service's model) once per process instead of once per client: inbound-handler's first event
creates three clients, and a session per client read the shared files three times.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import boto3
    from botocore.client import BaseClient


# What a client's answers taught this process (a queue's URL, the account id): forgotten, with the
# clients, by reset_clients. The service modules register it through ``learnt`` so this module never
# imports them.
_LEARNT: list[Callable[[], None]] = []

# "Session objects are not thread safe", low-level clients are (boto3 user guide, "Session" and
# "Low-level clients", Multithreading): clients are created one at a time and then shared.
_CREATING = threading.Lock()


@functools.cache
def session() -> boto3.session.Session:
    """The process's one boto3 session: its credential chain and botocore loader serve every client."""
    import boto3

    return boto3.session.Session()


@functools.cache
def client(
    service: str,
    region: str | None = None,
    max_attempts: int = 3,
    mode: str = "standard",
    signature_version: str | None = None,
    addressing_style: str | None = None,
    timeouts: tuple[float, float] = (5, 30),
) -> BaseClient:
    """A cached client; ``max_attempts=1`` when the caller owns retries (the SES sender does);
    ``signature_version`` and ``addressing_style`` shape S3's presigned URLs (common.aws.s3);
    ``timeouts`` (connect, read) shorter where a call must never hold up the mail (common.aws.events)."""
    from botocore.config import Config as BotoConfig

    with _CREATING:
        return session().client(
            service,
            region_name=region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1",
            config=BotoConfig(
                retries={"mode": mode, "total_max_attempts": max_attempts},
                connect_timeout=timeouts[0],
                read_timeout=timeouts[1],
                max_pool_connections=20,
                signature_version=signature_version,
                s3={"addressing_style": addressing_style} if addressing_style else None,
            ),
        )


# Control-plane calls (deploy, destroy): SES's management actions are throttled at 1 request/s
# ("You can execute this operation no more than once per second", SES API reference; SES quotas)
# and a deploy makes about 15 of them back to back; IAM, Lambda and ECR management calls have low
# rates too. Three standard attempts (0-1 s, then 0-2 s) can end a run on one Throttling; ten, with
# the adaptive mode's client-side rate limiting after a throttle, ride it out. The functions'
# data-plane clients keep :func:`client`'s defaults.
CONTROL_PLANE_ATTEMPTS = 10


def control_client(service: str, region: str | None = None) -> BaseClient:
    """A cached client for control-plane (management) calls: more attempts, adaptive retry mode."""
    return client(service, region, max_attempts=CONTROL_PLANE_ATTEMPTS, mode="adaptive")


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


T = TypeVar("T")


def or_none[T](call: Callable[[], T], *missing: str) -> T | None:
    """``call()``, or None when AWS answers with one of the ``missing`` error codes (a read of
    something that does not exist yet); any other error is raised."""
    try:
        return call()
    except Exception as exc:
        if error_code(exc) in missing:
            return None
        raise


def learnt[F: Callable[..., Any]](fn: F) -> F:
    """``functools.cache`` for a value learnt through a client; :func:`reset_clients` forgets it."""
    cached = functools.cache(fn)
    _LEARNT.append(cached.cache_clear)
    return cached  # type: ignore[return-value]


def forget_learnt() -> None:
    """Forget what was learnt through the clients (queue URLs, the account), keeping the clients:
    the emulator was reset under them."""
    for forget in _LEARNT:
        forget()


def reset_clients() -> None:
    """Forget cached clients and what was learnt through them, after AWS_ENDPOINT_URL or the
    credentials changed."""
    client.cache_clear()
    session.cache_clear()
    forget_learnt()
