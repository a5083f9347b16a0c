/**
 * The one place a C status code (src/core/status.h, mirrored in ../generated/abi.ts) becomes an
 * AetherError. Every status has its own error code; the context says which call failed and on what,
 * so the message names the operation, the object (tensor, layer, ...) and the status.
 *
 * Who validates what (docs/DESIGN.md "Errors"): JS validates the file (header, JSON, tensor table,
 * checksums, block scales) and reports `format_error` / `checksum_error` / `unsupported` with the file,
 * field and offset; C re-checks only what protects memory and the forward pass (enum ranges, config
 * ranges, tensor dtype / shape / byte range within the data section and linear memory, positions) and
 * reports a status, which arrives here.
 */
import { AetherError, type AetherErrorCode } from '../errors.js';
import { BAD_TENSOR_REASONS, BadReason, STATUS_NAMES, Status } from '../generated/abi.js';

/** AetherError code of each C status (a distinct code per status; unknown statuses: wasm_error). */
export const STATUS_ERROR_CODES: Readonly<Record<number, AetherErrorCode>> = {
  [Status.INVALID_ARG]: 'invalid_argument',
  [Status.BAD_TENSOR]: 'format_error',
  [Status.BAD_CONFIG]: 'config_error',
  [Status.CTX_FULL]: 'kv_cache_full',
  [Status.UNSUPPORTED]: 'unsupported',
  [Status.NO_MEMORY]: 'out_of_memory',
  [Status.NONFINITE]: 'non_finite',
  [Status.WORKER_DIED]: 'worker_died',
};

export interface StatusContext {
  /** What was called, e.g. 'forward', 'model init', "FFN of layer 3". */
  op: string;
  /** What it was called on, appended to the message (e.g. "tensor blk.0.attn_q"). */
  subject?: string;
  /** Extra explanation appended after the status name. */
  hint?: string;
  /** For AE_ERR_BAD_TENSOR: ae_model_bad_layer / _role / _reason and the role's tensor name. */
  badTensor?: { layer: number; role: number; reason: number; name: string };
  /** Structured details kept on the error. */
  details?: Record<string, unknown>;
}

export function statusName(status: number): string {
  return STATUS_NAMES[status] ?? `status ${status}`;
}

/** The AetherError for a non-zero status returned by `ctx.op`. */
export function statusError(status: number, ctx: StatusContext): AetherError {
  const code = STATUS_ERROR_CODES[status] ?? 'wasm_error';
  let what = `${ctx.op}${ctx.subject ? ` (${ctx.subject})` : ''} failed: ${statusName(status)}`;
  const details: Record<string, unknown> = { status, statusName: statusName(status), op: ctx.op, ...ctx.details };
  if (status === Status.BAD_TENSOR && ctx.badTensor) {
    const b = ctx.badTensor;
    const why = BAD_TENSOR_REASONS[b.reason] || 'invalid';
    what = `tensor ${b.name}: ${why} (checked by the C validator)`;
    Object.assign(details, { layer: b.layer, role: b.role, reason: b.reason, reasonName: why, tensor: b.name });
    if (b.reason === BadReason.NONE) what += ` [${ctx.op}]`;
  }
  return new AetherError(code, ctx.hint ? `${what}: ${ctx.hint}` : what, details);
}

/** Throw statusError(status, ctx) unless status is AE_OK. */
export function checkStatus(status: number, ctx: StatusContext): void {
  if (status !== Status.OK) throw statusError(status, ctx);
}
