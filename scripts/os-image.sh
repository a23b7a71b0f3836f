#!/usr/bin/env bash
# Make sure the project's OS image exists locally and print its tag.
#
# One interpreter line everywhere: Debian trixie with its python3.13 package (docs/decisions.md, "One
# Python"). What is pinned is what must not move: the Debian suite and Python's minor version. The
# Debian revision floats: the build installs the python3.13 the mirrors offer that day (Debian's
# mirrors keep only the current revision, so an exact pin breaks every build at the next security
# update) and records the exact versions as labels of the image:
#   org.service-email-handler.python       the interpreter's own version (e.g. 3.13.5)
#   org.service-email-handler.python-deb   Debian's package version (e.g. 3.13.5-2+deb13u5)
#   org.service-email-handler.os-recipe    a hash of the suite, the minor version and the recipe below
# The tag is <recipe hash>-<Debian version>. Which image is used:
#   1. an image of this recipe is already present: use it (no network), unless OS_IMAGE_REFRESH=1
#      (the deploy sets it), which asks the mirrors which python3.13 they offer now and rebuilds only
#      when that is another revision;
#   2. debian:trixie-slim (DEBIAN_SLIM) is present or pullable: install python3.13 in a container of it;
#   3. otherwise: debootstrap Debian trixie (minbase) and install python3.13 in it.
# Both builds run the same install-and-trim script, check that the installed packages are one
# 3.13 version and are flattened into one layer with `docker import`, so only the starting root differs.
# OS_IMAGE_REPOSITORY names the image elsewhere (tests build theirs beside the project's).
set -euo pipefail

SUITE=trixie
PYTHON_MINOR=3.13
DEBIAN_SLIM="${DEBIAN_SLIM:-debian:trixie-slim}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
REPOSITORY="${OS_IMAGE_REPOSITORY:-service-email-handler/os-trixie-py313}"
LABEL=org.service-email-handler
# Only what shapes the image counts: the suite, the minor version and the build steps below the marker.
recipe_hash=$({ echo "$SUITE $PYTHON_MINOR"; sed -n '/^# --- recipe ---$/,$p' "$0"; } | sha256sum | cut -c1-12)

log() { printf '[os-image] %s\n' "$*" >&2; }
label() { docker image inspect -f "{{index .Config.Labels \"$LABEL.$2\"}}" "$1"; }

existing=$(docker images "$REPOSITORY" --filter "label=$LABEL.os-recipe=$recipe_hash" \
  --format '{{.Repository}}:{{.Tag}}' | head -1)
if [ -n "$existing" ]; then
  have=$(label "$existing" python-deb)
  if [ "${OS_IMAGE_REFRESH:-0}" != 1 ]; then
    log "using $existing (python3.13 $have, built earlier)"; echo "$existing"; exit 0
  fi
  # The image keeps apt and its sources: ask the mirrors from a container of it (host network: apt only).
  offered=$(timeout 180 docker run --rm --network host "$existing" sh -c \
    'apt-get update -qq >/dev/null 2>&1 && apt-cache policy python3.13' 2>/dev/null | sed -n 's/ *Candidate: //p' || true)
  if [ -z "$offered" ]; then
    log "could not ask the mirrors which python3.13 they offer; using $existing (python3.13 $have)"
    echo "$existing"; exit 0
  fi
  if [ "$offered" = "$have" ]; then
    log "using $existing (python3.13 $have, still what the mirrors offer)"; echo "$existing"; exit 0
  fi
  log "the mirrors now offer python3.13 $offered (the image has $have): rebuilding"
fi

# --- recipe ---
work=$(mktemp -d /tmp/os-image.XXXXXX)
container=""
imported="$REPOSITORY:import-$recipe_hash-$$"
trap 'rm -rf "$work"; [ -z "$container" ] || docker rm -f "$container" >/dev/null 2>&1 || true
  docker rmi "$imported" >/dev/null 2>&1 || true' EXIT

# Runs as root inside the Debian root (a container or a chroot): python3.13 as the mirrors offer it
# (one version for all its packages, of the pinned minor), then the same trims as the official slim
# images (no docs, man pages, locales or apt lists).
cat >"$work/pin.sh" <<EOF
set -eu
export DEBIAN_FRONTEND=noninteractive
rm -f /etc/apt/sources.list.d/*
printf '%s\n' "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \\
  "deb $SECURITY_MIRROR $SUITE-security main" > /etc/apt/sources.list
apt-get update -qq
if ! apt-get install -y -qq --no-install-recommends ca-certificates python3.13 python3.13-minimal \\
    libpython3.13-stdlib libpython3.13-minimal python3.13-venv >/tmp/apt.log 2>&1; then
  tail -5 /tmp/apt.log; echo "apt-get install python3.13 failed (mirror: $MIRROR)"; exit 1
fi
v=\$(dpkg-query -W -f '\${Version}' python3.13)
case "\$v" in
  $PYTHON_MINOR.*) ;;
  *) echo "python3.13 is \$v, not a $PYTHON_MINOR release"; exit 1 ;;
esac
for p in python3.13-minimal libpython3.13-stdlib libpython3.13-minimal python3.13-venv; do
  got=\$(dpkg-query -W -f '\${Version}' "\$p")
  [ "\$got" = "\$v" ] || { echo "\$p is \$got, python3.13 is \$v: the mirror is mid-update, build again"; exit 1; }
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
  log "installing python3.13 on $DEBIAN_SLIM"
  container="os-image-$recipe_hash-$$"
  # Host network: apt is all it reaches, and an engine without a usable bridge still builds.
  docker run -i --network host --name "$container" "$DEBIAN_SLIM" sh -s <"$work/pin.sh" >&2
  source_cmd=(docker export "$container")
else
  log "$DEBIAN_SLIM is not available; debootstrap of Debian $SUITE with python3.13 (once, a few minutes)"
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
  -m "Debian $SUITE + python3.13" - "$imported" >/dev/null
# What was installed, read from the image itself, becomes its labels and its tag.
deb=$(docker run --rm --network none "$imported" dpkg-query -W -f '${Version}' python3.13)
python=$(docker run --rm --network none "$imported" python3 -c 'import platform; print(platform.python_version())')
tag="$REPOSITORY:$recipe_hash-$(printf '%s' "$deb" | tr '+~:' '___')"
printf 'FROM %s\nLABEL %s.os-recipe="%s" %s.python="%s" %s.python-deb="%s"\n' "$imported" \
  "$LABEL" "$recipe_hash" "$LABEL" "$python" "$LABEL" "$deb" \
  | docker build -q --network none -t "$tag" - >"$work/label.log" 2>&1 || { cat "$work/label.log" >&2; exit 1; }
log "built $tag (Python $python, Debian python3.13 $deb; $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$tag"
