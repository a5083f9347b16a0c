/* q3_K weights x q8_K activations, plus q3_K dequantise (quantise: the reference quantiser). Block layout and the
 * reference's arithmetic: src/kernels/ref/q3_K_ref.c. Per super-block, exact integers:
 *   sumi = sum_s sc_s (sum_{e in s} u_e x_e - 4 bsums[s])      (u = value + 4 in 0..7; the -4 through the bsums)
 * then in float acc += (d_w d_x) (float)sumi: exactly ae_vec_dot_q3_K_ref, in either build.
 * u of 16 elements (one sub-block) from two planes: the 2-bit field j of 16 qs bytes (u16 shift, & 3) or-ed with bit
 * 4 n + j of 16 hmask bytes moved to bit 2 (one u16 shift by at most 5, & 4: no bit of the neighbouring byte reaches
 * bit 2). Relaxed build: the sub-block's 16 products in 8 i16 pair sums (ae_rdot16: u in 0..7 is the 7-bit operand,
 * exact and host-independent), scaled into i32 lanes by one i32x4.dot_i16x8 against sc_s. Plain build: even / odd
 * i16 lanes of x and u, two i32x4.dot_i16x8, times sc_s. The row kernel takes 4 rows at a time (one from each quarter
 * of its range), each activation vector loaded once for the 4 and their float steps in the lanes. The prefill GEMM (kind
 * WM): gemm_k_simd128.c. */
#include "q3k_simd128.h"

void ae_from_float_q3_K_simd128(const float *x, void *y, int n) { ae_from_float_q3_K_ref(x, y, n); }

void ae_to_float_q3_K_simd128(const void *x, float *y, int n) {
  const ae_block_q3_K *b = (const ae_block_q3_K *)x;
  _Alignas(16) int16_t sc[16];
  for (int i = 0; i < n / AE_QK_K; i++) {
    q3k_scales16(b[i].scales, sc);
    const float d = ae_h2f_s(b[i].d);
    const v128 H0 = ae_load(b[i].hmask), H1 = ae_load(b[i].hmask + 16), four = wasm_i32x4_splat(4);
    v128 m3, m4;
    q3k_masks(&m3, &m4);
    for (int nn = 0; nn < 2; nn++) {
      const v128 Q0 = ae_load(b[i].qs + 32 * nn), Q1 = ae_load(b[i].qs + 32 * nn + 16);
      for (int j = 0; j < 4; j++)
        for (int half = 0; half < 2; half++) {
          const v128 u = q3k_u(half ? Q1 : Q0, half ? H1 : H0, nn, j, m3, m4);
          const int s = 8 * nn + 2 * j + half;
          const v128 dl = wasm_f32x4_splat(d * (float)sc[s]);   /* the reference's (d * sc) * value */
          const v128 lo = wasm_u16x8_extend_low_u8x16(u), hi = wasm_u16x8_extend_high_u8x16(u);
          float *dst = y + i * AE_QK_K + 16 * s;
          ae_store(dst, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_low_u16x8(lo), four))));
          ae_store(dst + 4, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_high_u16x8(lo), four))));
          ae_store(dst + 8, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_low_u16x8(hi), four))));
          ae_store(dst + 12, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_high_u16x8(hi), four))));
        }
    }
  }
}


