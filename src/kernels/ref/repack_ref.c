/* The load-time repacked layouts (kernels.h AE_Q4_0_R4, AE_Q5_0_X8, AE_Q5_1_X8, AE_Q5_0_R4, AE_Q5_1_R4, AE_Q8_0_R4):
 * repack / unpack in place, and the scalar reference matvecs over them (the specification the SIMD kernels in
 * simd128/dot_q4_0_r4_simd128.c, dot_q8_0_r4_simd128.c and dot_q5_0_simd128.c / dot_q5_1_simd128.c are checked
 * against). */
#include "kernels/ref/ref_util.h"

/* Byte i of chunk j of row k's part of a record: elements 8j+i (low nibble) and 8j+4+i (high nibble) of the row's
 * block; in the q4_0 block, element e < 16 is the low nibble of qs[e], element e >= 16 the high nibble of qs[e-16]. */
AE_INLINE int q4_elem(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

/* The loops the row-group layouts share (AE_Q4_0_R4, AE_Q8_0_R4, AE_Q4_K_R4, AE_Q6_K_R4): each group of 4 rows of nb
 * blocks of bs bytes is copied to tmp, then record b (rec bytes, in place) is built by pack(the 4 rows' block b, record),
 * or row k's block b rebuilt by unpack(record, k, block). The repack refuses (returns 1, nothing changed) rows % 4 != 0
 * or an inf / nan f16 at byte off0 (or off1, when >= 0) of any block: the kernels convert finite scales only. */
typedef void (*ref_pack_fn)(const uint8_t *const blk[4], uint8_t *rec);
typedef void (*ref_unpack_fn)(const uint8_t *rec, int k, uint8_t *blk);
static int ref_group_repack(void *W, int nrows, int nb, size_t bs, size_t rec, void *tmp, int off0, int off1, ref_pack_fn pack) {
  const size_t rs = (size_t)nb * bs;
  if (nrows % 4) return 1;
  for (size_t i = 0; i < (size_t)nrows * (size_t)nb; i++) {
    uint16_t h0, h1 = 0;
    __builtin_memcpy(&h0, (const uint8_t *)W + i * bs + off0, 2);
    if (off1 >= 0) __builtin_memcpy(&h1, (const uint8_t *)W + i * bs + off1, 2);
    if ((h0 & 0x7c00u) == 0x7c00u || (h1 & 0x7c00u) == 0x7c00u) return 1;
  }
  for (int g = 0; g + 4 <= nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    for (int b = 0; b < nb; b++) {
      const uint8_t *blk[4];
      for (int k = 0; k < 4; k++) blk[k] = (const uint8_t *)tmp + (size_t)k * rs + (size_t)b * bs;
      pack(blk, base + (size_t)b * rec);
    }
  }
  return 0;
}
static void ref_group_unpack(void *W, int nrows, int nb, size_t bs, size_t rec, void *tmp, ref_unpack_fn unpack) {
  const size_t rs = (size_t)nb * bs;
  for (int g = 0; g + 4 <= nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    for (int k = 0; k < 4; k++)
      for (int b = 0; b < nb; b++) unpack((const uint8_t *)tmp + (size_t)b * rec, k, base + (size_t)k * rs + (size_t)b * bs);
  }
}
/* The reference matvec over a row-group layout: row r's blocks read back from its group's records (unpack) and each
 * dotted alone by the file dtype's vec_dot (one block: 0 + its term, exactly that term), the terms summed in block order
 * as that vec_dot sums them. blck / bs: elements / bytes of a file block, rec: record bytes, xbs: bytes of an
 * activation block. */
static void ref_group_matvec(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int blck, size_t bs,
                             size_t rec, size_t xbs, ref_unpack_fn unpack, ae_vec_dot_fn vec_dot) {
  const int nb = ncols / blck;
  const size_t rs = (size_t)nb * bs;
  for (int r = r0; r < r1; r++) {
    const uint8_t *g = (const uint8_t *)W + (size_t)(r & ~3) * rs;
    float sum = 0.0f;
    for (int b = 0; b < nb; b++) {
      _Alignas(16) uint8_t w[256];   /* one file block (the largest: q6_K, 210 B) */
      float t;
      unpack(g + (size_t)b * rec, r & 3, w);
      vec_dot(blck, &t, w, (const uint8_t *)xq + (size_t)b * xbs);
      sum += t;
    }
    y[r] = sum;
  }
}

static void pack_block(const uint8_t *const blk[4], uint8_t *rec) {
  for (int k = 0; k < 4; k++) __builtin_memcpy(rec + 2 * k, blk[k], 2);
  for (int j = 0; j < 4; j++)
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < 4; i++)
        rec[8 + 16 * j + 4 * k + i] = (uint8_t)(q4_elem(blk[k] + 2, 8 * j + i) | (q4_elem(blk[k] + 2, 8 * j + 4 + i) << 4));
}

/* Row k's block b of a record back into a q4_0 block. */
static void unpack_block(const uint8_t *rec, int k, uint8_t *blk) {
  ae_block_q4_0 *o = (ae_block_q4_0 *)blk;
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
  return ref_group_repack(W, nrows, ncols / AE_QK4_0, sizeof(ae_block_q4_0), AE_R4_REC, tmp, 0, -1, pack_block);
}

void ae_unpack_q4_0_r4(void *W, int nrows, int ncols, void *tmp) {
  ref_group_unpack(W, nrows, ncols / AE_QK4_0, sizeof(ae_block_q4_0), AE_R4_REC, tmp, unpack_block);
}

