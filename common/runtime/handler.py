"""The one place a Lambda handler is made: config at cold start, logging, flush.

``images/<fn>/app.py`` is two lines: ``handler = make_handler("<fn>", logic)``.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from common.aws import sts
from common.runtime import config as config_mod
from common.runtime.config import Config
from common.runtime.errors import ConfigError, EventError
from common.runtime.functions import BY_NAME
from common.runtime.log import bind, clear_bindings, configure, flush, get_logger, scrubbed_exception

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

# A pipeline's entry point: configuration first, then what Lambda passes (the event, the context).
Logic = Callable[[Config, Any, "LambdaContext"], Mapping[str, Any]]


def make_handler(function_name: str, logic: Logic) -> Callable[[Any, LambdaContext], Mapping[str, Any]]:
    spec = BY_NAME[function_name]
    _pause_collector()
    # Logging first, so a configuration error is itself logged in the same shape.
    configure(service=function_name, environment=os.environ.get("ENVIRONMENT", config_mod.DEFAULT_ENV))
    log = get_logger(function_name)
    try:
        cfg = config_mod.with_secrets(config_mod.load(), spec.requires)
        if spec.owner_key:
            cfg = config_mod.with_owner_key(cfg)
    except ConfigError as exc:
        # Raised at import: the runtime reports it as the init error (errorType ConfigError).
        log.error("configuration invalid", extra={"function": function_name, "error": str(exc)})
        flush(log)
        _resume_collector()
        raise ConfigError(f"{function_name}: {exc}") from None
    cfg = replace(cfg, function=function_name)
    sts.use_account(cfg.account_id)
    if spec.queue_field and not cfg.send_queue:
        cfg = replace(cfg, send_queue=getattr(cfg, spec.queue_field))

    def handler(event: Any, context: LambdaContext) -> Mapping[str, Any]:
        started = time.perf_counter()
        bind(function=function_name, request_id=getattr(context, "aws_request_id", ""))
        outcome = "error"
        try:
            result = logic(cfg, event, context)
            outcome = str(result.get("status", "ok"))
            return result
        except EventError as exc:
            log.error("event rejected", extra={"reason": str(exc)})
            # What the runtime prints and Lambda keeps (the async DLQ's record) names no one either.
            raise scrubbed_exception(exc) from None
        except Exception as exc:
            log.exception("invocation failed")
            raise scrubbed_exception(exc) from None
        finally:
            log.info(
                "invocation finished",
                extra={"outcome": outcome, "duration_ms": round((time.perf_counter() - started) * 1000, 1)},
            )
            flush(log)
            clear_bindings()
            _resume_collector()  # after the first invocation (of any handler made in this process)

    handler.config = cfg  # type: ignore[attr-defined]
    return handler


# Set while the cold start runs without the cyclic collector (one process, however many handlers it makes).
_PAUSED: list[bool] = []


def _pause_collector() -> None:
    """In a Lambda runtime (``AWS_LAMBDA_RUNTIME_API``: Lambda and the RIE set it), the cold start runs
    without the cyclic garbage collector until the first invocation returns. The cold start allocates
    what lives as long as the sandbox (modules, clients, models), and the collector traversed it again
    and again: 30-50 ms of an ack-sender's cold start (docs/decisions.md, "Cold start: what was tried").
    The first invocation is part of it: the clients and most imports are made there."""
    if os.environ.get("AWS_LAMBDA_RUNTIME_API") and gc.isenabled() and not _PAUSED:
        gc.disable()
        _PAUSED.append(True)


def _resume_collector() -> None:
    """Re-enabled as it was, the collector's first pass walked everything the cold start made (~30 ms,
    before the response left). Frozen and at once unfrozen, that moves to the oldest generation
    untraversed: the young passes stay short, and a full collection, later, still examines it all (the
    first invocation's garbage included: nothing is kept for good)."""
    if not _PAUSED:
        return
    _PAUSED.clear()
    gc.freeze()
    gc.unfreeze()
    gc.enable()
