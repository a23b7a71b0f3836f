#!/usr/bin/env bash
# Make sure a Python 3.13 OS image exists locally and print its tag.
#
# Order: an image already present (the official python:3.13-slim-trixie, or our
# own debootstrap build from an earlier run), then a pull (works for users with
# a registry), then a one-off debootstrap of Debian trixie + `docker import`.
# The tag of the debootstrap image carries a hash of this script, so changing
# the recipe rebuilds it and re-runs are instant.
set -euo pipefail

OFFICIAL="${OFFICIAL_BASE:-python:3.13-slim-trixie}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=trixie
PACKAGES=python3.13,python3.13-venv,ca-certificates
# Only what shapes the image counts: the suite, the packages and the build steps below the marker.
recipe_hash=$({ echo "$SUITE $PACKAGES"; sed -n '/^# --- recipe ---$/,$p' "$0"; } | sha256sum | cut -c1-12)
LOCAL_TAG="service-email-handler/os-trixie-py313:${recipe_hash}"

log() { printf '[os-image] %s\n' "$*" >&2; }

if docker image inspect "$OFFICIAL" >/dev/null 2>&1; then
  log "using $OFFICIAL (present locally)"; echo "$OFFICIAL"; exit 0
fi
if docker image inspect "$LOCAL_TAG" >/dev/null 2>&1; then
  log "using $LOCAL_TAG (built earlier with debootstrap)"; echo "$LOCAL_TAG"; exit 0
fi
if [ "${SKIP_PULL:-0}" != 1 ] && timeout 60 docker pull -q "$OFFICIAL" >/dev/null 2>&1; then
  log "pulled $OFFICIAL"; echo "$OFFICIAL"; exit 0
fi

log "$OFFICIAL is not available; building $LOCAL_TAG with debootstrap (once, about 30 s to a few minutes)"
[ "$(id -u)" = 0 ] || { log "debootstrap needs root (or run: sudo $0)"; exit 1; }
if ! command -v debootstrap >/dev/null; then
  # A fresh machine: `make up` must work without a manual install step.
  log "installing debootstrap from Debian's packages"
  command -v apt-get >/dev/null || { log "debootstrap missing and no apt-get: install debootstrap"; exit 1; }
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null 2>&1 \
    || { log "could not install debootstrap: apt-get install debootstrap"; exit 1; }
fi

# --- recipe ---
work=$(mktemp -d /tmp/os-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
log "debootstrap done; trimming"

# Same spirit as the official slim images: no docs, man pages, locales or apt lists.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/debconf/*-old \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/usr/share/locale/* "$root"/var/log/* "$root"/tmp/* \
       "$root"/usr/share/python-wheels/setuptools-* 2>/dev/null || true
ln -sf python3.13 "$root/usr/bin/python3"
ln -sf python3.13 "$root/usr/bin/python"

tar -C "$root" -c . | docker import \
  -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["python3"]' \
  -m "Debian $SUITE minbase + Python 3.13 (debootstrap)" - "$LOCAL_TAG" >/dev/null
log "built $LOCAL_TAG ($(docker image inspect -f '{{.Size}}' "$LOCAL_TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$LOCAL_TAG"
