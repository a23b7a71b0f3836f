#!/usr/bin/env bash
# `make up` / `make down` / `make logs`: the compose stack with LocalStack or the local moto image.
#   EMULATOR=auto (default): LocalStack if its pinned image is present or pullable, else moto.
#   EMULATOR=moto | localstack: force one.
# Uses `docker compose` (v2 plugin) when present, else docker-compose 1.29.
set -euo pipefail
cd "$(dirname "$0")/.."

compose_cmd() {
  if docker compose version >/dev/null 2>&1; then echo "docker compose"
  elif command -v docker-compose >/dev/null 2>&1; then echo "docker-compose"
  else return 1; fi
}
if [ "${1:-}" = --which ]; then compose_cmd; exit; fi

COMPOSE=$(compose_cmd) || { echo "neither 'docker compose' nor 'docker-compose' found (apt-get install docker-compose)" >&2; exit 1; }
PROJECT="${COMPOSE_PROJECT_NAME:-service-email-handler}"
LOCALSTACK_IMAGE="${LOCALSTACK_IMAGE:-localstack/localstack:4.4.0}"
export LOCALSTACK_IMAGE
state=".build/compose-$PROJECT.emulator"

pick_emulator() {
  case "${EMULATOR:-auto}" in
    moto|localstack) echo "$EMULATOR" ;;
    auto)
      if docker image inspect "$LOCALSTACK_IMAGE" >/dev/null 2>&1 \
         || timeout 60 docker pull -q "$LOCALSTACK_IMAGE" >/dev/null 2>&1; then echo localstack
      else echo "[up] $LOCALSTACK_IMAGE not present and not pullable: using the local moto image" >&2; echo moto; fi ;;
    *) echo "EMULATOR must be auto, moto or localstack (got '$EMULATOR')" >&2; exit 2 ;;
  esac
}
files() { echo "-p $PROJECT -f compose/docker-compose.yml -f compose/emulator-$1.yml"; }

case "${1:-up}" in
  up)
    emulator=$(pick_emulator)
    scripts/images.sh
    mkdir -p .build && echo "$emulator" > "$state"
    echo "[up] starting $PROJECT with $emulator ($COMPOSE)"
    $COMPOSE $(files "$emulator") up -d --remove-orphans
    scripts/wait-healthy.sh "$PROJECT" "${UP_TIMEOUT:-120}"
    cat <<MSG

[up] ready. AWS emulator ($emulator): http://127.0.0.1:${EMULATOR_PORT:-4566}
     SMTP ingress (SES receiving): smtp://127.0.0.1:${SMTP_PORT:-2525}   (hello@example.com and *@thread.example.com)
     functions (POST an event to each RIE invocation URL):
       inbound-handler       http://127.0.0.1:${INBOUND_HANDLER_PORT:-9001}
       reply-handler         http://127.0.0.1:${REPLY_HANDLER_PORT:-9002}
       attachment-extractor  http://127.0.0.1:${ATTACHMENT_EXTRACTOR_PORT:-9003}
       ack-sender            http://127.0.0.1:${ACK_SENDER_PORT:-9004}
       forward-sender        http://127.0.0.1:${FORWARD_SENDER_PORT:-9005}
       reply-sender          http://127.0.0.1:${REPLY_SENDER_PORT:-9006}
     e.g. curl -XPOST http://127.0.0.1:${ACK_SENDER_PORT:-9004}/2015-03-31/functions/function/invocations -d @tests/fixtures/events/sqs-send.json

     next: send a test mail      .venv/bin/email-handler inject tests/fixtures/mail/latin1-charsets.eml
           see what went out     .venv/bin/email-handler outbox
           logs: make logs    stop: make down
MSG
    ;;
  down)
    emulator=$(cat "$state" 2>/dev/null || echo moto)
    $COMPOSE $(files "$emulator") down --remove-orphans -t 5
    rm -f "$state" ;;
  logs)
    emulator=$(cat "$state" 2>/dev/null || echo moto)
    $COMPOSE $(files "$emulator") logs -f --tail=50 ;;
  *) echo "usage: $0 up|down|logs|--which" >&2; exit 2 ;;
esac
