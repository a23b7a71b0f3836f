#!/usr/bin/env bash
# Wait until every long-running container of a compose project is healthy and every one-shot
# service (ONE_SHOT, default `init`) has exited 0 (compose 1.29 has no `up --wait`).
set -euo pipefail
project=$1; timeout=${2:-120}; one_shot=${ONE_SHOT:-init}; start=$SECONDS
while :; do
  states=$(docker ps -a --filter "label=com.docker.compose.project=$project" \
    --format '{{.Label "com.docker.compose.service"}}={{.State}}/{{.Status}}')
  [ -n "$states" ] || { echo "[up] no containers for project $project" >&2; exit 1; }
  done_once=$(echo "$states" | grep -E "^($one_shot)=exited/Exited \(0\)" || true)
  pending=$(echo "$states" | grep -v '(healthy)' | grep -vE "^($one_shot)=exited/Exited \(0\)" || true)
  if [ -z "$pending" ]; then
    echo "[up] all $(echo "$states" | grep -c '(healthy)') services healthy, $(echo "$done_once" | grep -c . || true) one-shot done ($((SECONDS - start))s)"
    exit 0
  fi
  if echo "$pending" | grep -qE '=exited|=dead|unhealthy'; then
    echo "[up] failed to start:" >&2; echo "$pending" >&2
    for svc in $(echo "$pending" | grep -E '=exited|=dead|unhealthy' | cut -d= -f1); do
      echo "--- last lines of $svc:" >&2
      docker logs --tail 20 "$(docker ps -aq --filter "label=com.docker.compose.project=$project" \
        --filter "label=com.docker.compose.service=$svc" | head -1)" >&2 2>&1 || true
    done
    exit 1
  fi
  if (( SECONDS - start > timeout )); then echo "[up] timed out waiting for:" >&2; echo "$pending" >&2; exit 1; fi
  sleep 1
done
