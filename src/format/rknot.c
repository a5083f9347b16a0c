#include "format/rknot.h"
#include "kernels/kernels.h"

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Sizes travel as doubles (exact below 2^53) so JS numbers pass without BigInt. */
AE_EXPORT int ae_rknot_check_header(const uint8_t *h, double file_size) {
  static const uint8_t magic[8] = {0x52, 0x4B, 0x4E, 0x4F, 0x54, 0x00, 0x0D, 0x0A};
  for (int i = 0; i < 8; i++)
    if (h[i] != magic[i]) return AE_RKNOT_BAD_MAGIC;
  if (rd32(h + 8) != AE_RKNOT_VERSION) return AE_RKNOT_BAD_VERSION;
  if (rd32(h + 12) != 0) return AE_RKNOT_BAD_FLAGS;
  const uint64_t json = rd64(h + 16), data = rd64(h + 24);
  if (json == 0 || json > AE_RKNOT_MAX_JSON) return AE_RKNOT_BAD_JSON_LENGTH;
  if (data % 64 || data > ((uint64_t)1 << 52)) return AE_RKNOT_BAD_DATA_SIZE;
  const uint64_t data_offset = (AE_RKNOT_HEADER_SIZE + json + 63) & ~(uint64_t)63;
  if (!(file_size >= 0) || (double)(data_offset + data) != file_size) return AE_RKNOT_BAD_FILE_SIZE;
  return AE_RKNOT_OK;
}

AE_EXPORT int ae_rknot_check_tensor(int type, int ne0, int ne1, double offset, double bytes, double data_size) {
  if (!ae_is_weight_type(type)) return AE_RKNOT_BAD_DTYPE;
  const ae_type_traits *tr = ae_traits((ae_type)type);
  if (ne0 <= 0 || ne1 <= 0 || ne0 % tr->blck_size) return AE_RKNOT_BAD_SHAPE;
  /* in double: ae_row_size is a 32-bit size_t here and would wrap for huge rows */
  const double want = (double)(ne0 / tr->blck_size) * (double)tr->type_size * (double)ne1;
  if (bytes != want) return AE_RKNOT_BAD_BYTES;
  if (!(offset >= 0) || offset != (double)(uint64_t)offset || (uint64_t)offset % 64) return AE_RKNOT_BAD_OFFSET;
  if (offset + bytes > data_size) return AE_RKNOT_BAD_OFFSET;
  return AE_RKNOT_OK;
}
