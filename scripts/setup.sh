#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine (run as root or with sudo available):
# toolchains from Debian's packages, npm dependencies, then the wasm + TypeScript build.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# libclang-rt-14-dev: libFuzzer, ASan and UBSan runtimes of the native sanitizer / fuzz builds (fuzz/c/build.sh)
# emscripten + node-acorn (its JS post-pass imports acorn): the ASan/UBSan wasm build of the SIMD kernels
# (fuzz/c/build-simd-san.sh, tests/simd-san.test.mjs), with emscripten's prebuilt sanitizer runtimes
# clang-19 + lld-19: the relaxed-SIMD builds (<name>-relaxed.wasm; clang 14 lacks relaxed SIMD). With
# -nostdlib they need neither libclang-rt-19-dev-wasm32 nor a newer wasi-libc.
PKGS="cmake make clang lld wasi-libc libclang-rt-14-dev-wasm32 libclang-rt-14-dev wabt emscripten node-acorn curl clang-19 lld-19"
[ "${AETHER_BROWSER_TESTS:-1}" = "1" ] && PKGS="$PKGS chromium"
missing=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
command -v node >/dev/null || { echo "setup: Node.js >= 20 is required" >&2; exit 1; }
# --omit=optional: node-llama-cpp (a dev dependency of bench/peers.mjs) lists a prebuilt binary per platform and GPU
# as optional dependencies; the one the bench uses, @node-llama-cpp/linux-x64, is a direct dev dependency. Its
# postinstall must never build or download anything: NODE_LLAMA_CPP_SKIP_DOWNLOAD (npm 11 does not run it anyway).
# npm ci again when package-lock.json changed since the last install (npm ci writes node_modules/.package-lock.json)
if [ "${CI:-}" = "true" ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --no-audit --no-fund
fi
npm run build
