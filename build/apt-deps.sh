#!/usr/bin/env bash
# Install the Debian packages the build and tests need, only when missing.
# Usage: build/apt-deps.sh PACKAGE...   (as root, or with sudo available)
set -euo pipefail

missing=()
for pkg in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$pkg")
	fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "apt-deps: missing packages: ${missing[*]}; install them as root: apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	sudo="sudo"
fi
echo "apt-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
