#!/usr/bin/env bash
# The SIMD128 kernels and their scalar references under ASan + UBSan, in wasm: emscripten (emcc, Debian package
# emscripten with its prebuilt sanitizer runtimes; node-acorn for its JS post-pass) builds src/kernels (dispatch,
# traits, simd128/*, ref/*) with the model's SIMD flags plus fuzz/c/simd_san.c into build/simd-san/simd-san.cjs.
# Run: node --no-experimental-fetch build/simd-san/simd-san.cjs [seed] (emscripten 3.1.6's loader would use fetch()).
# Rebuilt only when a source is newer than the output.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=build/simd-san
mkdir -p "$OUT"
SRC="src/kernels/dispatch.c src/kernels/traits.c $(ls src/kernels/simd128/*.c) $(ls src/kernels/ref/*.c) fuzz/c/simd_san.c"
newer() { local bin=$1 f; shift; [ ! -f "$bin" ] && return 0; for f in "$@"; do [ "$f" -nt "$bin" ] && return 0; done; return 1; }
if newer "$OUT/simd-san.cjs" $SRC $(ls src/*/*.h src/kernels/simd128/*.h src/kernels/dtypes.inc) fuzz/c/build-simd-san.sh; then
  # emcc runs its acorn-based optimizer with the system node; Debian installs acorn in /usr/share/nodejs
  NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} emcc -std=c11 -O1 -g2 -msimd128 -mnontrapping-fptoint -msign-ext -ffp-contract=off \
    -fno-math-errno -Isrc -DAE_THREADS=0 -Wno-unknown-attributes -Wno-ignored-attributes \
    -fsanitize=address,undefined -fno-sanitize=float-cast-overflow -fno-sanitize-recover=all \
    -sALLOW_MEMORY_GROWTH=1 -sENVIRONMENT=node -sEXIT_RUNTIME=1 -sINITIAL_MEMORY=67108864 \
    $SRC -o "$OUT/simd-san.cjs"
fi
