/* Shared SIMD128 helpers for the kernels in this directory (inline only). */
#ifndef AE_SIMD128_UTIL_H
#define AE_SIMD128_UTIL_H
#include <wasm_simd128.h>
#include "kernels/kernels.h"

typedef v128_t v128;

/* ---- relaxed SIMD (the <name>-relaxed.wasm builds, compiled with -mrelaxed-simd) ---------------------
 * AE_RELAXED is 1 in those builds. Kernels keep their relaxed code in separate functions under
 * #if AE_RELAXED. The one relaxed integer instruction used, ae_rdot(a, b, c) = c + [sum of 4 products
 * a[4i+k] b[4i+k]] per i32 lane, is exact and host-independent when every byte of b is in [0, 127]
 * (the spec leaves only b's top bit, and i16 saturation of pair sums, to the host; with b <= 127 a pair
 * sum is at most 2 * 128 * 127 = 32512). Every call site passes such a b (nibbles, 6-bit values, |x|). */
/* eight i16 ones (i32x4.dot_i16x8 against them widens i16 pairs), loaded through an opaque pointer: see ae_rdot_w */
AE_INLINE v128 ae_i16_ones(void) {
  static const int16_t k1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const int16_t *p = k1;
  __asm__("" : "+r"(p));
  return wasm_v128_load(p);
}
#if defined(__wasm_relaxed_simd__)
#define AE_RELAXED 1
typedef signed char ae_i8x16 __attribute__((vector_size(16)));
typedef int32_t ae_i32x4 __attribute__((vector_size(16)));
typedef float ae_f32x4 __attribute__((vector_size(16)));
/* the builtins, not wasm_simd128.h's wrappers: clang 16 has the former only */
AE_INLINE v128 ae_rdot(v128 a_i8, v128 b_u7, v128 acc) {
  return (v128)__builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4((ae_i8x16)a_i8, (ae_i8x16)b_u7, (ae_i32x4)acc);
}
/* ae_rdot16(a, b) = [a[2i] b[2i] + a[2i+1] b[2i+1]] per i16 lane (i16x8.relaxed_dot_i8x16_i7x16_s; one
 * pmaddubsw on x64, where V8 11.x lowers the i32 form above to 3 instructions). Exact and host-independent
 * when every byte of b is in [0, 127] (pair sums then stay within 2 * 128 * 127, no i16 saturation). */
AE_INLINE v128 ae_rdot16(v128 a_i8, v128 b_u7) {
  return (v128)__builtin_wasm_relaxed_dot_i8x16_i7x16_s_i16x8((ae_i8x16)a_i8, (ae_i8x16)b_u7);
}
/* ae_rdot with the widening spelled out: acc + i32x4.dot_i16x8_s(ae_rdot16(a, b), ones), the same sums as ae_rdot.
 * V8 without AVX-VNNI lowers ae_rdot to pmaddubsw + pmaddwd + paddd and rebuilds the pmaddwd's i16 ones (pcmpeqd +
 * psrlw) at every use: 5 instructions. With ones = ae_i16_ones() loaded once per function (the opaque pointer keeps
 * clang from folding it into a v128.const, which V8 would rebuild per use too), this is 3: in a tile of many dots
 * that is 1.25x (the q8_0 R4 GEMM; docs/PERFORMANCE.md "Session 16"). */
AE_INLINE v128 ae_rdot_w(v128 a_i8, v128 b_u7, v128 acc, v128 ones) {
  return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(ae_rdot16(a_i8, b_u7), ones));
}
/* i8x16.relaxed_swizzle: one pshufb on x64 (i8x16.swizzle adds a saturating fix-up for indices >= 16). Host-independent
 * when every index is < 16 or has its top bit set (both give 0 on every host). */
AE_INLINE v128 ae_rswizzle(v128 a, v128 idx) { return (v128)__builtin_wasm_relaxed_swizzle_i8x16((ae_i8x16)a, (ae_i8x16)idx); }
#else
#define AE_RELAXED 0
#endif
/* c + a * b for the f32 / f16 dot products: mul then add (two roundings) in both builds. f32x4.relaxed_madd (which a
 * host may fuse or not) was used in the relaxed build until the relaxed build became the default in Node too: it made
 * f32 / f16 results differ from the plain build's (and between hosts) in the last bits, for 0.8-1.3x (noisy)
 * kernel speed; now every dtype gives the same bits in both builds on every host (docs/DESIGN.md "Relaxed SIMD"). */
AE_INLINE v128 ae_madd(v128 a, v128 b, v128 c) { return wasm_f32x4_add(c, wasm_f32x4_mul(a, b)); }

