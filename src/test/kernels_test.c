/* kernels-test module: thin exports over every reference and SIMD kernel (tests/kernels*.test.mjs),
 * bandwidth probes and pool jobs (tests and bench/kernels.mjs). Pointers are byte offsets. */
#include <wasm_simd128.h>
#include "core/pool.h"
#include "kernels/kernels.h"

#define TR(ref, t) ((ref) ? ae_traits_ref((ae_type)(t)) : ae_traits((ae_type)(t)))

AE_EXPORT float kt_vec_dot(int type, int ref, int n, const void *w, const void *x) {
  const ae_type_traits *tr = TR(ref, type);
  float s = 0.0f;
  if (tr && tr->vec_dot) tr->vec_dot(n, &s, w, x);
  return s;
}
/* ae_quantize_row(_ref): activation conversion for weights of dtype `type`; returns the vec_dot_type */
AE_EXPORT int kt_quantize(int type, int ref, const float *x, void *y, int n) {
  return ref ? ae_quantize_row_ref((ae_type)type, x, y, n) : ae_quantize_row((ae_type)type, x, y, n);
}
AE_EXPORT int kt_from_float(int type, int ref, const float *x, void *y, int n) {
  const ae_type_traits *tr = TR(ref, type);
  if (!tr) return -1;
  tr->from_float(x, y, n);
  return 0;
}
AE_EXPORT int kt_to_float(int type, int ref, const void *x, float *y, int n) {
  const ae_type_traits *tr = TR(ref, type);
  if (!tr) return -1;
  tr->to_float(x, y, n);
  return 0;
}
/* field 0 block size, 1 type size, 2 vec_dot_type, 3 has vec_dot, 4 is_weight, 5 / 6 scale offsets,
 * 7 has its own batched kernel (matmul); -1 for an unknown type */
AE_EXPORT int kt_traits(int type, int ref, int field) {
  const ae_type_traits *tr = TR(ref, type);
  if (!tr) return -1;
  switch (field) {
    case 0: return tr->blck_size;
    case 1: return tr->type_size;
    case 2: return (int)tr->vec_dot_type;
    case 3: return tr->vec_dot != 0;
    case 4: return tr->is_weight;
    case 5: return tr->scale_off[0];
    case 6: return tr->scale_off[1];
    case 7: return tr->matmul != 0;
    default: return -1;
  }
}
AE_EXPORT int kt_row_size(int type, int n) { return (int)ae_row_size((ae_type)type, n); }
AE_EXPORT void kt_matvec(int type, int ref, const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (ref) ae_matvec_ref((ae_type)type, W, ncols, xq, y, r0, r1);
  else ae_matvec((ae_type)type, W, ncols, xq, y, r0, r1);
}
AE_EXPORT void kt_matmul(int type, const void *W, int ncols, const void *xq, int xq_stride, int nvec, float *y,
                         int y_stride, int r0, int r1) {
  ae_matmul((ae_type)type, W, ncols, xq, (size_t)xq_stride, nvec, y, y_stride, r0, r1);
}
AE_EXPORT float kt_fp16_to_fp32(int h) { return ae_fp16_to_fp32((ae_fp16)h); }
#if defined(__wasm_simd128__)
#include "kernels/simd128/simd128_util.h"
/* the k-quant kernels' 4-scale conversion (simd128_util.h ae_h4_f32): 4 halves at p -> 4 floats at y */
AE_EXPORT void kt_h4_f32(const void *p, float *y) { wasm_v128_store(y, ae_h4_f32(p)); }
#endif
AE_EXPORT int kt_fp32_to_fp16(float f) { return ae_fp32_to_fp16(f); }
AE_EXPORT void kt_rmsnorm(int ref, float *y, const float *x, const float *w, int n, float eps) {
  if (ref) ae_rmsnorm_ref(y, x, w, n, eps); else ae_rmsnorm(y, x, w, n, eps);
}
AE_EXPORT void kt_rope_cos_sin(float *cs, int pos, int rot_dim, float theta) { ae_rope_cos_sin(cs, pos, rot_dim, theta); }
AE_EXPORT void kt_rope(int ref, float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox) {
  if (ref) ae_rope_ref(x, n_heads, head_dim, rot_dim, cs, neox); else ae_rope(x, n_heads, head_dim, rot_dim, cs, neox);
}
AE_EXPORT void kt_softmax(int ref, float *x, int n) { if (ref) ae_softmax_ref(x, n); else ae_softmax(x, n); }
AE_EXPORT void kt_silu_mul(int ref, float *g, const float *u, int n) { if (ref) ae_silu_mul_ref(g, u, n); else ae_silu_mul(g, u, n); }
AE_EXPORT void kt_gelu(int ref, float *x, int n) { if (ref) ae_gelu_ref(x, n); else ae_gelu(x, n); }
AE_EXPORT void kt_gelu_mul(int ref, float *g, const float *u, int n) { if (ref) ae_gelu_mul_ref(g, u, n); else ae_gelu_mul(g, u, n); }
AE_EXPORT void kt_softcap(int ref, float *x, int n, float cap) { if (ref) ae_softcap_ref(x, n, cap); else ae_softcap(x, n, cap); }
AE_EXPORT void kt_add(int ref, float *y, const float *x, int n) { if (ref) ae_add_ref(y, x, n); else ae_add(y, x, n); }
AE_EXPORT void kt_attention(int ref, float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                            int kv_stride, float scale, float softcap, float *att) {
  if (ref) ae_attention_ref(out, q, k, v, n_kv, head_dim, kv_stride, scale, softcap, att);
  else ae_attention(out, q, k, v, n_kv, head_dim, kv_stride, scale, softcap, att);
}
AE_EXPORT void kt_get_row(int ref, int type, const void *W, int row, int ncols, float *y) {
  if (ref) ae_get_row_ref((ae_type)type, W, row, ncols, y); else ae_get_row((ae_type)type, W, row, ncols, y);
}
AE_EXPORT int kt_argmax(int ref, const float *x, int n) { return ref ? ae_argmax_ref(x, n) : ae_argmax(x, n); }
AE_EXPORT void kt_vexp(float *y, const float *x, int n) { ae_vexp_simd128(y, x, n); }
/* fn: 0 expf, 1 logf, 2 tanhf, 3 powf(a, b), 4 sinf, 5 cosf */
AE_EXPORT float kt_scalar(int fn, float a, float b) {
  switch (fn) {
    case 0: return ae_expf(a);
    case 1: return ae_logf(a);
    case 2: return ae_tanhf(a);
    case 3: return ae_powf(a, b);
    case 4: return ae_sinf(a);
    case 5: return ae_cosf(a);
    default: return 0.0f;
  }
}

