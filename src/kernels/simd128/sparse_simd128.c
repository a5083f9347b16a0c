/* SIMD128 kernels of the ffn-saturated module (declared in src/kernels/kernels.h, scalar references in
 * src/kernels/ref/sparse_ref.c): the neuron-major down (ae_axpy_rows) and dot products of gathered rows
 * (ae_gather_dot). */
#include "kernels/kernels.h"
#include "kernels/simd128/simd128_util.h"

/* ---- ae_axpy_rows: y[d0 .. d1) += sum_k coef[k] * row(idx[k])[d0 .. d1) (the neuron-major down) ---------
 * Rows are streamed whole (contiguous: what hardware prefetchers follow), four neurons per pass over y
 * (which stays in L1). Per output element the operations are y = y + coef_k * w_k in k order
 * (q8_0 / q4_0: w_k = d_k * q as (coef_k d_k) * q), so the result does not depend on the column split
 * or on how neurons are grouped. d0, d1 are multiples of 32. */
#define FMA(acc, s, v) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(s, v))

/* i32 lanes (|v| < 2^22) -> f32 by the magic-number trick: LLVM turns extend + convert into scalar
 * code on wasm, which this avoids */
AE_INLINE v128 i2f(v128 v) {
  return wasm_f32x4_sub(wasm_i32x4_add(v, wasm_i32x4_const_splat(0x4B400000)), wasm_f32x4_const_splat(12582912.0f));
}
/* 16 i8 -> 4 f32x4 in order */
AE_INLINE void i8_to_f32(v128 q, v128 *f) {
  const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
  f[0] = i2f(wasm_i32x4_extend_low_i16x8(lo)); f[1] = i2f(wasm_i32x4_extend_high_i16x8(lo));
  f[2] = i2f(wasm_i32x4_extend_low_i16x8(hi)); f[3] = i2f(wasm_i32x4_extend_high_i16x8(hi));
}

void ae_axpy_rows_f32_simd128(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  int k = 0;
  for (; k + 4 <= cnt; k += 4) {
    const float *w0 = (const float *)(base + (size_t)idx[k] * rs), *w1 = (const float *)(base + (size_t)idx[k + 1] * rs);
    const float *w2 = (const float *)(base + (size_t)idx[k + 2] * rs), *w3 = (const float *)(base + (size_t)idx[k + 3] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]), s1 = wasm_f32x4_splat(coef[k + 1]), s2 = wasm_f32x4_splat(coef[k + 2]), s3 = wasm_f32x4_splat(coef[k + 3]);
    for (int c = d0; c < d1; c += 4) {
      v128 v = ae_load(y + c);
      FMA(v, s0, ae_load(w0 + c)); FMA(v, s1, ae_load(w1 + c)); FMA(v, s2, ae_load(w2 + c)); FMA(v, s3, ae_load(w3 + c));
      ae_store(y + c, v);
    }
  }
  for (; k < cnt; k++) {
    const float *w0 = (const float *)(base + (size_t)idx[k] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]);
    for (int c = d0; c < d1; c += 4) { v128 v = ae_load(y + c); FMA(v, s0, ae_load(w0 + c)); ae_store(y + c, v); }
  }
}

AE_INLINE void h8(const ae_fp16 *p, v128 *a, v128 *b) {
  const v128 h = ae_load(p);
  *a = ae_h2f_fast(ae_h16_lo(h)); *b = ae_h2f_fast(ae_h16_hi(h));
}

