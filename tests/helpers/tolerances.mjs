// SIMD-vs-reference tolerances of the kernels, all in one place. EPS = 2^-24 is float32's unit
// roundoff (half an ulp of 1). Bounds are worst-case (Higham-style) error bounds of the SIMD
// arithmetic against the near-exact reference, so a test failing them means a bug, not bad luck.
export const EPS = 2 ** -24;

// Quantised dot products / matvec: both sides sum exact integers per block and then perform the
// identical float operation sequence ((float)sumi * (d_w * d_x) accumulated in block order; K-quants
// per super-block), so the SIMD result must equal the reference bit for bit.
// One entry per quantised weight dtype of the registry (a missing entry fails the kernel tests).
export const QUANT_DOT_EXACT = { q8_0: 0, q4_0: 0, q4_1: 0, q5_0: 0, q5_1: 0, iq4_nl: 0, iq4_xs: 0, q2_K: 0, q3_K: 0, q4_K: 0, q5_K: 0, q6_K: 0 };

// Quantise -> dequantise round trip of N(0, 1) data: relative RMS error bound per quantised weight dtype
// (format resolution, not SIMD error: q2_K 4 levels per sub-block range, q3_K ~ 1/2^3 steps (8 levels, a scale that maps the largest value to -4), q4 ~ 1/2^4 steps, q5 ~ 1/2^5, q6_K ~ 1/2^6, q8_0 ~ 1/2^8 with margin).
export const ROUND_TRIP_REL_RMS = { q4_0: 0.12, q4_1: 0.12, q5_0: 0.06, q5_1: 0.06, iq4_nl: 0.12, iq4_xs: 0.12, q2_K: 0.5, q3_K: 0.3, q4_K: 0.12, q5_K: 0.06, q6_K: 0.03, q8_0: 0.01 };

// Quantised dot (reference or SIMD) vs the float64 dot of the dequantised weights and activations
// (tests/kernels-dtypes.test.mjs). Per block the kernel forms exact integer sums, converts them ((float) of
// an integer above 2^24 rounds once), multiplies by a product of two scales (2 roundings) and, with a min
// or offset term, adds a second such term: <= 6 EPS relative per block term; the float accumulation over
// nb blocks adds <= nb EPS of the sum of |terms|.
export function quantDotF64Tol(nb, sumAbsTerms) { return (nb + 6) * EPS * sumAbsTerms + 1e-37 * nb; }
// q8_1 (activations of q4_1 / q5_1) stores s = fp16(d * sum(q)) with the f32 d, while the dequantised
// activation uses the f16 d: |s - d_f16 sum(q)| <= |sum q| * 2^-25 (d in f16's subnormal range) + 2^-11 |s|
// (d's rounding) + 2^-11 |s| (s's rounding) + 2^-25 (s subnormal). The kernel multiplies s by the weight
// block's min m, so the bound is |m| times this.
export function q8_1SumErr(sumq, sx) { return Math.abs(sumq) * 2 ** -25 + 2 ** -10 * 1.001 * Math.abs(sx) + 2 ** -24; }

// ffn-saturated kernels (neuron-major down axpy, gathered-row dots): the SIMD code performs the
// reference's float operations per element in the same order: bit-exact.
export const SPARSE_EXACT = 0;

// Quantisers (q8_0 roundf, q8_K nearest-even, fp16 RNE) and all dequantisers: identical operations
// per element, so bit-exact.
export const QUANTIZE_EXACT = 0;
export const TO_FLOAT_EXACT = 0;

// f32 / f16 dot of length n: the SIMD kernels sum products in 4 lanes (f16: one f32x4 accumulator,
// chains of n/4 additions; f32: two, n/8), then 3 reduction additions and n%4 scalar ones; each
// product is rounded once. Recursive summation bound: |err| <= (chain + 5) * EPS * sum|w_i x_i|
// (n/4 covers both). The reference (exact products, double accumulation) adds at most half an ulp.
export function dotTol(n, sumAbs, ref) {
  return (n / 4 + 8) * EPS * sumAbs + EPS * Math.abs(ref);
}

// RMSNorm: sum of squares in 16 lanes (positive terms: relative error <= (n/16 + 6) EPS); the scale
// 1/sqrt(mean + eps) halves that relative error and adds ~3 roundings (div, add, sqrt, div); y =
// (x * scale) * w adds 2 more. Relative per element.
export function rmsnormRelTol(n) { return ((n / 16 + 6) / 2 + 8) * EPS; }

