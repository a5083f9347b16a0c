/* iq4_nl weights x q8_0 activations, plus iq4_nl dequantise (quantise: the reference quantiser). Block layout and the
 * reference's arithmetic: src/kernels/ref/iq4_nl_ref.c. The codes become their values by one i8x16.swizzle against the
 * 16-value table (codes 0..15: always in range); the values are signed, as the activations are, so the products go
 * through i16 (extend, i32x4.dot_i16x8: exact) in both builds. Per block: sumi exact, then per row
 * acc += (float)sumi * (d_w d_x), the reference's sequence. The row kernel takes 4 rows at a time (one from each
 * quarter of its range; the activation block widened once for the 4), their float steps in the lanes. The prefill GEMM
 * (kind WM): gemm_iq4_simd128.c. */
#include "iq4_simd128.h"

void ae_from_float_iq4_nl_simd128(const float *x, void *y, int n) { ae_from_float_iq4_nl_ref(x, y, n); }

/* o[0..16) = dl * the 16 values of v (i8), in the references' order (scale times value) */
AE_INLINE void iq4_store16(float *o, v128 dl, v128 v) {
  const v128 l = wasm_i16x8_extend_low_i8x16(v), u = wasm_i16x8_extend_high_i8x16(v);
  ae_store(o, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(l))));
  ae_store(o + 4, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(l))));
  ae_store(o + 8, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(u))));
  ae_store(o + 12, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(u))));
}

void ae_to_float_iq4_nl_simd128(const void *x, float *y, int n) {
  const ae_block_iq4_nl *b = (const ae_block_iq4_nl *)x;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < n / 32; i++) {
    v128 v[2];
    iq4_values(b[i].qs, lut, m, &v[0], &v[1]);
    const v128 d = wasm_f32x4_splat(ae_h2f_s(b[i].d));
    for (int h = 0; h < 2; h++) iq4_store16(y + 32 * i + 16 * h, d, v[h]);
  }
}

/* One activation block of 32 (a q8_0 block, or a sub-block of q8_K), prepared for the row kernel.
 * Plain build: widened to i16 (w[0..3]: elements 0-7, 8-15, 16-23, 24-31) once for the 4 rows of a pass, dotted with
 * the widened values. Relaxed build: |x| (a[0], a[1]: elements 0-15, 16-31), the sign masks (s[h]: 0xff where x < 0)
 * and c = sum(|x| over x < 0), prepared once per call for a column chunk (iq4_prep_chunk): the values take x's sign by
 * a xor (v ^ s = -v - 1 where x < 0) and ae_rdot16 multiplies them by |x| (the 7-bit operand: the activation
 * quantisers give |x| <= 127; pair sums |.| <= 2 x 128 x 127, exact and host-independent); sum((v ^ s) |x|) + c =
 * sum(v x), as the q8_0 R4 kernels (dot_q8_0_r4_simd128.c). 2 operations per 16 values and row where the i16 products
 * take 5. */
#if AE_RELAXED
typedef struct { v128 a[2], s[2]; int32_t c; float dx; int32_t pad[2]; } iq4x;   /* dx: iq4_nl's d_x (q8_0) */
AE_INLINE void iq4x_prep(const int8_t *qs, iq4x *X) {
  const v128 lo = ae_load(qs), hi = ae_load(qs + 16), z = wasm_i8x16_splat(0);   /* x < 0 by a compare (one pcmpgtb) */
  X->a[0] = wasm_i8x16_abs(lo); X->s[0] = wasm_i8x16_lt(lo, z);
  X->a[1] = wasm_i8x16_abs(hi); X->s[1] = wasm_i8x16_lt(hi, z);
  const v128 n = wasm_i16x8_add(wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(X->a[0], X->s[0])), wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(X->a[1], X->s[1])));
  X->c = ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(n));
}
/* i32 lanes summing to sum((v ^ s) |x|) times sc (the i16 scale in every lane; iq4_nl: ones) over the 32; fused: 0 the i16
 * dots, 1 (iq4_nl) / 2 (iq4_xs) the i32 dots */
