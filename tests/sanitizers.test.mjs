// Sanitizer builds: the portable C (scalar kernels, config / tensor validation, arena layout, forward pass, sampler)
// built natively with clang -fsanitize=address,undefined (fuzz/c/build.sh) runs the generated models of every
// architecture and dtype of tests/model-generated (prefill + decode) and must (a) finish without any ASan / UBSan report
// (-fno-sanitize-recover: any report fails the run) and (b) give the logits the wasm engine gives (scalar references vs
// SIMD kernels: close, not bit-identical). The C fuzz targets run under the same sanitizers (tests/fuzz.test.mjs).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

import { load } from '../dist/src/index.js';
import { openRknot, readRknotTensor } from '../dist/src/formats/rknot.js';
import { Arch, Cfg, GLOBAL_TENSOR_ROLES, LAYER_TENSOR_ROLES } from '../dist/src/generated/abi.js';
import { DTYPE_IDS } from '../dist/src/runtime/abi.js';
import { generateModel, ARCHS } from './helpers/gen-model.mjs';
import { makeTmpDir, repoRoot } from './helpers/formats.mjs';

const tmp = makeTmpDir('san');
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function build() {
  const r = spawnSync('bash', [path.join(repoRoot, 'fuzz/c/build.sh')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `fuzz/c/build.sh failed:\n${r.stdout}\n${r.stderr}`);
}

const FLOAT_KEYS = new Set([Cfg.NORM_EPS, Cfg.ROPE_THETA, Cfg.EMBD_SCALE, Cfg.ATTN_SCALE, Cfg.ATTN_SOFTCAP, Cfg.FINAL_SOFTCAP,
  Cfg.ROPE_FREQ_SCALE, Cfg.ROPE_ATTN_FACTOR, Cfg.ROPE_THETA_SWA, Cfg.ROPE_FREQ_SCALE_SWA]);

/** The model as san-model reads it (fuzz/c/san_model.c): the config words the engine sets, every tensor with its role. */
async function writeDump(file, rknot, tokens, maxBatch) {
  const { meta } = await openRknot(rknot);
  const c = meta.config;
  const cfg = new Map([
    [Cfg.ARCH, Arch[c.arch]], [Cfg.DIM, c.dim], [Cfg.N_LAYERS, c.n_layers], [Cfg.N_HEADS, c.n_heads], [Cfg.N_KV_HEADS, c.n_kv_heads],
    [Cfg.HEAD_DIM, c.head_dim], [Cfg.HIDDEN_DIM, c.hidden_dim], [Cfg.VOCAB, c.vocab_size], [Cfg.N_CTX, c.n_ctx], [Cfg.ROPE_DIM, c.rope_dim ?? c.head_dim],
    [Cfg.ROPE_NEOX, c.rope_type === 'neox' ? 1 : 0], [Cfg.MAX_BATCH, maxBatch], [Cfg.MAX_THREADS, 1], [Cfg.LOGITS_ALL, 0], [Cfg.FFN_ACT, 0], [Cfg.SWA_WINDOW, 0],
    [Cfg.NORM_EPS, c.norm_eps], [Cfg.ROPE_THETA, c.rope_theta], [Cfg.EMBD_SCALE, 1], [Cfg.ATTN_SCALE, 0], [Cfg.ATTN_SOFTCAP, 0], [Cfg.FINAL_SOFTCAP, 0],
    [Cfg.ROPE_FREQ_SCALE, 1], [Cfg.ROPE_ATTN_FACTOR, 1], [Cfg.ROPE_THETA_SWA, 0], [Cfg.ROPE_FREQ_SCALE_SWA, 1],
  ]);
  const parts = [Buffer.from('AESM')];
  const words = Buffer.alloc(26 * 4);
  for (let k = 0; k < 26; k++) {
    if (FLOAT_KEYS.has(k)) words.writeFloatLE(cfg.get(k), 4 * k); else words.writeInt32LE(cfg.get(k), 4 * k);
  }
  parts.push(words);
  const used = meta.tensors.filter((t) => GLOBAL_TENSOR_ROLES[t.name] !== undefined || /^blk\.\d+\./.test(t.name));
  const n = Buffer.alloc(4); n.writeUInt32LE(used.length); parts.push(n);
  for (const t of used) {
    const m = /^blk\.(\d+)\.(.+)$/.exec(t.name);
    const layer = m ? Number(m[1]) : -1, role = m ? LAYER_TENSOR_ROLES[m[2]] : GLOBAL_TENSOR_ROLES[t.name];
    const { data } = await readRknotTensor(rknot, t.name);
    const h = Buffer.alloc(32);
    h.writeInt32LE(layer, 0); h.writeInt32LE(role, 4); h.writeInt32LE(DTYPE_IDS[t.dtype], 8);
    h.writeInt32LE(t.shape[0], 12); h.writeInt32LE(t.shape[1] ?? 1, 16); h.writeInt32LE(0, 20); h.writeBigUInt64LE(BigInt(data.length), 24);
    parts.push(h, Buffer.from(data.buffer, data.byteOffset, data.length));
  }
  const nt = Buffer.alloc(4 + 4 * tokens.length);
  nt.writeUInt32LE(tokens.length, 0);
  tokens.forEach((t, i) => nt.writeInt32LE(t, 4 + 4 * i));
  parts.push(nt);
  fs.writeFileSync(file, Buffer.concat(parts));
}

test('ASan + UBSan: generated models of every architecture and dtype run clean and match the wasm engine', { timeout: 1200000 }, async () => {
  build();
  const tokens = [1, 5, 9, 3, 17, 2, 30, 11, 7, 4, 22, 13];
  const maxBatch = 4;
  for (const arch of Object.keys(ARCHS)) {
    for (const dtype of ['f32', 'f16', 'q8_0', 'q4_0']) {
      const g = await generateModel(arch, dtype);
      const dump = path.join(tmp, `${arch}-${dtype}.bin`), out = path.join(tmp, `${arch}-${dtype}.f32`);
      await writeDump(dump, g.file, tokens, maxBatch);
      const r = spawnSync(path.join(repoRoot, 'build/fuzz/san-model'), [dump, out], { encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0', UBSAN_OPTIONS: 'print_stacktrace=1' } });
      assert.equal(r.status, 0, `${arch} ${dtype}: san-model failed (a sanitizer report or an error):\n${r.stdout}\n${r.stderr}`);
      assert.doesNotMatch(r.stderr, /runtime error|AddressSanitizer|LeakSanitizer/, `${arch} ${dtype}: ${r.stderr}`);
      const got = new Float32Array(new Uint8Array(fs.readFileSync(out)).buffer);
      // the wasm engine, same split: the first half as one prefill (chunks of maxBatch), then token by token
      const m = await load(g.file, { maxBatch, kvDtype: 'f32' }); // the native run keeps an f32 KV cache (C default)
      const vocab = m.config.vocab_size, half = tokens.length / 2;
      const want = [];
      m.engine.forward(tokens.slice(0, half), 0);
      want.push(...m.engine.logits());
      for (let p = half; p < tokens.length; p++) { m.engine.forward([tokens[p]], p); want.push(...m.engine.logits()); }
      m.dispose();
      assert.equal(got.length, want.length);
      let maxDiff = 0, maxAbs = 0;
      for (let i = 0; i < got.length; i++) { maxDiff = Math.max(maxDiff, Math.abs(got[i] - want[i])); maxAbs = Math.max(maxAbs, Math.abs(want[i])); }
      // scalar references vs SIMD: summation order (f32 / f16), and activation rounding at q8_0 boundaries (quantised)
      const tol = (dtype === 'f32' || dtype === 'f16' ? 1e-3 : 5e-2) * Math.max(1, maxAbs);
      assert.ok(maxDiff <= tol, `${arch} ${dtype}: native scalar vs wasm logits differ by ${maxDiff} (tolerance ${tol}, ${got.length / vocab} rows)`);
      fs.rmSync(path.dirname(g.file), { recursive: true, force: true });
    }
  }
});
