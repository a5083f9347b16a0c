/* iq4_nl weights x q8_0 activations (scalar reference), ggml's block_iq4_nl: a block of 32 elements is an f16 scale d
 * and 16 bytes of 4-bit codes (element j < 16 in the low nibble of qs[j], element 16 + j in its high nibble, as
 * q4_0's); a code c stands for AE_IQ4NL_VALUES[c], a non-linear set of 16 integers (-127..113, ggml's kvalues_iq4nl).
 * x = d * value. The dot product, exact integers per block, then one float step (as q4_0's):
 *   s += (float)sumi * (d_w * d_x),  sumi = sum_e value_e x_e  */
#include "ref_util.h"

const int8_t AE_IQ4NL_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline int iq4nl_value(const ae_block_iq4_nl *b, int e) {
  return AE_IQ4NL_VALUES[e < 16 ? b->qs[e] & 0x0f : b->qs[e - 16] >> 4];
}

void ae_to_float_iq4_nl_ref(const void *x, float *y, int n) {
  const ae_block_iq4_nl *b = (const ae_block_iq4_nl *)x;
  for (int i = 0; i < n / 32; i++) {
    const float d = AE_FP16(b[i].d);
    for (int e = 0; e < 32; e++) y[32 * i + e] = d * (float)iq4nl_value(&b[i], e);
  }
}

/* Simple (non-iterative) quantiser: the value of largest magnitude m maps to -127 (d = m / -127), each value to the
 * nearest code (the first of two at equal distance). */
void ae_from_float_iq4_nl_ref(const float *x, void *y, int n) {
  ae_block_iq4_nl *b = (ae_block_iq4_nl *)y;
  for (int i = 0; i < n / 32; i++) {
    const float *v = x + 32 * i;
    float amax = 0.0f, max = 0.0f;
    for (int e = 0; e < 32; e++) {
      const float a = __builtin_fabsf(v[e]);
      if (a > amax) { amax = a; max = v[e]; }
    }
    b[i].d = ae_fp32_to_fp16(max / -127.0f);
    const float d = AE_FP16(b[i].d), id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t c[32];
    for (int e = 0; e < 32; e++) {
      const float t = v[e] * id;
      int best = 0;
      float bd = __builtin_fabsf(t - (float)AE_IQ4NL_VALUES[0]);
      for (int k = 1; k < 16; k++) {
        const float dk = __builtin_fabsf(t - (float)AE_IQ4NL_VALUES[k]);
        if (dk < bd) { bd = dk; best = k; }
      }
      c[e] = (uint8_t)best;
    }
    for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)(c[j] | c[16 + j] << 4);
  }
}

void ae_vec_dot_iq4_nl_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_iq4_nl *a = (const ae_block_iq4_nl *)w;
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / 32; i++) {
    int sumi = 0;
    for (int e = 0; e < 32; e++) sumi += iq4nl_value(&a[i], e) * b[i].qs[e];
    sum += (float)sumi * (AE_FP16(a[i].d) * AE_FP16(b[i].d));
  }
  *s = sum;
}
