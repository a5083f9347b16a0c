/* q5_K weights in the relaxed build's load-time layout (kernels.h AE_Q5_K_X) x q8_K activations: the repack (SIMD, in
 * place, both builds: tests and tools) and the decode matvec; the prefill GEMM is gemm_k_simd128.c's (kind K_Q5X).
 * Bit-exact with ae_vec_dot_q5_K_ref on the unpacked rows (ae_matvec_q5_K_x_ref) for any row range.
 *
 * A group G of the block (80 B at 16 + 80G) holds the values 128G + 16i + e as U_i: V_i (i < 4) = U_i | (U_{4+i} & 7)
 * << 5 and V_4 = sum_i ((U_{4+i} >> 3) & 3) << 2i. So U_i = V_i & 0x1f (one and) and U_{4+i} = (V_i & 0xe0) >> 5 |
 * (V_4 moved by 3 - 2i) & 0x18 (five operations; the u16 shifts move no neighbouring byte's bit under the masks),
 * where the file layout assembles each 16 values from a nibble and a 5th bit of qh (nine operations per 32 values
 * and two shifts per 16 for the bit). The kernels are q5_K's (k45_simd128.inc: 4 rows in the lanes of the float
 * step, ae_rdot16 on the values, the scales by i32x4.dot_i16x8) with this decode: the same integers, the same float
 * sequence. The plain build keeps q5_K (model.c): its entry points here run the reference. */
#include "simd128_util.h"

/* ---- repack (in place; both builds) ---- */
void ae_repack_q5_K_x(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q5_K);
    v128 q[16];   /* q[n] = the values 16n .. 16n + 15 */
    ae_q5k_values(blk, q);
    ae_q5x_pack(q, blk + 16);
    ae_q5x_pack(q + 8, blk + 96);
  }
}

#if AE_RELAXED
/* ---- kernels: k45_simd128.inc with the X decode ---- */
typedef struct { const ae_block_q8_K *x; v128 bsp; } xk;   /* rows_sb_outer's activation: the block and its bsums pairs */
#define AE_QK_CHUNK 1
AE_INLINE void prep(const ae_block_q8_K *x, int n, xk *xs) {
  for (int i = 0; i < n; i++) {
    const v128 b0 = ae_load(x[i].bsums), b1 = ae_load(x[i].bsums + 8);
    xs[i].x = x + i;
    xs[i].bsp = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14), wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
  }
}
static void row_sb(const ae_block_q5_K *w, const xk *xs, int32_t *q, int32_t *m);   /* below: row_sb16 of the .inc */

/* V_4 of both groups */
AE_INLINE void k45_hq(const ae_block_q5_K *w, v128 hq[2]) {
  hq[0] = ae_load((const uint8_t *)w + 16 + 64);
  hq[1] = ae_load((const uint8_t *)w + 16 + 80 + 64);
}
/* elements 64g + 16k in v[k]: g even, U_k of group g / 2; g odd, U_{4+k} */
AE_INLINE void k45_vals_w(const ae_block_q5_K *w, const v128 hq[2], int g, v128 v[4]) {
  const uint8_t *o = (const uint8_t *)w + 16 + 80 * (g >> 1);
  if (!(g & 1)) {
    const v128 m = wasm_i8x16_splat(0x1f);
    for (int k = 0; k < 4; k++) v[k] = wasm_v128_and(ae_load(o + 16 * k), m);
    return;
  }
  const v128 hi = wasm_i8x16_splat((int8_t)0xe0), m18 = wasm_i8x16_splat(0x18), h = hq[g >> 1];
  const v128 t[4] = {wasm_i16x8_shl(h, 3), wasm_i16x8_shl(h, 1), wasm_u16x8_shr(h, 1), wasm_u16x8_shr(h, 3)};
  for (int k = 0; k < 4; k++)
    v[k] = wasm_v128_or(wasm_u16x8_shr(wasm_v128_and(ae_load(o + 16 * k), hi), 5), wasm_v128_and(t[k], m18));
}
#define K45_BLOCK ae_block_q5_K
#include "k45_simd128.inc"

static void row_sb(const ae_block_q5_K *w, const xk *xs, int32_t *q, int32_t *m) {
  v128 qv, mv;
  row_sb16(w, xs->x, xs->bsp, &qv, &mv);
  *q = ae_hsum_i32(qv);
  *m = ae_hsum_i32(mv);
}

void ae_matvec_rows_q5_K_x_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
  k45_matvec(W, ncols, xq, y, r0, r1);
}
#else
/* The plain build keeps q5_K in the file layout (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q5_K_x, ae_matvec_q5_K_x_ref)
#endif