/* sumi of block b of 4 rows (lane k: row w[k]), each activation vector loaded once for the 4 */
AE_INLINE v128 q3k_block4(const ae_block_q3_K *const wb[4], const ae_block_q8_K *x, v128 m3, v128 m4) {
  _Alignas(16) int16_t scb[4][16];
  const ae_block_q3_K *w[4];
  for (int k = 0; k < 4; k++) {
    /* opaque block pointers: every load of the block takes a constant offset from one register (else clang's
     * address arithmetic leaves V8 reloading 8 precomputed addresses from the stack) */
    const ae_block_q3_K *a = wb[k];
    __asm__("" : "+r"(a));
    w[k] = a;
    q3k_scales16(w[k]->scales, scb[k]);
  }
  /* read back from memory (one broadcast load per use), not shuffled out of registers (two instructions per use) */
  int16_t (*sc)[16] = scb;
  __asm__("" : "+r"(sc) : : "memory");
  v128 acc[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
  volatile v128 sink[4];   /* stored after each sub-block: keeps the compilers from hoisting every load (spills) */
  Q3K_SUBBLOCKS4(x, sc, acc, sink, q3k_u(ae_load(w[k]->qs + 32 * nn + 16 * half), ae_load(w[k]->hmask + 16 * half), nn, j, m3, m4));
  const v128 b0 = ae_load(x->bsums), b1 = ae_load(x->bsums + 8);
  v128 off[4];
  for (int k = 0; k < 4; k++) off[k] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_load(sc[k]), b0), wasm_i32x4_dot_i16x8(ae_load(sc[k] + 8), b1));
  return wasm_i32x4_sub(ae_reduce4_i32(acc[0], acc[1], acc[2], acc[3]), wasm_i32x4_shl(ae_reduce4_i32(off[0], off[1], off[2], off[3]), 2));
}


/* ---- AE_Q3_K_X (kernels.h): the values regrouped so that 8 vectors of 16 unpack in 19 operations ---- */
/* In place, block by block: the 16 u vectors of the file layout (q3k_u), packed as kernels.h says (every shift keeps
 * a byte's bits in that byte: the values are < 8, bit 2 moves by 4 or 5 only after it is isolated). Both builds. */
void ae_repack_q3_K_x(void *W, size_t nblocks) {
  const v128 m3 = wasm_i8x16_splat(3), m4 = wasm_i8x16_splat(4);
  for (size_t b = 0; b < nblocks; b++) {
    ae_block_q3_K *w = (ae_block_q3_K *)W + b;
    const v128 H0 = ae_load(w->hmask), H1 = ae_load(w->hmask + 16);
    v128 u[16];
    for (int nn = 0; nn < 2; nn++) {
      const v128 Q0 = ae_load(w->qs + 32 * nn), Q1 = ae_load(w->qs + 32 * nn + 16);
      for (int t = 0; t < 8; t++) u[8 * nn + t] = q3k_u(t & 1 ? Q1 : Q0, t & 1 ? H1 : H0, nn, t >> 1, m3, m4);
    }
    for (int nn = 0; nn < 2; nn++) {
      const v128 *U = u + 8 * nn;
      const v128 A = wasm_v128_or(wasm_v128_or(U[0], wasm_i16x8_shl(U[1], 3)), wasm_i16x8_shl(wasm_v128_and(U[6], m3), 6));
      const v128 B = wasm_v128_or(wasm_v128_or(U[2], wasm_i16x8_shl(U[3], 3)), wasm_i16x8_shl(wasm_v128_and(U[7], m3), 6));
      const v128 C = wasm_v128_or(wasm_v128_or(U[4], wasm_i16x8_shl(U[5], 3)),
                                  wasm_v128_or(wasm_i16x8_shl(wasm_v128_and(U[6], m4), 4), wasm_i16x8_shl(wasm_v128_and(U[7], m4), 5)));
      uint8_t *g = (uint8_t *)w + 48 * nn;   /* bytes 0..95: the hmask and qs planes, all read above */
      ae_store(g, A); ae_store(g + 16, B); ae_store(g + 32, C);
    }
  }
}

