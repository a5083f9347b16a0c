/* The load-time repacked q4_0 layout (kernels.h AE_Q4_0_R4): repack / unpack in place, and the scalar reference
 * matvec over it (the specification the SIMD kernels in simd128/dot_q4_0_r4_simd128.c are checked against). */
#include "kernels/ref/ref_util.h"

/* Byte i of chunk j of row k's part of a record: elements 8j+i (low nibble) and 8j+4+i (high nibble) of the row's
 * block; in the q4_0 block, element e < 16 is the low nibble of qs[e], element e >= 16 the high nibble of qs[e-16]. */
AE_INLINE int q4_elem(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

static void pack_block(const ae_block_q4_0 *rows[4], int b, uint8_t *rec) {
  for (int k = 0; k < 4; k++) __builtin_memcpy(rec + 2 * k, &rows[k][b].d, 2);
  for (int j = 0; j < 4; j++)
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < 4; i++)
        rec[8 + 16 * j + 4 * k + i] = (uint8_t)(q4_elem(rows[k][b].qs, 8 * j + i) | (q4_elem(rows[k][b].qs, 8 * j + 4 + i) << 4));
}

/* Row k's block b of a record back into a q4_0 block. */
static void unpack_block(const uint8_t *rec, int k, ae_block_q4_0 *o) {
  __builtin_memcpy(&o->d, rec + 2 * k, 2);
  uint8_t e[32];
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++) {
      const uint8_t v = rec[8 + 16 * j + 4 * k + i];
      e[8 * j + i] = v & 15;
      e[8 * j + 4 + i] = v >> 4;
    }
  for (int i = 0; i < 16; i++) o->qs[i] = (uint8_t)(e[i] | (e[i + 16] << 4));
}

int ae_repack_q4_0_r4_ref(void *W, int nrows, int ncols, void *tmp) {
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q4_0);
  if (nrows % 4) return 1;
  const ae_block_q4_0 *all = (const ae_block_q4_0 *)W;
  for (size_t i = 0; i < (size_t)nrows * (size_t)nb; i++)
    if ((all[i].d & 0x7c00u) == 0x7c00u) return 1;
  for (int g = 0; g + 4 <= nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    const ae_block_q4_0 *rows[4];
    for (int k = 0; k < 4; k++) rows[k] = (const ae_block_q4_0 *)((const uint8_t *)tmp + (size_t)k * rs);
    for (int b = 0; b < nb; b++) pack_block(rows, b, base + (size_t)b * AE_R4_REC);
  }
  return 0;
}

void ae_unpack_q4_0_r4(void *W, int nrows, int ncols, void *tmp) {
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q4_0);
  for (int g = 0; g + 4 <= nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    for (int k = 0; k < 4; k++)
      for (int b = 0; b < nb; b++)
        unpack_block((const uint8_t *)tmp + (size_t)b * AE_R4_REC, k, (ae_block_q4_0 *)(base + (size_t)k * rs) + b);
  }
}

/* ae_vec_dot_q4_0_ref's sequence on row r read from its group's records. */
void ae_matvec_q4_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q4_0);
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  for (int r = r0; r < r1; r++) {
    const uint8_t *g = (const uint8_t *)W + (size_t)(r & ~3) * rs;
    const int k = r & 3;
    float sum = 0.0f;
    for (int b = 0; b < nb; b++) {
      ae_block_q4_0 w;
      unpack_block(g + (size_t)b * AE_R4_REC, k, &w);
      int sumi = 0;
      for (int j = 0; j < AE_QK4_0 / 2; j++) {
        sumi += ((w.qs[j] & 0x0f) - 8) * (int)x[b].qs[j];
        sumi += ((w.qs[j] >> 4) - 8) * (int)x[b].qs[j + AE_QK4_0 / 2];
      }
      sum += (float)sumi * (AE_FP16(w.d) * AE_FP16(x[b].d));
    }
    y[r] = sum;
  }
}
