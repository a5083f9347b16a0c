/**
 * The compression tools' fast path: src/linalg/linalg.c compiled to wasm SIMD128 (wasm/linalg-st.wasm, one
 * thread, its own memory). JS keeps the orchestration; the O(n^3) work (Gram matrices, products, Cholesky,
 * tridiagonalisation) runs in the module. Node-only tooling (analyze, compress), never the runtime.
 *
 * Matrices are row-major. `gemmNT(A, B)` is C = A B^T (both operands' rows dotted), so C = A B is gemmNT(A, B^T)
 * and a Gram A^T A is gemmNT(A^T, A^T) (transposes in JS are O(n m), small next to the products).
 * Checked against the ml-matrix implementation (linalg.ts) on small matrices: tests/compress-fast.test.mjs.
 */
import { AetherError } from '../errors.js';
import { compileModule } from '../runtime/env.js';

const PAGE = 65536;
const BASE = 0x80000;   // above the module's static data and stack (slot 4: 0x50000..0x60000)

interface LinalgExports {
  __stack_pointer: WebAssembly.Global;
  ae_la_gemm_nt(M: number, N: number, K: number, A: number, lda: number, B: number, ldb: number, C: number, ldc: number, flags: number): void;
  ae_la_gemm_nt_ref(M: number, N: number, K: number, A: number, lda: number, B: number, ldb: number, C: number, ldc: number, flags: number): void;
  ae_la_chol(n: number, A: number, lda: number): number;
  ae_la_trinv_lower(n: number, L: number, ld: number): void;
  ae_la_tridiag(n: number, A: number, lda: number, d: number, e: number, v: number, p: number): void;
  ae_la_tql(n: number, d: number, e: number): number;
}

export const ACCUMULATE = 1, UPPER = 2;

/** A float matrix in the module's memory (row-major, `ld` elements per row). */
export interface WMat { ptr: number; rows: number; cols: number; ld: number; f64: boolean }

export class LinAlg {
  private top = BASE;
  constructor(readonly x: LinalgExports, readonly memory: WebAssembly.Memory) {}

  static async create(): Promise<LinAlg> {
    const mod = await compileModule('linalg', false);
    const memory = new WebAssembly.Memory({ initial: BASE / PAGE + 16, maximum: 65536 });
    const inst = await WebAssembly.instantiate(mod, { env: { memory } });
    const x = inst.exports as unknown as LinalgExports;
    x.__stack_pointer.value = BASE;   // the stack grows down from BASE, above the static data
    return new LinAlg(x, memory);
  }

  mark(): number { return this.top; }
  release(mark: number): void { this.top = mark; }

  alloc(bytes: number): number {
    const p = Math.ceil(this.top / 64) * 64, end = p + bytes;
    if (end > 2 ** 32 - PAGE) throw new AetherError('out_of_memory', `the linear-algebra module needs ${(end / 2 ** 30).toFixed(2)} GiB (wasm32: 4 GiB)`);
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
    this.top = end;
    return p;
  }

  matF32(rows: number, cols: number, data?: ArrayLike<number>): WMat {
    const src = this.rebind(data);
    const m = { ptr: this.alloc(rows * cols * 4), rows, cols, ld: cols, f64: false };
    if (src) this.f32(m).set(src());
    return m;
  }
  matF64(rows: number, cols: number, data?: ArrayLike<number>): WMat {
    const src = this.rebind(data);
    const m = { ptr: this.alloc(rows * cols * 8), rows, cols, ld: cols, f64: true };
    if (src) this.f64(m).set(src());
    return m;
  }
  /** `data` again after an allocation (a view of the module's memory is detached when the memory grows). */
  private rebind(data?: ArrayLike<number>): (() => ArrayLike<number>) | undefined {
    if (!data) return undefined;
    if (ArrayBuffer.isView(data) && data.buffer === this.memory.buffer) {
      const Ctor = data.constructor as Float32ArrayConstructor, off = data.byteOffset, len = (data as Float32Array).length;
      return () => new Ctor(this.memory.buffer, off, len);
    }
    return () => data;
  }
  f32(m: WMat): Float32Array { return new Float32Array(this.memory.buffer, m.ptr, m.rows * m.ld); }
  f64(m: WMat): Float64Array { return new Float64Array(this.memory.buffer, m.ptr, m.rows * m.ld); }

