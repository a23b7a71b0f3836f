"""The one place a Lambda handler is made: config at cold start, logging, flush.

``images/<fn>/app.py`` is two lines: ``handler = make_handler("<fn>", logic)``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from common.aws import sts
from common.errors import ConfigError, EventError
from common.runtime import outcomes
from common.runtime.config import CONFIGS, DEFAULT_ENV, Deployment, with_secrets
from common.runtime.log import bind, clear_bindings, configure, flush, get_logger, scrubbed_exception

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext


def make_handler[C: Deployment](
    function_name: str,
    logic: Callable[[C, Any, LambdaContext], Mapping[str, Any]],
    prepare: Callable[[C], C] | None = None,
) -> Callable[[Any, LambdaContext], Mapping[str, Any]]:
    """The handler of ``function_name``: its own configuration class (common.runtime.config.CONFIGS)
    loaded from the environment at cold start, then ``logic`` (configuration first, then what Lambda
    passes: the event, the context) per invocation. ``prepare`` completes the configuration where a
    function needs more than its variables and secrets (the owner's key:
    common.mail.encrypt.with_owner_key); a ConfigError it raises stops the start as a missing variable
    does."""
    # Logging first, so a configuration error is itself logged in the same shape.
    configure(service=function_name, environment=os.environ.get("ENVIRONMENT", DEFAULT_ENV))
    log = get_logger(function_name)
    try:
        # parse, not load: a missing variable and a missing secret are named in one message
        cfg: C = with_secrets(CONFIGS[function_name].parse())  # type: ignore[assignment]
        if prepare is not None:
            cfg = prepare(cfg)
    except ConfigError as exc:
        # Raised at import: the runtime reports it as the init error (errorType ConfigError).
        log.error("configuration invalid", extra={"function": function_name, "error": str(exc)})
        flush(log)
        raise ConfigError(f"{function_name}: {exc}") from None
    cfg = replace(cfg, function=function_name)
    sts.use_account(cfg.account_id)

    def handler(event: Any, context: LambdaContext) -> Mapping[str, Any]:
        started = time.perf_counter()
        bind(function=function_name, request_id=getattr(context, "aws_request_id", ""))
        outcomes.discard()
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
            # The mail's outcomes are stored by now: their events go out, then their counts, after the
            # last log line (common/runtime/outcomes.py). Neither raises.
            outcomes.send_events()
            log.info(
                "invocation finished",
                extra={"outcome": outcome, "duration_ms": round((time.perf_counter() - started) * 1000, 1)},
            )
            flush(log)
            outcomes.write_metrics()
            clear_bindings()

    handler.config = cfg  # type: ignore[attr-defined]
    return handler