/* The plain build's entry points of a layout only the relaxed build uses (AE_Q5_0_R4 ... AE_Q4_K_R4; model.c never
 * repacks into it there): the layout's scalar reference matvec, run per token for the GEMM. */
#define AE_REF_ENTRY_POINTS(name, ref)                                                                              \
  void ae_matvec_rows_##name##_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {          \
    ref(W, ncols, xq, y, r0, r1);                                                                                   \
  }                                                                                                                 \
  void ae_matmul_rows_##name##_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, \
                                       int y_stride, int r0, int r1) {                                              \
    for (int t = 0; t < nvec; t++)                                                                                  \
      ref(W, ncols, (const uint8_t *)xq + (size_t)t * xq_stride, y + (size_t)t * y_stride, r0, r1);                  \
  }

/* A row-group layout's in-place repack (AE_Q4_0_R4 ... AE_Q4_K_R4): 1 (nothing changed) when rows % 4 != 0 or a block's
 * f16 at offset off0 (or off1, when >= 0) is inf / nan (the R4 kernels convert finite scales only); else each group of
 * 4 rows is copied to tmp (4 rows of nb blocks of bs bytes) and record b (rec bytes) built from the 4 rows' block b by
 * pack(p, record, arg); 0. */
AE_INLINE int ae_group_repack(void *W, int nrows, int nb, size_t bs, size_t rec, void *tmp, int off0, int off1,
                              void (*pack)(const uint8_t *const p[4], uint8_t *rec, int arg), int arg) {
  if (nrows % 4) return 1;
  for (size_t i = 0; i < (size_t)nrows * (size_t)nb; i++) {
    const uint8_t *blk = (const uint8_t *)W + i * bs;
    uint16_t h0, h1 = 0;
    __builtin_memcpy(&h0, blk + off0, 2);
    if (off1 >= 0) __builtin_memcpy(&h1, blk + off1, 2);
    if ((h0 & 0x7c00u) == 0x7c00u || (h1 & 0x7c00u) == 0x7c00u) return 1;
  }
  const size_t rs = (size_t)nb * bs;
  for (int g = 0; g < nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    for (int b = 0; b < nb; b++) {
      const uint8_t *p[4];
      for (int k = 0; k < 4; k++) p[k] = (const uint8_t *)tmp + (size_t)k * rs + (size_t)b * bs;
      pack(p, base + (size_t)b * rec, arg);
    }
  }
  return 0;
}

/* Tokens of a GEMM's next tile of 4 or 3 tokens from `rem` left: 4 while the rest still splits into tiles of 3 and 4
 * with no partial one (every count but 1, 2 and 5 does), else 3 (a partial last tile repeats its last token). The
 * q4_0 and q6_K R4 tiles (per (row, token) the same results whichever tile a token falls in). */
AE_INLINE int ae_tile_tokens_43(int rem) { const int x = rem - 4; return rem >= 4 && x != 1 && x != 2 && x != 5 ? 4 : 3; }

/* A row-group layout's GEMM (AE_Q4_0_R4 ... AE_Q4_K_R4): the rows of r0..r1 outside whole 4-row groups go through
 * the layout's matvec per token (it handles partial groups); sets the whole groups' range [*a0p, *a1p) and returns 0
 * when there is none (everything done). */
AE_INLINE int ae_group_gemm_edges(void (*mv)(const void *, int, const void *, float *, int, int), const void *W, int ncols,
                                  const void *xq, size_t xq_stride, int nvec, float *y, int y_stride, int r0, int r1,
                                  int *a0p, int *a1p) {
  const int a0 = (r0 + 3) & ~3, a1 = r1 & ~3;
  *a0p = a0; *a1p = a1;
  for (int t = 0; t < nvec; t++) {
    const void *xt = (const uint8_t *)xq + (size_t)t * xq_stride;
    float *yt = y + (size_t)t * y_stride;
    if (a0 >= a1) { mv(W, ncols, xt, yt, r0, r1); continue; }
    if (r0 < a0) mv(W, ncols, xt, yt, r0, a0);
    if (a1 < r1) mv(W, ncols, xt, yt, a1, r1);
  }
  return a0 < a1;
}

