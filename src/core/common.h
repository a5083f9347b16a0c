/* Common macros for every Aether module. */
#ifndef AE_COMMON_H
#define AE_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <assert.h>

/* Functions the host calls are AE_EXPORT (visible; everything else is hidden). */
#define AE_EXPORT __attribute__((visibility("default"), used))
#define AE_INLINE static inline __attribute__((always_inline))
#define AE_NOINLINE __attribute__((noinline))

/* Linear memory below this is the modules' static data (module k at 0x10000 * (k + 1), docs/DESIGN.md);
 * from here up the host allocates. */
#define AE_HOST_BASE 0x80000u

#ifndef AE_THREADS
#define AE_THREADS 0
#endif

/* Split [0, n) into nth contiguous parts; part ith is [*r0, *r1). Deterministic, so that the
 * same element is always computed by the same code whatever nth is (1 vs N threads bit-exact). */
AE_INLINE void ae_split(int n, int ith, int nth, int *r0, int *r1) {
  int per = (n + nth - 1) / nth;
  int a = per * ith, b = a + per;
  if (a > n) a = n;
  if (b > n) b = n;
  *r0 = a; *r1 = b;
}

/* Same, but part boundaries are multiples of `align` (e.g. 4 rows for a 4-row microkernel). */
AE_INLINE void ae_split_aligned(int n, int align, int ith, int nth, int *r0, int *r1) {
  int blocks = (n + align - 1) / align;
  int b0, b1;
  ae_split(blocks, ith, nth, &b0, &b1);
  *r0 = b0 * align < n ? b0 * align : n;
  *r1 = b1 * align < n ? b1 * align : n;
}

#endif
