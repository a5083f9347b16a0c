/* Native (non-wasm) build of the portable C for the fuzz targets and sanitizer runs: the SIMD128 entry points the
 * dispatch and traits tables name are the scalar references here (wasm SIMD intrinsics do not compile natively),
 * and the wasm imports of forward.c (clock, FFN modules) are stubs. Nothing here is part of the wasm modules. */
#include "kernels/kernels.h"
#include "core/pool.h"
#include "core/status.h"
#include "model/model.h"

#define AE_NAT_A(T)                                                                                   \
  void ae_to_float_##T##_simd128(const void *x, float *y, int n) { ae_to_float_##T##_ref(x, y, n); }  \
  void ae_from_float_##T##_simd128(const float *x, void *y, int n) { ae_from_float_##T##_ref(x, y, n); }
#define AE_NAT_W(T, ID)                                                                               \
  AE_NAT_A(T)                                                                                         \
  void ae_vec_dot_##T##_simd128(int n, float *s, const void *w, const void *x) { ae_vec_dot_##T##_ref(n, s, w, x); } \
  void ae_matvec_rows_##T##_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {            \
    const size_t rs = ae_row_size(AE_##ID, ncols);                                                    \
    for (int r = r0; r < r1; r++) ae_vec_dot_##T##_ref(ncols, &y[r], (const uint8_t *)W + (size_t)r * rs, xq);      \
  }
#define AE_NAT_WM(T, ID)                                                                              \
  AE_NAT_W(T, ID)                                                                                     \
  void ae_matmul_rows_##T##_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,  \
                                    int y_stride, int r0, int r1) {                                   \
    for (int b = 0; b < nvec; b++)                                                                    \
      ae_matvec_rows_##T##_simd128(W, ncols, (const uint8_t *)xq + (size_t)b * xq_stride, y + (size_t)b * y_stride, r0, r1); \
  }
#define AE_NAT_KIND_A(T, ID) AE_NAT_A(T)
#define AE_NAT_KIND_W(T, ID) AE_NAT_W(T, ID)
#define AE_NAT_KIND_WM(T, ID) AE_NAT_WM(T, ID)
#define AE_DTYPE(ID, name, id, blck, bytes, act, kind, s0, s1) AE_NAT_KIND_##kind(name, ID)
#include "kernels/dtypes.inc"

#define AE_NAT_AXPY(T, ID)                                                                            \
  void ae_axpy_rows_##T##_simd128(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, \
                                  int d0, int d1, float *y) { ae_axpy_rows_ref(AE_##ID, base, rs, idx, coef, cnt, d0, d1, y); }
AE_NAT_AXPY(f32, F32) AE_NAT_AXPY(f16, F16) AE_NAT_AXPY(q8_0, Q8_0) AE_NAT_AXPY(q4_0, Q4_0)

/* The SIMD matvec / GEMM entry points of a layout T: its scalar reference matvec (per token for the GEMM) */
#define AE_NAT_MV(T)                                                                                              \
  void ae_matvec_rows_##T##_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {           \
    ae_matvec_##T##_ref(W, ncols, xq, y, r0, r1);                                                                   \
  }                                                                                                                 \
  void ae_matmul_rows_##T##_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, \
                                    int y_stride, int r0, int r1) {                                                 \
    for (int b = 0; b < nvec; b++)                                                                                  \
      ae_matvec_##T##_ref(W, ncols, (const uint8_t *)xq + (size_t)b * xq_stride, y + (size_t)b * y_stride, r0, r1); \
  }

/* load-time repacked q4_0 (kernels.h AE_Q4_0_R4): the scalar repack and reference matvec */
int ae_repack_q4_0_r4(void *W, int nrows, int ncols, void *tmp) { return ae_repack_q4_0_r4_ref(W, nrows, ncols, tmp); }
AE_NAT_MV(q4_0_r4)

/* load-time repacked q5_0 / q5_1 (kernels.h AE_Q5_0_X8, AE_Q5_1_X8): the same */
void ae_repack_q5_0_x8(void *W, size_t nblocks) { ae_repack_q5_0_x8_ref(W, nblocks); }
AE_NAT_MV(q5_0_x8)

void ae_repack_q5_1_x8(void *W, size_t nblocks) { ae_repack_q5_1_x8_ref(W, nblocks); }
AE_NAT_MV(q5_1_x8)

/* the relaxed build's q5_0 / q5_1 / q8_0 / q4_K / q6_K / q5_K row-group layouts (kernels.h AE_Q5_0_R4, AE_Q5_1_R4, AE_Q8_0_R4,
 * AE_Q4_K_R4, AE_Q6_K_R4, AE_Q5_K_R4): the scalar repack and reference */