  /** C = A B^T (flags: ACCUMULATE adds to C, UPPER computes only tiles touching j >= i). */
  gemmNT(A: WMat, B: WMat, C: WMat, flags = 0, ref = false): void {
    if (A.f64 || B.f64 || C.f64 || A.cols !== B.cols || C.rows !== A.rows || C.cols !== B.rows) {
      throw new AetherError('invalid_argument', `gemmNT: ${A.rows}x${A.cols} times (${B.rows}x${B.cols})^T into ${C.rows}x${C.cols}`);
    }
    (ref ? this.x.ae_la_gemm_nt_ref : this.x.ae_la_gemm_nt)(A.rows, B.rows, A.cols, A.ptr, A.ld, B.ptr, B.ld, C.ptr, C.ld, flags);
  }

  /** A^T (a new f32 matrix). */
  transpose(A: WMat): WMat {
    const T = this.matF32(A.cols, A.rows), a = this.f32(A), t = this.f32(T), R = A.rows, Cc = A.cols, ld = A.ld;
    const bs = 64;
    for (let i0 = 0; i0 < R; i0 += bs) for (let j0 = 0; j0 < Cc; j0 += bs) {
      const i1 = Math.min(R, i0 + bs), j1 = Math.min(Cc, j0 + bs);
      for (let i = i0; i < i1; i++) for (let j = j0; j < j1; j++) t[j * R + i] = a[i * ld + j];
    }
    return T;
  }

  /** Mirror the upper triangle of a square f32 matrix into the lower one. */
  mirrorUpper(G: WMat): void {
    const g = this.f32(G), n = G.rows, ld = G.ld;
    for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) g[i * ld + j] = g[j * ld + i];
  }

  /** Lower Cholesky factor in place (f64); 0 or 1 + the failing column. */
  chol(A: WMat): number { return this.x.ae_la_chol(A.rows, A.ptr, A.ld); }
  trinvLower(L: WMat): void { this.x.ae_la_trinv_lower(L.rows, L.ptr, L.ld); }

  /** Eigenvalues (descending) of a symmetric f64 matrix (lower triangle read; the matrix is destroyed). */
  symEigvals(A: WMat): Float64Array {
    const n = A.rows, m = this.mark();
    const d = this.alloc(n * 8), e = this.alloc(n * 8), v = this.alloc(n * 8), p = this.alloc(n * 8);
    this.x.ae_la_tridiag(n, A.ptr, A.ld, d, e, v, p);
    if (this.x.ae_la_tql(n, d, e) !== 0) throw new AetherError('invalid_argument', `symmetric eigenvalues of a ${n}x${n} matrix did not converge`);
    const out = Float64Array.from(new Float64Array(this.memory.buffer, d, n)).sort().reverse();
    this.release(m);
    return out;
  }
}

let shared: Promise<LinAlg> | undefined;
/** One instance per process (its memory is reused: callers mark / release). */
export function linalg(): Promise<LinAlg> {
  if (!shared) shared = LinAlg.create();
  return shared;
}

// ------------------------------------------------------------------------------------------------------------
// Algorithms for large matrices (Phi-3-mini: 3072 x 8192), built on the module's products.

