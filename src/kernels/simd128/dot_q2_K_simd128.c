/* q2_K weights x q8_K activations, plus q2_K dequantise (quantise: the reference quantiser). Block layout and the
 * reference's arithmetic: src/kernels/ref/q2_K_ref.c. Per super-block, exact integers:
 *   sumi_q = sum_s sc_s sum_{e in s} q_e x_e,  sumi_m = sum_s m_s bsums[s]
 * then in float acc + ((d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m): exactly ae_vec_dot_q2_K_ref, in either
 * build. q of 16 elements (one sub-block) from q3_K's low-bit plane: the 2-bit field j of 16 qs bytes (u16 shift, & 3).
 * Relaxed build: the sub-block's 16 products in 8 i16 pair sums (ae_rdot16: q in 0..3 is the 7-bit operand, exact and
 * host-independent), scaled into i32 lanes by one i32x4.dot_i16x8 against sc_s. Plain build: even / odd i16 lanes of x
 * and q, two i32x4.dot_i16x8, times sc_s. The row kernel takes 4 rows at a time (one from each quarter of its range),
 * each activation vector loaded once for the 4 and their float steps in the lanes. The prefill GEMM (kind WM):
 * gemm_k_simd128.c. */
#include "q3k_simd128.h"

void ae_from_float_q2_K_simd128(const float *x, void *y, int n) { ae_from_float_q2_K_ref(x, y, n); }

/* q (0..3) of the 16 elements 128 n + 32 j + 16 half + (0..15) from Q = qs[32 n + 16 half ..]; m3 = bytes 3 */
AE_INLINE v128 q2k_q(v128 Q, int j, v128 m3) { return wasm_v128_and(wasm_u16x8_shr(Q, 2 * j), m3); }
/* bytes 3 and 15, loaded through an opaque pointer (V8 would rebuild a v128.const at every use) */
AE_INLINE void q2k_masks(v128 *m3, v128 *m15) {
  static const uint8_t k[32] __attribute__((aligned(16))) = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
                                                             15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15};
  const uint8_t *p = k;
  __asm__("" : "+r"(p));
  *m3 = ae_load(p); *m15 = ae_load(p + 16);
}

void ae_to_float_q2_K_simd128(const void *x, float *y, int n) {
  const ae_block_q2_K *b = (const ae_block_q2_K *)x;
  v128 m3, m15;
  q2k_masks(&m3, &m15);
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float d = ae_h2f_s(b[i].d), dmin = ae_h2f_s(b[i].dmin);
    for (int nn = 0; nn < 2; nn++)
      for (int half = 0; half < 2; half++) {
        const v128 Q = ae_load(b[i].qs + 32 * nn + 16 * half);
        for (int j = 0; j < 4; j++) {
          const int s = 8 * nn + 2 * j + half;
          const v128 dl = wasm_f32x4_splat(d * (float)(b[i].scales[s] & 0x0f)), ml = wasm_f32x4_splat(dmin * (float)(b[i].scales[s] >> 4));
          const v128 q = q2k_q(Q, j, m3), lo = wasm_u16x8_extend_low_u8x16(q), hi = wasm_u16x8_extend_high_u8x16(q);
          float *dst = y + i * AE_QK_K + 16 * s;   /* the reference's dl * q - ml */
          ae_store(dst, wasm_f32x4_sub(wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_u32x4_extend_low_u16x8(lo))), ml));
          ae_store(dst + 4, wasm_f32x4_sub(wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_u32x4_extend_high_u16x8(lo))), ml));
          ae_store(dst + 8, wasm_f32x4_sub(wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_u32x4_extend_low_u16x8(hi))), ml));
          ae_store(dst + 12, wasm_f32x4_sub(wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_u32x4_extend_high_u16x8(hi))), ml));
        }
      }
  }
}

/* sumi_q (*q) and sumi_m (*m) of super-block b of 4 rows (lane k: row wb[k]), each activation vector loaded once for
 * the 4 */
