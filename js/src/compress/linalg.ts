/**
 * Dense linear algebra of the compression tools (analyze, compress): row-major Float64Array matrices,
 * with the decompositions from ml-matrix (a well-kept npm package: JAMA's algorithms). Node-only tooling:
 * nothing here is imported by the runtime (js/src/aether.ts) or the browser build.
 *
 * SVDs are computed through the symmetric eigendecomposition of the smaller Gram matrix (W^T W or W W^T),
 * which is several times faster than ml-matrix's SVD for the tall matrices of an FFN and accurate enough for
 * what the tools need (the top of the spectrum, energies, truncation subspaces): eigenvalues below
 * ~1e-16 lambda_max lose relative accuracy, which only affects the far tail.
 */
import { Matrix, EigenvalueDecomposition, CholeskyDecomposition, QrDecomposition } from 'ml-matrix';
import { AetherError } from '../errors.js';

/** A row-major matrix. */
export interface Mat { rows: number; cols: number; data: Float64Array }

export function mat(rows: number, cols: number, data?: Float64Array | Float32Array): Mat {
  const d = new Float64Array(rows * cols);
  if (data) d.set(data);
  return { rows, cols, data: d };
}

/** C = A B. */
export function matmul(A: Mat, B: Mat): Mat {
  if (A.cols !== B.rows) throw new AetherError('invalid_argument', `matmul: ${A.rows}x${A.cols} times ${B.rows}x${B.cols}`);
  const n = A.rows, k = A.cols, m = B.cols, C = new Float64Array(n * m), a = A.data, b = B.data;
  for (let i = 0; i < n; i++) {
    const ci = i * m;
    for (let p = 0; p < k; p++) {
      const v = a[i * k + p];
      if (v === 0) continue;
      const bp = p * m;
      for (let j = 0; j < m; j++) C[ci + j] += v * b[bp + j];
    }
  }
  return { rows: n, cols: m, data: C };
}

export function transpose(A: Mat): Mat {
  const T = new Float64Array(A.rows * A.cols);
  for (let i = 0; i < A.rows; i++) for (let j = 0; j < A.cols; j++) T[j * A.rows + i] = A.data[i * A.cols + j];
  return { rows: A.cols, cols: A.rows, data: T };
}

/** A^T A (cols x cols) when `side` = 'cols', A A^T (rows x rows) when 'rows'. Symmetric, filled fully. */
export function gram(A: Mat, side: 'cols' | 'rows'): Mat {
  const B = side === 'cols' ? transpose(A) : A;  // rows of B are the vectors to dot
  const n = B.rows, k = B.cols, G = new Float64Array(n * n), b = B.data;
  for (let i = 0; i < n; i++) {
    for (let j = i; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += b[i * k + p] * b[j * k + p];
      G[i * n + j] = s; G[j * n + i] = s;
    }
  }
  return { rows: n, cols: n, data: G };
}

/** Accumulate the upper triangle of sum_b x_b x_b^T over `n` rows of width d (stride `stride`) into acc (d x d). */
export function accumulateGram(acc: Float64Array, d: number, x: Float32Array, n: number, stride = d): void {
  for (let b = 0; b < n; b++) {
    const o = b * stride;
    for (let i = 0; i < d; i++) {
      const xi = x[o + i];
      if (xi === 0) continue;
      const ai = i * d;
      for (let j = i; j < d; j++) acc[ai + j] += xi * x[o + j];
    }
  }
}

/** Mirror the upper triangle of a d x d accumulator to a full symmetric matrix, scaled by `scale`. */
export function symmetricFromUpper(acc: Float64Array, d: number, scale = 1): Mat {
  const G = new Float64Array(d * d);
  for (let i = 0; i < d; i++) for (let j = i; j < d; j++) { const v = acc[i * d + j] * scale; G[i * d + j] = v; G[j * d + i] = v; }
  return { rows: d, cols: d, data: G };
}

function toMatrix(A: Mat): Matrix {
  const M = new Matrix(A.rows, A.cols);
  for (let i = 0; i < A.rows; i++) for (let j = 0; j < A.cols; j++) M.set(i, j, A.data[i * A.cols + j]);
  return M;
}
function fromMatrix(M: Matrix): Mat {
  const A = mat(M.rows, M.columns);
  for (let i = 0; i < M.rows; i++) for (let j = 0; j < M.columns; j++) A.data[i * M.columns + j] = M.get(i, j);
  return A;
}

/** Eigendecomposition of a symmetric matrix: eigenvalues descending, eigenvectors as columns of `vectors`. */
export function symEig(A: Mat, wantVectors = true): { values: Float64Array; vectors?: Mat } {
  const e = new EigenvalueDecomposition(toMatrix(A), { assumeSymmetric: true });
  const vals = e.realEigenvalues;
  const order = vals.map((_, i) => i).sort((a, b) => vals[b] - vals[a]);
  const values = Float64Array.from(order, (i) => vals[i]);
  if (!wantVectors) return { values };
  const V = e.eigenvectorMatrix, n = A.rows, vectors = mat(n, n);
  for (let c = 0; c < n; c++) for (let r = 0; r < n; r++) vectors.data[r * n + c] = V.get(r, order[c]);
  return { values, vectors };
}

