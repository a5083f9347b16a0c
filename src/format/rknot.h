/* The .rknot model format, version 1 (full specification: docs/rknot.md).
 *
 *   offset  size  field
 *   0       8     magic "RKNOT\0\r\n" (52 4B 4E 4F 54 00 0D 0A)
 *   8       4     u32 format version = 1
 *   12      4     u32 flags = 0 (any set bit is refused)
 *   16      8     u64 json_length, 1 .. 256 MiB
 *   24      8     u64 data_size, a multiple of 64
 *   32      json_length  UTF-8 JSON metadata: format {version, required_features, optional_features},
 *                 config, tokenizer, tensors [{name, dtype, shape (ggml order), offset, bytes, checksum}],
 *                 optional kv_cache, source, saturation, compression, quality
 *   data_offset = align64(32 + json_length): the data section, data_size bytes, laid out exactly as in
 *                 linear memory; every tensor at a multiple of 64; file size = data_offset + data_size.
 *
 * The host (js/src/formats/rknot.ts) parses the JSON; the C side checks the fixed header and every tensor
 * entry again before use (ae_rknot_check_header, ae_rknot_check_tensor, then ae_model_init validates the
 * tensors against the config and the memory). All integers little-endian. */
#ifndef AE_RKNOT_H
#define AE_RKNOT_H
#include "core/common.h"

#define AE_RKNOT_VERSION 1u
#define AE_RKNOT_HEADER_SIZE 32u
#define AE_RKNOT_MAX_JSON (256u << 20)

/* Which check failed (returned by the functions below; 0 = ok; the quoted text is the message). Values only grow. */
enum ae_rknot_error {
  AE_RKNOT_OK = 0,                /* "" */
  AE_RKNOT_BAD_MAGIC = 1,         /* "bad magic" */
  AE_RKNOT_BAD_VERSION = 2,       /* "unsupported version" */
  AE_RKNOT_BAD_FLAGS = 3,         /* "unknown flags" */
  AE_RKNOT_BAD_JSON_LENGTH = 4,   /* "bad JSON length" */
  AE_RKNOT_BAD_DATA_SIZE = 5,     /* "bad data size" */
  AE_RKNOT_BAD_FILE_SIZE = 6,     /* "file size does not match the header" */
  AE_RKNOT_BAD_DTYPE = 7,         /* "unknown dtype" */
  AE_RKNOT_BAD_SHAPE = 8,         /* "shape is not whole blocks" */
  AE_RKNOT_BAD_OFFSET = 9,        /* "offset misaligned or out of range" */
  AE_RKNOT_BAD_BYTES = 10,        /* "byte count does not match dtype and shape" */
};

/* Check the 32-byte header `h` of a file of `file_size` bytes. */
int ae_rknot_check_header(const uint8_t *h, double file_size);
/* Check one tensor entry: ggml dtype id, ne0 x ne1, offset and bytes within a data section of data_size. */
int ae_rknot_check_tensor(int type, int ne0, int ne1, double offset, double bytes, double data_size);

#endif