/* ---- bandwidth probes ---- */
/* Streaming read: xor of every 16-byte word with 4 independent accumulators (bytes a multiple of 64). */
AE_EXPORT int kt_probe_read(const void *p, int bytes) {
  const uint8_t *s = (const uint8_t *)p;
  v128_t a = wasm_i32x4_splat(0), b = a, c = a, d = a;
  for (int i = 0; i + 64 <= bytes; i += 64) {
    a = wasm_v128_xor(a, wasm_v128_load(s + i));
    b = wasm_v128_xor(b, wasm_v128_load(s + i + 16));
    c = wasm_v128_xor(c, wasm_v128_load(s + i + 32));
    d = wasm_v128_xor(d, wasm_v128_load(s + i + 48));
  }
  const v128_t r = wasm_v128_xor(wasm_v128_xor(a, b), wasm_v128_xor(c, d));
  return wasm_i32x4_extract_lane(r, 0) ^ wasm_i32x4_extract_lane(r, 1) ^ wasm_i32x4_extract_lane(r, 2) ^
         wasm_i32x4_extract_lane(r, 3);
}
/* Copy with v128 loads/stores (bytes a multiple of 64). */
AE_EXPORT void kt_probe_copy(void *dst, const void *src, int bytes) {
  uint8_t *d = (uint8_t *)dst;
  const uint8_t *s = (const uint8_t *)src;
  for (int i = 0; i + 64 <= bytes; i += 64) {
    const v128_t a = wasm_v128_load(s + i), b = wasm_v128_load(s + i + 16);
    const v128_t c = wasm_v128_load(s + i + 32), e = wasm_v128_load(s + i + 48);
    wasm_v128_store(d + i, a); wasm_v128_store(d + i + 16, b);
    wasm_v128_store(d + i + 32, c); wasm_v128_store(d + i + 48, e);
  }
}

/* ---- pool jobs ----
 * 1 matvec   {type, W, ncols, nrows, xq, y}: thread ith does ae_split_aligned(nrows, 4, ith, nth)
 * 2 read     {p, bytes, out}: thread ith reads its 64-byte-aligned share, out[ith] = result
 * 3 copy     {dst, src, bytes}
 * 4 quantise + matvec {type, W, ncols, nrows, xq, y, x}: thread 0 quantises x into xq, barrier, matvec */
typedef struct { int32_t type; uint32_t W; int32_t ncols, nrows; uint32_t xq, y, x; } kt_matvec_args;
typedef struct { uint32_t p; int32_t bytes; uint32_t out; } kt_read_args;
typedef struct { uint32_t dst, src; int32_t bytes; } kt_copy_args;