/* ae_vec_dot_q4_0_ref's sequence on row r read from its group's records. */
void ae_matvec_q4_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ref_group_matvec(W, ncols, xq, y, r0, r1, AE_QK4_0, sizeof(ae_block_q4_0), AE_R4_REC, sizeof(ae_block_q8_0), unpack_block, ae_vec_dot_q4_0_ref);
}

/* ---- AE_Q5_0_X8 / AE_Q5_1_X8 (kernels.h): the 5-bit values of a block, from either layout, and the layouts from
 * them. The 20 bytes after the block's f16 fields (d for q5_0; d, m for q5_1): qh[4] qs[16] in the file, T[4] A[16]
 * in the X8 layout. */
static void q5_values(const uint8_t *p, uint8_t q[32]) {   /* p: the file's qh, then qs */
  uint32_t qh;
  __builtin_memcpy(&qh, p, 4);
  const uint8_t *qs = p + 4;
  for (int e = 0; e < 32; e++) q[e] = (uint8_t)((e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (((qh >> e) & 1) << 4));
}
static void x8_values(const uint8_t *p, uint8_t q[32]) {   /* p: T, then A */
  const uint8_t *t = p, *a = p + 4;
  for (int i = 0; i < 16; i++) {
    const int sh = 2 * (i >> 2), tb = t[i & 3];
    q[i] = (uint8_t)((a[i] ^ 0x80) >> 3);
    q[i + 16] = (uint8_t)((a[i] & 7) | (((tb >> (6 - sh)) & 1) << 3) | ((((tb >> (7 - sh)) & 1) ^ 1) << 4));
  }
}
static void x8_repack(void *W, size_t nblocks, size_t bs, size_t off) {
  for (size_t i = 0; i < nblocks; i++) {
    uint8_t *p = (uint8_t *)W + i * bs + off, q[32], o[20] = {0};
    q5_values(p, q);
    for (int i2 = 0; i2 < 16; i2++) {
      const int sh = 2 * (i2 >> 2), hi = q[i2 + 16];
      o[4 + i2] = (uint8_t)(((q[i2] << 3) ^ 0x80) | (hi & 7));
      o[i2 & 3] |= (uint8_t)((((hi >> 3) & 1) << (6 - sh)) | ((((hi >> 4) & 1) ^ 1) << (7 - sh)));
    }
    __builtin_memcpy(p, o, 20);
  }
}
static void x8_unpack(void *W, size_t nblocks, size_t bs, size_t off) {
  for (size_t i = 0; i < nblocks; i++) {
    uint8_t *p = (uint8_t *)W + i * bs + off, q[32], o[20];
    x8_values(p, q);
    uint32_t qh = 0;
    for (int e = 0; e < 32; e++) qh |= (uint32_t)(q[e] >> 4) << e;
    __builtin_memcpy(o, &qh, 4);
    for (int i2 = 0; i2 < 16; i2++) o[4 + i2] = (uint8_t)((q[i2] & 15) | ((q[i2 + 16] & 15) << 4));
    __builtin_memcpy(p, o, 20);
  }
}

void ae_repack_q5_0_x8_ref(void *W, size_t nblocks) { x8_repack(W, nblocks, sizeof(ae_block_q5_0), 2); }
void ae_unpack_q5_0_x8(void *W, size_t nblocks) { x8_unpack(W, nblocks, sizeof(ae_block_q5_0), 2); }
void ae_repack_q5_1_x8_ref(void *W, size_t nblocks) { x8_repack(W, nblocks, sizeof(ae_block_q5_1), 4); }
void ae_unpack_q5_1_x8(void *W, size_t nblocks) { x8_unpack(W, nblocks, sizeof(ae_block_q5_1), 4); }

/* ae_vec_dot_q5_0_ref's sequence on the X8 layout. */
void ae_matvec_q5_0_x8_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK5_0;
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  for (int r = r0; r < r1; r++) {
    const uint8_t *row = (const uint8_t *)W + (size_t)r * nb * sizeof(ae_block_q5_0);
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
      const uint8_t *blk = row + (size_t)i * sizeof(ae_block_q5_0);
      uint8_t q[32];
      x8_values(blk + 2, q);
      int sumi = 0;
      for (int e = 0; e < 32; e++) sumi += (q[e] - 16) * (int)x[i].qs[e];
      ae_fp16 d;
      __builtin_memcpy(&d, blk, 2);
      sum += (float)sumi * (AE_FP16(d) * AE_FP16(x[i].d));
    }
    y[r] = sum;
  }
}

/* ae_vec_dot_q5_1_ref's sequence on the X8 layout. */
void ae_matvec_q5_1_x8_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK5_1;
  const ae_block_q8_1 *x = (const ae_block_q8_1 *)xq;
  for (int r = r0; r < r1; r++) {
    const ae_block_q5_1 *row = (const ae_block_q5_1 *)W + (size_t)r * nb;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
      uint8_t q[32];
      x8_values((const uint8_t *)&row[i] + 4, q);
      int sumi = 0;
      for (int e = 0; e < 32; e++) sumi += q[e] * (int)x[i].qs[e];
      sum += (AE_FP16(row[i].d) * AE_FP16(x[i].d)) * (float)sumi + AE_FP16(row[i].m) * AE_FP16(x[i].s);
    }
    y[r] = sum;
  }
}

/* ---- AE_Q5_0_R4 / AE_Q5_1_R4 (kernels.h): q5_0 / q5_1 rows in groups of 4, 88 / 96-byte records. Record = the 4 rows'
 * f16 scales (q5_1: then their f16 mins), 4 chunks of 16 B holding the low 4 bits of the 5-bit values q as the R4 q4_0
 * record holds its nibbles, then 16 B of 5th bits: byte 4k + i, bit 2j (2j + 1) = bit 4 of q of element 8j + i
 * (8j + 4 + i) of row k. q51 selects the q5_1 form (blocks d, m, qh, qs). */
