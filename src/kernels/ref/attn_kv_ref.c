/* Scalar references of the typed-KV attention (src/kernels/simd128/attn_kv_simd128.c; contracts in kernels.h). */
#include "kernels/kernels.h"

void ae_attn_accum_ref(ae_type t, const void *v, int n, int hd, const float *att, float *out) {
  const size_t rs = ae_kv_row_size(t, hd);
  for (int d = 0; d < hd; d++) {
    float o = out[d];
    for (int p = 0; p < n; p++) {
      const uint8_t *row = (const uint8_t *)v + (size_t)p * rs;
      float w, s = att[p];
      switch (t) {
        case AE_F32: w = ((const float *)row)[d]; break;
        case AE_F16: w = ae_fp16_to_fp32(((const ae_fp16 *)row)[d]); break;
        case AE_Q8_0: {
          const ae_block_q8_0 *b = (const ae_block_q8_0 *)row + d / AE_QK8_0;
          s = att[p] * ae_fp16_to_fp32(b->d);
          w = (float)b->qs[d % AE_QK8_0];
          break;
        }
        case AE_Q4_0: {
          const ae_block_q4_0 *b = (const ae_block_q4_0 *)row + d / AE_QK4_0;
          const int j = d % AE_QK4_0;
          s = att[p] * ae_fp16_to_fp32(b->d);
          w = (float)((j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4) - 8);
          break;
        }
        default: return;
      }
      o = o + s * w;
    }
    out[d] = o;
  }
}

void ae_attention_kv_ref(float *out, int out_stride, const float *q, int q_stride, int ng, const ae_kv_run *run, int nrun,
                         int hd, float scale, float softcap, float *att, int att_stride, void *qbuf) {
  for (int j = 0; j < ng; j++) {
    float *a = att + (size_t)j * att_stride, *o = out + (size_t)j * out_stride;
    int total = 0;
    for (int r = 0; r < nrun; r++) {
      const ae_type kt = (ae_type)run[r].kt;
      const int blk = ae_traits_ref(kt)->blck_size, hdk = (hd + blk - 1) / blk * blk;
      float *pad = (float *)((uint8_t *)qbuf + (size_t)ng * AE_KV_PAD(hd) * 4);
      for (int i = 0; i < hdk; i++) pad[i] = i < hd ? q[(size_t)j * q_stride + i] : 0.0f;
      const ae_type vt = ae_quantize_row_ref(kt, pad, qbuf, hdk);
      const void *qa = vt == AE_F32 ? (const void *)pad : qbuf;
      ae_matvec_ref(kt, run[r].k, hdk, qa, a + total, 0, run[r].n);
      total += run[r].n;
    }
    for (int t = 0; t < total; t++) a[t] = a[t] * scale;
    if (softcap > 0.0f) ae_softcap_ref(a, total, softcap);
    ae_softmax_ref(a, total);
    for (int d = 0; d < hd; d++) o[d] = 0.0f;
    int off = 0;
    for (int r = 0; r < nrun; r++) {
      ae_attn_accum_ref((ae_type)run[r].vt, run[r].v, run[r].n, hd, a + off, o);
      off += run[r].n;
    }
  }
}

/* Per token: the runs clipped to [lo[b], hi[b]), then ae_attention_kv_ref. */
void ae_attention_kv_multi_ref(float *out, int out_stride, int out_tok, const float *q, int q_stride, int q_tok, int ng,
                               int nq, const int *lo, const int *hi, const ae_kv_run *run, int nrun, int hd, float scale,
                               float softcap, float *att, int att_stride, void *qbuf) {
  enum { MAX_RUNS = 64 };
  ae_kv_run cr[MAX_RUNS];
  for (int b = 0; b < nq; b++) {
    int n = 0, u0 = 0;
    for (int r = 0; r < nrun && n < MAX_RUNS; u0 += run[r].n, r++) {
      const int s = lo[b] > u0 ? lo[b] : u0, e = hi[b] < u0 + run[r].n ? hi[b] : u0 + run[r].n;
      if (s >= e) continue;
      cr[n] = run[r];
      cr[n].k = (const uint8_t *)run[r].k + (size_t)(s - u0) * ae_kv_row_size((ae_type)run[r].kt, hd);
      cr[n].v = (const uint8_t *)run[r].v + (size_t)(s - u0) * ae_kv_row_size((ae_type)run[r].vt, hd);
      cr[n].n = e - s;
      n++;
    }
    ae_attention_kv_ref(out + (size_t)b * out_tok, out_stride, q + (size_t)b * q_tok, q_stride, ng, cr, n, hd, scale,
                        softcap, att + (size_t)b * ng * att_stride, att_stride, qbuf);
  }
}
