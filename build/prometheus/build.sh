#!/usr/bin/env bash
# Assemble a minimal FROM-scratch Prometheus image from Debian's prometheus
# package, as build/redis/build.sh does for Redis.
#
# No image can be pulled on this project's machines, so instead of
# prom/prometheus we copy the host's prometheus server, every shared library
# ldd lists for it, the dynamic loader and the package's web assets into a
# build context, add build/prometheus/prometheus.yml and the rule files of
# deploy/prometheus (rules.yaml, alerts.yaml), and build that with
# build/prometheus/Dockerfile.
#
# Usage: build/prometheus/build.sh [image-tag]
#        (default: $ORDERAGG_PROMETHEUS_IMAGE or orderagg-prometheus:local)
set -euo pipefail

tag="${1:-${ORDERAGG_PROMETHEUS_IMAGE:-orderagg-prometheus:local}}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${here}/../.."
out="${here}/../out/prometheus-context"

if ! command -v prometheus >/dev/null 2>&1; then
	echo "build/prometheus: installing prometheus from Debian" >&2
	if [ "$(id -u)" -ne 0 ]; then
		echo "build/prometheus: prometheus is missing; run: sudo apt-get install -y prometheus" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

bin=/usr/bin/prometheus
rootfs="$out/rootfs"

rm -rf "$out"
mkdir -p "$rootfs/usr/bin" "$rootfs/etc/prometheus/rules" "$rootfs/usr/share/prometheus" "$out/data"
cp -L "$bin" "$rootfs/usr/bin/prometheus"

# Every resolved library (=> /path) plus the loader (a bare absolute path).
libs="$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } NF == 2 && $1 ~ /^\// { print $1 }' | sort -u)"
for lib in $libs; do
	dest="$rootfs$lib"
	mkdir -p "$(dirname "$dest")"
	cp -L "$lib" "$dest"
done

# The classic UI (--web.local-assets' default): its templates, its own static
# files, and of the JavaScript libraries Debian links in (moment-timezone
# alone is 200 MB) only the files the templates load.
web=/usr/share/prometheus/web
mkdir -p "$rootfs$web/static"
cp -rL "$web/templates" "$rootfs$web/templates"
for d in "$web/static"/*; do
	[ -L "$d" ] || cp -rL "$d" "$rootfs$d"
done
for f in $(grep -ho 'static/[A-Za-z0-9_./-]*' "$web/templates"/*.html | sort -u); do
	if [ ! -e "$rootfs$web/$f" ]; then
		mkdir -p "$(dirname "$rootfs$web/$f")"
		cp -L "$web/$f" "$rootfs$web/$f"
	fi
done
cp "${here}/prometheus.yml" "$rootfs/etc/prometheus/prometheus.yml"
cp "${root}/deploy/prometheus/rules.yaml" "${root}/deploy/prometheus/alerts.yaml" "$rootfs/etc/prometheus/rules/"
# Minimal passwd/group so the non-root uid has a name; hosts from files then
# DNS (Docker's embedded resolver names the other containers).
printf 'root:x:0:0:root:/root:/sbin/nologin\nprometheus:x:65532:65532:prometheus:/prometheus:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nprometheus:x:65532:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
chmod 0755 "$rootfs/usr/bin/prometheus"
chmod -R a+rX "$rootfs/etc" "$rootfs/usr/share"
cp "${here}/Dockerfile" "$out/Dockerfile"

docker build --quiet -t "$tag" "$out" >/dev/null
echo "build/prometheus: built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.1f MB", $1/1e6}'))"