#define R5_BS(q51) ((q51) ? sizeof(ae_block_q5_1) : sizeof(ae_block_q5_0))
#define R5_REC(q51) ((q51) ? AE_R451_REC : AE_R45_REC)
static void pack_block5(const uint8_t *const rows[4], int b, uint8_t *rec, int q51) {
  const int co = q51 ? 16 : 8, ho = q51 ? 80 : 72;
  __builtin_memset(rec + ho, 0, 16);
  for (int k = 0; k < 4; k++) {
    const uint8_t *blk = rows[k] + (size_t)b * R5_BS(q51);
    uint8_t q[32];
    __builtin_memcpy(rec + 2 * k, blk, 2);
    if (q51) __builtin_memcpy(rec + 8 + 2 * k, blk + 2, 2);
    q5_values(blk + (q51 ? 4 : 2), q);
    for (int j = 0; j < 4; j++)
      for (int i = 0; i < 4; i++) {
        const int lo = q[8 * j + i], hi = q[8 * j + 4 + i];
        rec[co + 16 * j + 4 * k + i] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
        rec[ho + 4 * k + i] |= (uint8_t)(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
      }
  }
}
/* Row k's 5-bit values, scale and (q5_1) min of a record. */
static void r45_values(const uint8_t *rec, int k, uint8_t q[32], ae_fp16 *d, ae_fp16 *m, int q51) {
  const int co = q51 ? 16 : 8, ho = q51 ? 80 : 72;
  __builtin_memcpy(d, rec + 2 * k, 2);
  if (q51) __builtin_memcpy(m, rec + 8 + 2 * k, 2);
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++) {
      const uint8_t v = rec[co + 16 * j + 4 * k + i], h = rec[ho + 4 * k + i];
      q[8 * j + i] = (uint8_t)((v & 15) | (((h >> (2 * j)) & 1) << 4));
      q[8 * j + 4 + i] = (uint8_t)((v >> 4) | (((h >> (2 * j + 1)) & 1) << 4));
    }
}
static int repack5_ref(void *W, int nrows, int ncols, void *tmp, int q51) {
  const int nb = ncols / 32;
  const size_t rs = (size_t)nb * R5_BS(q51);
  if (nrows % 4) return 1;
  for (size_t i = 0; i < (size_t)nrows * (size_t)nb; i++) {
    uint16_t h[2];
    __builtin_memcpy(h, (const uint8_t *)W + i * R5_BS(q51), 4);
    if ((h[0] & 0x7c00u) == 0x7c00u || (q51 && (h[1] & 0x7c00u) == 0x7c00u)) return 1;
  }
  for (int g = 0; g + 4 <= nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    const uint8_t *rows[4];
    for (int k = 0; k < 4; k++) rows[k] = (const uint8_t *)tmp + (size_t)k * rs;
    for (int b = 0; b < nb; b++) pack_block5(rows, b, base + (size_t)b * R5_REC(q51), q51);
  }
  return 0;
}
static void unpack5(void *W, int nrows, int ncols, void *tmp, int q51) {
  const int nb = ncols / 32;
  const size_t rs = (size_t)nb * R5_BS(q51);
  for (int g = 0; g + 4 <= nrows; g += 4) {
    uint8_t *base = (uint8_t *)W + (size_t)g * rs;
    __builtin_memcpy(tmp, base, 4 * rs);
    for (int k = 0; k < 4; k++)
      for (int b = 0; b < nb; b++) {
        uint8_t q[32], *o = base + (size_t)k * rs + (size_t)b * R5_BS(q51);
        ae_fp16 d, m = 0;
        r45_values((const uint8_t *)tmp + (size_t)b * R5_REC(q51), k, q, &d, &m, q51);
        uint32_t qh = 0;
        for (int e = 0; e < 32; e++) qh |= (uint32_t)(q[e] >> 4) << e;
        __builtin_memcpy(o, &d, 2);
        if (q51) __builtin_memcpy(o + 2, &m, 2);
        uint8_t *p = o + (q51 ? 4 : 2);
        __builtin_memcpy(p, &qh, 4);
        for (int i = 0; i < 16; i++) p[4 + i] = (uint8_t)((q[i] & 15) | ((q[i + 16] & 15) << 4));
      }
  }
}
int ae_repack_q5_0_r4_ref(void *W, int nrows, int ncols, void *tmp) { return repack5_ref(W, nrows, ncols, tmp, 0); }
int ae_repack_q5_1_r4_ref(void *W, int nrows, int ncols, void *tmp) { return repack5_ref(W, nrows, ncols, tmp, 1); }
void ae_unpack_q5_0_r4(void *W, int nrows, int ncols, void *tmp) { unpack5(W, nrows, ncols, tmp, 0); }
void ae_unpack_q5_1_r4(void *W, int nrows, int ncols, void *tmp) { unpack5(W, nrows, ncols, tmp, 1); }
/* ae_vec_dot_q5_0_ref's / ae_vec_dot_q5_1_ref's sequence on row r read from its group's records. */
static void matvec5_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int q51) {
  const int nb = ncols / 32;
  const size_t rs = (size_t)nb * R5_BS(q51);
  for (int r = r0; r < r1; r++) {
    const uint8_t *g = (const uint8_t *)W + (size_t)(r & ~3) * rs;
    float sum = 0.0f;
    for (int b = 0; b < nb; b++) {
      uint8_t q[32];
      ae_fp16 d, m;
      r45_values(g + (size_t)b * R5_REC(q51), r & 3, q, &d, &m, q51);
      int sumi = 0;
      if (q51) {
        const ae_block_q8_1 *x = (const ae_block_q8_1 *)xq + b;
        for (int e = 0; e < 32; e++) sumi += q[e] * (int)x->qs[e];
        sum += (AE_FP16(d) * AE_FP16(x->d)) * (float)sumi + AE_FP16(m) * AE_FP16(x->s);
      } else {
        const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq + b;
        for (int e = 0; e < 32; e++) sumi += (q[e] - 16) * (int)x->qs[e];
        sum += (float)sumi * (AE_FP16(d) * AE_FP16(x->d));
      }
    }
    y[r] = sum;
  }
}
void ae_matvec_q5_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { matvec5_ref(W, ncols, xq, y, r0, r1, 0); }
void ae_matvec_q5_1_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { matvec5_ref(W, ncols, xq, y, r0, r1, 1); }