AE_INLINE v128 iq4x_dot(const uint8_t *qs, const iq4x *X, v128 lut, v128 m, v128 sc, const int fused) {
  v128 lo, hi;
  iq4_values(qs, lut, m, &lo, &hi);
  if (fused) {   /* kernels.h ae_fused_dot: the i32 relaxed dot; sc (an i16 splat; iq4_nl: ones) as i32 lanes by a multiply */
    const v128 d = ae_rdot(wasm_v128_xor(hi, X->s[1]), X->a[1], ae_rdot(wasm_v128_xor(lo, X->s[0]), X->a[0], wasm_i32x4_splat(0)));
    return fused == 1 ? d : wasm_i32x4_mul(d, wasm_i32x4_shr(wasm_i32x4_shl(sc, 16), 16));   /* 1: iq4_nl, 2: iq4_xs */
  }
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_rdot16(wasm_v128_xor(lo, X->s[0]), X->a[0]), sc),
                        wasm_i32x4_dot_i16x8(ae_rdot16(wasm_v128_xor(hi, X->s[1]), X->a[1]), sc));
}
#else
typedef struct { v128 w[4]; } iq4x;
AE_INLINE void iq4x_prep(const int8_t *qs, iq4x *X) {
  const v128 lo = ae_load(qs), hi = ae_load(qs + 16);
  X->w[0] = wasm_i16x8_extend_low_i8x16(lo); X->w[1] = wasm_i16x8_extend_high_i8x16(lo);
  X->w[2] = wasm_i16x8_extend_low_i8x16(hi); X->w[3] = wasm_i16x8_extend_high_i8x16(hi);
}
/* i32 lanes summing to sc sum(v x) over the 32: the i16 products summed, then times sc in i32 (sc: the i32 scale in
 * every lane; iq4_nl: sc1, none) */
AE_INLINE v128 iq4x_dot(const uint8_t *qs, const iq4x *X, v128 lut, v128 m, v128 sc, int sc1) {
  v128 lo, hi;
  iq4_values(qs, lut, m, &lo, &hi);
  const v128 d = wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(lo), X->w[0]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(lo), X->w[1])),
                                wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(hi), X->w[2]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(hi), X->w[3])));
  return sc1 ? d : wasm_i32x4_mul(d, sc);
}
#endif


/* ---- iq4_xs (src/kernels/ref/iq4_xs_ref.c): iq4_nl's codes and values in 8 sub-blocks of 32 with 6-bit scales, q8_K
 * activations. Per sub-block the products as iq4_nl's, times the sub-block's scale, summed exactly. */
void ae_from_float_iq4_xs_simd128(const float *x, void *y, int n) { ae_from_float_iq4_xs_ref(x, y, n); }

void ae_to_float_iq4_xs_simd128(const void *x, float *y, int n) {
  const ae_block_iq4_xs *b = (const ae_block_iq4_xs *)x;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float d = ae_h2f_s(b[i].d);
    for (int ib = 0; ib < 8; ib++) {
      v128 v[2];
      iq4_values(b[i].qs + 16 * ib, lut, m, &v[0], &v[1]);
      const v128 dl = wasm_f32x4_splat(d * (float)iq4xs_scale(&b[i], ib));   /* the reference's (d * ls) * value */
      for (int h = 0; h < 2; h++) iq4_store16(y + i * AE_QK_K + 32 * ib + 16 * h, dl, v[h]);
    }
  }
}

/* iq4_xs: i32 lanes summing to the block's sumi for 4 rows (acc[k]). Plain: each activation sub-block prepared once for
 * the 4 rows; relaxed: X = the super-block's 8 prepared sub-blocks, and sum_ib ls_ib c_ib (the sign moves' offsets) by
 * one i32x4.dot_i16x8 of the row's 8 scales with the 8 c (cv). */
AE_INLINE void iq4xs_block4(const ae_block_iq4_xs *const w[4], const void *xa, v128 lut, v128 m, v128 acc[4], const int fused) {
  volatile v128 sink[4];
  _Alignas(16) int16_t scb[4][8];
  for (int k = 0; k < 4; k++) wasm_v128_store(scb[k], iq4xs_scales8(w[k]));
  int16_t (*ls)[8] = scb;
  __asm__("" : "+r"(ls) : : "memory");   /* read back: one broadcast load per use */
#if AE_RELAXED
  const iq4x *X = (const iq4x *)xa;
  const v128 cv = wasm_i16x8_make((int16_t)X[0].c, (int16_t)X[1].c, (int16_t)X[2].c, (int16_t)X[3].c, (int16_t)X[4].c, (int16_t)X[5].c,
                                  (int16_t)X[6].c, (int16_t)X[7].c);   /* c <= 32 x 127: fits i16 */
  for (int k = 0; k < 4; k++) acc[k] = wasm_i32x4_dot_i16x8(ae_load(ls[k]), cv);
  for (int ib = 0; ib < 8; ib++) {
    for (int k = 0; k < 4; k++) acc[k] = wasm_i32x4_add(acc[k], iq4x_dot(w[k]->qs + 16 * ib, &X[ib], lut, m, wasm_v128_load16_splat(&ls[k][ib]), fused ? 2 : 0));
    sink[0] = acc[0]; sink[1] = acc[1]; sink[2] = acc[2]; sink[3] = acc[3];
  }
#else
  (void)fused;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xa;
  acc[0] = acc[1] = acc[2] = acc[3] = wasm_i32x4_splat(0);
  for (int ib = 0; ib < 8; ib++) {
    iq4x X;
    iq4x_prep(x->qs + 32 * ib, &X);
    for (int k = 0; k < 4; k++) acc[k] = wasm_i32x4_add(acc[k], iq4x_dot(w[k]->qs + 16 * ib, &X, lut, m, wasm_i32x4_splat(ls[k][ib]), 0));
    sink[0] = acc[0]; sink[1] = acc[1]; sink[2] = acc[2]; sink[3] = acc[3];
  }
#endif
}