AE_INLINE v128 ae_load(const void *p) { return wasm_v128_load(p); }
AE_INLINE void ae_store(void *p, v128 v) { wasm_v128_store(p, v); }
AE_INLINE uint32_t ae_f2u(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
AE_INLINE float ae_u2f(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }

/* Scalar fp16 -> fp32, exact (inline twin of ae_fp16_to_fp32). */
AE_INLINE float ae_h2f_s(ae_fp16 h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (__builtin_expect(e - 1u < 30u, 1)) return ae_u2f(sign | ((e + 112u) << 23) | (m << 13));
  if (e == 0x1f) return ae_u2f(sign | 0x7f800000u | (m << 13));
  return ae_u2f(sign | ae_f2u((float)m * 0x1p-24f));
}

/* ---- i8 -> i16 even/odd split: lanes k = byte 2k (even) or 2k+1 (odd), sign-extended.
 * Any fixed pairing of elements works for a dot product as long as both operands use it. */
AE_INLINE v128 ae_i8_even(v128 v) { return wasm_i16x8_shr(wasm_i16x8_shl(v, 8), 8); }
AE_INLINE v128 ae_i8_odd(v128 v) { return wasm_i16x8_shr(v, 8); }

/* ---- fp16 -> fp32 -------------------------------------------------------------------------------
 * Input form: i32 lanes holding (half << 16) (low 16 bits zero); ae_h16_lo/hi build it from 8 halves in
 * an i16x8 with one interleave each. */
AE_INLINE v128 ae_h16_lo(v128 h) { return wasm_i16x8_shuffle(wasm_i32x4_const_splat(0), h, 0, 8, 1, 9, 2, 10, 3, 11); }
AE_INLINE v128 ae_h16_hi(v128 h) { return wasm_i16x8_shuffle(wasm_i32x4_const_splat(0), h, 4, 12, 5, 13, 6, 14, 7, 15); }

/* Exact for all 65536 halves (NaN payloads kept, no float operation on a subnormal operand):
 * normal: exponent rebias by integer add; inf/nan: exponent forced to 255; zero/subnormal: the mantissa
 * is placed in a float of exponent 2^-14 and 2^-14 subtracted (exact). */
AE_INLINE v128 ae_h2f_exact(v128 x) {
  const v128 sign = wasm_v128_and(x, wasm_i32x4_const_splat((int32_t)0x80000000u));
  const v128 o = wasm_u32x4_shr(wasm_i32x4_shl(x, 1), 4);            /* |h| << 13 */
  const v128 e = wasm_v128_and(o, wasm_i32x4_const_splat(0x0f800000));
  v128 n = wasm_i32x4_add(o, wasm_i32x4_const_splat(0x38000000));
  const v128 infnan = wasm_i32x4_eq(e, wasm_i32x4_const_splat(0x0f800000));
  n = wasm_i32x4_add(n, wasm_v128_and(infnan, wasm_i32x4_const_splat(0x38000000)));
  const v128 sub = wasm_i32x4_eq(e, wasm_i32x4_const_splat(0));
  const v128 s = wasm_f32x4_sub(wasm_i32x4_add(o, wasm_i32x4_const_splat(0x38800000)), wasm_f32x4_splat(0x1p-14f));
  return wasm_v128_or(wasm_v128_bitselect(s, n, sub), sign);
}
/* A finite half as the float half * 2^-112, exactly: its bits moved into place (a subnormal float for halves below
 * 2^-14). The kernels that put the 2^112 on the other operand (f16 rows against x 2^112, attention weights times
 * 2^112, block scales against d_x 2^112) use it as it is. */
AE_INLINE v128 ae_h2f_raw(v128 x) { return wasm_v128_and(wasm_i32x4_shr(x, 3), wasm_i32x4_const_splat((int32_t)0x8fffffffu)); }
/* Fast: exact for finite halves (zero, subnormal, normal); WRONG for inf/nan (callers check
 * ae_h16_has_infnan and redo such rows with ae_h2f_exact). Subnormal halves become a subnormal float
 * operand of the multiply (correct, possibly slower). */
AE_INLINE v128 ae_h2f_fast(v128 x) { return wasm_f32x4_mul(ae_h2f_raw(x), wasm_f32x4_splat(0x1p112f)); }
/* 1 if every finite x[i] has |x[i]| < 2^16, so x[i] 2^112 is finite (inf and NaN stay what they were): the paths that
 * put a half's 2^112 on the other operand need it */
AE_INLINE int ae_f32_below_2p16(const float *x, int n) {
  v128 m = wasm_f32x4_splat(0.0f);
  const v128 inf = wasm_f32x4_splat(__builtin_inff());
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const v128 a = wasm_f32x4_abs(wasm_v128_load(x + i));
    m = wasm_f32x4_pmax(m, wasm_v128_andnot(a, wasm_f32x4_eq(a, inf)));   /* inf -> 0; NaN is ignored by pmax */
  }
  float mx = 0.0f;
  for (int j = 0; j < 4; j++) { const float v = wasm_f32x4_extract_lane(m, 0); mx = v > mx ? v : mx; m = wasm_i32x4_shuffle(m, m, 1, 2, 3, 0); }
  for (; i < n; i++) { const float a = __builtin_fabsf(x[i]); if (a != __builtin_inff() && a > mx) mx = a; }
  return mx < 65536.0f;
}
/* Running check for inf/nan halves: m = ae_h16_infnan_acc(m, h); any inf/nan iff ae_h16_has_infnan(m). */
AE_INLINE v128 ae_h16_infnan_acc(v128 m, v128 h) { return wasm_u16x8_max(m, wasm_i16x8_add(h, h)); }
AE_INLINE int ae_h16_has_infnan(v128 m) {
  return wasm_v128_any_true(wasm_u16x8_ge(m, wasm_u16x8_splat(0xf800)));
}
/* 8 halves p0[0..3] (lanes 0..3) and p1[0..3] (lanes 4..7), each a pointer per row, into i16x8. */
AE_INLINE v128 ae_gather8_h(const ae_fp16 *a0, const ae_fp16 *a1, const ae_fp16 *a2, const ae_fp16 *a3,
                            const ae_fp16 *b0, const ae_fp16 *b1, const ae_fp16 *b2, const ae_fp16 *b3) {
  v128 h = wasm_i32x4_const_splat(0);
  h = wasm_v128_load16_lane(a0, h, 0); h = wasm_v128_load16_lane(a1, h, 1);
  h = wasm_v128_load16_lane(a2, h, 2); h = wasm_v128_load16_lane(a3, h, 3);
  h = wasm_v128_load16_lane(b0, h, 4); h = wasm_v128_load16_lane(b1, h, 5);
  h = wasm_v128_load16_lane(b2, h, 6); h = wasm_v128_load16_lane(b3, h, 7);
  return h;
}
/* 4 halves at p[0], p[s], p[2s], p[3s] (element stride s) -> f32x4, exact. */
AE_INLINE v128 ae_gather4_h2f(const ae_fp16 *p0, const ae_fp16 *p1, const ae_fp16 *p2, const ae_fp16 *p3) {
  v128 h = wasm_i32x4_const_splat(0);
  h = wasm_v128_load16_lane(p0, h, 1);
  h = wasm_v128_load16_lane(p1, h, 3);
  h = wasm_v128_load16_lane(p2, h, 5);
  h = wasm_v128_load16_lane(p3, h, 7);
  return ae_h2f_exact(h);
}