/* ---- AE_Q8_0_R4 (kernels.h; the relaxed build's q8_0 layout): a 136-byte record per block column of a group of 4 rows:
 * the 4 rows' f16 scales, then chunks j < 8 of 16 B, row k's elements 4j..4j+3 at bytes 4k..4k+3. ---- */
static void pack_block8(const uint8_t *const blk[4], uint8_t *rec) {
  for (int k = 0; k < 4; k++) __builtin_memcpy(rec + 2 * k, blk[k], 2);
  for (int j = 0; j < 8; j++)
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < 4; i++) rec[8 + 16 * j + 4 * k + i] = blk[k][2 + 4 * j + i];
}
static void unpack_block8(const uint8_t *rec, int k, uint8_t *blk) {
  ae_block_q8_0 *o = (ae_block_q8_0 *)blk;
  __builtin_memcpy(&o->d, rec + 2 * k, 2);
  for (int j = 0; j < 8; j++)
    for (int i = 0; i < 4; i++) o->qs[4 * j + i] = (int8_t)rec[8 + 16 * j + 4 * k + i];
}
int ae_repack_q8_0_r4_ref(void *W, int nrows, int ncols, void *tmp) {
  return ref_group_repack(W, nrows, ncols / AE_QK8_0, sizeof(ae_block_q8_0), AE_R8_REC, tmp, 0, -1, pack_block8);
}
void ae_unpack_q8_0_r4(void *W, int nrows, int ncols, void *tmp) {
  ref_group_unpack(W, nrows, ncols / AE_QK8_0, sizeof(ae_block_q8_0), AE_R8_REC, tmp, unpack_block8);
}
/* ae_vec_dot_q8_0_ref's sequence on row r read from its group's records. */
void ae_matvec_q8_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ref_group_matvec(W, ncols, xq, y, r0, r1, AE_QK8_0, sizeof(ae_block_q8_0), AE_R8_REC, sizeof(ae_block_q8_0), unpack_block8, ae_vec_dot_q8_0_ref);
}

/* ---- AE_Q4_K_R4 (kernels.h; the relaxed build's q4_K layout): a 576-byte record per super-block column of a group of
 * 4 rows: d_k (8 B), dmin_k (8 B), the 6-bit scales / mins as L0, L1, H (16 B each; with SCa[4k + j] = sc_k[j],
 * SCb[4k + j] = sc_k[4 + j], MNa / MNb the mins, j < 4: L0 = SCa & 15 | (SCb & 15) << 4, L1 the same of MNa / MNb,
 * H = SCa >> 4 | (SCb >> 4) << 2 | (MNa >> 4) << 4 | (MNb >> 4) << 6), then chunk (j, c) (sub-block j < 8, c < 4)
 * at 64 + 16 (4j + c): row k's byte 4k + i = element 8c + i of its sub-block j (low nibble) | element 8c + 4 + i
 * (high nibble), i < 4, as AE_Q4_0_R4 within a sub-block. ---- */
/* The first 64 bytes of an AE_Q4_K_R4 / AE_Q5_K_R4 record from the 4 rows' blocks (q4_K and q5_K share d, dmin and
 * the 12 scale bytes at the same offsets), and row k's back (the scales re-packed as ggml packs them: a bijection). */
