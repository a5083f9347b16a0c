/* IEEE binary16 <-> binary32 conversions (scalar, exact; integer bit manipulation only). */
#include "kernels/kernels.h"

static inline uint32_t f2u(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }

/* Every half maps to the float of the same value; NaNs keep sign and payload (mantissa << 13). */
float ae_fp16_to_fp32(ae_fp16 h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));           /* inf / nan */
  if (e != 0) return u2f(sign | ((e + 112u) << 23) | (m << 13));       /* normal */
  if (m == 0) return u2f(sign);                                        /* +-0 */
  /* subnormal: m * 2^-24, exact in float (m < 2^10) */
  const float v = (float)m * 0x1p-24f;
  return u2f(sign | f2u(v));
}

/* Round to nearest, ties to even; overflow -> inf; NaN -> NaN with the top payload bits kept (quiet
 * bit forced only if the payload would be lost), like numpy's float32 -> float16. */
ae_fp16 ae_fp32_to_fp16(float f) {
  const uint32_t u = f2u(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
  if (e == 0xff) {
    if (m == 0) return (ae_fp16)(sign | 0x7c00u);
    uint32_t hm = m >> 13;
    if (hm == 0) hm = 0x200;
    return (ae_fp16)(sign | 0x7c00u | hm);
  }
  if (e >= 143) return (ae_fp16)(sign | 0x7c00u);                      /* |f| >= 65536 */
  if (e >= 113) {                                                       /* normal half range */
    uint32_t h = ((e - 112u) << 10) | (m >> 13);
    const uint32_t rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;            /* may carry into inf */
    return (ae_fp16)(sign | h);
  }
  if (e < 102) return (ae_fp16)sign;                                    /* |f| < 2^-25: rounds to 0 */
  /* subnormal half: value / 2^-24 = (m | 2^23) >> (126 - e), rounded to nearest even */
  const uint32_t sig = m | 0x800000u;
  const uint32_t s = 126u - e;                                          /* 14..24 */
  uint32_t h = sig >> s;
  const uint32_t rem = sig & ((1u << s) - 1u), half = 1u << (s - 1u);
  if (rem > half || (rem == half && (h & 1u))) h++;
  return (ae_fp16)(sign | h);
}
