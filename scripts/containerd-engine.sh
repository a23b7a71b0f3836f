#!/usr/bin/env bash
# Unpack a Docker engine that can use the containerd image store (Debian trixie's docker.io, containerd
# and docker-buildx, 26.x) into .build/containerd-engine/root and print that folder. Only the files are
# unpacked (dpkg -x): nothing is installed, no service starts, the host's own engine is untouched.
# tests/docker/test_push_containerd.py runs a second daemon from it, with its own data root and
# socket, to push images the way Docker Engine 29 and recent Docker Desktop do by default.
# Cached: a no-op once the folder holds dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$PWD/.build/containerd-engine"
root="$dir/root"
if [ -x "$root/usr/sbin/dockerd" ] && [ -x "$root/usr/bin/containerd" ] \
  && [ -x "$root/usr/libexec/docker/cli-plugins/docker-buildx" ]; then
  echo "$root"; exit 0
fi
command -v apt-get >/dev/null || { echo "[containerd-engine] needs apt-get (Debian's packages)" >&2; exit 1; }
mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/debs"
printf '%s\n' "deb http://deb.debian.org/debian trixie main" \
  "deb http://deb.debian.org/debian-security trixie-security main" >"$dir/sources.list"
# apt with its own lists and cache: the host's sources (bookworm here) and package state stay as they are.
apt_opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null
  -o APT::Sandbox::User=root)
echo "[containerd-engine] fetching docker.io, containerd and docker-buildx from Debian trixie" >&2
apt-get "${apt_opts[@]}" update -qq >&2
rm -f "$dir/debs"/*.deb
(cd "$dir/debs" && apt-get "${apt_opts[@]}" download docker.io containerd docker-buildx >&2)
rm -rf "$root.tmp" && mkdir -p "$root.tmp"
for deb in "$dir/debs"/*.deb; do dpkg -x "$deb" "$root.tmp"; done
rm -rf "$root" && mv "$root.tmp" "$root"
echo "$root"