/* The rows of step i of a 4-row matvec over [r0, r1) with q = (r1 - r0) / 4 groups: i < q: rows i, i + q, i + 2q, i + 3q
 * (one from each quarter: four weight streams); after them each row left over, in all 4 lanes. Returns how many of
 * the 4 lanes are distinct rows (4 or 1). */
AE_INLINE int ae_rows4(int i, int q, int r0, int rr[4]) {
  for (int k = 0; k < 4; k++) rr[k] = i < q ? r0 + i + k * q : r0 + 4 * q + (i - q);
  return i < q ? 4 : 1;
}
/* y[rr[k]] = lane k of acc for the n distinct rows (ae_rows4) */
AE_INLINE void ae_store_rows4(float *y, const int rr[4], int n, v128 acc) {
  y[rr[0]] = wasm_f32x4_extract_lane(acc, 0);
  if (n == 4) { y[rr[1]] = wasm_f32x4_extract_lane(acc, 1); y[rr[2]] = wasm_f32x4_extract_lane(acc, 2); y[rr[3]] = wasm_f32x4_extract_lane(acc, 3); }
}

/* ---- reductions (fixed order) ------------------------------------------------------------------- */
AE_INLINE int32_t ae_hsum_i32(v128 v) {
  v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_i32x4_extract_lane(v, 0);
}
/* (v0 + v2) + (v1 + v3) */
AE_INLINE float ae_hsum_f32(v128 v) {
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}
/* [hsum(a), hsum(b), hsum(c), hsum(d)] for i32 (exact, so the order does not matter). */
AE_INLINE v128 ae_reduce4_i32(v128 a, v128 b, v128 c, v128 d) {
  const v128 ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128 cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}
