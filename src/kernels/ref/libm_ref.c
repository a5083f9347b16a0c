/* Scalar math for modules that link no libm. Each function evaluates in double precision (relative
 * error around 1e-16) and rounds once to float, so results are correctly rounded unless the exact value
 * lies within ~1e-16 (relative) of a rounding boundary. Constants: pi/2 and ln 2 split so that k * hi is
 * exact (computed for this file with exact rational arithmetic). */
#include "kernels/kernels.h"

static inline uint64_t d2u(double d) { uint64_t u; __builtin_memcpy(&u, &d, 8); return u; }
static inline double u2d(uint64_t u) { double d; __builtin_memcpy(&d, &u, 8); return d; }

#define LN2_HI 0x1.62e42ff000000p-1      /* 32 significant bits: k * LN2_HI exact for |k| < 2^21 */
#define LN2_LO (-0x1.718432a1b0e26p-35)
#define LOG2E 0x1.71547652b82fep+0
#define PIO2_1 0x1.921fb58000000p+0      /* 26 bits: n * PIO2_1 exact for |n| < 2^27 */
#define PIO2_2 (-0x1.dde9740000000p-27)  /* 26 bits */
#define PIO2_3 0x1.1a62633145c07p-54
#define TWO_OVER_PI 0x1.45f306dc9c883p-1

/* 1/n! for n = 0..20, exact factorials (n! < 2^53 up to 18!, rounded once above). */
static double inv_fact(int n) {
  double f = 1.0;
  for (int i = 2; i <= n; i++) f *= (double)i;
  return 1.0 / f;
}

/* e^x; Taylor polynomial of degree 14 on |r| <= ln2/2 (truncation < 1e-18). */
static double exp_d(double x) {
  if (x != x) return x;
  if (x > 709.0) return __builtin_inf();
  if (x < -745.0) return 0.0;
  const double kf = __builtin_nearbyint(x * LOG2E);
  const double r = (x - kf * LN2_HI) - kf * LN2_LO;
  double p = inv_fact(14);
  for (int i = 13; i >= 0; i--) p = p * r + inv_fact(i);
  const int k = (int)kf, k1 = k / 2, k2 = k - k1;
  /* 2^k in two factors so that subnormal results come from a single rounding */
  return p * u2d((uint64_t)(k1 + 1023) << 52) * u2d((uint64_t)(k2 + 1023) << 52);
}

/* e^y - 1 without cancellation near 0. */
static double expm1_d(double y) {
  if (y > -0.35 && y < 0.35) {
    double p = inv_fact(18);
    for (int n = 17; n >= 1; n--) p = p * y + inv_fact(n);
    return p * y;
  }
  return exp_d(y) - 1.0;
}

/* ln x for finite x > 0: x = m 2^k, m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m-1)/(m+1). */
static double log_d(double x) {
  uint64_t u = d2u(x);
  int k = (int)((u >> 52) & 0x7ff) - 1023;
  if (k == -1023) {                       /* subnormal double: normalise */
    x *= 0x1p64; u = d2u(x); k = (int)((u >> 52) & 0x7ff) - 1023 - 64;
  }
  double m = u2d((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);   /* [1, 2) */
  if (m > 1.4142135623730951) { m *= 0.5; k++; }
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double p = 1.0 / 31.0;
  for (int n = 29; n >= 1; n -= 2) p = p * s2 + 1.0 / (double)n;
  return (double)k * LN2_HI + ((double)k * LN2_LO + 2.0 * s * p);
}

/* sin and cos of r, |r| <= pi/4 + tiny: Taylor to degree 21 / 22 (truncation < 1e-20). */
static double sin_poly(double r) {
  const double r2 = r * r;
  double p = inv_fact(21);
  for (int n = 19; n >= 3; n -= 2) p = p * r2 + ((n / 2) % 2 ? -inv_fact(n) : inv_fact(n));
  return r + r * r2 * p;
}
static double cos_poly(double r) {
  const double r2 = r * r;
  double p = inv_fact(22) * -1.0;
  for (int n = 20; n >= 2; n -= 2) p = p * r2 + ((n / 2) % 2 ? -inv_fact(n) : inv_fact(n));
  return 1.0 + r2 * p;
}
/* x = n pi/2 + r; returns n mod 4 */
static int reduce_pio2(double x, double *r) {
  const double n = __builtin_nearbyint(x * TWO_OVER_PI);
  *r = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3;
  return (int)((int64_t)n & 3);
}

float ae_expf(float x) { return (float)exp_d((double)x); }

float ae_logf(float x) {
  if (x != x) return x;
  if (x < 0.0f) return __builtin_nanf("");
  if (x == 0.0f) return -__builtin_inff();
  if (x == __builtin_inff()) return x;
  return (float)log_d((double)x);
}

float ae_tanhf(float x) {
  if (x != x) return x;
  const double ax = __builtin_fabs((double)x);
  double t;
  if (ax > 20.0) t = 1.0;
  else { const double e = expm1_d(2.0 * ax); t = e / (e + 2.0); }
  return (float)(x < 0.0f ? -t : t);
}

float ae_powf(float b, float e) {
  if (e == 0.0f || b == 1.0f) return 1.0f;
  if (b != b || e != e) return __builtin_nanf("");
  if (b == 0.0f) return e > 0.0f ? 0.0f : __builtin_inff();
  double sign = 1.0, db = (double)b;
  if (b < 0.0f) {
    const double ie = __builtin_trunc((double)e);
    if (ie != (double)e) return __builtin_nanf("");
    const double half = ie * 0.5;
    if (__builtin_trunc(half) != half) sign = -1.0;
    db = -db;
  }
  if (db == __builtin_inf()) return (float)(sign * (e > 0.0f ? __builtin_inf() : 0.0));
  return (float)(sign * exp_d((double)e * log_d(db)));
}

float ae_sinf(float x) {
  if (x != x || __builtin_fabsf(x) == __builtin_inff()) return __builtin_nanf("");
  double r; const int q = reduce_pio2((double)x, &r);
  double v = (q & 1) ? cos_poly(r) : sin_poly(r);
  return (float)((q & 2) ? -v : v);
}

float ae_cosf(float x) {
  if (x != x || __builtin_fabsf(x) == __builtin_inff()) return __builtin_nanf("");
  double r; const int q = reduce_pio2((double)x, &r);
  double v = (q & 1) ? sin_poly(r) : cos_poly(r);
  return (float)(((q + 1) & 2) ? -v : v);
}