void ae_job_run(int32_t job, uint32_t arg, int ith, int nth, ae_pool *pool, int32_t tag) {
  (void)tag;
  switch (job) {
    case 1:
    case 4: {
      const kt_matvec_args *a = (const kt_matvec_args *)(uintptr_t)arg;
      if (job == 4) {
        if (ith == 0) ae_quantize_row((ae_type)a->type, (const float *)(uintptr_t)a->x, (void *)(uintptr_t)a->xq, a->ncols);
        ae_barrier(pool);
      }
      int r0, r1;
      ae_split_aligned(a->nrows, 4, ith, nth, &r0, &r1);
      ae_matvec((ae_type)a->type, (const void *)(uintptr_t)a->W, a->ncols, (const void *)(uintptr_t)a->xq,
                (float *)(uintptr_t)a->y, r0, r1);
      break;
    }
    case 2: {
      const kt_read_args *a = (const kt_read_args *)(uintptr_t)arg;
      int c0, c1;
      ae_split(a->bytes / 64, ith, nth, &c0, &c1);
      ((int32_t *)(uintptr_t)a->out)[ith] =
          kt_probe_read((const uint8_t *)(uintptr_t)a->p + (size_t)c0 * 64, (c1 - c0) * 64);
      break;
    }
    case 3: {
      const kt_copy_args *a = (const kt_copy_args *)(uintptr_t)arg;
      int c0, c1;
      ae_split(a->bytes / 64, ith, nth, &c0, &c1);
      kt_probe_copy((uint8_t *)(uintptr_t)a->dst + (size_t)c0 * 64, (const uint8_t *)(uintptr_t)a->src + (size_t)c0 * 64,
                    (c1 - c0) * 64);
      break;
    }
    default: break;
  }
}

/* Load-time repacked q4_0 (kernels.h AE_Q4_0_R4): its type id, the repack (SIMD or reference) and the unpack, in
 * place (tmp: 4 row sizes). kt_matvec / kt_matmul take the type id like any other. */
