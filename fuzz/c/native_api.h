/* Exported C entry points the host (js/src/runtime) calls by name, declared for the native harnesses of fuzz/c. */
#include <stddef.h>
#include <stdint.h>
#include "core/pool.h"
#include "model/model.h"
extern uint64_t ae_native_mem_lo, ae_native_mem_hi;
size_t ae_model_sizeof(void);
int ae_model_reset(ae_model *m);
int ae_model_set_config_i(ae_model *m, int key, int32_t v);
int ae_model_set_config_f(ae_model *m, int key, float v);
int ae_model_set_tensor(ae_model *m, int layer, int role, const void *data, int type, int ne0, int ne1);
int ae_model_set_layer_swa(ae_model *m, int layer, int swa);
int ae_model_validate(ae_model *m);
size_t ae_model_arena_size(ae_model *m);
int ae_model_init(ae_model *m, void *arena, size_t size);
float *ae_model_logits(ae_model *m);
int ae_forward(ae_pool *pool, ae_forward_args *a);
int ae_pool_init(ae_pool *p, int nth, int spin);

/* The pool passes a job's argument as a 32-bit value (a wasm32 pointer): natively the ae_forward_args must live below
 * 4 GiB, so the harnesses take them from here (mmap MAP_32BIT). */
#include <sys/mman.h>
static inline ae_forward_args *ae_native_args(void) {
  static ae_forward_args *a;
  if (!a) a = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
  return a;
}
