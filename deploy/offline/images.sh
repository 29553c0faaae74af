#!/usr/bin/env bash
# Build the offline stand-ins for the images docker-compose.yml names, from
# Debian's packages, on a machine that reaches Debian's mirror but no image
# registry. Only images that are missing are built, so a second run takes
# seconds; each line of output says what was built or found.
#
#   deploy/offline/images.sh
#   docker-compose -f docker-compose.yml -f deploy/offline/compose.yml up -d --build
#
# The images get this project's own names (flashsale-offline/…), never an
# official one: a local build must not pass for redis:7.2.11 or postgres:16.
#
#   flashsale-offline/debian:bookworm   debootstrap --variant=minbase, imported;
#                                       also the runtime base (debian:bookworm-slim)
#   flashsale-offline/redis:bookworm    Debian's redis-server (7.0), /data as cwd
#   flashsale-offline/postgres:bookworm Debian's PostgreSQL 15, initialised from
#                                       POSTGRES_USER/PASSWORD/DB like the official one
#   flashsale-offline/haproxy:bookworm  Debian's haproxy (2.6), config in
#                                       /usr/local/etc/haproxy as in the official one
#   flashsale-offline/golang:bookworm   this machine's Go toolchain at /usr/local/go
#
# Settings: DEBIAN_MIRROR (http://deb.debian.org/debian), GOROOT_SOURCE (the
# Go toolchain to copy, `go env GOROOT`), CA_BUNDLE (the certificates the Go
# image trusts, /etc/ssl/certs/ca-certificates.crt: where a proxy re-signs
# TLS, `go mod download` inside a build needs the machine's bundle).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ca="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
base=flashsale-offline/debian:bookworm
label="org.opencontainers.image.description=offline stand-in built from Debian packages by deploy/offline/images.sh"

have() { docker image inspect "$1" >/dev/null 2>&1; }

# took prints how long since $1 (seconds since the epoch).
took() { echo "$(($(date +%s) - $1))s"; }

if have "$base"; then
	echo "images.sh: $base present"
else
	command -v debootstrap >/dev/null || { echo "images.sh: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
	start=$(date +%s)
	rootfs=$(mktemp -d)
	trap 'rm -rf "$rootfs"' EXIT
	debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
		tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1
	}
	rm -f "$rootfs.log"
	rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
	tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' -c "LABEL ${label%%=*}=\"${label#*=}\"" - "$base" >/dev/null
	rm -rf "$rootfs"
	trap - EXIT
	echo "images.sh: built $base (debootstrap minbase from $mirror) in $(took "$start")"
fi

# build NAME DIR builds DIR's Dockerfile as NAME unless NAME exists.
build() {
	if have "$1"; then
		echo "images.sh: $1 present"
		return
	fi
	local start log
	start=$(date +%s)
	log=$(mktemp)
	if ! docker build --label "$label" --build-arg "BASE=$base" -t "$1" "$2" >"$log" 2>&1; then
		tail -30 "$log" >&2; rm -f "$log"; exit 1
	fi
	rm -f "$log"
	echo "images.sh: built $1 in $(took "$start")"
}

build flashsale-offline/redis:bookworm "$here/redis"
build flashsale-offline/postgres:bookworm "$here/postgres"
build flashsale-offline/haproxy:bookworm "$here/haproxy"

# The Go image's context is its Dockerfile, the toolchain and the CA bundle,
# streamed as a tar (no copy of the toolchain on disk).
golang=flashsale-offline/golang:bookworm
if have "$golang"; then
	echo "images.sh: $golang present"
else
	goroot="${GOROOT_SOURCE:-$(go env GOROOT)}"
	want=$(sed -n 's/^go \([0-9]*\.[0-9]*\).*/go\1/p' "$here/../../go.mod")
	got=$("$goroot/bin/go" env GOVERSION)
	case "$got" in
	"$want" | "$want".*) ;;
	*) echo "images.sh: $goroot is $got, go.mod wants $want (set GOROOT_SOURCE)" >&2; exit 1 ;;
	esac
	start=$(date +%s)
	log=$(mktemp)
	if ! tar -c -f - -C "$here/golang" Dockerfile -C "$(dirname "$ca")" --transform "s|^$(basename "$ca")\$|ca-certificates.crt|" "$(basename "$ca")" \
		-C "$(dirname "$goroot")" --exclude="$(basename "$goroot")/pkg/tool/*/*_test" --transform "s|^$(basename "$goroot")\(/\|\$\)|go\1|" "$(basename "$goroot")" |
		docker build --label "$label" --build-arg "BASE=$base" -t "$golang" - >"$log" 2>&1; then
		tail -30 "$log" >&2; rm -f "$log"; exit 1
	fi
	rm -f "$log"
	echo "images.sh: built $golang ($got from $goroot) in $(took "$start")"
fi