/** Seeded PRNG (mulberry32) and standard normals (Box-Muller): runs are reproducible. */
export function rng(seed: number): { uniform(): number; normal(): number } {
  let a = seed >>> 0;
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  let spare: number | undefined;
  const normal = () => {
    if (spare !== undefined) { const s = spare; spare = undefined; return s; }
    const u = Math.max(uniform(), 1e-300), v = uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
  return { uniform, normal };
}

/**
 * A weight W (out x in) and, optionally, the calibration rows X (N x in) of its input, loaded into the module with
 * their transposes. The operators below apply, to the rows of V (b vectors), W W^T, W^T W, or
 * W C' W^T with C' = X^T X / N + ridge I (the activation-aware one: its eigenvalues are the squared singular values
 * of W S for S S^T = C', whatever the shape, so no Cholesky of C' is needed).
 */
export class WeightOps {
  readonly W: WMat; readonly Wt: WMat; readonly X?: WMat; readonly Xt?: WMat;
  readonly N: number;
  constructor(readonly la: LinAlg, w: Float32Array, readonly out: number, readonly inp: number, x?: Float32Array, readonly ridge = 0) {
    this.W = la.matF32(out, inp, w);
    this.Wt = la.transpose(this.W);
    this.N = x ? x.length / inp : 0;
    if (x) { this.X = la.matF32(this.N, inp, x); this.Xt = la.transpose(this.X); }
  }
  /** rows of V (b x in) -> rows of C' V (b x in); C' = I without calibration rows */
  applyC(Vt: WMat): WMat {
    const la = this.la;
    if (!this.X) return Vt;
    const Q = la.matF32(Vt.rows, this.N), R = la.matF32(Vt.rows, this.inp);
    la.gemmNT(Vt, this.X, Q);
    la.gemmNT(Q, this.Xt!, R);
    const r = la.f32(R), v = la.f32(Vt), s = 1 / this.N, lam = this.ridge;
    for (let i = 0; i < r.length; i++) r[i] = r[i] * s + lam * v[i];
    return R;
  }
  /** (W^T V)^T for rows V (b x out): b x in */
  wT(Vt: WMat): WMat { const P = this.la.matF32(Vt.rows, this.inp); this.la.gemmNT(Vt, this.Wt, P); return P; }
  /** (W V)^T for rows V (b x in): b x out */
  w(Vt: WMat): WMat { const P = this.la.matF32(Vt.rows, this.out); this.la.gemmNT(Vt, this.W, P); return P; }
  /** ||W||_F^2 */
  frob2(): number { let s = 0; for (const v of this.la.f32(this.W)) s += v * v; return s; }
}

/**
 * Rows of Yt (k x n) replaced by an orthonormal basis of their span: Cholesky QR on rows scaled to unit length, in
 * f32 products. The first pass adds a diagonal shift, raised 10x at a time until the Cholesky succeeds (the span
 * does not depend on it: Q = R^-1 Y for any invertible triangular R; shifted CholeskyQR, Fukaya et al. 2020), and
 * `passes` - 1 more passes restore orthonormality.
 */
export function orthRows(la: LinAlg, Yt: WMat, passes = 2): WMat {
  const k = Yt.rows, n = Yt.cols;
  const y0 = la.f32(Yt);
  for (let i = 0; i < y0.length; i++) if (!Number.isFinite(y0[i])) throw new AetherError('non_finite', `orthonormalisation: ${k} x ${n} vectors hold NaN / Inf (element ${i})`);
  let cur = la.matF32(k, n, y0);
  for (let pass = 0; pass < passes; pass++) {
    const m = la.mark();
    const c = la.f32(cur);
    for (let i = 0; i < k; i++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += c[i * n + j] * c[i * n + j];
      const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
      for (let j = 0; j < n; j++) c[i * n + j] *= inv;
    }
    const G = la.matF32(k, k);
    la.gemmNT(cur, cur, G, UPPER);
    const L = la.matF64(k, k), g = la.f32(G);
    let shift = pass === 0 ? 1e-6 : 0, ok = false;
    for (let attempt = 0; attempt < 8 && !ok; attempt++) {
      const l = la.f64(L);
      for (let i = 0; i < k; i++) for (let j = 0; j <= i; j++) l[i * k + j] = g[j * k + i] + (i === j ? shift : 0);
      ok = la.chol(L) === 0;
      if (!ok) shift = shift > 0 ? shift * 10 : 1e-6;
    }
    if (!ok) throw new AetherError('invalid_argument', `orthonormalisation of ${k} vectors of length ${n} failed (rank-deficient?)`);
    la.trinvLower(L);
    const Li = la.matF32(k, k, la.f64(L));
    const Y = la.transpose(cur);
    const Q = la.matF32(k, n);
    la.gemmNT(Li, Y, Q);
    const q = Float32Array.from(la.f32(Q));
    la.release(m);
    la.f32(cur).set(q);
  }
  return cur;
}

/** Rows of Y (b x n) minus their components along the orthonormal rows of Q (q x n; Qt = Q^T), in place. */
function projectOut(la: LinAlg, Y: WMat, Q: WMat, Qt: WMat): void {
  const m = la.mark();
  const C = la.matF32(Y.rows, Q.rows), P = la.matF32(Y.rows, Y.cols);
  la.gemmNT(Y, Q, C);      // Y Q^T
  la.gemmNT(C, Qt, P);     // (Y Q^T) Q
  const y = la.f32(Y), p = la.f32(P);
  for (let i = 0; i < y.length; i++) y[i] -= p[i];
  la.release(m);
}

/** The rows of A (a x n) then those of B (b x n) as one (a + b) x n matrix. */
function stackRows(la: LinAlg, A: WMat, B: WMat): WMat {
  const S = la.matF32(A.rows + B.rows, A.cols), s = la.f32(S);
  s.set(la.f32(A)); s.set(la.f32(B), A.rows * A.cols);
  return S;
}

/**
 * Rank-k factorisation W ~ B A minimising ||(W - B A) S||_F approximately (S S^T = C', see WeightOps): randomised
 * range finder with `powerIters` power iterations on W C' W^T (Halko, Martinsson & Tropp 2011), started from
 * W C' Omega; B = Q (out x k, orthonormal columns), A = Q^T W (k x in). Returns row-major Float32Arrays.
 *
 * With fewer calibration rows N than the rank k, W C' W^T = W X^T X W^T / N + ridge W W^T has only N directions
 * above the ridge; the optimum (ridge -> 0) keeps the range of W X^T and fills the other k - N directions with the
 * top of W W^T on its orthogonal complement (plain SVD where the calibration says nothing). The ridge part is
 * ~1e-6 of the data part, below float32 rounding, so the plain range finder picks those directions nearly at random
 * (tiny-llama-a, 64 tokens, rank 96: +8.2% perplexity against the exact path's +1.7%, docs/QUALITY.md "Fast path").
 * So for k > N the basis is built in two parts: Q1 = an orthonormal basis of the rows of X W^T (the data range,
 * exactly), then k - N directions by the range finder on P W W^T P (P: projection off Q1).
 */
export function lowRankFast(ops: WeightOps, k: number, powerIters = 1, seed = 1): { A: Float32Array; B: Float32Array } {
  const la = ops.la, R = rng(seed), m0 = la.mark();
  let Qt: WMat;
  if (ops.X && k > ops.N) {
    const Q1 = orthRows(la, ops.w(ops.X), 3);          // rows of (W X^T)^T: N x out -> orthonormal
    const Q1t = la.transpose(Q1);
    const k2 = k - ops.N;
    const Om = la.matF32(k2, ops.inp), om = la.f32(Om);
    for (let i = 0; i < om.length; i++) om[i] = R.normal();
    let Y = ops.w(Om);                                    // (W Omega^T)^T: k2 x out
    projectOut(la, Y, Q1, Q1t);
    for (let it = 0; it < powerIters; it++) {
      const Q2 = orthRows(la, Y, 1);
      Y = ops.w(ops.wT(Q2));                              // W W^T applied to the rows
      projectOut(la, Y, Q1, Q1t);
    }
    projectOut(la, Y, Q1, Q1t);
    const Q2 = orthRows(la, Y, 3);
    projectOut(la, Q2, Q1, Q1t);
    Qt = orthRows(la, stackRows(la, Q1, Q2), 2);
  } else {
    const Om = la.matF32(k, ops.inp), om = la.f32(Om);
    for (let i = 0; i < om.length; i++) om[i] = R.normal();
    let Yt = ops.w(ops.applyC(Om));
    for (let it = 0; it < powerIters; it++) {
      const Q = orthRows(la, Yt, 1);
      Yt = ops.w(ops.applyC(ops.wT(Q)));
    }
    Qt = orthRows(la, Yt, 3);
  }
  const At = ops.wT(Qt);                 // (W^T Q)^T = Q^T W: k x in
  const A = Float32Array.from(la.f32(At));
  const B = Float32Array.from(la.f32(la.transpose(Qt)));
  la.release(m0);
  return { A, B };
}

/**
 * Stochastic Lanczos quadrature of a symmetric PSD operator of size n (Ubaru, Chen & Saad 2017): `probes` Rademacher
 * vectors run together (one product per step), `steps` Lanczos steps each with full reorthogonalisation; the Gauss
 * nodes and weights of every probe make a measure of total mass n approximating the eigenvalue distribution.
 * Returns the nodes (descending) with their masses, and the two largest Ritz values (the top eigenvalues).
 */
export async function slq(la: LinAlg, n: number, op: (Vt: WMat) => WMat, probes: number, steps: number, seed = 7):
  Promise<{ nodes: Float64Array; mass: Float64Array; top: [number, number] }> {
  const { EigenvalueDecomposition, Matrix } = await import('ml-matrix');
  const R = rng(seed), b = probes, m = Math.min(steps, n);
  const Q: Float64Array[][] = Array.from({ length: b }, () => []);
  const alpha: number[][] = Array.from({ length: b }, () => []), beta: number[][] = Array.from({ length: b }, () => []);
  const done = new Array(b).fill(false);
  for (let p = 0; p < b; p++) {
    const q = new Float64Array(n), s = 1 / Math.sqrt(n);
    for (let i = 0; i < n; i++) q[i] = R.uniform() < 0.5 ? -s : s;
    Q[p].push(q);
  }
  for (let j = 0; j < m; j++) {
    const active = Array.from({ length: b }, (_, p) => p).filter((p) => !done[p]);
    if (active.length === 0) break;
    const mk = la.mark();
    const Vt = la.matF32(active.length, n), vt = la.f32(Vt);
    active.forEach((p, r) => vt.set(Q[p][j], r * n));
    const Ut = op(Vt);
    const ut = Float32Array.from(la.f32(Ut));
    la.release(mk);
    active.forEach((p, r) => {
      const u = Float64Array.from(ut.subarray(r * n, (r + 1) * n)), q = Q[p][j];
      let a = 0;
      for (let i = 0; i < n; i++) a += q[i] * u[i];
      alpha[p].push(a);
      for (let pass = 0; pass < 2; pass++) {
        for (const qi of Q[p]) {
          let c = 0;
          for (let i = 0; i < n; i++) c += qi[i] * u[i];
          for (let i = 0; i < n; i++) u[i] -= c * qi[i];
        }
      }
      let bn = 0;
      for (let i = 0; i < n; i++) bn += u[i] * u[i];
      bn = Math.sqrt(bn);
      if (j === m - 1 || !(bn > 1e-10 * Math.max(1, Math.abs(a)))) { done[p] = true; return; }
      beta[p].push(bn);
      for (let i = 0; i < n; i++) u[i] /= bn;
      Q[p].push(u);
    });
    if (j % 4 === 3) await new Promise((r) => setTimeout(r, 0));
  }
  const nodes: number[] = [], mass: number[] = [];
  let t1 = 0, t2 = 0;
  for (let p = 0; p < b; p++) {
    const k = alpha[p].length, T = new Matrix(k, k);
    for (let i = 0; i < k; i++) { T.set(i, i, alpha[p][i]); if (i + 1 < k) { T.set(i, i + 1, beta[p][i]); T.set(i + 1, i, beta[p][i]); } }
    const e = new EigenvalueDecomposition(T, { assumeSymmetric: true });
    const vals = e.realEigenvalues, V = e.eigenvectorMatrix;
    const sorted = [...vals].sort((x, y) => y - x);
    t1 = Math.max(t1, sorted[0]); t2 = Math.max(t2, sorted[1] ?? 0);
    for (let i = 0; i < k; i++) { nodes.push(Math.max(0, vals[i])); mass.push((V.get(0, i) ** 2) * n / b); }
  }
  const order = nodes.map((_, i) => i).sort((x, y) => nodes[y] - nodes[x]);
  return { nodes: Float64Array.from(order, (i) => nodes[i]), mass: Float64Array.from(order, (i) => mass[i]), top: [t1, t2] };
}

/** From an SLQ measure: the share of its total kept by the top r eigenvalues, and `count` pseudo-eigenvalues (quantiles). */
export function measureStats(nodes: Float64Array, mass: Float64Array, r: number[], count: number): { energy: number[]; pseudo: Float64Array } {
  let total = 0;
  for (let i = 0; i < nodes.length; i++) total += nodes[i] * mass[i];
  const energy = r.map((rr) => {
    let left = rr, s = 0;
    for (let i = 0; i < nodes.length && left > 0; i++) { const w = Math.min(left, mass[i]); s += w * nodes[i]; left -= w; }
    return total > 0 ? s / total : 1;
  });
  const pseudo = new Float64Array(count);
  let i = 0, acc = mass[0] ?? 0;
  for (let q = 0; q < count; q++) {
    const at = q + 0.5;
    while (acc < at && i + 1 < nodes.length) { i++; acc += mass[i]; }
    pseudo[q] = nodes[i] ?? 0;
  }
  return { energy, pseudo };
}