/* 4 rows (row[k]) x blocks [0, n), the float steps in the lanes from acc: acc = acc + (float)sumi * (d_w d_x) per block,
 * the reference's sequence (the product of two floats does not depend on their order). The activations: plain, the q8_0
 * / q8_K blocks at xq; relaxed, the chunk's prepared blocks at xp (iq4_nl: one iq4x per block; iq4_xs: 8 per
 * super-block) and, for iq4_xs, its d_x at dxs. The 4 rows' f16 d (the first field of both blocks) converted together:
 * exact (ae_h2f_exact), or (exact == 0) by moving the half's bits, d_w 2^-112 (ae_bscale_fast's arithmetic: exact for
 * finite halves) against d_x 2^112 (exact: iq4_nl's q8_0 d_x is a half, |d_x| <= 65504; iq4_xs, one d per 256 values
 * against a float d_x, always converts exactly), the same products; then the return value says whether a d was inf /
 * nan, and the caller redoes the group exactly. */
AE_INLINE int iq4_group(const uint8_t *const row[4], int n, const void *xq, const iq4x *xp, const float *dxs, int xs, v128 lut,
                        v128 m, v128 one, int exact, v128 *accp, const int fused) {
  const size_t bs = xs ? sizeof(ae_block_iq4_xs) : sizeof(ae_block_iq4_nl);
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
#if AE_RELAXED
  (void)xq;
#else
  (void)xp; (void)dxs;
#endif
  for (int b = 0; b < n; b++) {
    const size_t o = (size_t)b * bs;
    v128 sumi;
    float dx;
    if (xs) {
      const ae_block_iq4_xs *w4[4] = {(const void *)(row[0] + o), (const void *)(row[1] + o), (const void *)(row[2] + o), (const void *)(row[3] + o)};
      v128 a[4];
#if AE_RELAXED
      iq4xs_block4(w4, xp + 8 * b, lut, m, a, fused);
      dx = dxs[b];
#else
      iq4xs_block4(w4, (const ae_block_q8_K *)xq + b, lut, m, a, 0);
      dx = ((const ae_block_q8_K *)xq)[b].d;
#endif
      sumi = ae_reduce4_i32(a[0], a[1], a[2], a[3]);
    } else {
#if AE_RELAXED
      const iq4x *X = xp + b;
      const int f = fused ? 1 : 0;
      sumi = wasm_i32x4_add(ae_reduce4_i32(iq4x_dot(row[0] + o + 2, X, lut, m, one, f), iq4x_dot(row[1] + o + 2, X, lut, m, one, f),
                                           iq4x_dot(row[2] + o + 2, X, lut, m, one, f), iq4x_dot(row[3] + o + 2, X, lut, m, one, f)),
                            wasm_v128_load32_splat(&X->c));
      dx = X->dx;
#else
      const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq + b;
      iq4x X;
      iq4x_prep(x->qs, &X);
      sumi = ae_reduce4_i32(iq4x_dot(row[0] + o + 2, &X, lut, m, one, 1), iq4x_dot(row[1] + o + 2, &X, lut, m, one, 1),
                            iq4x_dot(row[2] + o + 2, &X, lut, m, one, 1), iq4x_dot(row[3] + o + 2, &X, lut, m, one, 1));
      dx = ae_h2f_s(x->d);
#endif
    }
    v128 h = wasm_i32x4_splat(0);   /* the 4 halves in i32 lanes as (h << 16) */
    h = wasm_v128_load16_lane(row[0] + o, h, 1); h = wasm_v128_load16_lane(row[1] + o, h, 3);
    h = wasm_v128_load16_lane(row[2] + o, h, 5); h = wasm_v128_load16_lane(row[3] + o, h, 7);
    v128 dd;
    if (exact || xs) dd = wasm_f32x4_mul(ae_h2f_exact(h), wasm_f32x4_splat(dx));   /* iq4_xs: a float d_x, unbounded */
    else {
      bad = ae_h16_infnan_acc(bad, h);
      dd = wasm_f32x4_mul(ae_h2f_raw(h), wasm_f32x4_splat(dx * 0x1p112f));
    }
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), dd));
  }
  *accp = acc;
  return exact ? 0 : ae_h16_has_infnan(bad);
}

