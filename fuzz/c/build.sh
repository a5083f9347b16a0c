#!/usr/bin/env bash
# Native builds of the portable C (no SIMD128: fuzz/c/native_shim.c maps the SIMD entry points to the references):
#   build/fuzz/<target>       libFuzzer targets, clang -fsanitize=fuzzer,address,undefined
#   build/fuzz/san-model      the model runner for the sanitizer tests (tests/sanitizers.test.mjs), -fsanitize=address,undefined
# Rebuilt only when a source is newer than the binary.
# Safe to run concurrently (test files that build it run in parallel test runners: tests/fuzz.test.mjs,
# tests/sanitizers.test.mjs): one build at a time holds build/fuzz/.build.lock (flock; the others wait, then find the
# binaries up to date), and each binary is linked to a temporary name and renamed into place, so a process that is
# running or starting a binary never sees a half-written file.
set -euo pipefail
cd "$(dirname "$0")/../.."
CC=${AE_FUZZ_CC:-clang}
OUT=${AE_FUZZ_OUT:-build/fuzz}
mkdir -p "$OUT"
exec 9>"$OUT/.build.lock"
flock 9
SRC="src/core/pool.c src/kernels/dispatch.c src/kernels/traits.c $(ls src/kernels/ref/*.c) $(ls src/model/*.c | grep -v abi_check.c) src/format/rknot.c fuzz/c/native_shim.c"
FLAGS="-include fuzz/c/native_prelude.h -std=c11 -O1 -g -fno-omit-frame-pointer -ffp-contract=off -Isrc -Ifuzz/c -D_GNU_SOURCE -DAE_THREADS=0 -Wno-unknown-attributes -Wno-ignored-attributes"
# float -> int conversions: the wasm build compiles them with -mnontrapping-fptoint (saturating, NaN -> 0: defined),
# so the native build does not report them (UBSan float-cast-overflow); every other UB check is on.
SAN="-fsanitize=address,undefined -fno-sanitize=float-cast-overflow -fno-sanitize-recover=all"
newer() { local bin=$1 f; shift; [ ! -f "$bin" ] && return 0; for f in "$@"; do [ "$f" -nt "$bin" ] && return 0; done; return 1; }
DEPS="$SRC $(ls src/*/*.h src/kernels/dtypes.inc) fuzz/c/build.sh"
trap 'rm -f "$OUT"/.*.tmp$$' EXIT
# link NAME ARGS...: compile to a temporary file, then rename it into place (a failing compile stops the script)
link() { local name=$1; shift; $CC "$@" -o "$OUT/.$name.tmp$$"; mv -f "$OUT/.$name.tmp$$" "$OUT/$name"; }
for t in rknot-check model-init; do
  f="fuzz/c/fuzz_${t//-/_}.c"
  if newer "$OUT/$t" $DEPS "$f"; then link "$t" $FLAGS $SAN -fsanitize=fuzzer $SRC "$f" -lm; fi
done
if newer "$OUT/san-model" $DEPS fuzz/c/san_model.c; then link san-model $FLAGS $SAN $SRC fuzz/c/san_model.c -lm; fi
