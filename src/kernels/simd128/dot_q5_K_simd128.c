/* q5_K weights x q8_K activations, plus q5_K dequantise (quantise: the reference quantiser).
 * q4_K's scheme (dot_q4_K_simd128.c) with the 5th bits: per super-block, exact integers sumi_q = sum_j sc_j
 * sum(q x) over sub-block j (q = nibble | 16 * bit j of qh[l]), sumi_m = sum_j m_j (bsums[2j] + bsums[2j+1]);
 * then in float
 *   acc += (d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m      (exactly ae_vec_dot_q5_K_ref)
 * The activation is split once per column chunk into even / odd i16 and shared by all rows; the weight
 * bytes are built in i16 lanes (nibble | 5th bit moved to bit 4 of each byte by one shift and mask). Rows
 * are computed one at a time with the reference's scalar float sequence: bit-exact for any row range. */
#include "simd128_util.h"

void ae_from_float_q5_K_simd128(const float *x, void *y, int n) { ae_from_float_q5_K_ref(x, y, n); }


void ae_to_float_q5_K_simd128(const void *x, float *y, int n) {
  const ae_block_q5_K *b = (const ae_block_q5_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    uint8_t sm[16];
    ae_store(sm, ae_k4_unpack_scales(b[i].scales));
    const float d = ae_h2f_s(b[i].d), dmin = ae_h2f_s(b[i].dmin);
    float *o = y + i * AE_QK_K;
    for (int j = 0; j < 8; j++) {
      const v128 d1 = wasm_f32x4_splat(d * (float)sm[j]), m1 = wasm_f32x4_splat(dmin * (float)sm[8 + j]);
      for (int h = 0; h < 2; h++) {
        v128 q = ae_load(b[i].qs + 32 * (j / 2) + 16 * h);
        q = (j & 1) ? wasm_u8x16_shr(q, 4) : wasm_v128_and(q, wasm_i8x16_splat(0x0f));
        const v128 hb = wasm_v128_and(wasm_u8x16_shr(ae_load(b[i].qh + 16 * h), j), wasm_i8x16_splat(1));
        q = wasm_v128_or(q, wasm_i8x16_shl(hb, 4));
        const v128 lo = wasm_u16x8_extend_low_u8x16(q), hi = wasm_u16x8_extend_high_u8x16(q);
        const v128 f[4] = {wasm_f32x4_convert_i32x4(wasm_u32x4_extend_low_u16x8(lo)),
                           wasm_f32x4_convert_i32x4(wasm_u32x4_extend_high_u16x8(lo)),
                           wasm_f32x4_convert_i32x4(wasm_u32x4_extend_low_u16x8(hi)),
                           wasm_f32x4_convert_i32x4(wasm_u32x4_extend_high_u16x8(hi))};
        for (int k = 0; k < 4; k++) ae_store(o + 32 * j + 16 * h + 4 * k, wasm_f32x4_sub(wasm_f32x4_mul(d1, f[k]), m1));
      }
    }
  }
}

/* Activation super-block split: X[2c], X[2c+1] = even / odd i16 of x[16c .. 16c+16); bsp lanes j =
 * bsums[2j] + bsums[2j+1]; d = x's scale. */
typedef struct { v128 X[32]; v128 bsp; } xk;
#define AE_QK_CHUNK 16   /* super-blocks per column chunk: 16 * 528 B = 8.3 KiB of stack */

AE_INLINE void prep(const ae_block_q8_K *x, int n, xk *xs) {
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < 16; c++) {
      const v128 v = ae_load(x[i].qs + 16 * c);
      xs[i].X[2 * c] = ae_i8_even(v);
      xs[i].X[2 * c + 1] = ae_i8_odd(v);
    }
    const v128 b0 = ae_load(x[i].bsums), b1 = ae_load(x[i].bsums + 8);
    xs[i].bsp = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14),
                               wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
  }
}

/* Bit j of both bytes of each i16 lane of h, moved to bit 4 of its byte (0x10 / 0x1000). j is a constant
 * after unrolling, so the branch folds. */
AE_INLINE v128 hbits(v128 h, int j) {
  return wasm_v128_and(j <= 4 ? wasm_i16x8_shl(h, 4 - j) : wasm_u16x8_shr(h, j - 4), wasm_i16x8_splat(0x1010));
}

/* sum over 16 weight bytes wb (5-bit values, i16 lanes b0 | b1 << 8) x (X[0] = even, X[1] = odd activations) */
AE_INLINE v128 dot16(v128 wb, const v128 *X) {
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(wb, wasm_i16x8_splat(0x00ff)), X[0]),
                        wasm_i32x4_dot_i16x8(wasm_u16x8_shr(wb, 8), X[1]));
}

