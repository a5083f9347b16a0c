/* libFuzzer target: the C re-check of one .rknot tensor entry (src/format/rknot.c) on arbitrary values, as the host
 * passes them (JS numbers: doubles for offset / bytes / data size). Accepted entries must satisfy the invariants the
 * loader relies on; anything else aborts (a finding). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "format/rknot.h"
#include "kernels/kernels.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 36) return 0;
  int32_t type, ne0, ne1;
  double off, bytes, ds;
  memcpy(&type, d, 4); memcpy(&ne0, d + 4, 4); memcpy(&ne1, d + 8, 4);
  memcpy(&off, d + 12, 8); memcpy(&bytes, d + 20, 8); memcpy(&ds, d + 28, 8);
  if (n >= 37 && (d[36] & 1)) { type &= 31; ne0 &= 0xfffff; ne1 &= 0xffff; if (off >= 0 && off < 4294967296.0) off = (double)((uint32_t)off & ~63u); } /* plausible values too */
  if (ae_rknot_check_tensor(type, ne0, ne1, off, bytes, ds) == AE_RKNOT_OK) {
    const ae_type_traits *tr = ae_traits((ae_type)type);
    if (!tr || !tr->is_weight || ne0 <= 0 || ne1 <= 0 || ne0 % tr->blck_size) abort();
    if (!(off >= 0) || off != floor(off) || fmod(off, 64.0) != 0.0 || !(off + bytes <= ds)) abort();
    if (bytes != (double)(ne0 / tr->blck_size) * tr->type_size * (double)ne1) abort();
  }
  return 0;
}