/** Singular values of A, descending (through the smaller Gram matrix). */
export function singularValues(A: Mat): Float64Array {
  const G = gram(A, A.cols <= A.rows ? 'cols' : 'rows');
  return symEig(G, false).values.map((v) => Math.sqrt(Math.max(0, v)));
}

/**
 * The calibration ridge, one rule for the exact and the fast path: RIDGE_EPS x the mean variance of the inputs
 * (mean of diag C, C = E[x x^T]; 1 for an all-zero calibration). Both paths use exactly this value: the exact path
 * never raises it (whitening() below), the fast path adds it to its operator (fast.ts WeightOps).
 */
export const RIDGE_EPS = 1e-6;
export function ridgeFromDiag(diagMean: number, eps = RIDGE_EPS): number {
  return diagMean > 0 ? eps * diagMean : eps;
}

/**
 * Lower-triangular S with S S^T = C + ridge I, ridge = ridgeFromDiag(mean diag C) unless given. Cholesky (float64);
 * when it breaks down (C is a computed second-moment matrix: with fewer tokens than features it is singular, and
 * rounding can leave eigenvalues slightly below zero, deeper than a tiny ridge) the factor comes from the
 * eigendecomposition instead: C+ = C with its negative eigenvalues set to 0, the symmetric square root
 * R = V sqrt(L+ + ridge) V^T, and S = the triangular factor of R's LQ decomposition (QR of R^T, no squaring of the
 * condition number), so S S^T = C+ + ridge I. The ridge is never raised: the fast path, which never factors C,
 * regularises with the same value (it used to differ: this function raised the ridge 10x at a time).
 */
export function whitening(C: Mat, ridge?: number): { S: Mat; ridge: number; factor: 'cholesky' | 'eigen' } {
  const n = C.rows;
  let tr = 0;
  for (let i = 0; i < n; i++) tr += C.data[i * n + i];
  for (const v of C.data) if (!Number.isFinite(v)) throw new AetherError('non_finite', 'the calibration covariance holds NaN / Inf');
  const lam = ridge ?? ridgeFromDiag(tr / n);
  if (!(lam > 0)) throw new AetherError('invalid_argument', `calibration ridge ${lam}: expected > 0`);
  const Cs = mat(n, n);   // (C + C^T) / 2: exactly symmetric (ml-matrix's Cholesky insists)
  for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) Cs.data[i * n + j] = Cs.data[j * n + i] = (C.data[i * n + j] + C.data[j * n + i]) / 2;
  const R = mat(n, n, Cs.data);
  for (let i = 0; i < n; i++) R.data[i * n + i] += lam;
  const ch = new CholeskyDecomposition(toMatrix(R));
  if (ch.isPositiveDefinite()) return { S: fromMatrix(ch.lowerTriangularMatrix), ridge: lam, factor: 'cholesky' };
  const { values, vectors } = symEig(Cs);
  const V = vectors!, root = mat(n, n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    let s = 0;
    for (let p = 0; p < n; p++) s += V.data[i * n + p] * Math.sqrt(Math.max(0, values[p]) + lam) * V.data[j * n + p];
    root.data[i * n + j] = s;
  }
  // root is symmetric: root^T = Q T (QR) -> root = T^T Q^T, S = T^T lower triangular, S S^T = root root^T
  const T = new QrDecomposition(toMatrix(root)).upperTriangularMatrix;
  const S = mat(n, n);
  for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) S.data[i * n + j] = T.get(j, i);
  return { S, ridge: lam, factor: 'eigen' };
}

/** Solve S^T X = B for X (S lower triangular, so S^T is upper): back substitution, column by column of B. */
export function solveLowerTransposed(S: Mat, B: Mat): Mat {
  const n = S.rows, m = B.cols, X = mat(n, m, B.data), s = S.data, x = X.data;
  for (let i = n - 1; i >= 0; i--) {
    const d = s[i * n + i];
    for (let j = 0; j < m; j++) {
      let v = x[i * m + j];
      for (let k = i + 1; k < n; k++) v -= s[k * n + i] * x[k * m + j];  // (S^T)[i][k] = S[k][i]
      x[i * m + j] = v / d;
    }
  }
  return X;
}

/**
 * Rank-k factorisation W ~ B A (B: out x k, A: k x in) minimising ||(W - B A) S||_F (S = I: plain SVD
 * truncation; S the whitening of the input covariance: activation-aware, SVD-LLM's truncation-aware
 * whitening, so the error is measured on W x for the calibration inputs x).
 * Returns the factors and the singular values of W S.
 */
