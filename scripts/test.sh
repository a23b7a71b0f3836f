#!/usr/bin/env bash
# `make test` on a host with Python >= 3.12. What runs side by side (docs/development.md, Tests):
#   images       built in the background from the start (only the docker suite needs them);
#   lint, unit   one after the other meanwhile (the unit suite on TEST_WORKERS pytest-xdist workers);
#   integration  starts as soon as the unit suite passed, without waiting for the images, on
#                TEST_WORKERS workers, one test file per worker (its module fixtures stay whole);
#   docker       starts once the images are built, in its own pytest run beside integration, on three
#                workers (it mostly waits on containers). Its output streams; integration's is shown at the end.
# Prints how long each phase took at the end, pass or fail, so a slow phase is visible in every run,
# and ends with one line adding up every pytest run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=.build/test
mkdir -p "$OUT"
: >"$OUT/phases"
started=$SECONDS

record() { printf '%s %s %s %s\n' "$1" "$2" "$3" "$4" >>"$OUT/phases"; } # NAME SECONDS RC STARTED
phase() { # phase NAME COMMAND...: run it, record its time and exit code
  local name=$1 t0=$SECONDS rc
  shift
  echo "[test] == $name"
  "$@"
  rc=$?
  record "$name" $((SECONDS - t0)) "$rc" $((t0 - started))
  return "$rc"
}
counts() { # the totals of pytest's closing lines in the given logs
  python3 - "$@" <<'PY'
import re, sys
total = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        continue
    last = next((l for l in reversed(lines) if re.search(r"\d+ (passed|failed|error)", l)), "")
    for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last):
        total["error" if word.startswith("error") else word] += int(n)
print(f"tests: {total['passed']} passed, {total['failed'] + total['error']} failed, {total['skipped']} skipped")
PY
}
summary() {
  local rc=$?
  echo
  echo "[test] timing by phase (seconds; phases that started before others ended ran side by side):"
  sort -n -k4 "$OUT/phases" | while read -r name secs code at; do
    printf '[test]   %-12s %5ss  from %4ss to %4ss  %s\n' "$name" "$secs" "$at" $((at + secs)) \
      "$([ "$code" = 0 ] && echo ok || echo "FAILED ($code)")"
  done
  printf '[test]   %-12s %5ss\n' total $((SECONDS - started))
  counts "$OUT"/pytest-*.log
  exit "$rc"
}
trap summary EXIT

echo "[test] interpreter: $($PY -c 'import sys; print(sys.executable, sys.version.split()[0])')"
scripts/host-deps.sh || exit 1
rm -f "$OUT"/pytest-*.log
images_pid=""
if docker info >/dev/null 2>&1; then
  ( t0=$SECONDS; make --no-print-directory images >"$OUT/images.log" 2>&1; rc=$?
    record images $((SECONDS - t0)) "$rc" $((t0 - started)); exit "$rc" ) &
  images_pid=$!
else
  echo "[test] no Docker engine: the docker suite will be skipped (it cannot skip under CI=true)"
fi
wait_images() {
  [ -n "$images_pid" ] || return 0
  if ! wait "$images_pid"; then
    tail -40 "$OUT/images.log"; echo "[test] image build failed (full log: $OUT/images.log)"; return 1
  fi
  grep '^\[images\]' "$OUT/images.log" | grep -E 'MB|service-email' | tail -12
}

suites() { # suites NAME PATH...: one pytest run, its output kept for the closing count
  local name=$1
  shift
  $PY -m pytest "$@" ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest-$name.log"
  return "${PIPESTATUS[0]}"
}
# Two workers match this machine's two cores; the suites' tests pick free ports and name their own
# resources, and each worker has its own moto server (tests/conftest.py), so they run safely side by side.
WORKERS=${TEST_WORKERS:-2}
xdist() { [ "$WORKERS" -gt 1 ] 2>/dev/null && echo "-n $WORKERS --dist loadfile"; }
# The docker suite on three workers: its units are test files, and each compose stack
# (tests/docker/conftest.py), so both stacks come up at once while the image tests run beside them.
docker_xdist() { [ "$WORKERS" -gt 1 ] 2>/dev/null && echo "-n 3 --dist loadscope"; }

rc=0
phase lint make --no-print-directory lint || rc=1
# shellcheck disable=SC2046
phase unit suites unit tests/unit $(xdist) || rc=1
if [ "$rc" = 0 ]; then
  # shellcheck disable=SC2046
  ( phase integration suites integration tests/integration $(xdist) >"$OUT/integration.out" 2>&1 ) &
  integration_pid=$!
  echo "[test] == integration started in the background (output at the end; live: $OUT/pytest-integration.log)"
  if wait_images; then
    # shellcheck disable=SC2046
    phase docker suites docker tests/docker $(docker_xdist) || rc=1
  else
    rc=1
  fi
  wait "$integration_pid" || rc=1
  echo "[test] == integration output"
  cat "$OUT/integration.out"
fi
exit "$rc"
