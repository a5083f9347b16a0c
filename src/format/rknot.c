#include "format/rknot.h"
#include "kernels/kernels.h"

AE_EXPORT int ae_rknot_check_tensor(int type, int ne0, int ne1, double offset, double bytes, double data_size) {
  if (!ae_is_weight_type(type)) return AE_RKNOT_BAD_DTYPE;
  const ae_type_traits *tr = ae_traits((ae_type)type);
  if (ne0 <= 0 || ne1 <= 0 || ne0 % tr->blck_size) return AE_RKNOT_BAD_SHAPE;
  /* in double: ae_row_size is a 32-bit size_t here and would wrap for huge rows */
  const double want = (double)(ne0 / tr->blck_size) * (double)tr->type_size * (double)ne1;
  if (bytes != want) return AE_RKNOT_BAD_BYTES;
  /* every comparison false on NaN: a NaN data size or offset is refused (fuzz/c rknot-check found NaN data_size
   * accepted); offsets below 2^53 before the integer cast (a larger double does not fit the cast) */
  if (!(offset >= 0) || !(offset < 9007199254740992.0) || offset != (double)(uint64_t)offset || (uint64_t)offset % 64) return AE_RKNOT_BAD_OFFSET;
  if (!(offset + bytes <= data_size)) return AE_RKNOT_BAD_OFFSET;
  return AE_RKNOT_OK;
}
