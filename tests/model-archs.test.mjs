// Every architecture end to end: a small GGUF written with the keys and tensor names llama.cpp's converter writes for it
// (tests/helpers/gen-gguf.mjs), converted to .rknot by our converter, run by the wasm forward (prefill in batches, then
// decode) and compared with the scalar JS reference forward (tests/helpers/ref-forward.mjs) fed the GGUF's weights;
// 1 and 2 threads must give identical bits. The converter's config is checked against what the GGUF implies.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { convertModel } from '../dist/src/formats/convert.js';
import { openRknot, readRknotTensor } from '../dist/src/formats/rknot.js';
import { generateGGUF, generateHF, GGUF_VARIANTS } from './helpers/gen-gguf.mjs';
import { createRefModel } from './helpers/ref-forward.mjs';
import { logitRuns } from './helpers/logit-runs.mjs';

// f32 weights: the bound of tests/model-generated.test.mjs (identical weights on both sides; f32 vs f64 summation and
// the vector exp / tanh remain): 2e-4 on logits of magnitude ~1.
// q8_0 weights: activations are quantised to q8_0 on both sides, and an activation within ~1e-7 of a rounding boundary
// can round one way in the f32 wasm path and the other in the f64 reference; the logits then differ by ~1e-2 from that
// step on (measured: 1 run in ~10, e.g. gemma3 seed 5, phi3 seed 3; every other run stays below 2e-7). The q8_0 runs
// therefore allow 3e-2, which still catches a wrong tensor or a missing step (errors of O(1)); the f32 runs are the
// precise check of each variant.
const TOL = { f32: 2e-4, q8_0: 3e-2 };
const SEED = 5;
const PROMPT = [1, 17, 290, 33, 5, 260, 301];   // 7 tokens, prefill in batches of 4
const DECODE = [280, 12, 99, 300, 4];           // positions 7..11: past the sliding windows (5)
const steps = logitRuns(PROMPT, DECODE);

async function runWasm(file, threads, nCtx) {
  // an f32 KV cache: the reference is float64 and these checks are about the architectures (KV dtypes:
  // tests/model-generated.test.mjs, tests/kernels-attn-kv.test.mjs)
  const model = await load(file, { threads, maxBatch: 4, kvDtype: 'f32', ...(nCtx ? { nCtx } : {}) });
  try {
    assert.equal(model.threads, threads);
    return steps.runEngine(model);
  } finally { model.dispose(); }
}

function runRef(cfg, W, opts) {
  return steps.runRef(createRefModel(cfg, W, opts));
}

const without = (cfg, ...keys) => { const c = { ...cfg }; for (const k of keys) delete c[k]; return c; };
const dropTensors = (W, re) => new Map([...W].filter(([n]) => !re.test(n)));
/** [feature, (cfg, W) -> reduced { cfg, W } or undefined when the variant does not use it] */
const VARIANT_DROPS = [
  ['rope_scaling', (c, W) => c.rope_scaling && { cfg: without(c, 'rope_scaling'), W }],
  ['sliding window', (c, W) => c.sliding_window && { cfg: without(c, 'sliding_window', 'swa_layers'), W }],
  ['rope_theta_swa', (c, W) => c.rope_theta_swa && { cfg: without(c, 'rope_theta_swa'), W }],
  ['embd_scale', (c, W) => c.embd_scale && { cfg: without(c, 'embd_scale'), W }],
  ['gelu', (c, W) => c.ffn_act && { cfg: without(c, 'ffn_act'), W }],
  ['attn_softcap', (c, W) => c.attn_softcap && { cfg: without(c, 'attn_softcap'), W }],
  ['final_softcap', (c, W) => c.final_softcap && { cfg: without(c, 'final_softcap'), W }],
  ['q/k norms', (c, W) => W.has('blk.0.attn_q_norm.weight') && { cfg: c, W: dropTensors(W, /attn_[qk]_norm/) }],
  ['post norms', (c, W) => W.has('blk.0.post_ffw_norm.weight') && { cfg: c, W: dropTensors(W, /post_(attention|ffw)_norm/) }],
];

