// Load-time repack of q4_0, q5_0, q5_1 and (relaxed build) q8_0 matrices (EngineOptions.repack; docs/DESIGN.md "Repacked weights"): whole generated
// models give the same logits bit for bit with and without it (prefill and decode), in the plain and the relaxed
// build, on 1 and 2 threads; every consumer of the repacked matrices keeps working (FFN modules: fused, static with
// compacted copies and the neuron-major down made from tensorBytes, dynamic; tensorBytes returns the file bytes);
// the token embedding, a tied output and matrices of other dtypes stay as they are. Kernel-level checks of the layout are
// in tests/kernels.test.mjs.
import test from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--experimental-wasm-relaxed-simd');
setFlagsFromString('--no-liftoff');
const { load } = await import('../dist/src/index.js');
const { generateModel, tensorRole, K_SHAPE, Q4_K_M } = await import('./helpers/gen-model.mjs');
const { cEncoder } = await import('./helpers/kernels.mjs');

const bitsEqual = (a, b) => a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
const PROMPT = [1, 17, 33, 250, 7, 99, 140];

async function run(file, opts, setup) {
  const m = await load(file, { nCtx: 64, ...opts });
  try {
    if (setup) setup(m);
    const e = m.engine, out = [];
    e.forward(PROMPT, 0); out.push(e.logits());
    e.forward([55], PROMPT.length); out.push(e.logits());
    e.forward([201], PROMPT.length + 1); out.push(e.logits());
    return { out, repacked: [...e.repacked].sort(), r4: [...e.repackedR4].sort(), simd: m.simd };
  } finally { m.dispose(); }
}
const same = (a, b, what) => a.out.forEach((l, i) => assert.ok(bitsEqual(l, b.out[i]), `${what}: step ${i} logits differ`));

for (const [arch, dtype] of [['llama', 'q4_0'], ['phi3', 'q4_0'], ['qwen2', 'q4_0'], ['llama', 'q5_0'], ['qwen2', 'q5_0'], ['llama', 'q5_1'], ['phi3', 'q5_1'], ['llama', 'q8_0'], ['phi3', 'q8_0'], ['qwen2', 'q8_0']]) {
  test(`${arch} ${dtype}: repack on == off bit for bit (plain and relaxed builds), 1 vs 2 threads`, async () => {
    const g = await generateModel(arch, dtype, 3);
    for (const simd of ['plain', 'relaxed']) {
      const off = await run(g.file, { simd, repack: false });
      const on = await run(g.file, { simd, repack: true });
      const on2 = await run(g.file, { simd, repack: true, threads: 2 });
      assert.equal(off.repacked.length, 0);
      const all = [...g.dtypes].filter(([n, d]) => d === dtype && n !== 'token_embd.weight').map(([n]) => n).sort();
      // q8_0: the relaxed build's R4 layout (the generated shapes have rows % 4 == 0), the token embedding too (get_rows
      // reads its rows; qwen2 ties the output to it); the plain build keeps the file layout
      const matrices = dtype !== 'q8_0' ? all : simd === 'plain' ? [] : [...all, 'token_embd.weight'].sort();
      assert.deepEqual(on.repacked, matrices, `every ${dtype} matrix but the token embedding is repacked`);
      if (dtype !== 'q8_0') assert.ok(!on.repacked.includes('token_embd.weight'));
      // q5_0: the relaxed build's row-group layout (AE_Q5_0_R4) where rows % 4 == 0, the plain build's X8 layout
      if (dtype === 'q8_0' && simd === 'relaxed') assert.deepEqual(on.r4, matrices, 'relaxed q8_0: all in the R4 layout');
      else if ((dtype === 'q5_0' || dtype === 'q5_1') && simd === 'relaxed') {
        assert.ok(on.r4.length > 0 && on.r4.every((n) => matrices.includes(n)), `relaxed ${dtype} in the R4 layout: ${on.r4}`);
      } else assert.equal(on.r4.length, 0);
      same(off, on, `${simd} repack`);
      same(on, on2, `${simd} 1 vs 2 threads`);
      const auto = await run(g.file, { simd });
      assert.deepEqual(auto.repacked, matrices, `repack 'auto' repacks with the ${simd} build too`);
    }
  });
}

