#!/usr/bin/env bash
# `make test` on a machine with no host Python >= 3.12: run the same suites inside a
# container of the project's own OS image (Debian trixie, Python 3.13). The container
# shares the host network (the tests only use 127.0.0.1) and the Docker socket (the
# docker suite drives the host engine), and sees the repository at the same path.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[test] no host Python >= 3.12: running the suites in a container (Python 3.13 from the OS image)"
OS_IMAGE=$(scripts/os-image.sh)
RUNNER="service-email-handler/test-runner:$(cat pyproject.toml scripts/test-in-container.sh | sha256sum | cut -c1-12)"
if ! docker image inspect "$RUNNER" >/dev/null 2>&1; then
  # Python packages: downloaded on the host (its pip trusts the host's CA setup), installed
  # offline. Debian packages: apt inside the build (plain-HTTP mirror, signed by the archive key).
  HOST_PY=$(command -v python3)
  deps=$("$HOST_PY" - <<'PY'
import re, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = p["optional-dependencies"]
deps = p["dependencies"] + extras["local"] + extras["dev"] + extras["bench"]
print(" ".join(d for d in deps if not d.startswith("service-email-handler")))
PY
)
  rm -rf .build/wheelhouse-test && mkdir -p .build/wheelhouse-test
  "$HOST_PY" -m pip download -q -d .build/wheelhouse-test --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    --python-version 3.13 --implementation cp --only-binary=:all: $deps
  docker build -t "$RUNNER" --network host --build-arg "OS_IMAGE=$OS_IMAGE" -f - . <<'DOCKERFILE'
ARG OS_IMAGE
FROM ${OS_IMAGE}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      docker-cli docker-compose docker-registry curl make >/dev/null && rm -rf /var/lib/apt/lists/*
COPY .build/wheelhouse-test/ /wheels/
RUN python3 -m venv /opt/test-venv && /opt/test-venv/bin/pip install -q --no-index --find-links /wheels /wheels/*.whl
DOCKERFILE
fi
scripts/images.sh
exec docker run --rm --network host -v /var/run/docker.sock:/var/run/docker.sock \
  -v "$PWD:$PWD" -w "$PWD" -e CI -e PYTHONPATH="$PWD" "$RUNNER" \
  sh -c "/opt/test-venv/bin/ruff check . && /opt/test-venv/bin/ruff format --check . && /opt/test-venv/bin/mypy && /opt/test-venv/bin/python -m pytest ${PYTEST_ARGS:-}"