static void k4_pack_head(const ae_block_q4_K *const w[4], uint8_t *rec) {
  uint8_t sc[4][8], mn[4][8];
  for (int k = 0; k < 4; k++) {
    int s[8], m[8];
    ae_ref_k4_scales(w[k]->scales, s, m);
    for (int j = 0; j < 8; j++) { sc[k][j] = (uint8_t)s[j]; mn[k][j] = (uint8_t)m[j]; }
    __builtin_memcpy(rec + 2 * k, &w[k]->d, 2);
    __builtin_memcpy(rec + 8 + 2 * k, &w[k]->dmin, 2);
  }
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 4; j++) {
      const int i = 4 * k + j, sa = sc[k][j], sb = sc[k][4 + j], ma = mn[k][j], mb = mn[k][4 + j];
      rec[16 + i] = (uint8_t)((sa & 15) | (sb & 15) << 4);
      rec[32 + i] = (uint8_t)((ma & 15) | (mb & 15) << 4);
      rec[48 + i] = (uint8_t)(sa >> 4 | (sb >> 4) << 2 | (ma >> 4) << 4 | (mb >> 4) << 6);
    }
}
static void k4_unpack_head(const uint8_t *rec, int k, ae_block_q4_K *o) {
  __builtin_memcpy(&o->d, rec + 2 * k, 2);
  __builtin_memcpy(&o->dmin, rec + 8 + 2 * k, 2);
  int sc[8], mn[8];
  for (int j = 0; j < 4; j++) {
    const int i = 4 * k + j, l0 = rec[16 + i], l1 = rec[32 + i], h = rec[48 + i];
    sc[j] = (l0 & 15) | (h & 3) << 4; sc[4 + j] = (l0 >> 4) | ((h >> 2) & 3) << 4;
    mn[j] = (l1 & 15) | ((h >> 4) & 3) << 4; mn[4 + j] = (l1 >> 4) | ((h >> 6) & 3) << 4;
  }
  for (int j = 0; j < 4; j++) {
    o->scales[j] = (uint8_t)((sc[j] & 63) | (sc[4 + j] >> 4) << 6);
    o->scales[4 + j] = (uint8_t)((mn[j] & 63) | (mn[4 + j] >> 4) << 6);
    o->scales[8 + j] = (uint8_t)((sc[4 + j] & 15) | (mn[4 + j] & 15) << 4);
  }
}
/* element l of sub-block j of a q4_K block (ggml: qs[32 (j / 2) + l], low nibble for even j) */
AE_INLINE int k4_elem(const uint8_t *qs, int j, int l) { const int v = qs[32 * (j >> 1) + l]; return j & 1 ? v >> 4 : v & 15; }
static void pack_block_k4(const uint8_t *const blk[4], uint8_t *rec) {
  const ae_block_q4_K *w[4] = {(const ae_block_q4_K *)blk[0], (const ae_block_q4_K *)blk[1], (const ae_block_q4_K *)blk[2], (const ae_block_q4_K *)blk[3]};
  k4_pack_head(w, rec);
  for (int j = 0; j < 8; j++)
    for (int c = 0; c < 4; c++)
      for (int k = 0; k < 4; k++)
        for (int i = 0; i < 4; i++)
          rec[64 + 16 * (4 * j + c) + 4 * k + i] = (uint8_t)(k4_elem(w[k]->qs, j, 8 * c + i) | k4_elem(w[k]->qs, j, 8 * c + 4 + i) << 4);
}
/* Row k's super-block of a record back into a q4_K block (the scales re-packed as ggml packs them: a bijection). */
static void unpack_block_k4(const uint8_t *rec, int k, uint8_t *blk) {
  ae_block_q4_K *o = (ae_block_q4_K *)blk;
  k4_unpack_head(rec, k, o);
  uint8_t e[8][32];
  for (int j = 0; j < 8; j++)
    for (int c = 0; c < 4; c++)
      for (int i = 0; i < 4; i++) {
        const uint8_t v = rec[64 + 16 * (4 * j + c) + 4 * k + i];
        e[j][8 * c + i] = v & 15; e[j][8 * c + 4 + i] = v >> 4;
      }
  for (int p = 0; p < 4; p++)
    for (int l = 0; l < 32; l++) o->qs[32 * p + l] = (uint8_t)(e[2 * p][l] | e[2 * p + 1][l] << 4);
}
int ae_repack_q4_K_r4_ref(void *W, int nrows, int ncols, void *tmp) {
  return ref_group_repack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q4_K), AE_RK4_REC, tmp, 0, 2, pack_block_k4);
}
void ae_unpack_q4_K_r4(void *W, int nrows, int ncols, void *tmp) {
  ref_group_unpack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q4_K), AE_RK4_REC, tmp, unpack_block_k4);
}
/* ae_vec_dot_q4_K_ref's sequence on row r read from its group's records. */
void ae_matvec_q4_K_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ref_group_matvec(W, ncols, xq, y, r0, r1, AE_QK_K, sizeof(ae_block_q4_K), AE_RK4_REC, sizeof(ae_block_q8_K), unpack_block_k4, ae_vec_dot_q4_K_ref);
}

/* ---- AE_Q5_K_X (kernels.h; the relaxed build's q5_K layout, block by block in place): d, dmin and the scales as q5_K's;
 * bytes 16..175 = two groups of 80 B, group G holding values v = 128G .. 128G + 127 of the block as U_i (16 values
 * 128G + 16i + e, e < 16, i < 8): V_i (16 B at 16 + 80G + 16i, i < 4) byte e = U_i[e] | (U_{4+i}[e] & 7) << 5, and
 * V_4 (at 16 + 80G + 64) byte e = sum over i < 4 of ((U_{4+i}[e] >> 3) & 3) << 2i. */
