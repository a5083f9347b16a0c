/* C status codes returned by exported functions. Values only grow. The quoted word in each comment is
 * the status's name in messages; js/src/generated/abi.ts mirrors this enum (npm run gen:abi) and
 * js/src/runtime/status.ts maps a status to an AetherError. */
#ifndef AE_STATUS_H
#define AE_STATUS_H
enum ae_status {
  AE_OK = 0,                /* "ok" */
  AE_ERR_INVALID_ARG = 1,   /* "invalid argument": a pointer, size or enum out of range */
  AE_ERR_BAD_TENSOR = 2,    /* "bad tensor": tensor table entry inconsistent (dtype, shape, bytes, range) */
  AE_ERR_BAD_CONFIG = 3,    /* "bad config": model config out of range or inconsistent */
  AE_ERR_CTX_FULL = 4,      /* "context full": position beyond the KV cache */
  AE_ERR_UNSUPPORTED = 5,   /* "unsupported": dtype / arch / mode not supported by this module */
  AE_ERR_NO_MEMORY = 6,     /* "no memory": arena too small */
  AE_ERR_NONFINITE = 7,     /* "non-finite value": NaN / Inf where finite values are required */
  AE_ERR_WORKER_DIED = 8,   /* "worker died": a compute worker of the pool died during the call */
};
#endif
