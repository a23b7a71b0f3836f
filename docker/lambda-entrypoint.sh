#!/bin/sh
# One entry point for every function image, and for the host-side RIE fixture.
#
# On AWS, Lambda sets AWS_LAMBDA_RUNTIME_API and we run the runtime interface
# client alone. Anywhere else (docker run, compose, tests on the host) we put the
# real Runtime Interface Emulator in front of it, so the invocation URL
#   POST /2015-03-31/functions/function/invocations
# works exactly as documented. `exec` keeps the PID and lets signals reach the
# process that owns them (RIE forwards SIGTERM to the runtime).
#
# The runtime client is `python -m awslambdaric`.
#
# Overridable for the host: RIE_BIN, PYTHON, RIE_ADDRESS, RIE_RUNTIME_API_ADDRESS.
set -eu

PYTHON="${PYTHON:-python}"

if [ -n "${AWS_LAMBDA_RUNTIME_API:-}" ]; then
  exec "$PYTHON" -m awslambdaric "$@"
fi

exec "${RIE_BIN:-/usr/local/bin/aws-lambda-rie}" \
  --runtime-interface-emulator-address "${RIE_ADDRESS:-0.0.0.0:8080}" \
  --runtime-api-address "${RIE_RUNTIME_API_ADDRESS:-127.0.0.1:9001}" \
  "$PYTHON" -m awslambdaric "$@"