const CFG_KEYS = ['arch', 'dim', 'n_layers', 'n_heads', 'n_kv_heads', 'head_dim', 'hidden_dim', 'vocab_size', 'n_ctx', 'rope_dim',
  'rope_type', 'ffn_act', 'embd_scale', 'attn_scale', 'attn_softcap', 'final_softcap', 'sliding_window', 'swa_layers', 'rope_theta_swa', 'rope_scaling'];

for (const name of Object.keys(GGUF_VARIANTS)) {
  for (const dtype of ['f32', 'q8_0']) {
    test(`${name} GGUF (${dtype}) -> .rknot -> wasm forward matches the scalar reference; 1 and 2 threads bit-identical`, async (t) => {
      const { file, cfg, W, variant } = generateGGUF(name, dtype, SEED);
      const out = path.join(path.dirname(file), `${name}.rknot`);
      t.after(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }));
      await convertModel(file, out, { quant: 'keep', hashInput: false });
      const { meta } = await openRknot(out);
      const c = meta.config;
      for (const k of CFG_KEYS) {
        const want = cfg[k];
        if (want === undefined) assert.equal(c[k], undefined, `config.${k} should be absent`);
        else if (typeof want === 'number') assert.ok(Math.abs(c[k] - want) <= 1e-6 * Math.abs(want), `config.${k}: ${c[k]} vs ${want}`);
        else assert.deepEqual(c[k], want, `config.${k}`);
      }
      assert.equal(c.rope_theta, cfg.rope_theta);
      assert.equal(c.qk_norm ?? false, !!(variant.qkNorm || variant.gemma === 3));
      assert.equal(c.post_norms ?? false, variant.gemma >= 2);
      assert.equal(c.tie_embeddings, !!variant.tied);
      assert.equal(c.qkv_bias, !!variant.bias);
      // every feature the config uses is declared, so an older reader refuses the file
      if (c.rope_scaling) assert.ok(meta.format.required_features.includes('rope_scaling'));
      if (c.sliding_window) assert.ok(meta.format.required_features.includes('sliding_window'));
      if (c.ffn_act === 'gelu_tanh') assert.ok(meta.format.required_features.includes('gelu_ffn'));

      const nCtxRuns = variant.longrope ? [undefined, variant.longrope.orig] : [undefined];
      for (const nCtx of nCtxRuns) {
        const [one, two] = [await runWasm(out, 1, nCtx), await runWasm(out, 2, nCtx)];
        const ref = runRef(cfg, W, { quantizedActs: dtype !== 'f32', nCtx: nCtx ?? cfg.n_ctx });
        let maxDiff = 0;
        for (let s = 0; s < ref.length; s++) {
          assert.ok(Buffer.from(one[s].buffer).equals(Buffer.from(two[s].buffer)), `step ${s}: 1 vs 2 threads differ`);
          for (let i = 0; i < cfg.vocab_size; i++) maxDiff = Math.max(maxDiff, Math.abs(one[s][i] - ref[s][i]));
        }
        assert.ok(maxDiff < TOL[dtype], `max |logit - ref| ${maxDiff} >= ${TOL[dtype]}`);
        console.log(`${name} ${dtype}${nCtx ? ` nCtx ${nCtx}` : ''}: max |logit - ref| = ${maxDiff.toExponential(2)}`);
        if (dtype !== 'f32' || nCtx) continue;
        // each variant matters here: the reference without it is far from the wasm output (so the check above can fail)
        for (const [feature, drop] of VARIANT_DROPS) {
          const reduced = drop(cfg, W);
          if (!reduced) continue;
          const other = runRef(reduced.cfg, reduced.W, { nCtx: cfg.n_ctx });
          let d = 0;
          for (let s = 0; s < other.length; s++) for (let i = 0; i < cfg.vocab_size; i++) d = Math.max(d, Math.abs(one[s][i] - other[s][i]));
          assert.ok(d > 100 * TOL.f32, `${name}: without ${feature} the reference is still within ${d}`);
          console.log(`  ${name} without ${feature}: ${d.toExponential(2)}`);
        }
      }
    });
  }
}

