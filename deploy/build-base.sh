#!/usr/bin/env bash
# Builds the local base image `world-base:bookworm` (or $1) without a registry:
# a Debian 12 bookworm minbase root from the Debian mirror apt already uses,
# with the runtime packages baked in, imported with `docker import`.
#
# Use it where `debian:bookworm-slim` and `nginx` cannot be pulled, then build
# with `--build-arg BASE=world-base:bookworm`. It takes a couple of minutes and
# about 230 MB. Needs root, debootstrap (installed from apt when missing) and a
# Docker engine. Reuses an existing image unless --force is given.
set -euo pipefail

image=world-base:bookworm
force=no
for arg in "$@"; do
    case "$arg" in
        --force) force=yes ;;
        -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) image=$arg ;;
    esac
done

# ca-certificates for TLS clients, curl for health checks, nginx-light for the proxy.
packages=ca-certificates,curl,nginx-light

if [ "$force" = no ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "build-base: $image exists; reusing it (--force rebuilds)"
    exit 0
fi

# The first bookworm mirror named in apt's sources (one-line or deb822 format).
mirror() {
    local files
    files=$(ls /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$files" ] || return 0
    # shellcheck disable=SC2086
    awk '
      FNR == 1 { uris = ""; suites = "" }
      /^deb / { for (i = 2; i < NF; i++) if ($i ~ /^(https?|file):/ && $(i + 1) == "bookworm") { print $i; exit } }
      /^URIs:/ { uris = $2 }
      /^Suites:/ { suites = $0 " " }
      /^[[:space:]]*$/ { if (uris != "" && suites ~ /[[:space:]]bookworm[[:space:]]/) { print uris; exit } uris = ""; suites = "" }
      END { if (uris != "" && suites ~ /[[:space:]]bookworm[[:space:]]/) print uris }
    ' $files | head -n 1
}

url=${WORLD_DEBIAN_MIRROR:-$(mirror)}
url=${url:-http://deb.debian.org/debian}

if ! command -v debootstrap >/dev/null 2>&1; then
    echo "build-base: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/world-base.XXXXXX")
cleanup() {
    # debootstrap may leave /proc or /sys mounted inside the root on failure.
    for m in proc sys dev/pts dev; do umount -l "$root/$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT

echo "build-base: debootstrap bookworm from $url (packages: $packages)"
start=$SECONDS
if ! debootstrap --variant=minbase --include="$packages" bookworm "$root" "$url" >"$root.log" 2>&1; then
    tail -n 30 "$root.log" >&2
    [ -f "$root/debootstrap/debootstrap.log" ] && tail -n 30 "$root/debootstrap/debootstrap.log" >&2
    rm -f "$root.log"
    echo "build-base: debootstrap failed" >&2
    exit 1
fi
rm -f "$root.log"

# Slim the root: package caches, lists, docs and man pages are not needed at run time.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log "$root"/debootstrap
printf 'deb %s bookworm main\n' "$url" >"$root/etc/apt/sources.list"

echo "build-base: importing as $image"
tar --numeric-owner -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$image" >/dev/null
echo "build-base: $image ready ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}'), $((SECONDS - start)) s)"