AE_INLINE void q2k_block4(const ae_block_q2_K *const wb[4], const ae_block_q8_K *x, v128 m3, v128 m15, v128 *q, v128 *m) {
  _Alignas(16) int16_t scb[4][16];
  const ae_block_q2_K *w[4];
  const v128 b0 = ae_load(x->bsums), b1 = ae_load(x->bsums + 8);
  v128 mn[4];
  for (int k = 0; k < 4; k++) {
    /* opaque block pointers: every load of the block takes a constant offset from one register */
    const ae_block_q2_K *a = wb[k];
    __asm__("" : "+r"(a));
    w[k] = a;
    const v128 s = ae_load(a->scales), sc = wasm_v128_and(s, m15), mv = wasm_u16x8_shr(wasm_v128_andnot(s, m15), 4);
    wasm_v128_store(scb[k], wasm_u16x8_extend_low_u8x16(sc));
    wasm_v128_store(scb[k] + 8, wasm_u16x8_extend_high_u8x16(sc));
    mn[k] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_u16x8_extend_low_u8x16(mv), b0), wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(mv), b1));
  }
  *m = ae_reduce4_i32(mn[0], mn[1], mn[2], mn[3]);
  /* read back from memory (one broadcast load per use), not shuffled out of registers */
  int16_t (*sc)[16] = scb;
  __asm__("" : "+r"(sc) : : "memory");
  v128 acc[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
  volatile v128 sink[4];   /* stored after each sub-block: keeps the compilers from hoisting every load (spills) */
  Q3K_SUBBLOCKS4(x, sc, acc, sink, q2k_q(ae_load(w[k]->qs + 32 * nn + 16 * half), j, m3));
  *q = ae_reduce4_i32(acc[0], acc[1], acc[2], acc[3]);
}

/* The row kernel: rows in groups of 4, one from each quarter of the range (ae_rows4), each row left over in all 4
 * lanes; the 4 rows' float steps in the lanes: per lane the reference's sequence, so any row range and grouping gives
 * its bits. */
AE_INLINE void q2k_matvec(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * sizeof(ae_block_q2_K);
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  const int q = (r1 - r0) / 4, tail = (r1 - r0) - 4 * q;
  v128 m3, m15;
  q2k_masks(&m3, &m15);
  for (int i = 0; i < q + tail; i++) {
    int rr[4];
    const int nr = ae_rows4(i, q, r0, rr);
    const ae_block_q2_K *row[4];
    for (int k = 0; k < 4; k++) row[k] = (const ae_block_q2_K *)((const uint8_t *)W + (size_t)rr[k] * rs);
    v128 acc = wasm_f32x4_splat(0.0f);
    for (int b = 0; b < nb; b++) {
      const ae_block_q2_K *w[4] = {row[0] + b, row[1] + b, row[2] + b, row[3] + b};
      v128 sq, sm;
      q2k_block4(w, x + b, m3, m15, &sq, &sm);
      const v128 dx = wasm_f32x4_splat(x[b].d);
      const v128 dall = wasm_f32x4_mul(ae_gather4_h2f(&w[0]->d, &w[1]->d, &w[2]->d, &w[3]->d), dx);
      const v128 dmin = wasm_f32x4_mul(ae_gather4_h2f(&w[0]->dmin, &w[1]->dmin, &w[2]->dmin, &w[3]->dmin), dx);
      acc = wasm_f32x4_add(acc, wasm_f32x4_sub(wasm_f32x4_mul(dall, wasm_f32x4_convert_i32x4(sq)), wasm_f32x4_mul(dmin, wasm_f32x4_convert_i32x4(sm))));
    }
    ae_store_rows4(y, rr, nr, acc);
  }
}
void ae_matvec_rows_q2_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { q2k_matvec(W, ncols, xq, y, r0, r1); }
/* one row: the row kernel's arithmetic (the row in all 4 lanes), the reference's bits */
void ae_vec_dot_q2_K_simd128(int n, float *s, const void *w, const void *x) { q2k_matvec(w, n, x, s, 0, 1); }
