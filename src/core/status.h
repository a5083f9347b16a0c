/* C status codes returned by exported functions. Values only grow; js/src/runtime/status.ts mirrors them. */
#ifndef AE_STATUS_H
#define AE_STATUS_H
enum ae_status {
  AE_OK = 0,
  AE_ERR_INVALID_ARG = 1,   /* a pointer, size or enum out of range */
  AE_ERR_BAD_TENSOR = 2,    /* tensor table entry inconsistent (dtype, shape, bytes, range) */
  AE_ERR_BAD_CONFIG = 3,    /* model config out of range or inconsistent */
  AE_ERR_CTX_FULL = 4,      /* position beyond the KV cache */
  AE_ERR_UNSUPPORTED = 5,   /* dtype / arch / mode not supported by this module */
  AE_ERR_NO_MEMORY = 6,     /* arena too small */
  AE_ERR_NONFINITE = 7,     /* NaN / Inf where finite values are required */
};
#endif
