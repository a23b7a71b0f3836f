#!/usr/bin/env bash
# Wait until every container of a compose project is healthy (compose 1.29 has no `up --wait`).
set -euo pipefail
project=$1; timeout=${2:-120}; start=$SECONDS
while :; do
  states=$(docker ps -a --filter "label=com.docker.compose.project=$project" \
    --format '{{.Label "com.docker.compose.service"}}={{.State}}/{{.Status}}')
  [ -n "$states" ] || { echo "[up] no containers for project $project" >&2; exit 1; }
  pending=$(echo "$states" | grep -v '(healthy)' || true)
  if [ -z "$pending" ]; then echo "[up] all $(echo "$states" | wc -l) services healthy ($((SECONDS - start))s)"; exit 0; fi
  if echo "$pending" | grep -qE '=exited|=dead|unhealthy'; then
    echo "[up] failed to start:" >&2; echo "$pending" >&2; exit 1
  fi
  if (( SECONDS - start > timeout )); then echo "[up] timed out waiting for:" >&2; echo "$pending" >&2; exit 1; fi
  sleep 1
done