/* One row's super-block: *q, *m = i32x4 lanes summing to sumi_q, sumi_m. */
AE_INLINE void row_sbv(const ae_block_q5_K *w, const xk *xs, v128 *q, v128 *m) {
  const v128 sm = ae_k4_unpack_scales(w->scales);
  const v128 sc16 = wasm_u16x8_extend_low_u8x16(sm);
  const v128 sc_lo = wasm_u32x4_extend_low_u16x8(sc16), sc_hi = wasm_u32x4_extend_high_u16x8(sc16);
  *m = wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(sm), xs->bsp);
  const v128 hq0 = ae_load(w->qh), hq1 = ae_load(w->qh + 16);
  const v128 f = wasm_i16x8_splat(0x0f0f);
  volatile v128 part[4];   /* one store per 64 elements orders V8's schedule (no spills), no chain */
#pragma clang loop unroll(full)
  for (int g = 0; g < 4; g++) {
    const v128 v0 = ae_load(w->qs + 32 * g), v1 = ae_load(w->qs + 32 * g + 16);
    const v128 *X = xs->X + 8 * g;
    const v128 a0 = wasm_v128_or(wasm_v128_and(v0, f), hbits(hq0, 2 * g));
    const v128 a1 = wasm_v128_or(wasm_v128_and(v1, f), hbits(hq1, 2 * g));
    const v128 b0 = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v0, 4), f), hbits(hq0, 2 * g + 1));
    const v128 b1 = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v1, 4), f), hbits(hq1, 2 * g + 1));
    const v128 d0 = wasm_i32x4_add(dot16(a0, X), dot16(a1, X + 2));
    const v128 d1 = wasm_i32x4_add(dot16(b0, X + 4), dot16(b1, X + 6));
    const v128 scv = g < 2 ? sc_lo : sc_hi;
    v128 s0, s1;
    if ((g & 1) == 0) { s0 = wasm_i32x4_shuffle(scv, scv, 0, 0, 0, 0); s1 = wasm_i32x4_shuffle(scv, scv, 1, 1, 1, 1); }
    else { s0 = wasm_i32x4_shuffle(scv, scv, 2, 2, 2, 2); s1 = wasm_i32x4_shuffle(scv, scv, 3, 3, 3, 3); }
    part[g] = wasm_i32x4_add(wasm_i32x4_mul(d0, s0), wasm_i32x4_mul(d1, s1));
  }
  *q = wasm_i32x4_add(wasm_i32x4_add(part[0], part[1]), wasm_i32x4_add(part[2], part[3]));
}
AE_INLINE void row_sb(const ae_block_q5_K *w, const xk *xs, int32_t *q, int32_t *m) {
  v128 qv, mv;
  row_sbv(w, xs, &qv, &mv);
  *q = ae_hsum_i32(qv);
  *m = ae_hsum_i32(mv);
}

#define K45_BLOCK ae_block_q5_K
#if AE_RELAXED
AE_INLINE void k45_hq(const ae_block_q5_K *w, v128 hq[2]) { hq[0] = ae_load(w->qh); hq[1] = ae_load(w->qh + 16); }
/* 5-bit values (nibble | 5th bit at bit 4) of sub-block 2g (v[0], v[1]) and 2g + 1 (v[2], v[3]) */
AE_INLINE void k45_vals(v128 v0, v128 v1, const v128 hq[2], int g, v128 v[4]) {
  const v128 f = wasm_i16x8_splat(0x0f0f);
  v[0] = wasm_v128_or(wasm_v128_and(v0, f), hbits(hq[0], 2 * g));
  v[1] = wasm_v128_or(wasm_v128_and(v1, f), hbits(hq[1], 2 * g));
  v[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v0, 4), f), hbits(hq[0], 2 * g + 1));
  v[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v1, 4), f), hbits(hq[1], 2 * g + 1));
}
AE_INLINE void k45_vals_w(const ae_block_q5_K *w, const v128 hq[2], int g, v128 v[4]) {
  k45_vals(ae_load(w->qs + 32 * g), ae_load(w->qs + 32 * g + 16), hq, g, v);
}
#endif
#include "k45_simd128.inc"

void ae_matvec_rows_q5_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  k45_matvec(W, ncols, xq, y, r0, r1);
}

void ae_vec_dot_q5_K_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q5_K_simd128(w, n, x, s, 0, 1);
}
