/* The C side of .rknot validation (format: docs/rknot.md). The host (js/src/formats/rknot-read.ts) parses and
 * validates the file: header, JSON, tensor table, checksums, block scales. C never reads file bytes; it
 * re-checks what protects memory before a tensor is used: each tensor entry against the data section the
 * host copied (ae_rknot_check_tensor, here), then ae_model_init checks every tensor against the config and
 * the linear memory (src/model/model.c). docs/DESIGN.md "Errors" has the split. */
#ifndef AE_RKNOT_H
#define AE_RKNOT_H
#include "core/common.h"

/* Which check failed (returned by ae_rknot_check_tensor; 0 = ok; the quoted text is the message).
 * Values only grow; 1..6 were the header checks of a C header parser the loader never used (removed:
 * the header is checked in JS only) and stay unassigned. */
enum ae_rknot_error {
  AE_RKNOT_OK = 0,                /* "" */
  AE_RKNOT_BAD_DTYPE = 7,         /* "unknown dtype" */
  AE_RKNOT_BAD_SHAPE = 8,         /* "shape is not whole blocks" */
  AE_RKNOT_BAD_OFFSET = 9,        /* "offset misaligned or out of range" */
  AE_RKNOT_BAD_BYTES = 10,        /* "byte count does not match dtype and shape" */
};

/* Check one tensor entry: ggml dtype id (a weight dtype of src/kernels/dtypes.inc), ne0 x ne1 in whole
 * blocks, bytes = the dtype's size of that shape, offset a multiple of 64 with offset + bytes within a
 * data section of data_size bytes. Sizes travel as doubles (exact below 2^53) so JS numbers pass as is. */
int ae_rknot_check_tensor(int type, int ne0, int ne1, double offset, double bytes, double data_size);

#endif