static int q5kx_file_value(const uint8_t *blk, int e) {   /* q5_K's 5-bit value e of a file-layout block */
  const int j = e >> 5, l = e & 31;
  const uint8_t byte = blk[48 + 32 * (j >> 1) + l];
  return ((j & 1) ? byte >> 4 : byte & 0x0f) | (((blk[16 + l] >> j) & 1) << 4);
}
static int q5kx_value(const uint8_t *blk, int v) {   /* value v of an AE_Q5_K_X block */
  const uint8_t *g = blk + 16 + 80 * (v >> 7);
  const int i = (v >> 4) & 7, e = v & 15;
  if (i < 4) return g[16 * i + e] & 0x1f;
  return (g[16 * (i - 4) + e] >> 5) | (((g[64 + e] >> (2 * (i - 4))) & 3) << 3);
}
void ae_repack_q5_K_x_ref(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q5_K), q[256];
    for (int e = 0; e < 256; e++) q[e] = (uint8_t)q5kx_file_value(blk, e);
    for (int G = 0; G < 2; G++) {
      uint8_t *g = blk + 16 + 80 * G;
      for (int e = 0; e < 16; e++) g[64 + e] = 0;
      for (int i = 0; i < 4; i++)
        for (int e = 0; e < 16; e++) {
          const int u = q[128 * G + 16 * i + e], w = q[128 * G + 64 + 16 * i + e];
          g[16 * i + e] = (uint8_t)(u | (w & 7) << 5);
          g[64 + e] |= (uint8_t)(((w >> 3) & 3) << (2 * i));
        }
    }
  }
}
void ae_unpack_q5_K_x(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q5_K), q[256];
    for (int v = 0; v < 256; v++) q[v] = (uint8_t)q5kx_value(blk, v);
    for (int l = 0; l < 32; l++) blk[16 + l] = 0;
    for (int e = 0; e < 256; e++) {
      const int j = e >> 5, l = e & 31;
      uint8_t *byte = blk + 48 + 32 * (j >> 1) + l;
      if (j & 1) *byte = (uint8_t)((*byte & 0x0f) | (q[e] & 15) << 4);
      else *byte = (uint8_t)((*byte & 0xf0) | (q[e] & 15));
      blk[16 + l] |= (uint8_t)(((q[e] >> 4) & 1) << j);
    }
  }
}
/* ae_vec_dot_q5_K_ref's sequence on the X layout. */
void ae_matvec_q5_K_x_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  for (int r = r0; r < r1; r++) {
    const ae_block_q5_K *row = (const ae_block_q5_K *)W + (size_t)r * nb;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
      int sc[8], m[8];
      ae_ref_k4_scales(row[i].scales, sc, m);
      int sumi_q = 0, sumi_m = 0;
      for (int j = 0; j < 8; j++) {
        int dot = 0, qsum = 0;
        for (int l = 0; l < 32; l++) {
          dot += q5kx_value((const uint8_t *)&row[i], 32 * j + l) * x[i].qs[32 * j + l];
          qsum += x[i].qs[32 * j + l];
        }
        sumi_q += sc[j] * dot;
        sumi_m += m[j] * qsum;
      }
      const float dall = AE_FP16(row[i].d) * x[i].d, dmin = AE_FP16(row[i].dmin) * x[i].d;
      sum += dall * (float)sumi_q - dmin * (float)sumi_m;
    }
    y[r] = sum;
  }
}

/* ---- AE_Q5_K_R4 (kernels.h; the relaxed build's q5_K layout for rows in groups of 4): a 704-byte record per super-block
 * column of a group of 4 rows: bytes 0..63 as AE_Q4_K_R4's (d_k, dmin_k, the scales and mins as L0, L1, H), then per
 * sub-block j < 8 the 80 bytes at 64 + 80j: with U_m[4k + e] = row k's 5-bit value of element 32j + 4m + e (m < 8,
 * e < 4), V_i (16 B at 64 + 80j + 16i, i < 4) byte b = U_i[b] | (U_{4+i}[b] & 7) << 5 and V_4 (at 64 + 80j + 64)
 * byte b = sum over i < 4 of ((U_{4+i}[b] >> 3) & 3) << 2i. ---- */
static void pack_block_k5(const uint8_t *const blk[4], uint8_t *rec) {
  const ae_block_q4_K *h[4] = {(const ae_block_q4_K *)blk[0], (const ae_block_q4_K *)blk[1], (const ae_block_q4_K *)blk[2], (const ae_block_q4_K *)blk[3]};
  k4_pack_head(h, rec);
  for (int j = 0; j < 8; j++) {
    uint8_t *g = rec + 64 + 80 * j;
    for (int b = 0; b < 16; b++) g[64 + b] = 0;
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 4; k++)
        for (int e = 0; e < 4; e++) {
          const int u = q5kx_file_value(blk[k], 32 * j + 4 * i + e), w = q5kx_file_value(blk[k], 32 * j + 16 + 4 * i + e);
          g[16 * i + 4 * k + e] = (uint8_t)(u | (w & 7) << 5);
          g[64 + 4 * k + e] |= (uint8_t)(((w >> 3) & 3) << (2 * i));
        }
  }
}
/* Row k's super-block of a record back into a q5_K block. */
static void unpack_block_k5(const uint8_t *rec, int k, uint8_t *blk) {
  k4_unpack_head(rec, k, (ae_block_q4_K *)blk);
  uint8_t q[256];
  for (int j = 0; j < 8; j++) {
    const uint8_t *g = rec + 64 + 80 * j;
    for (int i = 0; i < 4; i++)
      for (int e = 0; e < 4; e++) {
        const int v = g[16 * i + 4 * k + e], h = g[64 + 4 * k + e];
        q[32 * j + 4 * i + e] = (uint8_t)(v & 0x1f);
        q[32 * j + 16 + 4 * i + e] = (uint8_t)((v >> 5) | ((h >> (2 * i)) & 3) << 3);
      }
  }
  ae_block_q5_K *o = (ae_block_q5_K *)blk;
  for (int l = 0; l < 32; l++) o->qh[l] = 0;
  for (int e = 0; e < 256; e++) {
    const int j = e >> 5, l = e & 31;
    uint8_t *byte = o->qs + 32 * (j >> 1) + l;
    if (j & 1) *byte = (uint8_t)((*byte & 0x0f) | (q[e] & 15) << 4);
    else *byte = (uint8_t)((*byte & 0xf0) | (q[e] & 15));
    o->qh[l] |= (uint8_t)(((q[e] >> 4) & 1) << j);
  }
}
int ae_repack_q5_K_r4_ref(void *W, int nrows, int ncols, void *tmp) {
  return ref_group_repack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q5_K), AE_RK5_REC, tmp, 0, 2, pack_block_k5);
}
void ae_unpack_q5_K_r4(void *W, int nrows, int ncols, void *tmp) {
  ref_group_unpack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q5_K), AE_RK5_REC, tmp, unpack_block_k5);
}
/* ae_vec_dot_q5_K_ref's sequence on row r read from its group's records. */
void ae_matvec_q5_K_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ref_group_matvec(W, ncols, xq, y, r0, r1, AE_QK_K, sizeof(ae_block_q5_K), AE_RK5_REC, sizeof(ae_block_q8_K), unpack_block_k5, ae_vec_dot_q5_K_ref);
}