test('mixed dtypes: only q4_0, q5_0, q5_1 and q8_0 matrices are repacked (f16 untouched; q8_0 only in the relaxed build), results unchanged', async () => {
  const g = await generateModel('llama', 'q4_0', 5, { dtypeOf: (n) => (n.includes('ffn_down') ? 'q8_0' : n.includes('attn_output') ? 'f16' : n.includes('ffn_up') ? 'q5_0' : n.includes('attn_k') ? 'q5_1' : undefined) });
  const off = await run(g.file, { simd: 'relaxed', repack: false }), on = await run(g.file, { simd: 'relaxed', repack: true });
  for (const d of ['q4_0', 'q5_0', 'q5_1', 'q8_0']) assert.ok(on.repacked.some((n) => g.dtypes.get(n) === d), `a ${d} matrix is repacked`);
  assert.ok(on.repacked.every((n) => ['q4_0', 'q5_0', 'q5_1', 'q8_0'].includes(g.dtypes.get(n))));
  same(off, on, 'mixed');
  const plain = await run(g.file, { simd: 'plain', repack: true });
  assert.ok(plain.repacked.length > 0 && !plain.repacked.some((n) => g.dtypes.get(n) === 'q8_0' || g.dtypes.get(n) === 'f16'), 'plain build: q8_0 stays');
  same(off, plain, 'mixed, plain build');
});

for (const dtype of ['q4_0', 'q5_0', 'q5_1', 'q8_0']) test(`${dtype}: tensorBytes of a repacked matrix = the file bytes; FFN modules (fused, static with copies and neuron-major down, dynamic) unchanged by the repack`, async () => {
  const g = await generateModel('llama', dtype, 7);
  const opts = { simd: 'relaxed', modules: ['ffn-fused', 'ffn-saturated'] };
  const m = await load(g.file, { ...opts, repack: true, nCtx: 64 });
  try {
    assert.ok(m.engine.repacked.has('blk.0.ffn_gate.weight'));
    if (dtype !== 'q4_0') assert.ok(m.engine.repackedR4.has('blk.0.ffn_gate.weight'), 'the relaxed build: the R4 layout');
    for (const name of ['blk.0.ffn_gate.weight', 'blk.1.ffn_down.weight', 'blk.0.attn_q.weight', 'token_embd.weight']) {
      assert.ok(bitsEqual(m.engine.tensorBytes(name), g.bytes.get(name)), `${name}: tensorBytes == the file's bytes`);
    }
  } finally { m.dispose(); }
  const H = g.cfg.hidden_dim, mask = new Uint8Array(H / 8);
  for (let i = 0; i < H; i += 3) mask[i >> 3] |= 1 << (i & 7);
  const modes = [
    ['fused', undefined],
    ['static', { masks: [mask, mask], down: 'neuron' }],
    ['static', { masks: [mask, mask], down: 'rows' }],
    ['dynamic', { threshold: 0.02, down: 'rows' }],
    ['dynamic', { threshold: 0.02, down: 'neuron' }],
  ];
  for (const [mode, o] of modes) {
    const set = (mm) => mm.setFfnMode(mode, undefined, o);
    const off = await run(g.file, { ...opts, repack: false }, set);
    const on = await run(g.file, { ...opts, repack: true }, set);
    const on2 = await run(g.file, { ...opts, repack: true, threads: 2 }, set);
    same(off, on, `${mode} ${JSON.stringify(o ?? {})} repack`);
    same(on, on2, `${mode} ${JSON.stringify(o ?? {})} 1 vs 2 threads`);
  }
  const dense = await run(g.file, { ...opts, repack: true });
  const fused = await run(g.file, { ...opts, repack: true }, (mm) => mm.setFfnMode('fused'));
  same(dense, fused, 'fused == dense (repacked)');
});