// Polynomial exp (src/kernels/simd128/simd128_util.h): measured at most 1 ulp from fround(Math.exp)
// over 12.6 million inputs; 2 allowed (Math.exp itself is not guaranteed correctly rounded).
export const EXP_MAX_ULP = 2;

// Softmax: exp within 2 ulp (4 EPS) vs the reference's correctly rounded expf (1 EPS), the sum in 16
// lanes of positive terms (n/16 + 6) EPS relative, and e * (1/sum) 2 roundings vs the reference's 1.
// Relative per element (+ an absolute floor for results in the subnormal range).
export function softmaxRelTol(n) { return (n / 16 + 16) * EPS; }
export const SOFTMAX_ABS = 1e-37;

// SiLU * u: exp within 2 ulp; 1 + e, the division and the multiply round once each; the reference's
// expf is correctly rounded. <= ~6 ulp relative; 16 EPS (8 ulp) leaves margin.
export const SILU_REL = 16 * EPS;
export const SILU_ABS = 1e-37;

// GELU (tanh form): the reference computes 0.5 x (1 + tanhf(z)) in float, which cancels for x < 0
// (absolute error ~EPS in 1 + tanh, i.e. ~EPS |x| in the result), while SIMD uses the equivalent
// x / (1 + e^-2z) with the polynomial exp. Inner z = c (x + 0.044715 x^3) carries ~4 roundings
// (relative), which move the result by at most |x| * sigmoid'(2z) * 2|z| * 4 EPS <= ~2 EPS |x|.
// Bound: 8 EPS |x| + 16 EPS |ref|.
export function geluTol(x, ref) { return 8 * EPS * Math.abs(x) + 16 * EPS * Math.abs(ref) + 1e-37; }
// gelu(g) * u: the gelu bound scaled by |u|, plus the rounding of the product.
export function geluMulTol(g, u, ref) { return geluTol(g, ref / (u || 1)) * Math.abs(u) + 2 * EPS * Math.abs(ref) + 1e-37; }
// softcap(x) = cap tanh(x / cap): the SIMD tanh is (1 - e) / (1 + e) with the <= 2 ulp exp for |y| >= 1/8
// (absolute error in tanh <= ~6 EPS where 1 - e cancels) and an odd polynomial below (a few ulp of y);
// the reference is tanh in double. Absolute bound in x: cap * 8 EPS + 4 EPS |x|.
export function softcapTol(cap, x) { return cap * 8 * EPS + 4 * EPS * Math.abs(x) + 1e-37; }

// RoPE and add: the SIMD kernels evaluate the reference's exact expressions: bit-exact.
export const ROPE_EXACT = 0;
export const ADD_EXACT = 0;

// rope_cos_sin vs an independent double-precision JS evaluation of the same float32 formula
// (fround(cos(fround(pos * fround(1 / fround(theta ** fround(2i / d))))))): the kernel rounds
// double-precision results once, so at most 1 ulp where the JS double pow/cos (<= 1 ulp of double)
// and the kernel's own disagree on a near-halfway case.
export const ROPE_COS_SIN_ULP = 1;

// Scalar math (ae_expf, ae_tanhf, ae_logf, ae_powf, ae_sinf, ae_cosf) vs fround(Math.f(x)): both are
// double evaluations rounded once; they can differ by 1 ulp only in near-halfway cases.
export const SCALAR_MATH_ULP = 1;

// Attention: scores carry the f32 dot error of a length-hd sum in 4 lanes, scaled:
// ds = scale * (hd/4 + 6) * EPS * sum|q k|; softmax turns an absolute score error ds into a relative
// probability error <= 2 ds, plus softmaxRelTol(n_kv); the output sum over n_kv positions (sequential
// per lane) adds (n_kv + 2) EPS relative to sum_t p_t |v_t|. Per output element i:
//   |err_i| <= (2 ds_max + softmaxRelTol(n_kv) + (n_kv + 2) EPS) * sum_t p_t |v_t,i|.
export function attentionTol(dsMax, nKv, sumPAbsV) {
  return (2 * dsMax + softmaxRelTol(nKv) + (nKv + 4) * EPS) * sumPAbsV + 1e-30;
}
export function attentionScoreErr(scale, hd, sumAbsQK) { return Math.abs(scale) * (hd / 4 + 6) * EPS * sumAbsQK; }
