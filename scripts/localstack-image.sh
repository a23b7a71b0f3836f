#!/usr/bin/env bash
# Make sure a LocalStack 4.4.0 image exists locally and print its tag (progress on stderr).
#
# Order: $LOCALSTACK_IMAGE (localstack/localstack:4.4.0) when present or pullable; else our own
# build of the same version, service-email-handler/localstack:4.4.0, from the project's OS image
# and the hash lock requirements/localstack.txt with `docker build --network none`. The build is
# labelled with a hash of its inputs and reused until the lock, the recipe or the OS image change.
# Exits non-zero with the reason on stderr when neither works.
set -euo pipefail
cd "$(dirname "$0")/.."

OFFICIAL="${LOCALSTACK_IMAGE:-localstack/localstack:4.4.0}"
VERSION=4.4.0
OWN="service-email-handler/localstack:$VERSION"
log() { printf '[localstack-image] %s\n' "$*" >&2; }
REASON=.build/logs/localstack-image.reason  # the last failure, for scripts/compose.sh to quote
fail() { log "$*"; mkdir -p .build/logs; echo "$*" > "$REASON"; exit 1; }
rm -f "$REASON"

if docker image inspect "$OFFICIAL" >/dev/null 2>&1; then log "using $OFFICIAL (present locally)"; echo "$OFFICIAL"; exit 0; fi
if [ "${SKIP_PULL:-0}" != 1 ] && timeout 60 docker pull -q "$OFFICIAL" >/dev/null 2>&1; then
  log "pulled $OFFICIAL"; echo "$OFFICIAL"; exit 0
fi
grep -q "^localstack-core==$VERSION " requirements/localstack.txt \
  || fail "requirements/localstack.txt does not pin localstack-core==$VERSION"

OS_IMAGE=$(scripts/os-image.sh) || fail "$OFFICIAL cannot be pulled and there is no OS image to build one on (scripts/os-image.sh failed)"
recipe=$({ docker image inspect -f '{{.Id}}' "$OS_IMAGE"; cat requirements/localstack.txt compose/localstack.Dockerfile; } \
  | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{index .Config.Labels "org.service-email-handler.recipe"}}' "$OWN" 2>/dev/null)" = "$recipe" ]; then
  log "using $OWN (built earlier from this lock)"; echo "$OWN"; exit 0
fi

log "$OFFICIAL is not available: building $OWN from localstack-core $VERSION (once; a few minutes)"
scripts/wheelhouse.sh localstack >&2 || fail "$OFFICIAL cannot be pulled and LocalStack's wheels cannot be downloaded (PyPI unreachable?)"
mkdir -p .build/logs
build_log=.build/logs/localstack.log
t0=$SECONDS
if ! docker build --network none -t "$OWN" -f compose/localstack.Dockerfile --build-arg "BASE_IMAGE=$OS_IMAGE" \
     --label "org.service-email-handler.recipe=$recipe" .build/wheelhouse-localstack >"$build_log" 2>&1; then
  tail -20 "$build_log" >&2; fail "$OFFICIAL cannot be pulled and building $OWN failed (log: $build_log)"
fi
log "built $OWN: $(docker image inspect -f '{{.Size}}' "$OWN" | awk '{printf "%.0f MB", $1/1e6}') in $((SECONDS - t0))s"
echo "$OWN"