/* Same for f32 with the order of ae_hsum_f32 per lane: (v0 + v2) + (v1 + v3). */
AE_INLINE v128 ae_reduce4_f32(v128 a, v128 b, v128 c, v128 d) {
  const v128 ab = wasm_f32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128 cd = wasm_f32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return wasm_f32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* ---- exp ------------------------------------------------------------------------------------------
 * e^x = 2^k e^r, k = nearest(x log2 e), r = (x - k C1) - k C2 with C1 = 355/512 (9 bits: k C1 exact) and
 * C2 = ln2 - C1 rounded to float; e^r = 1 + r + r^2 q(r), q of degree 5 interpolating (e^r - 1 - r)/r^2
 * at Chebyshev nodes of [-ln2/2, ln2/2] (coefficients rounded to float; approximation error 7e-10
 * relative = 0.012 ulp). 2^k is applied as two factors 2^(k/2) 2^(k - k/2) so results down to the
 * subnormal range and up to FLT_MAX are formed correctly; x is clamped to [-104, 88.75] (exp underflows
 * to 0 / overflows to inf there) with NaN propagated. Measured error: at most 1 ulp against
 * fround(Math.exp(x)) over 12.6 million inputs spread over [-87.3, 88.72], [-1, 1] and [-1e-3, 1e-3]
 * (93% exact); tests/kernels.test.mjs allows 2 ulp (tests/helpers/tolerances.mjs EXP_MAX_ULP). */
AE_INLINE v128 ae_v_exp(v128 x) {
  x = wasm_f32x4_pmax(x, wasm_f32x4_splat(-104.0f));   /* pmax(x, lo) = x < lo ? lo : x (NaN kept) */
  x = wasm_f32x4_pmin(x, wasm_f32x4_splat(88.75f));    /* pmin(x, hi) = hi < x ? hi : x (NaN kept) */
  const v128 kf = wasm_f32x4_nearest(wasm_f32x4_mul(x, wasm_f32x4_splat(0x1.715476p+0f)));
  v128 r = wasm_f32x4_sub(x, wasm_f32x4_mul(kf, wasm_f32x4_splat(0.693359375f)));
  r = wasm_f32x4_sub(r, wasm_f32x4_mul(kf, wasm_f32x4_splat(-0x1.bd0106p-13f)));
  v128 q = wasm_f32x4_splat(0x1.a124e4p-13f);
  q = wasm_f32x4_add(wasm_f32x4_mul(q, r), wasm_f32x4_splat(0x1.6d4316p-10f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, r), wasm_f32x4_splat(0x1.1110ep-7f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, r), wasm_f32x4_splat(0x1.5554eap-5f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, r), wasm_f32x4_splat(0x1.555556p-3f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, r), wasm_f32x4_splat(0.5f));
  const v128 p = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(r, r), q), r), wasm_f32x4_splat(1.0f));
  const v128 k = wasm_i32x4_trunc_sat_f32x4(kf);
  const v128 k1 = wasm_i32x4_shr(k, 1), k2 = wasm_i32x4_sub(k, k1);
  const v128 s1 = wasm_i32x4_shl(wasm_i32x4_add(k1, wasm_i32x4_splat(127)), 23);
  const v128 s2 = wasm_i32x4_shl(wasm_i32x4_add(k2, wasm_i32x4_splat(127)), 23);
  return wasm_f32x4_mul(wasm_f32x4_mul(p, s1), s2);
}

/* q4_K / q5_K: 12 packed bytes of 6-bit scales and mins -> u8 lanes 0..7 = scales, 8..15 = mins. Reads 16 bytes
 * (the 4 after the scales belong to the same block: the first quants of q4_K, the first qh bytes of q5_K). */