test('tied output (qwen2 ties the embedding): the embedding is not repacked, logits unchanged', async () => {
  const g = await generateModel('qwen2', 'q4_0', 9);
  assert.ok(!g.dtypes.has('output.weight'), 'the generated qwen2 ties its output to the embedding');
  const on = await run(g.file, { simd: 'relaxed', repack: true });
  assert.ok(!on.repacked.includes('token_embd.weight'));
});

test('repack option checked', async () => {
  const g = await generateModel('llama', 'q4_0', 11);
  await assert.rejects(load(g.file, { repack: 'yes' }), (e) => e.code === 'invalid_argument' && /repack/.test(e.message));
});

// The relaxed build's fused-dot kernels (the repacked q4_0 and the q8_0 prefill tiles, the repacked q4_0, q5_0, q5_1, q4_K and q6_K matvecs; EngineOptions.fusedDot;
// docs/DESIGN.md "Relaxed SIMD"): forced on or off they give the same logits, on 1 and 2 threads, with prompts of 19 tokens (two 8-token groups
// and a remainder) and 7; 'auto' runs the probe (the choice itself depends on the host); the plain build keeps off.
test('fused-dot kernels (q4_0 and q8_0 prefill tiles, q4_0 / q5_0 / q5_1 / q4_K / q6_K matvecs): on == off bit for bit (relaxed build, 1 and 2 threads), auto probes, plain ignores it, bad values refused', async () => {
  const PROMPT19 = Array.from({ length: 19 }, (_, i) => (i * 37 + 3) % 250);
  // q5_1: a vocabulary of 322 (rows % 4 != 0) keeps the output matrix in the X8 layout, whose relaxed matvec has the fused
  // form (the other q5_1 matrices take the relaxed build's R4 layout, whose matvec has one too); q5_0: all R4
  // q8_0: repack off keeps its matrices in the file layout, whose prefill GEMM has the fused tile (AE_FUSED_TILES);
  // repacked (AE_Q8_0_R4) its matvec and GEMM have their own switch (AE_FUSED_R8)
  // Q4_K_M-style: q4_K and q6_K matrices in the R4 layouts, whose matvecs have the fused form (AE_FUSED_TILES), q5_0 where
  // rows of 544 cannot be k-quants
  const kGen = { dtypeOf: (n) => Q4_K_M[tensorRole(n)], encode: await cEncoder(['q4_K', 'q6_K']) };
  for (const [arch, dtype, shape, extra, gen] of [['llama', 'q4_0'], ['phi3', 'q4_0'], ['llama', 'q5_1', { vocab_size: 322 }], ['qwen2', 'q5_0'], ['qwen2', 'q8_0', undefined, { repack: false }], ['llama', 'q8_0'],
    ['llama', 'Q4_K_M', K_SHAPE, undefined, kGen]]) {
    const g = await generateModel(arch, gen ? 'f32' : dtype, 3, { ...(shape ? { shape } : {}), ...gen });
    if (gen) for (const d of ['q4_K', 'q6_K']) assert.ok([...g.dtypes.values()].includes(d), `the model has ${d} matrices`);
    const go = async (opts) => {
      const m = await load(g.file, { nCtx: 64, simd: 'relaxed', ...extra, ...opts });
      try {
        const e = m.engine, out = [];
        e.forward(PROMPT19, 0); out.push(e.logits());
        e.forward(PROMPT, PROMPT19.length); out.push(e.logits());
        e.forward([55], PROMPT19.length + PROMPT.length); out.push(e.logits());
        return { out, fused: e.fusedDot, probe: e.fusedDotProbe, simd: m.simd };
      } finally { m.dispose(); }
    };
    const off = await go({ fusedDot: false }), on = await go({ fusedDot: true }), on2 = await go({ fusedDot: true, threads: 2 });
    assert.deepEqual([off.fused, on.fused, on2.fused], [false, true, true]);
    same(off, on, `${arch} ${dtype} fused dot on vs off`);
    same(on, on2, `${arch} ${dtype} fused dot 1 vs 2 threads`);
    const auto = await go({});
    const timings = auto.probe ? [auto.probe.tiles, auto.probe.q8_0_r4].filter(Boolean) : [];
    assert.ok(timings.length > 0 && timings.every((t) => t.i16Ms > 0 && t.i32Ms > 0) && auto.probe.when === 'load' && timings.some((t) => t.fused) === auto.fused, JSON.stringify(auto.probe));
    assert.equal(auto.probe.q8_0_r4 !== null, dtype === 'q8_0' && extra?.repack !== false, `${arch} ${dtype}: the q8_0 R4 switch is timed exactly when there are R4 q8_0 matrices`);
    same(off, auto, `${arch} ${dtype} fused dot auto (${auto.fused})`);
    const plain = await go({ simd: 'plain', fusedDot: true });
    assert.equal(plain.fused, false, 'the plain build has no fused tile');
    same(off, plain, `${arch} ${dtype} plain build`);
  }
  const g = await generateModel('llama', 'f16', 3);
  const m = await load(g.file, { nCtx: 64, simd: 'relaxed' });
  assert.equal(m.engine.fusedDotProbe, null, 'no q4_0 / q5_1 / q8_0 weights: no probe');
  m.dispose();
  const g51 = await generateModel('llama', 'q5_1', 3);
  const m51 = await load(g51.file, { nCtx: 64, simd: 'relaxed' });
  assert.ok(m51.engine.fusedDotProbe?.tiles, 'q5_1 matrices in the R4 layout (its matvec has the fused form): the probe runs');
  m51.dispose();
  const g4 = await generateModel('llama', 'q4_0', 3);
  await assert.rejects(load(g4.file, { fusedDot: 'yes' }), (e) => e.code === 'invalid_argument' && /fusedDot: expected true, false or 'auto'/.test(e.message));
});

