/**
 * The C ABI as the host uses it. Everything mirrored from the C sources (enums, names, struct offsets,
 * the dtype registry) is generated into ../generated/abi.ts by scripts/gen-abi.mjs (`npm run gen:abi`);
 * this file only adds what is derived from it.
 */
import { DTYPE_ROWS, HOST_BASE, LAYER_TENSOR_ROLES, GLOBAL_TENSOR_ROLES, POOL, Role } from '../generated/abi.js';

export {
  Arch, BAD_TENSOR_REASONS, HEAD_STAT_NAMES, OP_CLASS_NAMES, BadReason, Cfg, FfnAct, FfnMode, FWD, GLOBAL_TENSOR_ROLES, LAYER_TENSOR_ROLES, MODULE_SLOTS,
  RKNOT_CHECK_NAMES, RknotCheck, Role, SMP, STATUS_NAMES, Status,
} from '../generated/abi.js';

export const PAGE = 65536;
/** First byte the host manages (AE_HOST_BASE). */
export const HEAP_BASE = HOST_BASE;

/** Tensor name of each role (GGUF style, without `blk.N.` and `.weight`), indexed by role. */
export const ROLE_NAMES: readonly string[] = (() => {
  const names: string[] = new Array(Role.ROLE_COUNT).fill('');
  for (const [n, r] of [...Object.entries(GLOBAL_TENSOR_ROLES), ...Object.entries(LAYER_TENSOR_ROLES)]) names[r] = n.replace(/\.weight$/, '');
  // the one role without a fixed tensor name (the engine picks rope_freqs / rope_factors_long / _short)
  names[Role.ROPE_FREQS] = 'RoPE frequency factors (rope_freqs / rope_factors_long / rope_factors_short)';
  return names;
})();

/** ggml type ids of the dtypes a tensor may have (registry rows of kind W / WM). */
export const DTYPE_IDS: Readonly<Record<string, number>> =
  Object.fromEntries(DTYPE_ROWS.filter((d) => d.kind !== 'A').map((d) => [d.name, d.ggmlId]));

/** ae_pool size in bytes. */
export const POOL_SIZE = POOL.SIZE;