AE_EXPORT int kt_q4_0_r4_type(void) { return AE_Q4_0_R4; }
AE_EXPORT int kt_repack_q4_0_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q4_0_r4_ref(W, nrows, ncols, tmp) : ae_repack_q4_0_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q4_0_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q4_0_r4(W, nrows, ncols, tmp); }
/* The relaxed build's q5_0 layout (kernels.h AE_Q5_0_R4): type id, repack (SIMD or reference), unpack. */
AE_EXPORT int kt_q5_0_r4_type(void) { return AE_Q5_0_R4; }
AE_EXPORT int kt_repack_q5_0_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q5_0_r4_ref(W, nrows, ncols, tmp) : ae_repack_q5_0_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q5_0_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q5_0_r4(W, nrows, ncols, tmp); }
AE_EXPORT int kt_q5_1_r4_type(void) { return AE_Q5_1_R4; }
AE_EXPORT int kt_repack_q5_1_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q5_1_r4_ref(W, nrows, ncols, tmp) : ae_repack_q5_1_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q5_1_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q5_1_r4(W, nrows, ncols, tmp); }
/* The relaxed build's q8_0 layout (kernels.h AE_Q8_0_R4): type id, repack (SIMD or reference), unpack. */
AE_EXPORT int kt_q8_0_r4_type(void) { return AE_Q8_0_R4; }
AE_EXPORT int kt_repack_q8_0_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q8_0_r4_ref(W, nrows, ncols, tmp) : ae_repack_q8_0_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q8_0_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q8_0_r4(W, nrows, ncols, tmp); }
/* The relaxed build's q4_K layout (kernels.h AE_Q4_K_R4): type id, repack (SIMD or reference), unpack. */
AE_EXPORT int kt_q4_K_r4_type(void) { return AE_Q4_K_R4; }
AE_EXPORT int kt_repack_q4_K_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q4_K_r4_ref(W, nrows, ncols, tmp) : ae_repack_q4_K_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q4_K_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q4_K_r4(W, nrows, ncols, tmp); }
/* The relaxed build's q5_K row-group layout (kernels.h AE_Q5_K_R4). */
AE_EXPORT int kt_q5_K_r4_type(void) { return AE_Q5_K_R4; }
AE_EXPORT int kt_repack_q5_K_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q5_K_r4_ref(W, nrows, ncols, tmp) : ae_repack_q5_K_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q5_K_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q5_K_r4(W, nrows, ncols, tmp); }
/* The relaxed build's q5_K layout (kernels.h AE_Q5_K_X, block by block): type id, repack (SIMD or reference), unpack. */
AE_EXPORT int kt_q5_K_x_type(void) { return AE_Q5_K_X; }
AE_EXPORT void kt_repack_q5_K_x(int ref, void *W, int nblocks) { if (ref) ae_repack_q5_K_x_ref(W, (size_t)nblocks); else ae_repack_q5_K_x(W, (size_t)nblocks); }
AE_EXPORT void kt_unpack_q5_K_x(void *W, int nblocks) { ae_unpack_q5_K_x(W, (size_t)nblocks); }
/* The relaxed build's q6_K row-group layout (kernels.h AE_Q6_K_R4). */
AE_EXPORT int kt_q6_K_r4_type(void) { return AE_Q6_K_R4; }
AE_EXPORT int kt_repack_q6_K_r4(int ref, void *W, int nrows, int ncols, void *tmp) {
  return ref ? ae_repack_q6_K_r4_ref(W, nrows, ncols, tmp) : ae_repack_q6_K_r4(W, nrows, ncols, tmp);
}
AE_EXPORT void kt_unpack_q6_K_r4(void *W, int nrows, int ncols, void *tmp) { ae_unpack_q6_K_r4(W, nrows, ncols, tmp); }
/* The same for q3_K (kernels.h AE_Q3_K_X). */
AE_EXPORT int kt_q3_K_x_type(void) { return AE_Q3_K_X; }
AE_EXPORT void kt_repack_q3_K_x(int ref, void *W, int nblocks) { if (ref) ae_repack_q3_K_x_ref(W, (size_t)nblocks); else ae_repack_q3_K_x(W, (size_t)nblocks); }
AE_EXPORT void kt_unpack_q3_K_x(void *W, int nblocks) { ae_unpack_q3_K_x(W, (size_t)nblocks); }
/* The same for q6_K (kernels.h AE_Q6_K_X). */
AE_EXPORT int kt_q6_K_x_type(void) { return AE_Q6_K_X; }
AE_EXPORT void kt_repack_q6_K_x(int ref, void *W, int nblocks) { if (ref) ae_repack_q6_K_x_ref(W, (size_t)nblocks); else ae_repack_q6_K_x(W, (size_t)nblocks); }
AE_EXPORT void kt_unpack_q6_K_x(void *W, int nblocks) { ae_unpack_q6_K_x(W, (size_t)nblocks); }
/* The same for q5_0's load-time layout (kernels.h AE_Q5_0_X8), block by block. */
AE_EXPORT int kt_q5_0_x8_type(void) { return AE_Q5_0_X8; }
AE_EXPORT void kt_repack_q5_0_x8(int ref, void *W, int nblocks) {
  if (ref) ae_repack_q5_0_x8_ref(W, (size_t)nblocks); else ae_repack_q5_0_x8(W, (size_t)nblocks);
}
AE_EXPORT void kt_unpack_q5_0_x8(void *W, int nblocks) { ae_unpack_q5_0_x8(W, (size_t)nblocks); }
AE_EXPORT int kt_q5_1_x8_type(void) { return AE_Q5_1_X8; }
AE_EXPORT void kt_repack_q5_1_x8(int ref, void *W, int nblocks) {
  if (ref) ae_repack_q5_1_x8_ref(W, (size_t)nblocks); else ae_repack_q5_1_x8(W, (size_t)nblocks);
}
AE_EXPORT void kt_unpack_q5_1_x8(void *W, int nblocks) { ae_unpack_q5_1_x8(W, (size_t)nblocks); }

/* Table indices (function pointers) of the hot SIMD kernels, so tests/wasm-modules.test.mjs can find them
 * in `wasm-objdump -d` output (the linked modules carry no name section); -1 when there is none.
 * kt_dtype_fn: a dtype's kernels from the traits table, which = 0 vec_dot, 1 matvec rows, 2 batched matmul.
 * kt_kernel_fn: other kernels: 0 attention, 1..4 axpy_rows f32 / f16 / q8_0 / q4_0, 5 gather_dot,
 * 6..9 attn_accum f32 / f16 / q8_0 / q4_0; -1 past the end. */