/** An `encode` for generateModel: the k-quant dtypes' bytes from the C reference quantiser (tests/helpers/kernels.mjs). */
const kquantEncoder = async () => (await import('./helpers/kernels.mjs')).cEncoder(['q4_K', 'q5_K', 'q6_K']);

// q4_K (the relaxed build's AE_Q4_K_R4): a Q4_K_M-style model (q4_K, q6_K, q5_0 where rows are not multiples of 256;
// the q4_K / q6_K bytes from the C reference quantiser, which the JS converter cannot produce)
test('Q4_K_M-style llama / phi3: the relaxed build repacks the q4_K matrices (not the q4_K token embedding) into AE_Q4_K_R4, the plain build keeps them; repack on == off bit for bit, 1 vs 2 threads, tensorBytes == the file bytes', async () => {
  const encode = await kquantEncoder();
  const mix = { token_embd: 'q4_K', attn_q: 'q4_K', attn_k: 'q4_K', attn_v: 'q6_K', attn_qkv: 'q4_K', attn_output: 'q4_K', ffn_gate: 'q4_K', ffn_up: 'q4_K', ffn_down: 'q5_0', output: 'q6_K' };
  for (const arch of ['llama', 'phi3']) {
    const g = await generateModel(arch, 'f32', 5, { shape: { dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 544, vocab_size: 320 }, dtypeOf: (n) => mix[tensorRole(n)], encode });
    const q4k = [...g.dtypes].filter(([n, d]) => d === 'q4_K' && n !== 'token_embd.weight').map(([n]) => n).sort();
    assert.ok(q4k.length >= 3 * g.cfg.n_layers && g.dtypes.get('token_embd.weight') === 'q4_K');
    for (const simd of ['plain', 'relaxed']) {
      const off = await run(g.file, { simd, repack: false }), on = await run(g.file, { simd, repack: true }), on2 = await run(g.file, { simd, repack: true, threads: 2 });
      const r4k = on.r4.filter((n) => g.dtypes.get(n) === 'q4_K');
      assert.deepEqual(r4k, simd === 'relaxed' ? q4k : [], `${arch} ${simd}: the q4_K matrices in AE_Q4_K_R4`);
      assert.ok(!on.repacked.includes('token_embd.weight'));
      same(off, on, `${arch} ${simd} repack`);
      same(on, on2, `${arch} ${simd} 1 vs 2 threads`);
    }
    const m = await load(g.file, { nCtx: 64, simd: 'relaxed', repack: true });
    try {
      for (const name of q4k) assert.ok(bitsEqual(m.engine.tensorBytes(name), g.bytes.get(name)), `${name}: tensorBytes == the file's bytes`);
    } finally { m.dispose(); }
  }
});