#if AE_RELAXED
/* sumi of block b of 4 rows in the X layout (lane k: row wb[k]); as q3k_block4 */
AE_INLINE v128 q3kx_block4(const ae_block_q3_K *const wb[4], const ae_block_q8_K *x, v128 m7, v128 m3, v128 m4) {
  _Alignas(16) int16_t scb[4][16];
  const uint8_t *w[4];
  for (int k = 0; k < 4; k++) {
    const uint8_t *a = (const uint8_t *)wb[k];
    __asm__("" : "+r"(a));
    w[k] = a;
    q3k_scales16(a + 96, scb[k]);
  }
  int16_t (*sc)[16] = scb;
  __asm__("" : "+r"(sc) : : "memory");
  v128 acc[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
  volatile v128 sink[4];
#pragma clang loop unroll(full)
  for (int nn = 0; nn < 2; nn++)
#pragma clang loop unroll(full)
    for (int t = 0; t < 8; t++) {
      const int s = 8 * nn + t;
      const v128 xv = ae_load(x->qs + 16 * s);
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; k++)
        acc[k] = q3k_sc16(acc[k], xv, xv, xv, q3kx_u(w[k] + 48 * nn, t, m7, m3, m4), sc[k] + s);
      sink[0] = acc[0]; sink[1] = acc[1]; sink[2] = acc[2]; sink[3] = acc[3];
    }
  const v128 b0 = ae_load(x->bsums), b1 = ae_load(x->bsums + 8);
  v128 off[4];
  for (int k = 0; k < 4; k++) off[k] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_load(sc[k]), b0), wasm_i32x4_dot_i16x8(ae_load(sc[k] + 8), b1));
  return wasm_i32x4_sub(ae_reduce4_i32(acc[0], acc[1], acc[2], acc[3]), wasm_i32x4_shl(ae_reduce4_i32(off[0], off[1], off[2], off[3]), 2));
}
#else
/* The plain build keeps q3_K in its file layout (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q3_K_x, ae_matvec_q3_K_x_ref)
#endif

/* The row kernel of both layouts (x_layout: AE_Q3_K_X, the relaxed build's; a constant after inlining): rows in groups
 * of 4, one from each quarter of the range (four weight streams, as the other matvecs), each row left over (range % 4)
 * in all 4 lanes; the 4 rows' float steps in the lanes: per lane the reference's sequence, so any row range and
 * grouping gives its bits. */
AE_INLINE void q3k_matvec(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int x_layout) {
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * sizeof(ae_block_q3_K);
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  const int q = (r1 - r0) / 4, tail = (r1 - r0) - 4 * q;
  v128 m3, m4;
  q3k_masks(&m3, &m4);
#if AE_RELAXED
  v128 m7, n3, n4;
  q3kx_masks(&m7, &n3, &n4);
#else
  (void)x_layout;
#endif
  for (int i = 0; i < q + tail; i++) {
    int rr[4];
    const int nr = ae_rows4(i, q, r0, rr);
    const ae_block_q3_K *row[4];
    for (int k = 0; k < 4; k++) row[k] = (const ae_block_q3_K *)((const uint8_t *)W + (size_t)rr[k] * rs);
    v128 acc = wasm_f32x4_splat(0.0f);
    for (int b = 0; b < nb; b++) {
      const ae_block_q3_K *w[4] = {row[0] + b, row[1] + b, row[2] + b, row[3] + b};
      const v128 dw = ae_gather4_h2f(&w[0]->d, &w[1]->d, &w[2]->d, &w[3]->d);   /* exact, as ae_h2f_s */
#if AE_RELAXED
      const v128 sumi = x_layout ? q3kx_block4(w, x + b, m7, n3, n4) : q3k_block4(w, x + b, m3, m4);
#else
      const v128 sumi = q3k_block4(w, x + b, m3, m4);
#endif
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_mul(dw, wasm_f32x4_splat(x[b].d)), wasm_f32x4_convert_i32x4(sumi)));
    }
    ae_store_rows4(y, rr, nr, acc);
  }
}
void ae_matvec_rows_q3_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { q3k_matvec(W, ncols, xq, y, r0, r1, 0); }
#if AE_RELAXED
void ae_matvec_rows_q3_K_x_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { q3k_matvec(W, ncols, xq, y, r0, r1, 1); }
#endif
/* one row: the row kernel's arithmetic (the row in all 4 lanes), the reference's bits */
void ae_vec_dot_q3_K_simd128(int n, float *s, const void *w, const void *x) { q3k_matvec(w, n, x, s, 0, 1, 0); }
