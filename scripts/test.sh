#!/usr/bin/env bash
# `make test` on a host with Python >= 3.12: lint, the images (built in the background while lint
# and the unit suite run: neither needs them), then the integration and docker suites. Prints how
# long each phase took at the end, pass or fail, so a slow phase is visible in every run, and ends
# with one line adding up both pytest runs.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=.build/test
mkdir -p "$OUT"
: >"$OUT/phases"
started=$SECONDS

record() { printf '%s %s %s\n' "$1" "$2" "$3" >>"$OUT/phases"; }
phase() { # phase NAME COMMAND...: run it, record its time and exit code
  local name=$1 t0=$SECONDS rc
  shift
  echo "[test] == $name"
  "$@"
  rc=$?
  record "$name" $((SECONDS - t0)) "$rc"
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
  echo "[test] timing by phase (seconds; images overlap lint and unit):"
  while read -r name secs code; do
    printf '[test]   %-18s %5ss  %s\n' "$name" "$secs" "$([ "$code" = 0 ] && echo ok || echo "FAILED ($code)")"
  done <"$OUT/phases"
  printf '[test]   %-18s %5ss\n' total $((SECONDS - started))
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
    record images $((SECONDS - t0)) "$rc"; exit "$rc" ) &
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

rc=0
phase lint make --no-print-directory lint || rc=1
phase unit suites unit tests/unit || rc=1
wait_images || rc=1
if [ "$rc" = 0 ]; then
  phase integration+docker suites rest tests/integration tests/docker || rc=1
fi
exit "$rc"