// q5_K (the relaxed build's AE_Q5_K_R4 where the rows are a multiple of 4, else AE_Q5_K_X block by block): the q5_K
// matrices of a Q4_K_M-style model (Phi-3's attn_qkv, llama's attn_k / attn_v / ffn_gate here; the output, 322 rows,
// in X) are repacked in the relaxed build, kept in the plain one; the q5_K token embedding stays (get_rows)
test('q5_K matrices: the relaxed build repacks them into AE_Q5_K_R4 (rows % 4 == 0) or AE_Q5_K_X, the plain build keeps them; repack on == off bit for bit, 1 vs 2 threads, tensorBytes == the file bytes', async () => {
  const encode = await kquantEncoder();
  const mix = { token_embd: 'q5_K', attn_q: 'q4_K', attn_k: 'q5_K', attn_v: 'q5_K', attn_qkv: 'q5_K', attn_output: 'q4_K', ffn_gate: 'q5_K', ffn_up: 'q4_K', ffn_down: 'q5_0', output: 'q5_K' };
  for (const arch of ['llama', 'phi3']) {
    const g = await generateModel(arch, 'f32', 7, { shape: { dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 544, vocab_size: 322 }, dtypeOf: (n) => mix[tensorRole(n)], encode });
    const q5k = [...g.dtypes].filter(([n, d]) => d === 'q5_K' && n !== 'token_embd.weight').map(([n]) => n).sort();
    const q5r4 = q5k.filter((n) => n !== 'output.weight');   // 322 rows: X
    assert.ok(q5r4.length >= g.cfg.n_layers && q5k.includes('output.weight') && g.dtypes.get('token_embd.weight') === 'q5_K', `${arch}: ${q5k.length} q5_K matrices`);
    for (const simd of ['plain', 'relaxed']) {
      const off = await run(g.file, { simd, repack: false }), on = await run(g.file, { simd, repack: true }), on2 = await run(g.file, { simd, repack: true, threads: 2 });
      assert.deepEqual(on.repacked.filter((n) => g.dtypes.get(n) === 'q5_K'), simd === 'relaxed' ? q5k : [], `${arch} ${simd}: the q5_K matrices repacked`);
      assert.deepEqual(on.r4.filter((n) => g.dtypes.get(n) === 'q5_K'), simd === 'relaxed' ? q5r4 : [], `${arch} ${simd}: those with rows % 4 == 0 in AE_Q5_K_R4, the output in AE_Q5_K_X`);
      assert.ok(!on.repacked.includes('token_embd.weight'), 'not the token embedding');
      same(off, on, `${arch} ${simd} repack`);
      same(on, on2, `${arch} ${simd} 1 vs 2 threads`);
    }
    const m = await load(g.file, { nCtx: 64, simd: 'relaxed', repack: true });
    try {
      for (const name of q5k) assert.ok(bitsEqual(m.engine.tensorBytes(name), g.bytes.get(name)), `${name}: tensorBytes == the file's bytes`);
    } finally { m.dispose(); }
  }
});