/* f16 rows: the host makes them from finite values only, where ae_h2f_fast is exact */
void ae_axpy_rows_f16_simd128(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  int k = 0;
  for (; k + 4 <= cnt; k += 4) {
    const ae_fp16 *w0 = (const ae_fp16 *)(base + (size_t)idx[k] * rs), *w1 = (const ae_fp16 *)(base + (size_t)idx[k + 1] * rs);
    const ae_fp16 *w2 = (const ae_fp16 *)(base + (size_t)idx[k + 2] * rs), *w3 = (const ae_fp16 *)(base + (size_t)idx[k + 3] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]), s1 = wasm_f32x4_splat(coef[k + 1]), s2 = wasm_f32x4_splat(coef[k + 2]), s3 = wasm_f32x4_splat(coef[k + 3]);
    for (int c = d0; c < d1; c += 8) {
      v128 v0 = ae_load(y + c), v1 = ae_load(y + c + 4), a, b;
      h8(w0 + c, &a, &b); FMA(v0, s0, a); FMA(v1, s0, b);
      h8(w1 + c, &a, &b); FMA(v0, s1, a); FMA(v1, s1, b);
      h8(w2 + c, &a, &b); FMA(v0, s2, a); FMA(v1, s2, b);
      h8(w3 + c, &a, &b); FMA(v0, s3, a); FMA(v1, s3, b);
      ae_store(y + c, v0); ae_store(y + c + 4, v1);
    }
  }
  for (; k < cnt; k++) {
    const ae_fp16 *w0 = (const ae_fp16 *)(base + (size_t)idx[k] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]);
    for (int c = d0; c < d1; c += 8) {
      v128 v0 = ae_load(y + c), v1 = ae_load(y + c + 4), a, b;
      h8(w0 + c, &a, &b); FMA(v0, s0, a); FMA(v1, s0, b);
      ae_store(y + c, v0); ae_store(y + c + 4, v1);
    }
  }
}

/* one 32-value block: y[0..32) += s * q[0..32) (q as 2 x 16 i8) */
AE_INLINE void blk_axpy(float *y, v128 s, v128 qa, v128 qb) {
  v128 f[4];
  i8_to_f32(qa, f);
  for (int j = 0; j < 4; j++) { v128 v = ae_load(y + 4 * j); FMA(v, s, f[j]); ae_store(y + 4 * j, v); }
  i8_to_f32(qb, f);
  for (int j = 0; j < 4; j++) { v128 v = ae_load(y + 16 + 4 * j); FMA(v, s, f[j]); ae_store(y + 16 + 4 * j, v); }
}

void ae_axpy_rows_q8_0_simd128(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  for (int k = 0; k < cnt; k++) {
    const ae_block_q8_0 *w = (const ae_block_q8_0 *)(base + (size_t)idx[k] * rs);
    for (int c = d0; c < d1; c += 32) {
      const ae_block_q8_0 *bk = w + c / 32;
      blk_axpy(y + c, wasm_f32x4_splat(coef[k] * ae_h2f_s(bk->d)), ae_load(bk->qs), ae_load(bk->qs + 16));
    }
  }
}

void ae_axpy_rows_q4_0_simd128(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  const v128 m4 = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  for (int k = 0; k < cnt; k++) {
    const ae_block_q4_0 *w = (const ae_block_q4_0 *)(base + (size_t)idx[k] * rs);
    for (int c = d0; c < d1; c += 32) {
      const ae_block_q4_0 *bk = w + c / 32;
      const v128 v = ae_load(bk->qs);
      blk_axpy(y + c, wasm_f32x4_splat(coef[k] * ae_h2f_s(bk->d)), wasm_i8x16_sub(wasm_v128_and(v, m4), eight),
               wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(v, 4), m4), eight));
    }
  }
}

/* ---- ae_gather_dot: y[k] = dot(row k, x) for rows at arbitrary addresses (q8_0 / q4_0 weights,
 * q8_0 activation), 4 rows at a time. Per row exactly the reference (ae_vec_dot_q8_0_ref /
 * ae_vec_dot_q4_0_ref): sumi exact per block, then sum += (float)sumi * (d_w * d_x) in block order,
 * which is what every row kernel of the core computes (kernels.h), so dynamic mode with threshold 0
 * gives the dense bits. The activation is prepared once per token (even / odd i16 of each byte pair). */
typedef struct { v128 e0, o0, e1, o1; } gx_blk;

static_assert(sizeof(gx_blk) == AE_GATHER_BLK_BYTES, "prepared activation block");

void ae_gather_prep_simd128(const void *xq, int nb, void *prep, float *dx) {
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  gx_blk *xs = (gx_blk *)prep;
  for (int b = 0; b < nb; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    xs[b].e0 = ae_i8_even(a); xs[b].o0 = ae_i8_odd(a);
    xs[b].e1 = ae_i8_even(c); xs[b].o1 = ae_i8_odd(c);
    dx[b] = ae_h2f_s(x[b].d);
  }
}

