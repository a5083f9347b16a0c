/* ae_X entry points: the SIMD128 kernels (what the model calls); per-dtype kernels come from the
 * traits table (src/kernels/dtypes.inc). */
#include "kernels/kernels.h"

void ae_matvec(ae_type t, const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
  const ae_type_traits *tr = ae_traits(t);
  if (tr && tr->matvec) tr->matvec(W, ncols, xq, y, r0, r1);
}

/* Dtypes without a batched kernel: rows in chunks of AE_MATMUL_ROWS (their weights stay in L2 while
 * every vector passes over them); each (chunk, vector) is exactly ae_matvec on those rows, so results
 * equal ae_matvec bit for bit. */
#define AE_MATMUL_ROWS 16
void ae_matmul(ae_type t, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
               float *y, int y_stride, int r0, int r1) {
  const ae_type_traits *tr = ae_traits(t);
  if (!tr || !tr->matvec || r0 >= r1) return;
  /* one vector: the matvec (a batched kernel's 4-token tile would compute 3 idle lanes; same bits either way) */
  if (tr->matmul && nvec > 1) { tr->matmul(W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1); return; }
  for (int rc = r0; rc < r1; rc += AE_MATMUL_ROWS) {
    const int re = rc + AE_MATMUL_ROWS < r1 ? rc + AE_MATMUL_ROWS : r1;
    for (int b = 0; b < nvec; b++)
      tr->matvec(W, ncols, (const uint8_t *)xq + (size_t)b * xq_stride, y + (size_t)b * y_stride, rc, re);
  }
}

int ae_fused_dot = 0;
AE_EXPORT int ae_set_fused_dot(int mask) {
#if defined(__wasm_relaxed_simd__)
  ae_fused_dot = mask & (AE_FUSED_TILES | AE_FUSED_R8);
#else
  (void)mask;
#endif
  return ae_fused_dot;
}

/* Static zero data (finite zero scales): the timing does not depend on the values. The kernel is called through the
 * traits table, so the probe times the very function the forward pass runs (and its optimised code, once tiered up). */
static uint8_t probe_w[8 * 16 * 34], probe_x[8 * 16 * 34];
static float probe_y[8 * 8];
AE_EXPORT int ae_probe_fused_dot(int kind, int on, int reps) {
  const int keep = ae_fused_dot;
  ae_set_fused_dot(on ? keep | kind : keep & ~kind);
  for (int i = 0; i < reps; i++) {
    if (kind == AE_FUSED_R8) ae_matmul(AE_Q8_0_R4, probe_w, 512, probe_x, 16 * 34, 8, probe_y, 8, 0, 8);
    else ae_matmul(AE_Q4_0_R4, probe_w, 512, probe_x, 16 * 34, 8, probe_y, 8, 0, 8);
  }
  ae_fused_dot = keep;
  return (int)probe_y[0];
}

ae_type ae_quantize_row(ae_type t, const float *x, void *y, int n) {
  const ae_type_traits *tr = ae_traits(t);
  if (!tr) return (ae_type)AE_TYPE_COUNT;
  ae_traits(tr->vec_dot_type)->from_float(x, y, n);
  return tr->vec_dot_type;
}

/* Row `row` of an AE_Q8_0_R4 matrix (a repacked q8_0 token embedding: get_rows) as q8_0 blocks, each dequantised by
 * to_float (the file layout's conversion, the same bits). */
void ae_get_row_q8_0_r4(const void *W, int row, int ncols, float *y, void (*to_float)(const void *, float *, int)) {
  const uint8_t *g = (const uint8_t *)W + (size_t)(row & ~3) * ae_row_size(AE_Q8_0, ncols);
  const int k = row & 3;
  for (int b = 0; b < ncols / AE_QK8_0; b++) {
    const uint8_t *rec = g + (size_t)b * AE_R8_REC;
    ae_block_q8_0 blk;
    __builtin_memcpy(&blk.d, rec + 2 * k, 2);
    for (int j = 0; j < 8; j++) __builtin_memcpy(blk.qs + 4 * j, rec + 8 + 16 * j + 4 * k, 4);
    to_float(&blk, y + (size_t)b * AE_QK8_0, AE_QK8_0);
  }
}

void ae_get_row(ae_type t, const void *W, int row, int ncols, float *y) {
  if (t == AE_Q8_0_R4) { ae_get_row_q8_0_r4(W, row, ncols, y, ae_traits(AE_Q8_0)->to_float); return; }
  if (t == AE_Q6_K_X) { ae_get_row_q6_K_x(W, row, ncols, y, ae_traits(AE_Q6_K)->to_float); return; }
  if (t == AE_Q6_K_R4) { ae_get_row_q6_K_r4(W, row, ncols, y, ae_traits(AE_Q6_K)->to_float); return; }
  const ae_type_traits *tr = ae_traits(t);
  if (!tr) return;
  tr->to_float((const uint8_t *)W + (size_t)row * ae_row_size(t, ncols), y, ncols);
}

static const ae_axpy_rows_fn k_axpy[AE_TYPE_COUNT] = {
  [AE_F32] = ae_axpy_rows_f32_simd128, [AE_F16] = ae_axpy_rows_f16_simd128,
  [AE_Q8_0] = ae_axpy_rows_q8_0_simd128, [AE_Q4_0] = ae_axpy_rows_q4_0_simd128,
};
int ae_axpy_rows_supported(int t) { return t >= 0 && t < AE_TYPE_COUNT && k_axpy[t] != 0; }
void ae_axpy_rows(ae_type t, const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt,
                  int d0, int d1, float *y) {
  if (ae_axpy_rows_supported(t)) k_axpy[t](base, rs, idx, coef, cnt, d0, d1, y);
}

void ae_rmsnorm(float *y, const float *x, const float *w, int n, float eps) { ae_rmsnorm_simd128(y, x, w, n, eps); }
void ae_rope(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox) {
  ae_rope_simd128(x, n_heads, head_dim, rot_dim, cs, neox);
}
void ae_softmax(float *x, int n) { ae_softmax_simd128(x, n); }
void ae_silu_mul(float *g, const float *u, int n) { ae_silu_mul_simd128(g, u, n); }
void ae_gelu(float *x, int n) { ae_gelu_simd128(x, n); }
void ae_gelu_mul(float *g, const float *u, int n) { ae_gelu_mul_simd128(g, u, n); }
void ae_softcap(float *x, int n, float cap) { ae_softcap_simd128(x, n, cap); }
void ae_add(float *y, const float *x, int n) { ae_add_simd128(y, x, n); }
void ae_attention(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                  int kv_stride, float scale, float softcap, float *att) {
  ae_attention_simd128(out, q, k, v, n_kv, head_dim, kv_stride, scale, softcap, att);
}
int ae_argmax(const float *x, int n) { return ae_argmax_simd128(x, n); }