// q6_K (the relaxed build's AE_Q6_K_R4 where the rows are a multiple of 4, else AE_Q6_K_X block by block): attn_v /
// output / a tied q6_K embedding (Llama-3.2 and Gemma-2 Q4_K_M files tie a q6_K embedding to the output) are repacked
// in the relaxed build, get_rows reads the embedding's rows from either layout (llama: a vocabulary of 320 rows, R4;
// qwen2: 322, X)
test('q6_K matrices and a tied q6_K embedding: the relaxed build repacks them into AE_Q6_K_R4 (rows % 4 == 0) or AE_Q6_K_X, the plain build keeps them; repack on == off bit for bit, 1 vs 2 threads, tensorBytes == the file bytes', async () => {
  const encode = await kquantEncoder();
  const mix = { token_embd: 'q6_K', attn_q: 'q4_K', attn_k: 'q4_K', attn_v: 'q6_K', attn_qkv: 'q6_K', attn_output: 'q4_K', ffn_gate: 'q4_K', ffn_up: 'q4_K', ffn_down: 'q5_0', output: 'q6_K' };
  for (const [arch, vocab] of [['llama', 320], ['qwen2', 322]]) {
    const g = await generateModel(arch, 'f32', 8, { shape: { dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 544, vocab_size: vocab }, dtypeOf: (n) => mix[tensorRole(n)], encode });
    const q6k = [...g.dtypes].filter(([, d]) => d === 'q6_K').map(([n]) => n).sort();
    assert.ok(q6k.includes('token_embd.weight') && q6k.length > g.cfg.n_layers, `${arch}: ${q6k.length} q6_K matrices`);
    if (arch === 'qwen2') assert.ok(!g.dtypes.has('output.weight'), 'qwen2 ties its output to the q6_K embedding');
    const rowsOf = (n) => /token_embd|output/.test(n) ? vocab : 128;   // attn_v: n_kv_heads x head_dim rows
    const q6r4 = q6k.filter((n) => rowsOf(n) % 4 === 0);
    assert.ok(q6r4.length > 0 && q6r4.length < q6k.length === (arch === 'qwen2'), `${arch}: ${q6r4.length} of the q6_K matrices in row groups`);
    for (const simd of ['plain', 'relaxed']) {
      const off = await run(g.file, { simd, repack: false }), on = await run(g.file, { simd, repack: true }), on2 = await run(g.file, { simd, repack: true, threads: 2 });
      assert.deepEqual(on.repacked.filter((n) => g.dtypes.get(n) === 'q6_K'), simd === 'relaxed' ? q6k : [], `${arch} ${simd}: the q6_K matrices repacked`);
      assert.deepEqual(on.r4.filter((n) => g.dtypes.get(n) === 'q6_K'), simd === 'relaxed' ? q6r4 : [], `${arch} ${simd}: those with rows % 4 == 0 in AE_Q6_K_R4, the rest in AE_Q6_K_X`);
      same(off, on, `${arch} ${simd} repack`);
      same(on, on2, `${arch} ${simd} 1 vs 2 threads`);
    }
    const m = await load(g.file, { nCtx: 64, simd: 'relaxed', repack: true });
    try {
      for (const name of q6k) assert.ok(bitsEqual(m.engine.tensorBytes(name), g.bytes.get(name)), `${name}: tensorBytes == the file's bytes`);
    } finally { m.dispose(); }
  }
});

