#!/bin/bash
# The KV-cache quality table of docs/QUALITY.md ("KV-cache compression by position and per head"): profile-heads on
# documents 0..66 of val.txt, then aether longctx on documents 67.. for each policy. JSON lines to $OUT/q.jsonl.
#   OUT=/tmp/aether-kv bash bench/kv-quality.sh        (run from the repository root after npm run build)
set -e
OUT=${OUT:-/tmp/aether-kv}; mkdir -p "$OUT"
M=models/tiny-llama-a-q8_0.rknot
T=tests/fixtures/tiny-llama-a/val.txt
[ -s "$OUT/heads.json" ] || node dist/cli/aether.js profile-heads $M --calib $T --docs 0:67 --max-tokens 16384 --window 32 --sinks 4 -o "$OUT/tiny-heads.rknot" --json > "$OUT/heads.json"
run() { echo "== $*" >&2; node --no-liftoff dist/cli/aether.js longctx "$@" --text $T --docs 67: --max-tokens 4096 --json >> "$OUT/q.jsonl"; }
run $M --kv-policy full --kv-dtype f16 --passkey --seeds 2
run $M --kv-policy "0-20:f16,21-100:q8_0,101-:q4_0" --passkey --seeds 2
run $M --kv-policy "sinks=4:f16,window=64:f16,rest=q4_0" --passkey --seeds 2
run "$OUT/tiny-heads.rknot" --kv-policy "sinks=4:f16,window=32:f16,rest=f16" --heads local
run $M --kv-policy "sinks=4:f16,window=64:f16,rest=q8_0"
run $M --kv-policy full --kv-dtype q4_0
run $M --kv-policy full --kv-dtype q8_0
run $M --kv-policy "0-3:f16,4-:q4_0"
run $M --kv-policy "sinks=4:f16,window=32:f16,rest=q4_0"
run "$OUT/tiny-heads.rknot" --kv-policy "sinks=4:f16,window=32:f16,rest=q8_0" --heads local