/* The row kernel of both dtypes (xs: iq4_xs, a constant after inlining): rows in groups of 4, one from each quarter of
 * the range (ae_rows4), iq4_group per group, so any row range and grouping gives the reference's bits. The relaxed
 * build prepares the activations once per call for column chunks of IQ4_CHUNK blocks of 32 (a whole row up to 16384
 * columns; longer rows: the partial sums cross chunks through y, exactly). */
#define IQ4_CHUNK 512
AE_INLINE void iq4_matvec(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int xs, const int fused) {
  const int nb = ncols / (xs ? AE_QK_K : 32);
  const size_t bs = xs ? sizeof(ae_block_iq4_xs) : sizeof(ae_block_iq4_nl), rs = (size_t)nb * bs;
  const int q = (r1 - r0) / 4, tail = (r1 - r0) - 4 * q;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  const v128 one = ae_i16_ones();
#if AE_RELAXED
  iq4x xp[IQ4_CHUNK];
  float dxs[IQ4_CHUNK / 8];
  const int cb = IQ4_CHUNK / (xs ? 8 : 1);
#else
  iq4x *xp = 0;
  float *dxs = 0;
  const int cb = nb;
#endif
  for (int c0 = 0; c0 < nb; c0 += cb) {
    const int n = nb - c0 < cb ? nb - c0 : cb;
#if AE_RELAXED
    for (int b = 0; b < n; b++) {
      if (xs) {
        const ae_block_q8_K *x = (const ae_block_q8_K *)xq + c0 + b;
        for (int ib = 0; ib < 8; ib++) iq4x_prep(x->qs + 32 * ib, &xp[8 * b + ib]);
        dxs[b] = x->d;
      } else {
        const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq + c0 + b;
        iq4x_prep(x->qs, &xp[b]);
        xp[b].dx = ae_h2f_s(x->d);
      }
    }
#endif
    for (int i = 0; i < q + tail; i++) {
      int rr[4];
      const int nr = ae_rows4(i, q, r0, rr);
      const uint8_t *row[4];
      for (int k = 0; k < 4; k++) row[k] = (const uint8_t *)W + (size_t)rr[k] * rs + (size_t)c0 * bs;
      const v128 a0 = c0 ? wasm_f32x4_make(y[rr[0]], y[rr[1]], y[rr[2]], y[rr[3]]) : wasm_f32x4_splat(0.0f);
      v128 acc = a0;
      if (iq4_group(row, n, xq, xp, dxs, xs, lut, m, one, 0, &acc, fused)) { acc = a0; iq4_group(row, n, xq, xp, dxs, xs, lut, m, one, 1, &acc, fused); }
      ae_store_rows4(y, rr, nr, acc);
    }
  }
}
/* relaxed build: the fused-dot form where kernels.h ae_fused_dot says so (the same bits) */
#if AE_RELAXED
#define IQ4_FUSED (ae_fused_dot & AE_FUSED_TILES)
#else
#define IQ4_FUSED 0
#endif
void ae_matvec_rows_iq4_nl_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (IQ4_FUSED) iq4_matvec(W, ncols, xq, y, r0, r1, 0, 1); else iq4_matvec(W, ncols, xq, y, r0, r1, 0, 0);
}
void ae_matvec_rows_iq4_xs_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (IQ4_FUSED) iq4_matvec(W, ncols, xq, y, r0, r1, 1, 1); else iq4_matvec(W, ncols, xq, y, r0, r1, 1, 0);
}
/* one row: the row kernel's arithmetic (the row in all 4 lanes), the references' bits */
void ae_vec_dot_iq4_nl_simd128(int n, float *s, const void *w, const void *x) { iq4_matvec(w, n, x, s, 0, 1, 0, 0); }
void ae_vec_dot_iq4_xs_simd128(int n, float *s, const void *w, const void *x) { iq4_matvec(w, n, x, s, 0, 1, 1, 0); }
