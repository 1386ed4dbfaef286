#!/usr/bin/env bash
# Assemble a minimal FROM-scratch Redis image from Debian's redis-server package.
#
# No image can be pulled on this project's machines, so instead of redis:7 we
# copy the host's redis-server and redis-cli (for the compose health check),
# every shared library ldd lists for them and the dynamic loader into a build
# context, and build that with build/redis/Dockerfile.
#
# Usage: build/redis/build.sh [image-tag]     (default: $REDIS_IMAGE or orderagg-redis:local)
set -euo pipefail

tag="${1:-${REDIS_IMAGE:-orderagg-redis:local}}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${here}/../out/redis-context"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	echo "build/redis: installing redis-server and redis-tools from Debian" >&2
	if [ "$(id -u)" -ne 0 ]; then
		echo "build/redis: redis-server is missing; run: sudo apt-get install -y redis-server redis-tools" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null
fi

bins=(/usr/bin/redis-server /usr/bin/redis-cli)

rm -rf "$out"
mkdir -p "$out/rootfs/usr/bin" "$out/rootfs/etc" "$out/rootfs/data" "$out/rootfs/tmp"

# redis-server is a symlink to redis-check-rdb in Debian; the binary picks its
# role from argv[0], so copy the real file under the redis-server name.
for b in "${bins[@]}"; do
	cp -L "$b" "$out/rootfs/usr/bin/$(basename "$b")"
done

# Every resolved library (=> /path) plus the loader (a bare absolute path).
libs="$(ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } NF == 2 && $1 ~ /^\// { print $1 }' | sort -u)"
for lib in $libs; do
	dest="$out/rootfs$lib"
	mkdir -p "$(dirname "$dest")"
	cp -L "$lib" "$dest"
done

cp "${here}/redis.conf" "$out/rootfs/etc/redis.conf"
# Minimal passwd/group so the non-root uid has a name (redis logs it).
printf 'root:x:0:0:root:/root:/sbin/nologin\nredis:x:65532:65532:redis:/data:/sbin/nologin\n' >"$out/rootfs/etc/passwd"
printf 'root:x:0:\nredis:x:65532:\n' >"$out/rootfs/etc/group"
chmod 0755 "$out/rootfs/usr/bin/"*
chown -R 65532:65532 "$out/rootfs/data"
chmod 1777 "$out/rootfs/tmp"
cp "${here}/Dockerfile" "$out/Dockerfile"

docker build --quiet -t "$tag" "$out" >/dev/null
echo "build/redis: built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.1f MB", $1/1e6}'))"