#define AE_NAT_R45(T)                                                                                        \
  int ae_repack_##T##_r4(void *W, int nrows, int ncols, void *tmp) { return ae_repack_##T##_r4_ref(W, nrows, ncols, tmp); } \
  AE_NAT_MV(T##_r4)
AE_NAT_R45(q5_0) AE_NAT_R45(q5_1) AE_NAT_R45(q8_0) AE_NAT_R45(q4_K) AE_NAT_R45(q6_K) AE_NAT_R45(q5_K)
/* the relaxed build's q5_K / q6_K block layouts (kernels.h AE_Q5_K_X, AE_Q6_K_X): the same */
void ae_repack_q5_K_x(void *W, size_t nblocks) { ae_repack_q5_K_x_ref(W, nblocks); }
void ae_repack_q6_K_x(void *W, size_t nblocks) { ae_repack_q6_K_x_ref(W, nblocks); }
AE_NAT_MV(q6_K_x)
AE_NAT_MV(q5_K_x)
/* the relaxed build's q3_K block layout (kernels.h AE_Q3_K_X): the same */
void ae_repack_q3_K_x(void *W, size_t nblocks) { ae_repack_q3_K_x_ref(W, nblocks); }
AE_NAT_MV(q3_K_x)

void ae_rmsnorm_simd128(float *y, const float *x, const float *w, int n, float eps) { ae_rmsnorm_ref(y, x, w, n, eps); }
void ae_rope_simd128(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox) { ae_rope_ref(x, n_heads, head_dim, rot_dim, cs, neox); }
void ae_softmax_simd128(float *x, int n) { ae_softmax_ref(x, n); }
void ae_silu_mul_simd128(float *g, const float *u, int n) { ae_silu_mul_ref(g, u, n); }
void ae_gelu_simd128(float *x, int n) { ae_gelu_ref(x, n); }
void ae_gelu_mul_simd128(float *g, const float *u, int n) { ae_gelu_mul_ref(g, u, n); }
void ae_softcap_simd128(float *x, int n, float cap) { ae_softcap_ref(x, n, cap); }
void ae_add_simd128(float *y, const float *x, int n) { ae_add_ref(y, x, n); }
void ae_attention_simd128(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                          int kv_stride, float scale, float softcap, float *att) {
  ae_attention_ref(out, q, k, v, n_kv, head_dim, kv_stride, scale, softcap, att);
}
int ae_argmax_simd128(const float *x, int n) { return ae_argmax_ref(x, n); }

double ae_clock_ms(void) { return 0.0; }
int ae_ffn_fused_run(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool) { (void)m; (void)layer; (void)n; (void)ith; (void)nth; (void)pool; return AE_ERR_UNSUPPORTED; }
int ae_ffn_saturated_run(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool) { (void)m; (void)layer; (void)n; (void)ith; (void)nth; (void)pool; return AE_ERR_UNSUPPORTED; }

/* KV-cache attention (src/kernels/simd128/attn_kv_simd128.c holds these next to its SIMD kernels): the same dtype
 * rules here, the reference attention. */
int ae_attn_accum_supported(int t) { return t == AE_F32 || t == AE_F16 || t == AE_Q8_0 || t == AE_Q4_0; }
void ae_attn_accum(ae_type t, const void *v, int n, int head_dim, const float *att, float *out) {
  if (ae_attn_accum_supported(t) && n > 0) ae_attn_accum_ref(t, v, n, head_dim, att, out);
}
int ae_kv_types_ok(int kt, int vt, int head_dim) {
  if (!ae_is_weight_type(kt) || !ae_attn_accum_supported(vt) || head_dim <= 0 || head_dim > 1024) return 0;
  return ae_traits((ae_type)kt)->matvec != 0;
}
size_t ae_kv_row_size(ae_type t, int head_dim) {
  const int b = ae_traits(t)->blck_size;
  return ae_row_size(t, (head_dim + b - 1) / b * b);
}
void ae_attention_kv(float *out, int out_stride, const float *q, int q_stride, int ng, const ae_kv_run *run, int nrun,
                     int head_dim, float scale, float softcap, float *att, int att_stride, void *qbuf) {
  ae_attention_kv_ref(out, out_stride, q, q_stride, ng, run, nrun, head_dim, scale, softcap, att, att_stride, qbuf);
}
void ae_attention_kv_multi(float *out, int out_stride, int out_tok, const float *q, int q_stride, int q_tok, int ng, int nq,
                           const int *lo, const int *hi, const ae_kv_run *run, int nrun, int head_dim, float scale,
                           float softcap, float *att, int att_stride, void *qbuf) {
  ae_attention_kv_multi_ref(out, out_stride, out_tok, q, q_stride, q_tok, ng, nq, lo, hi, run, nrun, head_dim, scale, softcap,
                            att, att_stride, qbuf);
}