// q3_K (the relaxed build's AE_Q3_K_X, block by block): a Q3_K_M-style model (q3_K with q4_K / q5_K / q6_K, a q3_K token
// embedding, which stays in the file layout: get_rows reads it)
test('q3_K matrices: the relaxed build repacks them into AE_Q3_K_X (not the token embedding), the plain build keeps them; repack on == off bit for bit, 1 vs 2 threads, tensorBytes == the file bytes', async () => {
  const encode = await (await import('./helpers/kernels.mjs')).cEncoder(['q3_K', 'q4_K', 'q5_K', 'q6_K']);
  const mix = { token_embd: 'q3_K', attn_q: 'q3_K', attn_k: 'q3_K', attn_v: 'q5_K', attn_qkv: 'q4_K', attn_output: 'q4_K', ffn_gate: 'q3_K', ffn_up: 'q3_K', ffn_down: 'q4_K', output: 'q6_K' };
  for (const arch of ['llama', 'phi3']) {
    const g = await generateModel(arch, 'f32', 12, { shape: { dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 512, vocab_size: 322 }, dtypeOf: (n) => mix[tensorRole(n)], encode });
    const q3k = [...g.dtypes].filter(([n, d]) => d === 'q3_K' && n !== 'token_embd.weight').map(([n]) => n).sort();
    assert.ok(q3k.length >= 2 * g.cfg.n_layers && g.dtypes.get('token_embd.weight') === 'q3_K', `${arch}: ${q3k.length} q3_K matrices and a q3_K embedding`);
    for (const simd of ['plain', 'relaxed']) {
      const off = await run(g.file, { simd, repack: false }), on = await run(g.file, { simd, repack: true }), on2 = await run(g.file, { simd, repack: true, threads: 2 });
      assert.deepEqual(on.repacked.filter((n) => g.dtypes.get(n) === 'q3_K'), simd === 'relaxed' ? q3k : [], `${arch} ${simd}: the q3_K matrices repacked (block layout), not the embedding`);
      assert.deepEqual(on.r4.filter((n) => g.dtypes.get(n) === 'q3_K'), [], 'no row groups for q3_K');
      same(off, on, `${arch} ${simd} repack`);
      same(on, on2, `${arch} ${simd} 1 vs 2 threads`);
    }
    const m = await load(g.file, { nCtx: 64, simd: 'relaxed', repack: true });
    try {
      for (const name of q3k) assert.ok(bitsEqual(m.engine.tensorBytes(name), g.bytes.get(name)), `${name}: tensorBytes == the file's bytes`);
    } finally { m.dispose(); }
  }
});

test('q5_K / q6_K FFN (AE_Q5_K_R4 / AE_Q6_K_R4: FFN matrices have rows in multiples of 4): FFN modules (fused, static with copies and neuron-major down, dynamic) unchanged by the repack, 1 vs 2 threads', async () => {
  const encode = await kquantEncoder();
  const mix = { ffn_gate: 'q5_K', ffn_up: 'q5_K', ffn_down: 'q6_K', output: 'q6_K' };
  const g = await generateModel('llama', 'f32', 11, { shape: { dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 512, vocab_size: 320 }, dtypeOf: (n) => mix[tensorRole(n)], encode });
  const opts = { simd: 'relaxed', modules: ['ffn-fused', 'ffn-saturated'] };
  const H = g.cfg.hidden_dim, mask = new Uint8Array(H / 8);
  for (let i = 0; i < H; i += 3) mask[i >> 3] |= 1 << (i & 7);
  const modes = [['fused', undefined], ['static', { masks: [mask, mask], down: 'neuron' }], ['static', { masks: [mask, mask], down: 'rows' }],
    ['dynamic', { threshold: 0.02, down: 'rows' }], ['dynamic', { threshold: 0.02, down: 'neuron' }]];
  for (const [mode, o] of modes) {
    const set = (mm) => mm.setFfnMode(mode, undefined, o);
    const off = await run(g.file, { ...opts, repack: false }, set);
    const on = await run(g.file, { ...opts, repack: true }, set);
    const on2 = await run(g.file, { ...opts, repack: true, threads: 2 }, set);
    assert.ok(on.r4.includes('blk.0.ffn_gate.weight') && on.r4.includes('blk.0.ffn_down.weight'));
    same(off, on, `${mode} ${JSON.stringify(o ?? {})} repack`);
    same(on, on2, `${mode} ${JSON.stringify(o ?? {})} 1 vs 2 threads`);
  }
});