AE_INLINE v128 ae_k4_unpack_scales(const uint8_t *q) {
  const v128 v = ae_load(q);
  const v128 s1 = wasm_i8x16_shuffle(v, v, 0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11);
  const v128 s2 = wasm_i8x16_shuffle(v, v, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7);
  const v128 a = wasm_v128_and(s1, wasm_i8x16_const(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const v128 b = wasm_v128_and(wasm_u16x8_shr(s1, 4), wasm_i8x16_const(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const v128 c = wasm_v128_and(wasm_u16x8_shr(s2, 2),
                               wasm_i8x16_const(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
  return wasm_v128_or(wasm_v128_or(a, b), c);
}

/* ---- 32-element blocks of signed bytes (q8_0, q8_1) --------------------------------------------------
 * ggml's q8_0 / q8_1 quantisation of one block: d = amax / 127 (f32), q = roundf(x * (1 / d)) (half away from
 * zero); writes the 32 bytes to qs and returns d; qsum (if not NULL) gets i32 lanes summing to sum(q). */
AE_INLINE v128 ae_round_half_away(v128 v) {
  const v128 t = wasm_f32x4_trunc(v);
  const v128 d = wasm_f32x4_sub(v, t);   /* exact */
  const v128 one = wasm_f32x4_splat(1.0f);
  const v128 up = wasm_v128_and(wasm_f32x4_ge(d, wasm_f32x4_splat(0.5f)), one);
  const v128 dn = wasm_v128_and(wasm_f32x4_le(d, wasm_f32x4_splat(-0.5f)), one);
  return wasm_f32x4_sub(wasm_f32x4_add(t, up), dn);
}
AE_INLINE float ae_q8_block_quant(const float *v, int8_t *qs, v128 *qsum) {
  v128 f[8];
  v128 am = wasm_f32x4_splat(0.0f);
  for (int j = 0; j < 8; j++) {
    f[j] = ae_load(v + 4 * j);
    am = wasm_f32x4_pmax(am, wasm_f32x4_abs(f[j]));
  }
  am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 2, 3, 0, 1));
  am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 1, 0, 3, 2));
  const float d = wasm_f32x4_extract_lane(am, 0) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const v128 idv = wasm_f32x4_splat(id);
  v128 q[8], sum = wasm_i32x4_splat(0);
  for (int j = 0; j < 8; j++) {
    q[j] = wasm_i32x4_trunc_sat_f32x4(ae_round_half_away(wasm_f32x4_mul(f[j], idv)));
    sum = wasm_i32x4_add(sum, q[j]);
  }
  const v128 h0 = wasm_i16x8_narrow_i32x4(q[0], q[1]), h1 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
  const v128 h2 = wasm_i16x8_narrow_i32x4(q[4], q[5]), h3 = wasm_i16x8_narrow_i32x4(q[6], q[7]);
  ae_store(qs, wasm_i8x16_narrow_i16x8(h0, h1));
  ae_store(qs + 16, wasm_i8x16_narrow_i16x8(h2, h3));
  if (qsum) *qsum = sum;
  return d;
}
/* o[0..32) = d * qs[0..32) (dequantise one q8_0 / q8_1 block) */
AE_INLINE void ae_q8_block_dequant(const int8_t *qs, float d, float *o) {
  const v128 dv = wasm_f32x4_splat(d);
  for (int h = 0; h < 2; h++) {
    const v128 q = ae_load(qs + 16 * h);
    const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
    ae_store(o + 16 * h + 0, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo)), dv));
    ae_store(o + 16 * h + 4, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo)), dv));
    ae_store(o + 16 * h + 8, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi)), dv));
    ae_store(o + 16 * h + 12, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi)), dv));
  }
}

/* d_w 2^-112 in 4 lanes (exact for finite halves: the half's bits moved into a float's, as dot_q4_0_r4_simd128.c) from
 * the f16 at w; with d_x 2^112 the product d_w' d_x' is the same real number as d_w d_x, so the same float (gemm_q8act,
 * gemm_iq4). Rows with an inf / nan scale take the exact conversion (ae_row_finite). */
AE_INLINE v128 ae_bscale_fast(const uint8_t *w) {
  int16_t h;
  __builtin_memcpy(&h, w, 2);
  return wasm_f32x4_splat(ae_u2f(((uint32_t)(int32_t)h << 13) & 0x8fffffffu));
}
/* every block scale of a row finite (nb blocks of bs bytes, the f16 scale first) */
AE_INLINE int ae_row_finite(const uint8_t *w, int nb, size_t bs) {
  int bad = 0;
  for (int b = 0; b < nb; b++, w += bs) { uint16_t h; __builtin_memcpy(&h, w, 2); bad |= (h & 0x7c00) == 0x7c00; }
  return !bad;
}

/* ---- prefill GEMM tiles (gemm_q32, gemm_q8act): one row's y of up to 4 tokens (token t at yt[t y_stride + r]) in
 * the lanes of an f32x4: loaded (zeros for the first column chunk, c0 == 0) and stored back; lanes >= nt unused. */
AE_INLINE v128 ae_gemm_load_y(const float *yt, int y_stride, int nt, int r, int c0) {
  float a[4] = {0, 0, 0, 0};
  if (c0) for (int t = 0; t < nt; t++) a[t] = yt[(size_t)t * y_stride + r];
  return ae_load(a);
}
AE_INLINE void ae_gemm_store_y(float *yt, int y_stride, int nt, int r, v128 acc) {
  float a[4];
  ae_store(a, acc);
  for (int t = 0; t < nt; t++) yt[(size_t)t * y_stride + r] = a[t];
}

/* ---- lanes / q6_K helpers shared by the q6_K matvec (dot_q6_K_simd128.c) and the k-quant GEMM (gemm_k) ---- */
/* i32 lane j & 3 of v in all 4 lanes */
AE_INLINE v128 ae_lane_splat32(v128 v, int j) {
  switch (j & 3) {
    case 0: return wasm_i32x4_shuffle(v, v, 0, 0, 0, 0);
    case 1: return wasm_i32x4_shuffle(v, v, 1, 1, 1, 1);
    case 2: return wasm_i32x4_shuffle(v, v, 2, 2, 2, 2);
    default: return wasm_i32x4_shuffle(v, v, 3, 3, 3, 3);
  }
}
/* q6_K: the 6-bit values of elements 128h + 32k + 16p + [0, 16) as bytes (0..63), from l0 = ql[64h + 16p ..],
 * l1 = ql[64h + 32 + 16p ..], hb = qh[32h + 16p ..] (i16 shifts, byte masks). That is chunk (sub-block)
 * c = 8h + 2k + p. */
