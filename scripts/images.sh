#!/usr/bin/env bash
# Build the base image, the six function images and the local tools image with no
# registry access: OS image from scripts/os-image.sh, wheels from the host wheelhouse,
# and `--network none` on every build to prove nothing is fetched.
#   --functions   only what a deploy ships (base and function images): no local tools image.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=1
case "${1:-}" in
  --functions) TOOLS=0 ;;
  "") ;;
  *) echo "usage: $0 [--functions]" >&2; exit 2 ;;
esac

TAG="${IMAGE_TAG:-latest}"
FUNCTIONS="inbound-handler reply-handler attachment-extractor ack-sender forward-sender reply-sender"
step() { printf '\n[images] %s\n' "$*"; }
build() { # build <tag> <context> [docker build args...]
  local tag=$1 ctx=$2; shift 2
  local t0=$SECONDS
  local log=".build/logs/${tag//[\/:]/_}.log"
  mkdir -p .build/logs
  # The legacy builder (no buildx here) prints a deprecation notice; keep it in the log.
  if ! docker build --network none -t "$tag" "$@" "$ctx" >"$log" 2>&1; then
    tail -40 "$log" >&2; echo "[images] FAILED: $tag (full log: $log)" >&2; exit 1
  fi
  printf '[images]   %-48s %6.1f MB  (%ds)\n' "$tag" \
    "$(docker image inspect -f '{{.Size}}' "$tag" | awk '{print $1/1e6}')" $((SECONDS - t0))
}

step "1/4 wheelhouse"
scripts/wheelhouse.sh
step "2/4 OS base image"
OS_IMAGE=$(scripts/os-image.sh)
echo "[images]   $OS_IMAGE"
# The exact Python the OS image holds (its labels), carried to the base: its last stage starts from
# scratch, so nothing of the OS image's configuration is inherited. The function images inherit them.
os_label() { docker image inspect -f "{{index .Config.Labels \"org.service-email-handler.$1\"}}" "$OS_IMAGE"; }
step "3/4 shared base"
build "service-email-handler/base:$TAG" . -f Dockerfile.base --build-arg "BASE_IMAGE=$OS_IMAGE" \
  --label "org.service-email-handler.source=$(python3 scripts/source-hash.py)" \
  --label "org.service-email-handler.python=$(os_label python)" \
  --label "org.service-email-handler.python-deb=$(os_label python-deb)"
step "4/4 function images"
for fn in $FUNCTIONS; do
  build "service-email-handler/$fn:$TAG" "images/$fn" --build-arg "BASE_IMAGE=service-email-handler/base:$TAG"
done
if [ "$TOOLS" = 1 ]; then
  step "local tools image (moto server, event wiring, SMTP ingress, provisioning)"
  scripts/wheelhouse.sh local
  build "service-email-handler/local:$TAG" . -f compose/local.Dockerfile --build-arg "BASE_IMAGE=$OS_IMAGE"
fi
step "done"