// The same variants from Hugging Face folders (config.json + safetensors): the converter maps the names, adds 1 to Gemma
// norms, computes Llama 3's rope_freqs and takes Phi-3's LongRoPE factors from config.json.
const HF_CASES = [
  ...Object.keys(GGUF_VARIANTS).map((name) => [name, {}]),
  // newer transformers configs (rope_parameters) and Gemma 3's multimodal checkpoint layout
  ['llama3', { ropeParameters: true }], ['phi3-128k', { ropeParameters: true }], ['gemma3', { ropeParameters: true, multimodal: true }],
];
for (const [name, opts] of HF_CASES) {
  const what = [opts.ropeParameters && 'rope_parameters', opts.multimodal && 'multimodal layout'].filter(Boolean).join(', ');
  test(`${name} HF folder${what ? ` (${what})` : ''} -> .rknot -> wasm forward matches the scalar reference`, async (t) => {
    const { dir, cfg, W, variant } = generateHF(name, SEED, opts);
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const out = path.join(dir, 'model.rknot');
    await convertModel(dir, out, { quant: 'keep', hashInput: false });
    const { meta } = await openRknot(out);
    const c = meta.config;
    for (const k of [...CFG_KEYS, 'attn_scale']) {
      const want = cfg[k];
      if (k === 'rope_scaling' && want) { assert.equal(c.rope_scaling?.type, want.type); continue; }
      if (want === undefined) assert.equal(c[k], undefined, `config.${k} should be absent`);
      else if (typeof want === 'number') assert.ok(Math.abs(c[k] - want) <= 1e-6 * Math.abs(want), `config.${k}: ${c[k]} vs ${want}`);
      else assert.deepEqual(c[k], want, `config.${k}`);
    }
    if (variant.longrope) assert.deepEqual(c.rope_scaling, cfg.rope_scaling);
    // Gemma norms: the stored w became 1 + w; Llama 3 factors match llama.cpp's formula
    for (const n of ['blk.0.attn_norm.weight', 'output_norm.weight', 'rope_freqs.weight', 'blk.0.attn_q_norm.weight']) {
      if (!W.has(n)) continue;
      const got = new Float32Array((await readRknotTensor(out, n)).data.slice().buffer);
      const want = W.get(n);
      for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= 1e-6 * Math.abs(want[i]), `${n}[${i}]: ${got[i]} vs ${want[i]}`);
    }
    const [one, two] = [await runWasm(out, 1), await runWasm(out, 2)];
    const ref = runRef(cfg, W, { nCtx: cfg.n_ctx });
    let maxDiff = 0;
    for (let s = 0; s < ref.length; s++) {
      assert.ok(Buffer.from(one[s].buffer).equals(Buffer.from(two[s].buffer)), `step ${s}: 1 vs 2 threads differ`);
      for (let i = 0; i < cfg.vocab_size; i++) maxDiff = Math.max(maxDiff, Math.abs(one[s][i] - ref[s][i]));
    }
    assert.ok(maxDiff < TOL.f32, `max |logit - ref| ${maxDiff} >= ${TOL.f32}`);
    console.log(`${name} HF: max |logit - ref| = ${maxDiff.toExponential(2)}`);
  });
}

test('FFN module modes (fused / saturated / profile) are refused with a clear error on GeGLU / post-norm models', async (t) => {
  const { file } = generateGGUF('gemma2', 'q8_0', SEED);
  t.after(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }));
  const out = path.join(path.dirname(file), 'g2.rknot');
  await convertModel(file, out, { hashInput: false });
  const model = await load(out, { threads: 1, maxBatch: 4, modules: ['ffn-fused'] });
  try {
    assert.equal(model.engine.ffnModulesSupported, false);
    for (const mode of ['fused', 'static', 'dynamic', 'profile']) {
      assert.throws(() => model.engine.setFfnMode(0, mode), (e) => e.code === 'unsupported' && /SwiGLU/.test(e.message) && /gemma2/.test(e.message), mode);
    }
    model.engine.setFfnMode(0, 'dense');
    model.engine.forward([1, 2, 3], 0);   // still usable
    assert.ok(model.engine.logits().every(Number.isFinite));
  } finally { model.dispose(); }
});