/* ---- AE_Q6_K_X (kernels.h; the relaxed build's q6_K layout, block by block in place): the scales and d as q6_K's;
 * bytes 0..191 (ql, qh) = four groups of 48 B, group G holding the 6-bit values v = 64G .. 64G + 63 as U_i (16 values
 * 64G + 16i + e): V_i (16 B at 48G + 16i, i < 3) byte e = U_i[e] | ((U_3[e] >> 2i) & 3) << 6. */
static int q6kx_file_value(const uint8_t *blk, int v) {   /* q6_K's unsigned 6-bit value v of a file-layout block */
  const int h = v >> 7, k = (v >> 5) & 3, l = v & 31;
  const uint8_t lo = blk[64 * h + l + 32 * (k & 1)];
  return (k < 2 ? lo & 0x0f : lo >> 4) | ((blk[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
}
static int q6kx_value(const uint8_t *blk, int v) {   /* value v of an AE_Q6_K_X block */
  const uint8_t *g = blk + 48 * (v >> 6);
  const int i = (v >> 4) & 3, e = v & 15;
  if (i < 3) return g[16 * i + e] & 0x3f;
  return (g[e] >> 6) | (g[16 + e] >> 6) << 2 | (g[32 + e] >> 6) << 4;
}
void ae_repack_q6_K_x_ref(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q6_K), q[256];
    for (int v = 0; v < 256; v++) q[v] = (uint8_t)q6kx_file_value(blk, v);
    for (int G = 0; G < 4; G++)
      for (int i = 0; i < 3; i++)
        for (int e = 0; e < 16; e++)
          blk[48 * G + 16 * i + e] = (uint8_t)(q[64 * G + 16 * i + e] | ((q[64 * G + 48 + e] >> (2 * i)) & 3) << 6);
  }
}
/* q6_K's ql / qh (bytes 0..191 of a file-layout block) from its 256 unsigned 6-bit values */
static void q6k_file_values(uint8_t *blk, const uint8_t q[256]) {
  for (int j = 0; j < 192; j++) blk[j] = 0;
  for (int v = 0; v < 256; v++) {
    const int h = v >> 7, k = (v >> 5) & 3, l = v & 31;
    blk[64 * h + l + 32 * (k & 1)] |= (uint8_t)(k < 2 ? q[v] & 15 : (q[v] & 15) << 4);
    blk[128 + 32 * h + l] |= (uint8_t)(((q[v] >> 4) & 3) << (2 * k));
  }
}
void ae_unpack_q6_K_x(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q6_K), q[256];
    for (int v = 0; v < 256; v++) q[v] = (uint8_t)q6kx_value(blk, v);
    q6k_file_values(blk, q);
  }
}
/* ae_vec_dot_q6_K_ref's sequence on the X layout: each block unpacked into a copy and dotted alone (its (d_w d_x) sumi
 * exactly, as the reference's 0 + x), the blocks' terms summed in order as the reference sums them. */
void ae_matvec_q6_K_x_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  for (int r = r0; r < r1; r++) {
    const ae_block_q6_K *row = (const ae_block_q6_K *)W + (size_t)r * nb;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
      ae_block_q6_K t = row[i];
      ae_unpack_q6_K_x(&t, 1);
      float s;
      ae_vec_dot_q6_K_ref(AE_QK_K, &s, &t, &x[i]);
      sum += s;
    }
    y[r] = sum;
  }
}
/* Row `row` of an AE_Q6_K_X matrix (a repacked q6_K token embedding: get_rows), each block unpacked into a copy and
 * dequantised by to_float (q6_K's). */
void ae_get_row_q6_K_x(const void *W, int row, int ncols, float *y, void (*to_float)(const void *, float *, int)) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q6_K *r = (const ae_block_q6_K *)W + (size_t)row * nb;
  for (int i = 0; i < nb; i++) {
    ae_block_q6_K t = r[i];
    ae_unpack_q6_K_x(&t, 1);
    to_float(&t, y + (size_t)i * AE_QK_K, AE_QK_K);
  }
}

/* ---- AE_Q6_K_R4 (kernels.h; the relaxed build's q6_K layout for rows in groups of 4): an 840-byte record per
 * super-block column: d_k (8 B), the scales in pairs (byte 8 + 8p + 2k + r = sc_k[2p + r]), then per sub-block j
 * 48 B at 72 + 48j: V_i (i < 3) byte e = U_i[e] | ((U_3[e] >> 2i) & 3) << 6, where chunk U_c's byte 4k + i is row k's
 * 6-bit value 16j + 4c + i. ---- */
