/* One query head: att[t] = (q . k_t) * scale, soft-capped when softcap > 0, softmax, out = sum_t att[t] v_t.
 * Scores: 4 positions at a time (q loaded once), per position one f32x4 accumulator over head_dim,
 * reduced as (v0 + v2) + (v1 + v3) plus the head_dim % 4 tail in order (same arithmetic in the
 * 1-position tail). Output: 16 dims at a time in registers, positions in order. */
#include "simd128_util.h"

AE_INLINE float dot1(const float *q, const float *k, int hd) {
  v128 a = wasm_f32x4_splat(0.0f);
  int i = 0;
  for (; i + 4 <= hd; i += 4) a = wasm_f32x4_add(a, wasm_f32x4_mul(ae_load(q + i), ae_load(k + i)));
  float s = ae_hsum_f32(a);
  for (; i < hd; i++) s += q[i] * k[i];
  return s;
}

void ae_attention_simd128(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                          int kv_stride, float scale, float softcap, float *att) {
  const size_t ks = (size_t)kv_stride;
  int t = 0;
  for (; t + 4 <= n_kv; t += 4) {
    const float *k0 = k + t * ks, *k1 = k0 + ks, *k2 = k1 + ks, *k3 = k2 + ks;
    v128 a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 4 <= head_dim; i += 4) {
      const v128 qv = ae_load(q + i);
      a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(qv, ae_load(k0 + i)));
      a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(qv, ae_load(k1 + i)));
      a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(qv, ae_load(k2 + i)));
      a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(qv, ae_load(k3 + i)));
    }
    v128 s = ae_reduce4_f32(a0, a1, a2, a3);
    if (i < head_dim) {
      float r[4];
      ae_store(r, s);
      for (int j = i; j < head_dim; j++) {
        r[0] += q[j] * k0[j]; r[1] += q[j] * k1[j]; r[2] += q[j] * k2[j]; r[3] += q[j] * k3[j];
      }
      s = ae_load(r);
    }
    ae_store(att + t, wasm_f32x4_mul(s, wasm_f32x4_splat(scale)));
  }
  for (; t < n_kv; t++) att[t] = dot1(q, k + t * ks, head_dim) * scale;
  if (softcap > 0.0f) ae_softcap_simd128(att, n_kv, softcap);

  ae_softmax_simd128(att, n_kv);

  int d = 0;
  for (; d + 16 <= head_dim; d += 16) {
    v128 o0 = wasm_f32x4_splat(0.0f), o1 = o0, o2 = o0, o3 = o0;
    const float *vp = v + d;
    for (int u = 0; u < n_kv; u++, vp += ks) {
      const v128 p = wasm_f32x4_splat(att[u]);
      o0 = wasm_f32x4_add(o0, wasm_f32x4_mul(p, ae_load(vp)));
      o1 = wasm_f32x4_add(o1, wasm_f32x4_mul(p, ae_load(vp + 4)));
      o2 = wasm_f32x4_add(o2, wasm_f32x4_mul(p, ae_load(vp + 8)));
      o3 = wasm_f32x4_add(o3, wasm_f32x4_mul(p, ae_load(vp + 12)));
    }
    ae_store(out + d, o0); ae_store(out + d + 4, o1); ae_store(out + d + 8, o2); ae_store(out + d + 12, o3);
  }
  for (; d + 4 <= head_dim; d += 4) {
    v128 o = wasm_f32x4_splat(0.0f);
    for (int u = 0; u < n_kv; u++) o = wasm_f32x4_add(o, wasm_f32x4_mul(wasm_f32x4_splat(att[u]), ae_load(v + u * ks + d)));
    ae_store(out + d, o);
  }
  for (; d < head_dim; d++) {
    float o = 0.0f;
    for (int u = 0; u < n_kv; u++) o += att[u] * v[u * ks + d];
    out[d] = o;
  }
}