AE_INLINE v128 ae_q6_decode(v128 l0, v128 l1, v128 hb, int k) {
  const v128 f = wasm_i8x16_splat(0x0f), t = wasm_i8x16_splat(0x30);
  switch (k) {
    case 0: return wasm_v128_or(wasm_v128_and(l0, f), wasm_v128_and(wasm_i16x8_shl(hb, 4), t));
    case 1: return wasm_v128_or(wasm_v128_and(l1, f), wasm_v128_and(wasm_i16x8_shl(hb, 2), t));
    case 2: return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l0, 4), f), wasm_v128_and(hb, t));
    default: return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 4), f), wasm_v128_and(wasm_u16x8_shr(hb, 2), t));
  }
}
/* q6_K block w's 256 unsigned 6-bit values: q[c] = the values 16c .. 16c + 15 */
AE_INLINE void ae_q6_values(const ae_block_q6_K *w, v128 q[16]) {
#pragma clang loop unroll(full)
  for (int h = 0; h < 2; h++)
#pragma clang loop unroll(full)
    for (int p = 0; p < 2; p++) {
      const v128 l0 = wasm_v128_load(w->ql + 64 * h + 16 * p), l1 = wasm_v128_load(w->ql + 64 * h + 32 + 16 * p);
      const v128 hb = wasm_v128_load(w->qh + 32 * h + 16 * p);
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; k++) q[8 * h + 2 * k + p] = ae_q6_decode(l0, l1, hb, k);
    }
}
/* AE_Q6_K_X's packing of 64 values (u[0..3], bytes 0..63) into 3 vectors at g: V_i = u[i] | ((u[3] >> 2i) & 3) << 6 */
AE_INLINE void ae_q6x_pack(const v128 u[4], uint8_t *g) {
  const v128 mc0 = wasm_i8x16_splat((int8_t)0xc0);
  wasm_v128_store(g, wasm_v128_or(u[0], wasm_v128_and(wasm_i16x8_shl(u[3], 6), mc0)));
  wasm_v128_store(g + 16, wasm_v128_or(u[1], wasm_v128_and(wasm_i16x8_shl(u[3], 4), mc0)));
  wasm_v128_store(g + 32, wasm_v128_or(u[2], wasm_v128_and(wasm_i16x8_shl(u[3], 2), mc0)));
}
/* 4x4 transpose of 32-bit words: out[w] = word w of r0..r3 (the row-group layouts' repacks) */
AE_INLINE void ae_transpose32_4x4(v128 r0, v128 r1, v128 r2, v128 r3, v128 out[4]) {
  const v128 t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7);
  const v128 t2 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
  out[0] = wasm_i64x2_shuffle(t0, t2, 0, 2); out[1] = wasm_i64x2_shuffle(t0, t2, 1, 3);
  out[2] = wasm_i64x2_shuffle(t1, t3, 0, 2); out[3] = wasm_i64x2_shuffle(t1, t3, 1, 3);
}
/* The 4 f16 at p (a row group's block scales, finite) as f32 times 2^-112, exactly: the half's bits moved into a
 * float's (the row-group kernels multiply by the activation scale times 2^112, or by 2^112) */
AE_INLINE v128 ae_h4_scaled(const void *p) {
  return wasm_v128_and(wasm_i32x4_shl(wasm_i32x4_load16x4(p), 13), wasm_i32x4_const_splat((int32_t)0x8fffffffu));
}
/* The 4 f16 at p as f32, exactly, with no subnormal float operand (ae_h2f_exact on the halves moved to the top of
 * their i32 lanes): a subnormal half (below 2^-14, as the d of real q5_K / q6_K super-blocks often is) would be a
 * subnormal float times 2^112 in ae_h4_scaled's use, and x86 takes a microcode assist for a subnormal multiply operand
 * (the q6_K R4 matvec ran 0.72x with every d subnormal: docs/PERFORMANCE.md "Session 24"). ~12 operations against 3:
 * for the k-quants' per-record scales (one conversion per 256 columns). */
AE_INLINE v128 ae_h4_f32(const void *p) { return ae_h2f_exact(wasm_i32x4_shl(wasm_i32x4_load16x4(p), 16)); }
/* AE_Q6_K_X (kernels.h): a group's 64 values from its 3 vectors at g: u[i] = the values 16i .. 16i + 15 (i < 3: the low 6
 * bits; u[3]: the top 2 bits of the three, as bits 0-1, 2-3, 4-5; the u16 shifts after the masks move no bit across
 * bytes) */
