#!/usr/bin/env bash
# Fill .build/wheelhouse with the image's Python wheels and .build/rie with the real
# aws-lambda-rie binary, on the host, so no docker build needs the network.
# Re-runs are instant: a stamp records the lock file and RIE pin it was made from.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-$(scripts/find-python.sh 2>/dev/null || command -v python3)}"
SAM_CLI_VERSION="$(sed -n 's/^SAM_CLI_VERSION *:= *//p' Makefile)"
case "$(docker info -f '{{.Architecture}}' 2>/dev/null || uname -m)" in
  aarch64|arm64) PLATFORM=manylinux2014_aarch64; RIE_ARCH=arm64 ;;
  *)             PLATFORM=manylinux2014_x86_64;  RIE_ARCH=x86_64 ;;
esac
if [ "${1:-image}" = localstack ]; then
  # LocalStack's runtime (compose/localstack.Dockerfile), hash-locked by scripts/lock-localstack.py.
  # Four dependencies publish only pure-Python sdists: they are downloaded (hash-checked) and built in the image.
  WH=.build/wheelhouse-localstack
  stamp="$(sha256sum < requirements/localstack.txt | cut -c1-16)-$PLATFORM"
  if [ -f "$WH/.stamp" ] && [ "$(cat "$WH/.stamp")" = "$stamp" ]; then echo "[wheelhouse] localstack up to date"; exit 0; fi
  arch=${PLATFORM#manylinux2014_}
  echo "[wheelhouse] downloading LocalStack's wheels for $arch / CPython 3.13 (about 120 MB, once)"
  rm -rf "$WH" && mkdir -p "$WH"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --require-hashes -d "$WH" \
    --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" --platform "$PLATFORM" \
    --python-version 3.13 --implementation cp -r requirements/localstack.txt
  cp requirements/localstack.txt "$WH/localstack.lock"
  # The sdists build with setuptools, which the image installs first (from the same lock).
  awk '/^setuptools==/{p=1} p{print} p && !/\\$/{exit}' requirements/localstack.txt > "$WH/build.lock"
  echo "$stamp" > "$WH/.stamp"; echo "[wheelhouse] localstack: $(ls "$WH" | grep -cE '\.(whl|tar\.gz)$') files"; exit 0
fi
if [ "${1:-image}" = local ]; then
  # The local tools image: moto[server], aiosmtpd and friends from their own pinned list
  # (no hashes: a dev-only image that is never deployed).
  WH=.build/wheelhouse-local
  stamp="$(sha256sum < requirements/local.txt | cut -c1-16)-$PLATFORM"
  if [ -f "$WH/.stamp" ] && [ "$(cat "$WH/.stamp")" = "$stamp" ]; then echo "[wheelhouse] local tools up to date"; exit 0; fi
  echo "[wheelhouse] downloading the local tools' wheels for $PLATFORM / CPython 3.13"
  rm -rf "$WH" && mkdir -p "$WH"
  arch=${PLATFORM#manylinux2014_}
  # The tools import common/ (the mail parser among it), so its wheels are here too; google-re2 has
  # manylinux_2_28 wheels only, as for the images below.
  "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$WH" \
    --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" --platform "$PLATFORM" \
    --python-version 3.13 --implementation cp --only-binary=:all: -r requirements/local.txt
  cp requirements/local.txt "$WH/local.txt"; echo "$stamp" > "$WH/.stamp"; exit 0
fi

WH=.build/wheelhouse
stamp="$(sha256sum < requirements/image.txt | cut -c1-16)-$PLATFORM-sam$SAM_CLI_VERSION"
if [ -f "$WH/.stamp" ] && [ "$(cat "$WH/.stamp")" = "$stamp" ] && [ -x .build/rie/aws-lambda-rie ]; then
  echo "[wheelhouse] up to date ($PLATFORM)"; exit 0
fi

echo "[wheelhouse] downloading image wheels for $PLATFORM / CPython 3.13"
rm -rf "$WH" && mkdir -p "$WH" .build/rie .build/cache
# google-re2 publishes manylinux_2_28 wheels only (glibc 2.28; the images' Debian trixie has 2.41).
arch=${PLATFORM#manylinux2014_}
"$PY" -m pip download -q --disable-pip-version-check --no-deps --require-hashes -d "$WH" \
  --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" --platform "$PLATFORM" \
  --python-version 3.13 --implementation cp --only-binary=:all: \
  -r requirements/image.txt
cp requirements/image.txt "$WH/image.lock"

echo "[wheelhouse] extracting aws-lambda-rie ($RIE_ARCH) from aws-sam-cli==$SAM_CLI_VERSION"
"$PY" -m pip download -q --disable-pip-version-check --no-deps -d .build/cache "aws-sam-cli==$SAM_CLI_VERSION"
"$PY" - "$SAM_CLI_VERSION" "$RIE_ARCH" <<'PYEOF'
import sys, zipfile, pathlib, os
version, arch = sys.argv[1:]
wheel = next(pathlib.Path(".build/cache").glob(f"aws_sam_cli-{version}-*.whl"))
with zipfile.ZipFile(wheel) as z:
    data = z.read(f"samcli/local/rapid/aws-lambda-rie-{arch}")
out = pathlib.Path(".build/rie/aws-lambda-rie")
out.write_bytes(data)
os.chmod(out, 0o755)
PYEOF
echo "$stamp" > "$WH/.stamp"
echo "[wheelhouse] $(ls "$WH"/*.whl | wc -l) wheels, RIE $(du -h .build/rie/aws-lambda-rie | cut -f1)"
