#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine (run as root or with sudo available):
# toolchains from Debian's packages, npm dependencies, then the wasm + TypeScript build.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
PKGS="cmake make clang lld wasi-libc libclang-rt-14-dev-wasm32 wabt emscripten curl"
[ "${AETHER_BROWSER_TESTS:-1}" = "1" ] && PKGS="$PKGS chromium"
missing=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
command -v node >/dev/null || { echo "setup: Node.js >= 20 is required" >&2; exit 1; }
[ -d node_modules ] && [ "${CI:-}" != "true" ] || npm ci --no-audit --no-fund
npm run build
