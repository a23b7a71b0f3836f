#!/usr/bin/env bash
# Debian packages the build and the test suites use on the host: debootstrap (the OS image when no
# registry serves debian:trixie-slim) and docker-registry (the local registry standing in for
# ECR in the deploy push test) and chromium (the headless browser the forward's HTML is judged in,
# tests/integration/test_forward_in_browser.py). Installed once when missing; a no-op taking milliseconds otherwise.
set -euo pipefail
want=()
command -v debootstrap >/dev/null || want+=(debootstrap)
command -v docker-registry >/dev/null || want+=(docker-registry)
command -v chromium >/dev/null || want+=(chromium)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "[host-deps] missing ${want[*]}: install them with apt-get (needs root)" >&2; exit 0
fi
echo "[host-deps] installing ${want[*]} from Debian's packages"
# The package's own service must not start (policy-rc.d); the tests run their own instance.
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"; } >/dev/null 2>&1 \
  || { echo "[host-deps] apt-get install ${want[*]} failed" >&2; exit 1; }