typedef void (*kt_any_fn)(void);
AE_EXPORT int kt_dtype_fn(int type, int which) {
  const ae_type_traits *tr = ae_traits((ae_type)type);
  if (!tr) return -1;
  const kt_any_fn f = which == 0 ? (kt_any_fn)tr->vec_dot : which == 1 ? (kt_any_fn)tr->matvec
                    : which == 2 ? (kt_any_fn)tr->matmul : 0;
  return f ? (int)(uintptr_t)f : -1;
}
AE_EXPORT int kt_kernel_fn(int i) {
  static const kt_any_fn fns[] = {
    (kt_any_fn)ae_attention_simd128, (kt_any_fn)ae_axpy_rows_f32_simd128, (kt_any_fn)ae_axpy_rows_f16_simd128,
    (kt_any_fn)ae_axpy_rows_q8_0_simd128, (kt_any_fn)ae_axpy_rows_q4_0_simd128, (kt_any_fn)ae_gather_dot_simd128,
    (kt_any_fn)ae_attn_accum_f32_simd128, (kt_any_fn)ae_attn_accum_f16_simd128, (kt_any_fn)ae_attn_accum_q8_0_simd128,
    (kt_any_fn)ae_attn_accum_q4_0_simd128,
  };
  if (i < 0 || i >= (int)(sizeof fns / sizeof fns[0])) return -1;
  return (int)(uintptr_t)fns[i];
}

/* ffn-saturated kernels (kernels.h): SIMD (ref = 0) or reference (ref = 1). kt_gather_dot's SIMD path
 * prepares x into prep (nb * AE_GATHER_BLK_BYTES, 16-byte aligned) and dx (nb floats) first. */
AE_EXPORT void kt_axpy_rows(int ref, int type, const uint8_t *base, int rs, const int32_t *idx, const float *coef, int cnt,
                            int d0, int d1, float *y) {
  if (ref) ae_axpy_rows_ref((ae_type)type, base, (size_t)rs, idx, coef, cnt, d0, d1, y);
  else ae_axpy_rows((ae_type)type, base, (size_t)rs, idx, coef, cnt, d0, d1, y);
}
AE_EXPORT int kt_axpy_supported(int type) { return ae_axpy_rows_supported(type); }
AE_EXPORT void kt_gather_dot(int ref, int type, const uint8_t *const *rows, int cnt, int nb, const void *xq, void *prep,
                             float *dx, float *y) {
  if (ref) { ae_gather_dot_ref((ae_type)type, rows, cnt, nb, xq, y); return; }
  ae_gather_prep_simd128(xq, nb, prep, dx);
  ae_gather_dot_simd128((ae_type)type, rows, cnt, nb, prep, dx, y);
}

/* Typed-KV attention (kernels.h): SIMD (ref = 0) or reference (ref = 1). runs: nrun ae_kv_run structs the host
 * wrote (k, v, kt, vt, n: 5 x 4 bytes each). */
AE_EXPORT void kt_attn_accum(int ref, int type, const void *v, int n, int hd, const float *att, float *out) {
  if (ref) ae_attn_accum_ref((ae_type)type, v, n, hd, att, out); else ae_attn_accum((ae_type)type, v, n, hd, att, out);
}
AE_EXPORT int kt_attn_accum_supported(int type) { return ae_attn_accum_supported(type); }
AE_EXPORT int kt_kv_row_size(int type, int hd) { return (int)ae_kv_row_size((ae_type)type, hd); }
AE_EXPORT int kt_kv_types_ok(int kt, int vt, int hd) { return ae_kv_types_ok(kt, vt, hd); }
AE_EXPORT int kt_kv_run_size(void) { return (int)sizeof(ae_kv_run); }
AE_EXPORT void kt_attention_kv(int ref, float *out, int out_stride, const float *q, int q_stride, int ng, const ae_kv_run *run,
                               int nrun, int hd, float scale, float softcap, float *att, int att_stride, void *qbuf) {
  if (ref) ae_attention_kv_ref(out, out_stride, q, q_stride, ng, run, nrun, hd, scale, softcap, att, att_stride, qbuf);
  else ae_attention_kv(out, out_stride, q, q_stride, ng, run, nrun, hd, scale, softcap, att, att_stride, qbuf);
}
/* ae_attention_kv_multi (ref = 0) or its reference; lohi: nq lo values then nq hi values */
AE_EXPORT void kt_attention_kv_multi(int ref, float *out, int out_stride, int out_tok, const float *q, int q_stride, int q_tok,
                                     int ng, int nq, const int *lohi, const ae_kv_run *run, int nrun, int hd, float scale,
                                     float softcap, float *att, int att_stride, void *qbuf) {
  if (ref) ae_attention_kv_multi_ref(out, out_stride, out_tok, q, q_stride, q_tok, ng, nq, lohi, lohi + nq, run, nrun, hd,
                                     scale, softcap, att, att_stride, qbuf);
  else ae_attention_kv_multi(out, out_stride, out_tok, q, q_stride, q_tok, ng, nq, lohi, lohi + nq, run, nrun, hd, scale,
                             softcap, att, att_stride, qbuf);
}