/* q5_K's 256 values of a file-layout block (0..31, one per byte): q[n] = values 16n .. 16n + 15 (the AE_Q5_K_X and
 * AE_Q5_K_R4 repacks). The 5th bit of value 32j + l is bit j of qh[l]: moved to bit 4 of both bytes of an i16 lane. */
AE_INLINE v128 ae_q5k_hbits(v128 h, int j) {
  return wasm_v128_and(j <= 4 ? wasm_i16x8_shl(h, 4 - j) : wasm_u16x8_shr(h, j - 4), wasm_i16x8_splat(0x1010));
}
AE_INLINE void ae_q5k_values(const uint8_t *blk, v128 q[16]) {
  const v128 f = wasm_i8x16_splat(0x0f);
  const v128 h0 = wasm_v128_load(blk + 16), h1 = wasm_v128_load(blk + 32);
  for (int g = 0; g < 4; g++) {
    const v128 v0 = wasm_v128_load(blk + 48 + 32 * g), v1 = wasm_v128_load(blk + 48 + 32 * g + 16);
    q[4 * g] = wasm_v128_or(wasm_v128_and(v0, f), ae_q5k_hbits(h0, 2 * g));
    q[4 * g + 1] = wasm_v128_or(wasm_v128_and(v1, f), ae_q5k_hbits(h1, 2 * g));
    q[4 * g + 2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v0, 4), f), ae_q5k_hbits(h0, 2 * g + 1));
    q[4 * g + 3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v1, 4), f), ae_q5k_hbits(h1, 2 * g + 1));
  }
}
/* AE_Q5_K_X's packing of 8 value vectors u[0..7] into 80 bytes at o: V_i = u[i] | (u[4+i] & 7) << 5, V_4 = sum_i
 * ((u[4+i] >> 3) & 3) << 2i */
AE_INLINE void ae_q5x_pack(const v128 u[8], uint8_t *o) {
  const v128 m7 = wasm_i8x16_splat(0x07), m18 = wasm_i8x16_splat(0x18);
  for (int i = 0; i < 4; i++) wasm_v128_store(o + 16 * i, wasm_v128_or(u[i], wasm_i16x8_shl(wasm_v128_and(u[4 + i], m7), 5)));
  const v128 t0 = wasm_u16x8_shr(wasm_v128_and(u[4], m18), 3), t1 = wasm_u16x8_shr(wasm_v128_and(u[5], m18), 1);
  const v128 t2 = wasm_i16x8_shl(wasm_v128_and(u[6], m18), 1), t3 = wasm_i16x8_shl(wasm_v128_and(u[7], m18), 3);
  wasm_v128_store(o + 64, wasm_v128_or(wasm_v128_or(t0, t1), wasm_v128_or(t2, t3)));
}
AE_INLINE void ae_q6x_decode(const uint8_t *g, v128 u[4]) {
  const v128 m3f = wasm_i8x16_splat(0x3f), mc0 = wasm_i8x16_splat((int8_t)0xc0);
  const v128 v0 = wasm_v128_load(g), v1 = wasm_v128_load(g + 16), v2 = wasm_v128_load(g + 32);
  u[0] = wasm_v128_and(v0, m3f); u[1] = wasm_v128_and(v1, m3f); u[2] = wasm_v128_and(v2, m3f);
  u[3] = wasm_v128_or(wasm_v128_or(wasm_u16x8_shr(wasm_v128_and(v0, mc0), 6), wasm_u16x8_shr(wasm_v128_and(v1, mc0), 4)),
                      wasm_u16x8_shr(wasm_v128_and(v2, mc0), 2));
}
/* q6_K sub-block scales sign-extended to i16 (sc_lo = scales 0..7, sc_hi = 8..15) -> i16 pairs (sc_c, sc_c) in
 * the i32 lanes of scp[c >> 2]: ae_lane_splat32(scp[c >> 2], c) is sc_c in all 8 i16 lanes. */
AE_INLINE void ae_q6_scale_pairs(v128 sc_lo, v128 sc_hi, v128 scp[4]) {
  scp[0] = wasm_i16x8_shuffle(sc_lo, sc_lo, 0, 0, 1, 1, 2, 2, 3, 3);
  scp[1] = wasm_i16x8_shuffle(sc_lo, sc_lo, 4, 4, 5, 5, 6, 6, 7, 7);
  scp[2] = wasm_i16x8_shuffle(sc_hi, sc_hi, 0, 0, 1, 1, 2, 2, 3, 3);
  scp[3] = wasm_i16x8_shuffle(sc_hi, sc_hi, 4, 4, 5, 5, 6, 6, 7, 7);
}

#endif
