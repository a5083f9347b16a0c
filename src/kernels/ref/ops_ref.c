/* Scalar reference row ops (the specification of the SIMD versions). */
#include "kernels/kernels.h"

/* ggml rms_norm: sum of squares in double, mean rounded to float, scale = 1 / sqrtf(mean + eps);
 * y = (x * scale) * w (the multiply by the norm weight follows, as in HF Llama). */
void ae_rmsnorm_ref(float *y, const float *x, const float *w, int n, float eps) {
  double ss = 0.0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
  const float mean = (float)(ss / (double)n);
  const float scale = 1.0f / __builtin_sqrtf(mean + eps);
  for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* As PyTorch / HF computes inv_freq and the angles, all in float32:
 *   e = float(2i) / float(rot_dim); freq = 1 / theta^e; angle = float(pos) * freq. */
void ae_rope_cos_sin(float *cs, int pos, int rot_dim, float theta_base) {
  for (int i = 0; i < rot_dim / 2; i++) {
    const float e = (float)(2 * i) / (float)rot_dim;
    const float freq = 1.0f / ae_powf(theta_base, e);
    const float a = (float)pos * freq;
    cs[2 * i] = ae_cosf(a);
    cs[2 * i + 1] = ae_sinf(a);
  }
}

void ae_rope_ref(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox) {
  const int half = rot_dim / 2;
  for (int h = 0; h < n_heads; h++) {
    float *v = x + (size_t)h * head_dim;
    for (int i = 0; i < half; i++) {
      const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = v[i0], x1 = v[i1];
      v[i0] = x0 * c - x1 * s;
      v[i1] = x0 * s + x1 * c;
    }
  }
}

/* x = exp(x - max) / sum, sum in double. */
void ae_softmax_ref(float *x, int n) {
  if (n <= 0) return;
  float max = x[0];
  for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int i = 0; i < n; i++) { x[i] = ae_expf(x[i] - max); sum += x[i]; }
  for (int i = 0; i < n; i++) x[i] = (float)((double)x[i] / sum);
}

void ae_silu_mul_ref(float *g, const float *u, int n) {
  for (int i = 0; i < n; i++) {
    const float v = g[i];
    g[i] = v / (1.0f + ae_expf(-v)) * u[i];
  }
}

/* PyTorch gelu(approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in float. */
void ae_gelu_ref(float *x, int n) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  for (int i = 0; i < n; i++) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + ae_tanhf(c * (v + a * (v * v * v))));
  }
}

void ae_gelu_mul_ref(float *g, const float *u, int n) {
  ae_gelu_ref(g, n);
  for (int i = 0; i < n; i++) g[i] *= u[i];
}

void ae_softcap_ref(float *x, int n, float cap) {
  for (int i = 0; i < n; i++) x[i] = cap * ae_tanhf(x[i] / cap);
}

void ae_add_ref(float *y, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += x[i];
}

/* score[t] = float(q.k_t) * scale (dot in double), soft-capped when softcap > 0 (ae_softcap_ref), softmax
 * (ae_softmax_ref), out = sum_t p_t v_t in double. */
void ae_attention_ref(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                      int kv_stride, float scale, float softcap, float *att) {
  for (int t = 0; t < n_kv; t++) {
    const float *kt = k + (size_t)t * kv_stride;
    double dot = 0.0;
    for (int i = 0; i < head_dim; i++) dot += (double)q[i] * (double)kt[i];
    att[t] = (float)dot * scale;
  }
  if (softcap > 0.0f) ae_softcap_ref(att, n_kv, softcap);
  ae_softmax_ref(att, n_kv);
  for (int i = 0; i < head_dim; i++) {
    double acc = 0.0;
    for (int t = 0; t < n_kv; t++) acc += (double)att[t] * (double)v[(size_t)t * kv_stride + i];
    out[i] = (float)acc;
  }
}

/* First index of the maximum; NaNs never win (a NaN at index 0 makes the result 0). */
int ae_argmax_ref(const float *x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}
