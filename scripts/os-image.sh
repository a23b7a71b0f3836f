#!/usr/bin/env bash
# Make sure the project's OS image exists locally and print its tag.
#
# One interpreter everywhere: Debian trixie with its python3.13 package pinned to one exact Debian
# version (PYTHON_DEB_VERSION), whichever way the image is made (docs/decisions.md, "One Python").
#   1. the image is already present (a hash of this recipe and the pin is in its tag): use it;
#   2. debian:trixie-slim is present or pullable: install the pinned packages in a container of it;
#   3. otherwise: debootstrap Debian trixie (minbase) and install the pinned packages in it.
# Both builds run the same install-and-trim script, check the installed versions against the pin
# and are flattened into one layer with `docker import`, so only the starting root differs.
# A Debian security update of python3.13 means bumping PYTHON_DEB_VERSION (the build names the
# version the mirrors offer when the pin is no longer there).
set -euo pipefail

PYTHON_DEB_VERSION=3.13.5-2+deb13u5
DEBIAN_SLIM="${DEBIAN_SLIM:-debian:trixie-slim}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
SUITE=trixie
# Only what shapes the image counts: the suite, the pin and the build steps below the marker.
recipe_hash=$({ echo "$SUITE $PYTHON_DEB_VERSION"; sed -n '/^# --- recipe ---$/,$p' "$0"; } | sha256sum | cut -c1-12)
LOCAL_TAG="service-email-handler/os-trixie-py313:${recipe_hash}"

log() { printf '[os-image] %s\n' "$*" >&2; }

if docker image inspect "$LOCAL_TAG" >/dev/null 2>&1; then
  log "using $LOCAL_TAG (python3.13 $PYTHON_DEB_VERSION, built earlier)"; echo "$LOCAL_TAG"; exit 0
fi

# --- recipe ---
work=$(mktemp -d /tmp/os-image.XXXXXX)
container=""
trap 'rm -rf "$work"; [ -z "$container" ] || docker rm -f "$container" >/dev/null 2>&1 || true' EXIT

# Runs as root inside the Debian root (a container or a chroot): the pinned python3.13, then the
# same trims as the official slim images (no docs, man pages, locales or apt lists).
cat >"$work/pin.sh" <<EOF
set -eu
export DEBIAN_FRONTEND=noninteractive
rm -f /etc/apt/sources.list.d/*
printf '%s\n' "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \\
  "deb $SECURITY_MIRROR $SUITE-security main" > /etc/apt/sources.list
apt-get update -qq
v=$PYTHON_DEB_VERSION
if ! apt-get install -y -qq --no-install-recommends ca-certificates python3.13=\$v python3.13-minimal=\$v \\
    libpython3.13-stdlib=\$v libpython3.13-minimal=\$v python3.13-venv=\$v >/tmp/apt.log 2>&1; then
  tail -5 /tmp/apt.log
  echo "python3.13 \$v is not offered by the mirrors; they offer: \$(apt-cache policy python3.13 | sed -n 's/ *Candidate: //p')"
  echo "bump PYTHON_DEB_VERSION in scripts/os-image.sh (a Debian security update replaced it)"
  exit 1
fi
for p in python3.13 python3.13-minimal libpython3.13-stdlib libpython3.13-minimal python3.13-venv; do
  got=\$(dpkg-query -W -f '\${Version}' "\$p")
  [ "\$got" = "\$v" ] || { echo "\$p is \$got, not the pinned \$v"; exit 1; }
done
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /usr/share/doc/* \\
  /usr/share/man/* /usr/share/info/* /usr/share/locale/* /var/log/* /tmp/* \\
  /usr/share/python-wheels/setuptools-* 2>/dev/null || true
ln -sf python3.13 /usr/bin/python3
ln -sf python3.13 /usr/bin/python
EOF

if docker image inspect "$DEBIAN_SLIM" >/dev/null 2>&1 \
  || { [ "${SKIP_PULL:-0}" != 1 ] && timeout 60 docker pull -q "$DEBIAN_SLIM" >/dev/null 2>&1; }; then
  log "installing python3.13 $PYTHON_DEB_VERSION on $DEBIAN_SLIM"
  container="os-image-$recipe_hash-$$"
  docker run -i --name "$container" "$DEBIAN_SLIM" sh -s <"$work/pin.sh" >&2
  source_cmd=(docker export "$container")
else
  log "$DEBIAN_SLIM is not available; debootstrap of Debian $SUITE with python3.13 $PYTHON_DEB_VERSION (once, a few minutes)"
  [ "$(id -u)" = 0 ] || { log "debootstrap needs root (or run: sudo $0)"; exit 1; }
  if ! command -v debootstrap >/dev/null; then
    # A fresh machine: `make up` must work without a manual install step.
    log "installing debootstrap from Debian's packages"
    command -v apt-get >/dev/null || { log "debootstrap missing and no apt-get: install debootstrap"; exit 1; }
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null 2>&1 \
      || { log "could not install debootstrap: apt-get install debootstrap"; exit 1; }
  fi
  root="$work/rootfs"
  debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
  rm -f "$root/etc/resolv.conf" && cp -L /etc/resolv.conf "$root/etc/resolv.conf"  # apt in the chroot
  mount -t proc proc "$root/proc"
  chroot "$root" sh -s <"$work/pin.sh" >&2 || { umount "$root/proc"; exit 1; }
  umount "$root/proc"
  rm -f "$root/etc/resolv.conf"
  source_cmd=(tar -C "$root" -c .)
fi

"${source_cmd[@]}" | docker import \
  -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["python3"]' \
  -m "Debian $SUITE + python3.13 $PYTHON_DEB_VERSION" - "$LOCAL_TAG" >/dev/null
log "built $LOCAL_TAG ($(docker image inspect -f '{{.Size}}' "$LOCAL_TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$LOCAL_TAG"