static void pack_block_k6(const uint8_t *const rows[4], uint8_t *rec) {
  uint8_t u[4][256];
  for (int k = 0; k < 4; k++) {
    for (int v = 0; v < 256; v++) u[k][v] = (uint8_t)q6kx_file_value(rows[k], v);
    __builtin_memcpy(rec + 2 * k, rows[k] + 208, 2);
    for (int p = 0; p < 8; p++)
      for (int r = 0; r < 2; r++) rec[8 + 8 * p + 2 * k + r] = rows[k][192 + 2 * p + r];
  }
  for (int j = 0; j < 16; j++)
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 4; k++)
        for (int e = 0; e < 4; e++)
          rec[72 + 48 * j + 16 * i + 4 * k + e] = (uint8_t)(u[k][16 * j + 4 * i + e] | ((u[k][16 * j + 12 + e] >> (2 * i)) & 3) << 6);
}
/* Row k's super-block of a record back into a q6_K block. */
static void unpack_block_k6(const uint8_t *rec, int k, uint8_t *blk) {
  uint8_t q[256];
  for (int j = 0; j < 16; j++)
    for (int e = 0; e < 4; e++) {
      int top = 0;
      for (int i = 0; i < 3; i++) {
        const uint8_t v = rec[72 + 48 * j + 16 * i + 4 * k + e];
        q[16 * j + 4 * i + e] = v & 0x3f;
        top |= (v >> 6) << (2 * i);
      }
      q[16 * j + 12 + e] = (uint8_t)top;
    }
  q6k_file_values(blk, q);
  for (int p = 0; p < 8; p++)
    for (int r = 0; r < 2; r++) blk[192 + 2 * p + r] = rec[8 + 8 * p + 2 * k + r];
  __builtin_memcpy(blk + 208, rec + 2 * k, 2);
}
int ae_repack_q6_K_r4_ref(void *W, int nrows, int ncols, void *tmp) {
  return ref_group_repack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q6_K), AE_RK6_REC, tmp, 208, -1, pack_block_k6);
}
void ae_unpack_q6_K_r4(void *W, int nrows, int ncols, void *tmp) {
  ref_group_unpack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q6_K), AE_RK6_REC, tmp, unpack_block_k6);
}
/* ae_vec_dot_q6_K_ref's sequence on row r read from its group's records. */
void ae_matvec_q6_K_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ref_group_matvec(W, ncols, xq, y, r0, r1, AE_QK_K, sizeof(ae_block_q6_K), AE_RK6_REC, sizeof(ae_block_q8_K), unpack_block_k6, ae_vec_dot_q6_K_ref);
}
/* Row `row` of an AE_Q6_K_R4 matrix (a repacked q6_K token embedding: get_rows), each block read back and dequantised
 * by to_float (q6_K's). */
void ae_get_row_q6_K_r4(const void *W, int row, int ncols, float *y, void (*to_float)(const void *, float *, int)) {
  const int nb = ncols / AE_QK_K;
  const uint8_t *g = (const uint8_t *)W + (size_t)(row & ~3) * (size_t)nb * sizeof(ae_block_q6_K);
  for (int b = 0; b < nb; b++) {
    ae_block_q6_K t;
    unpack_block_k6(g + (size_t)b * AE_RK6_REC, row & 3, (uint8_t *)&t);
    to_float(&t, y + (size_t)b * AE_QK_K, AE_QK_K);
  }
}

/* ---- AE_Q3_K_X (kernels.h): q3_K's 3-bit values u (0..7) regrouped; scales and d stay ---- */
static int q3k_file_u(const uint8_t *blk, int e) {   /* u of element e of a q3_K block (file layout) */
  const int n = e >> 7, j = (e >> 5) & 3, l = e & 31;
  return ((blk[32 + 32 * n + l] >> (2 * j)) & 3) | ((blk[l] >> (4 * n + j)) & 1) << 2;
}
static int q3kx_u(const uint8_t *blk, int e) {   /* u of element e of an AE_Q3_K_X block */
  const uint8_t *g = blk + 48 * (e >> 7);
  const int t = (e >> 4) & 7, i = e & 15, A = g[i], B = g[16 + i], C = g[32 + i];
  switch (t) {
    case 0: return A & 7;
    case 1: return (A >> 3) & 7;
    case 2: return B & 7;
    case 3: return (B >> 3) & 7;
    case 4: return C & 7;
    case 5: return (C >> 3) & 7;
    case 6: return (A >> 6) | ((C >> 6) & 1) << 2;
    default: return (B >> 6) | (C >> 7) << 2;
  }
}
void ae_repack_q3_K_x_ref(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q3_K), u[256];
    for (int e = 0; e < 256; e++) u[e] = (uint8_t)q3k_file_u(blk, e);
    for (int n = 0; n < 2; n++) {
      const uint8_t *U = u + 128 * n;   /* U[16 t + i] */
      uint8_t *g = blk + 48 * n;
      for (int i = 0; i < 16; i++) {
        g[i] = (uint8_t)(U[i] | U[16 + i] << 3 | (U[96 + i] & 3) << 6);
        g[16 + i] = (uint8_t)(U[32 + i] | U[48 + i] << 3 | (U[112 + i] & 3) << 6);
        g[32 + i] = (uint8_t)(U[64 + i] | U[80 + i] << 3 | (U[96 + i] >> 2) << 6 | (U[112 + i] >> 2) << 7);
      }
    }
  }
}
void ae_unpack_q3_K_x(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    uint8_t *blk = (uint8_t *)W + b * sizeof(ae_block_q3_K), u[256];
    for (int e = 0; e < 256; e++) u[e] = (uint8_t)q3kx_u(blk, e);
    for (int j = 0; j < 96; j++) blk[j] = 0;
    for (int e = 0; e < 256; e++) {
      const int n = e >> 7, j = (e >> 5) & 3, l = e & 31;
      blk[32 + 32 * n + l] |= (uint8_t)((u[e] & 3) << (2 * j));
      blk[l] |= (uint8_t)((u[e] >> 2) << (4 * n + j));
    }
  }
}
/* ae_vec_dot_q3_K_ref's sequence on the X layout: each block unpacked into a copy and dotted alone, the terms summed in
 * order (as ae_matvec_q6_K_x_ref) */
void ae_matvec_q3_K_x_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  for (int r = r0; r < r1; r++) {
    const ae_block_q3_K *row = (const ae_block_q3_K *)W + (size_t)r * nb;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
      ae_block_q3_K t = row[i];
      ae_unpack_q3_K_x(&t, 1);
      float s;
      ae_vec_dot_q3_K_ref(AE_QK_K, &s, &t, &x[i]);
      sum += s;
    }
    y[r] = sum;
  }
}
