// Thread pool over kernels-test.wasm: 1 worker_thread (2 threads) instantiating the module over the same
// shared memory with its own stack runs ae_worker_main; the main thread runs jobs with ae_pool_run.
// Results must equal the 1-thread run bit for bit. Then the -st build with a non-shared memory.
import test from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels, startWorkers, rng, T, TYPE_NAMES, randomRow, WEIGHT_TYPES, ACT_TYPES } from './helpers/kernels.mjs';

const TYPES = WEIGHT_TYPES;   // every weight dtype of the registry
const ROWS = 1002, COLS = 1024;   // 1002: the 4-row split leaves a partial group

function setupMatvec(k, type, r) {
  const W = k.putU8(randomRow(r, type, ROWS * COLS, 0.03));
  const xf = new Float32Array(COLS);
  for (let i = 0; i < COLS; i++) xf[i] = r.normal();
  const x = k.putF32(xf);
  const xq = k.alloc(Math.max(...ACT_TYPES.map((t) => k.rowSize(t, COLS)), COLS * 4));
  k.x.kt_quantize(type, 0, x, xq, COLS);
  return { W, x, xq, xf };
}
function argsMatvec(k, type, W, xq, y, x = 0) {
  const a = k.alloc(32);
  k.u32(a, 7).set([type, W, COLS, ROWS, xq, y, x]);
  return a;
}

// maxJobs 3: the worker loop returns every 3 jobs and is called again (as js/src/runtime/worker.ts does, so that
// browsers run it optimised); 0: it never returns until quit
for (const maxJobs of [0, 3]) test(`pool: 2 threads == 1 thread bit for bit (matvec of every dtype, quantise+barrier+matvec, probes; worker loop maxJobs ${maxJobs})`, async () => {
  const k = await loadKernels({ pages: 1024 });
  const X = k.x;
  const pool = k.alloc(64);
  assert.equal(X.ae_pool_init(pool, 2, 20000), 2);
  const workers = await startWorkers(k, pool, 2, maxJobs);
  let quit = false;
  try {
    const r = rng(71);
    for (const type of TYPES) {
      const { W, x, xq } = setupMatvec(k, type, r);
      const y1 = k.alloc(ROWS * 4), y2 = k.alloc(ROWS * 4), y3 = k.alloc(ROWS * 4);
      X.kt_matvec(type, 0, W, COLS, xq, y1, 0, ROWS);
      k.f32(y2, ROWS).fill(NaN);
      X.ae_pool_run(pool, 1, argsMatvec(k, type, W, xq, y2));
      assert.deepEqual(k.u32(y2, ROWS), k.u32(y1, ROWS), `${TYPE_NAMES[type]}: job 1 (matvec) 2 threads`);
      const xq2 = k.alloc(Math.max(...ACT_TYPES.map((t) => k.rowSize(t, COLS))) + COLS * 4);
      k.f32(y3, ROWS).fill(NaN);
      X.ae_pool_run(pool, 4, argsMatvec(k, type, W, xq2, y3, x));
      assert.deepEqual(k.u32(y3, ROWS), k.u32(y1, ROWS), `${TYPE_NAMES[type]}: job 4 (quantise, barrier, matvec)`);
    }
    // read probe: xor of the parts == xor of the whole; copy probe copies everything
    const bytes = 1 << 20, src = k.putU8(r.bytes(bytes)), dst = k.alloc(bytes), out = k.alloc(16);
    const ra = k.alloc(16); k.u32(ra, 3).set([src, bytes, out]);
    X.ae_pool_run(pool, 2, ra);
    const parts = k.i32(out, 2);
    assert.equal(parts[0] ^ parts[1], X.kt_probe_read(src, bytes));
    const ca = k.alloc(16); k.u32(ca, 3).set([dst, src, bytes]);
    X.ae_pool_run(pool, 3, ca);
    assert.deepEqual(k.u8(dst, bytes), k.u8(src, bytes));
    const entries = await workers.quit();
    quit = true;
    // jobs run: 2 per dtype + 2 probes (+ the quit); the loop came back for every 3
    const jobs = 2 * TYPES.length + 2;
    assert.deepEqual(entries, [maxJobs ? Math.floor(jobs / maxJobs) + 1 : 1], 'entries into the worker loop');
  } finally {
    if (!quit) await workers.quit();
  }
});

test('pool: -st build over a non-shared memory runs jobs with nth forced to 1', async () => {
  const mt = await loadKernels({ pages: 512 });
  const st = await loadKernels({ st: true, pages: 512 });
  assert.ok(!(st.memory.buffer instanceof SharedArrayBuffer));
  const pool = st.alloc(64);
  assert.equal(st.x.ae_pool_init(pool, 2, 0), 1, 'nth forced to 1 without threads');
  for (const type of TYPES) {
    const a = setupMatvec(mt, type, rng(72 + type)), b = setupMatvec(st, type, rng(72 + type));
    const y1 = mt.alloc(ROWS * 4), y2 = st.alloc(ROWS * 4);
    mt.x.kt_matvec(type, 0, a.W, COLS, a.xq, y1, 0, ROWS);
    st.x.ae_pool_run(pool, 1, argsMatvec(st, type, b.W, b.xq, y2));
    assert.deepEqual(st.u32(y2, ROWS), mt.u32(y1, ROWS), `${TYPE_NAMES[type]}: st == mt`);
  }
});