AE_INLINE v128 gdot_blk_q8(const ae_block_q8_0 *w, const gx_blk *x) {
  const v128 a = ae_load(w->qs), c = ae_load(w->qs + 16);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(a), x->e0), wasm_i32x4_dot_i16x8(ae_i8_odd(a), x->o0)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(c), x->e1), wasm_i32x4_dot_i16x8(ae_i8_odd(c), x->o1)));
}
AE_INLINE v128 gdot_blk_q4(const ae_block_q4_0 *w, const gx_blk *x) {
  const v128 v = ae_load(w->qs), m4 = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  const v128 lo = wasm_i8x16_sub(wasm_v128_and(v, m4), eight), hi = wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(v, 4), m4), eight);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(lo), x->e0), wasm_i32x4_dot_i16x8(ae_i8_odd(lo), x->o0)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(hi), x->e1), wasm_i32x4_dot_i16x8(ae_i8_odd(hi), x->o1)));
}

/* 4 rows (pointers), blocks [0, nb): per row acc += (float)sumi * (d_w * d_x) in block order. Scales use
 * the fast fp16 conversion (exact for finite halves); a group that meets an inf/nan scale is redone
 * with the exact one (returns 1 then). */
#define GDOT4(T, BLK, exact)                                                                            \
  do {                                                                                                  \
    const T *w0 = (const T *)p0, *w1 = (const T *)p1, *w2 = (const T *)p2, *w3 = (const T *)p3;        \
    for (int b = 0; b < nb; b++) {                                                                      \
      t4[0] = BLK(w0 + b, xs + b); t4[1] = BLK(w1 + b, xs + b); t4[2] = BLK(w2 + b, xs + b); t4[3] = BLK(w3 + b, xs + b); \
      const v128 si = ae_reduce4_i32(t4[0], t4[1], t4[2], t4[3]);                                       \
      v128 h = wasm_i32x4_const_splat(0);                                                               \
      h = wasm_v128_load16_lane(&w0[b].d, h, 1); h = wasm_v128_load16_lane(&w1[b].d, h, 3);             \
      h = wasm_v128_load16_lane(&w2[b].d, h, 5); h = wasm_v128_load16_lane(&w3[b].d, h, 7);             \
      v128 d;                                                                                           \
      if (exact) d = ae_h2f_exact(h); else { bad = ae_h16_infnan_acc(bad, h); d = ae_h2f_fast(h); }     \
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(si), wasm_f32x4_mul(d, wasm_v128_load32_splat(dx + b)))); \
    }                                                                                                   \
  } while (0)

static v128 gdot4(int t, const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3, int nb,
                  const gx_blk *xs, const float *dx) {
  v128 acc = wasm_f32x4_splat(0.0f), bad = wasm_i32x4_splat(0);
  volatile v128 t4[4];   /* the stores order V8's schedule row by row (fewer spills) */
  if (t == AE_Q8_0) GDOT4(ae_block_q8_0, gdot_blk_q8, 0); else GDOT4(ae_block_q4_0, gdot_blk_q4, 0);
  if (ae_h16_has_infnan(bad)) {
    acc = wasm_f32x4_splat(0.0f);
    if (t == AE_Q8_0) GDOT4(ae_block_q8_0, gdot_blk_q8, 1); else GDOT4(ae_block_q4_0, gdot_blk_q4, 1);
  }
  return acc;
}

/* rows[k] for k < cnt (cnt >= 1); y[k] out */
void ae_gather_dot_simd128(ae_type t, const uint8_t *const *rows, int cnt, int nb, const void *prep, const float *dx, float *y) {
  const gx_blk *xs = (const gx_blk *)prep;
  for (int k = 0; k < cnt; k += 4) {
    const int m = cnt - k < 4 ? cnt - k : 4;
    const uint8_t *p0 = rows[k], *p1 = rows[k + (m > 1)], *p2 = rows[k + (m > 2 ? 2 : 0)], *p3 = rows[k + (m > 3 ? 3 : 0)];
    float o[4];
    ae_store(o, gdot4(t, p0, p1, p2, p3, nb, xs, dx));
    for (int j = 0; j < m; j++) y[k + j] = o[j];
  }
}
