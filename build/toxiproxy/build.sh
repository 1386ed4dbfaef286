#!/usr/bin/env bash
# Build a FROM-scratch Toxiproxy image from its Go module.
#
# No image can be pulled on this project's machines, so instead of
# ghcr.io/shopify/toxiproxy the server command of github.com/Shopify/toxiproxy/v2
# is compiled here (static, CGO_ENABLED=0) through the Go module proxy and
# copied into an empty image laid out like the upstream one: /toxiproxy as the
# entrypoint, API on :8474, `-host=0.0.0.0` as the default command. The
# integration tests (integration/redis_chaos_test.go) drive it with the Go
# client, github.com/Shopify/toxiproxy/v2/client.
#
# Usage: build/toxiproxy/build.sh [image-tag]
#   tag:     $1, else $ORDERAGG_TOXIPROXY_IMAGE, else orderagg-toxiproxy:local
#   version: $TOXIPROXY_VERSION (a module version), default v2.12.0
set -euo pipefail

tag="${1:-${ORDERAGG_TOXIPROXY_IMAGE:-orderagg-toxiproxy:local}}"
version="${TOXIPROXY_VERSION:-v2.12.0}"
go="${GO:-go}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${here}/../out/toxiproxy-context"

rm -rf "$out"
mkdir -p "$out/bin"

# `go install pkg@version` builds the module at that version on its own,
# outside orderagg's go.mod; run it from the empty context so no go.mod is
# in the way. The binary is named after its directory, cmd/server.
(
	cd "$out"
	GOBIN="$out/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$go" install -trimpath \
		-ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=${version#v}" \
		"github.com/Shopify/toxiproxy/v2/cmd/server@${version}"
)
mv "$out/bin/server" "$out/toxiproxy"
rmdir "$out/bin"
chmod 0755 "$out/toxiproxy"
cp "${here}/Dockerfile" "$out/Dockerfile"

docker build --quiet -t "$tag" "$out" >/dev/null
echo "build/toxiproxy: built $tag (toxiproxy ${version}, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.1f MB", $1/1e6}'))"
