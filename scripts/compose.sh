#!/usr/bin/env bash
# `make up` / `make down` / `make logs`: the compose stack with LocalStack or the local moto image.
#   EMULATOR=auto (default): LocalStack whenever it can be had (localstack/localstack:4.4.0 present
#     or pullable, else built offline once by scripts/localstack-image.sh), else moto, saying why.
#   EMULATOR=localstack | moto: force one (localstack fails when it cannot be had).
# With LocalStack, DynamoDB is tried as soon as LocalStack is up: when LocalStack's own DynamoDB
# cannot start (offline it downloads a JRE and DynamoDB Local on first use and answers 500),
# compose/dynamodb-moto.yml routes DynamoDB alone to a moto server (AWS_ENDPOINT_URL_DYNAMODB).
# IAM=on (default) | off: with moto the emulator enforces IAM and each function container runs with
# its own role session's credentials (written before the start, with the local admin's for the host
# CLI, by `python -m local.env` in the local tools image); LocalStack community enforces none.
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
AWS_URL="http://127.0.0.1:${EMULATOR_PORT:-4566}"
DYNAMODB_URL="http://127.0.0.1:${DYNAMODB_PORT:-4567}"
state=".build/compose-$PROJECT.files"        # the running stack's compose files (down, logs)
stack_file=".build/local/stacks/$PROJECT.json"  # how the host CLI reaches it (local/env.py)
reason_file=".build/logs/localstack-image.reason"

# Sets $emulator (and LOCALSTACK_IMAGE for compose) or exits.
choose_emulator() {
  emulator=moto
  case "${EMULATOR:-auto}" in
    moto) return ;;
    localstack|auto) ;;
    *) echo "EMULATOR must be auto, moto or localstack (got '$EMULATOR')" >&2; exit 2 ;;
  esac
  if LOCALSTACK_IMAGE=$(scripts/localstack-image.sh); then
    export LOCALSTACK_IMAGE; emulator=localstack; return
  fi
  local why; why=$(cat "$reason_file" 2>/dev/null || echo "see the lines above")
  if [ "${EMULATOR:-auto}" = localstack ]; then echo "[up] EMULATOR=localstack, but LocalStack cannot be had: $why" >&2; exit 1; fi
  echo "[up] LocalStack cannot be had ($why): using the local moto image" >&2
}

# Prints "ok" when LocalStack's own DynamoDB answers, else why not (one request, which blocks while
# LocalStack installs DynamoDB Local; offline it fails after ~9 s of download attempts).
probe_dynamodb() {
  python3 - "$AWS_URL" "${DYNAMODB_PROBE_TIMEOUT:-300}" <<'PY'
import json, sys, urllib.error, urllib.request
url, timeout = sys.argv[1], float(sys.argv[2])
request = urllib.request.Request(url, data=b"{}", method="POST", headers={
    "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20000101/us-east-1/dynamodb/aws4_request, "
                     "SignedHeaders=host, Signature=0"})
try:
    with urllib.request.urlopen(request, timeout=timeout) as response:
        json.load(response)["TableNames"]
    print("ok")
except urllib.error.HTTPError as exc:
    try:
        error = json.loads(exc.read()).get("__type", "")
    except ValueError:
        error = ""
    print(f"ListTables answered {exc.code} {error}".rstrip())
except Exception as exc:
    print(f"ListTables failed: {type(exc).__name__}: {exc}")
PY
}

# .build/local/emulator.env (the stack's random secret, made once and kept: the emulator's and the
# tools' env_file), .build/local/credentials (profile local-admin: the host CLI and the AWS CLI) and
# .build/local/functions/<function>.env (each function container's env_file: its own variables of
# compose/local.env, mounted for it, and its role session's keys). The keys are
# derived from the identities and the secret (local/iam.py, local/secret.py), so no emulator is
# needed; the init service opens the role sessions they belong to.
write_credentials() {
  mkdir -p .build/local
  docker run --rm --network none --user "$(id -u):$(id -g)" -v "$PWD/.build/local:/out" \
    -v "$PWD/compose/local.env:/opt/lib/compose/local.env:ro" \
    "service-email-handler/local:${IMAGE_TAG:-latest}" python -m local.env /out
}

# down/logs read the compose files too, which name the role env files: an empty one will do there.
ensure_env_files() {
  mkdir -p .build/local/functions
  # an empty placeholder only: `up` (python -m local.env) writes the stack's secret into it once
  [ -e .build/local/emulator.env ] || (umask 077 && : > .build/local/emulator.env)
  for f in inbound-handler reply-handler attachment-extractor ack-sender forward-sender reply-sender; do
    [ -e ".build/local/functions/$f.env" ] || : > ".build/local/functions/$f.env"
  done
}