export function lowRank(W: Mat, k: number, S?: Mat): { B: Mat; A: Mat; sigma: Float64Array } {
  const WS = S ? matmul(W, S) : W;
  const out = W.rows, inp = W.cols;
  if (!(k >= 1 && k <= Math.min(out, inp))) throw new AetherError('invalid_argument', `rank ${k} outside 1..${Math.min(out, inp)}`);
  if (inp <= out) {
    // WS = U s V^T; W_k S = WS V_k V_k^T -> B = WS V_k (out x k), A = V_k^T S^-1 (k x in)
    const { values, vectors } = symEig(gram(WS, 'cols'));
    const Vk = mat(inp, k);
    for (let r = 0; r < inp; r++) for (let c = 0; c < k; c++) Vk.data[r * k + c] = vectors!.data[r * inp + c];
    const B = matmul(WS, Vk);
    const A = S ? transpose(solveLowerTransposed(S, Vk)) : transpose(Vk);
    return { B, A, sigma: values.map((v) => Math.sqrt(Math.max(0, v))) };
  }
  // out < in: W_k S = U_k U_k^T W S -> B = U_k (out x k), A = U_k^T W (k x in)
  const { values, vectors } = symEig(gram(WS, 'rows'));
  const Uk = mat(out, k);
  for (let r = 0; r < out; r++) for (let c = 0; c < k; c++) Uk.data[r * k + c] = vectors!.data[r * out + c];
  return { B: Uk, A: matmul(transpose(Uk), W), sigma: values.map((v) => Math.sqrt(Math.max(0, v))) };
}

/** Fraction of sum s_i^2 in the first r singular values. */
export function energyKept(sigma: Float64Array, r: number): number {
  let all = 0, top = 0;
  for (let i = 0; i < sigma.length; i++) { const e = sigma[i] * sigma[i]; all += e; if (i < r) top += e; }
  return all > 0 ? top / all : 1;
}

/**
 * Power-law exponent of an eigenvalue spectrum's tail (WeightWatcher's "alpha"): p(lambda) ~ lambda^-alpha for
 * lambda >= xmin, alpha by maximum likelihood (Hill estimator, continuous: 1 + n / sum ln(lambda_i / xmin)),
 * xmin chosen among the eigenvalues to minimise the Kolmogorov-Smirnov distance between the tail and the fitted
 * law (Clauset, Shalizi & Newman 2009), with at least `minTail` eigenvalues in the tail.
 */
export function powerLawAlpha(eigs: ArrayLike<number>, minTail = 10): { alpha: number; xmin: number; n: number; ks: number } {
  const x = Array.from(eigs).filter((v) => v > 0).sort((a, b) => a - b);
  const N = x.length;
  let best = { alpha: NaN, xmin: NaN, n: 0, ks: Infinity };
  if (N < minTail) return best;
  const logs = x.map(Math.log);
  // suffix sums of logs
  const suf = new Float64Array(N + 1);
  for (let i = N - 1; i >= 0; i--) suf[i] = suf[i + 1] + logs[i];
  for (let i = 0; i + minTail <= N; i++) {
    if (i > 0 && x[i] === x[i - 1]) continue;
    const n = N - i, xmin = x[i];
    const s = suf[i] - n * logs[i];
    if (!(s > 0)) continue;
    const alpha = 1 + n / s;
    // KS distance between the empirical tail CDF and 1 - (x / xmin)^(1 - alpha)
    let ks = 0;
    for (let j = i; j < N; j++) {
      const model = 1 - Math.pow(x[j] / xmin, 1 - alpha);
      const lo = (j - i) / n, hi = (j - i + 1) / n;
      ks = Math.max(ks, Math.abs(model - lo), Math.abs(model - hi));
    }
    if (ks < best.ks) best = { alpha, xmin, n, ks };
  }
  return best;
}

/** Spearman rank correlation (average ranks for ties). NaN when either side is constant or n < 3. */
export function spearman(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = a.length;
  if (n !== b.length || n < 3) return NaN;
  const rank = (v: ArrayLike<number>) => {
    const idx = Array.from({ length: n }, (_, i) => i).sort((i, j) => v[i] - v[j]);
    const r = new Float64Array(n);
    for (let i = 0; i < n;) {
      let j = i;
      while (j + 1 < n && v[idx[j + 1]] === v[idx[i]]) j++;
      for (let k = i; k <= j; k++) r[idx[k]] = (i + j) / 2 + 1;
      i = j + 1;
    }
    return r;
  };
  const ra = rank(a), rb = rank(b);
  let ma = 0, mb = 0;
  for (let i = 0; i < n; i++) { ma += ra[i]; mb += rb[i]; }
  ma /= n; mb /= n;
  let sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) { const da = ra[i] - ma, db = rb[i] - mb; sab += da * db; saa += da * da; sbb += db * db; }
  return saa > 0 && sbb > 0 ? sab / Math.sqrt(saa * sbb) : NaN;
}