write_stack_file() { # emulator image dynamodb-url-or-empty
  mkdir -p "$(dirname "$stack_file")"
  printf '{"project": "%s", "endpoint": "%s", "emulator": "%s", "image": "%s", "dynamodb": %s}\n' \
    "$PROJECT" "$AWS_URL" "$1" "$2" "$([ -n "$3" ] && printf '"%s"' "$3" || echo null)" > "$stack_file"
}

case "${1:-up}" in
  up)
    case "${IAM:=on}" in on|off) ;; *) echo "IAM must be on or off (got '$IAM')" >&2; exit 2 ;; esac
    export IAM
    scripts/images.sh
    mkdir -p .build/logs
    write_credentials
    choose_emulator
    files="-p $PROJECT -f compose/docker-compose.yml -f compose/emulator-$emulator.yml"
    dynamodb_note=""
    if [ "$emulator" = localstack ]; then
      echo "[up] starting LocalStack ($LOCALSTACK_IMAGE) for $PROJECT"
      $COMPOSE $files up -d aws
      scripts/wait-healthy.sh "$PROJECT" "${UP_TIMEOUT:-120}"
      t0=$SECONDS
      probe=$(probe_dynamodb)
      if [ "$probe" = ok ]; then
        dynamodb_note="DynamoDB: LocalStack's own (started in $((SECONDS - t0))s)"
      else
        files="$files -f compose/dynamodb-moto.yml"
        dynamodb_note="DynamoDB: moto at $DYNAMODB_URL, because LocalStack's own did not start ($probe after $((SECONDS - t0))s;
     it downloads a JRE and DynamoDB Local on first use: make logs shows why that failed). Every
     container and the host CLI reach moto through AWS_ENDPOINT_URL_DYNAMODB; for your own tools:
       export AWS_ENDPOINT_URL_DYNAMODB=$DYNAMODB_URL"
        echo "[up] LocalStack's DynamoDB did not start ($probe after $((SECONDS - t0))s): routing DynamoDB to moto"
      fi
    fi
    echo "$files" > "$state"
    echo "[up] starting $PROJECT with $emulator ($COMPOSE)"
    $COMPOSE $files up -d --remove-orphans
    scripts/wait-healthy.sh "$PROJECT" "${UP_TIMEOUT:-120}"
    routed=""; [[ "$files" == *dynamodb-moto* ]] && routed=$DYNAMODB_URL
    write_stack_file "$emulator" "${LOCALSTACK_IMAGE:-service-email-handler/local:${IMAGE_TAG:-latest}}" "$routed"
    label=$emulator; [ "$emulator" = localstack ] && label="LocalStack 4.4.0, $LOCALSTACK_IMAGE"
    if [ "$emulator" = localstack ]; then
      iam_note="IAM: not enforced: LocalStack's community edition does not enforce IAM (EMULATOR=moto does);
     the functions still run with their own role sessions' credentials"
    elif [ "$IAM" = on ]; then
      iam_note="IAM: enforced: each function runs with its own role's credentials and may do only what
     deploy/iam.py grants it (IAM=off make up turns enforcement off)"
    else
      iam_note="IAM: not enforced (IAM=off); the functions still run with their own role sessions' credentials"
    fi
    cat <<MSG

[up] ready. AWS emulator ($label): $AWS_URL
     $iam_note
     admin credentials: .build/local/credentials (profile local-admin; email-handler inject/outbox/invoke use them)
       with the AWS CLI: AWS_SHARED_CREDENTIALS_FILE=$PWD/.build/local/credentials AWS_PROFILE=local-admin aws --endpoint-url $AWS_URL s3 ls
${dynamodb_note:+     $dynamodb_note
}     SMTP ingress (SES receiving): smtp://127.0.0.1:${SMTP_PORT:-2525}   (hello@example.com and *@thread.example.com)
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
    ensure_env_files
    # --remove-orphans also takes the services of files this stack did not list (a stale state).
    files=$(cat "$state" 2>/dev/null || echo "-p $PROJECT -f compose/docker-compose.yml -f compose/emulator-moto.yml")
    $COMPOSE $files down --remove-orphans -t 5
    rm -f "$state" "$stack_file" ;;
  logs)
    ensure_env_files
    files=$(cat "$state" 2>/dev/null || echo "-p $PROJECT -f compose/docker-compose.yml -f compose/emulator-moto.yml")
    $COMPOSE $files logs -f --tail=50 ;;
  *) echo "usage: $0 up|down|logs|--which" >&2; exit 2 ;;
esac
