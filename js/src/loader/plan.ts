/** What the two loaders (stream.ts: .rknot, gguf.ts: GGUF) share: the caller's destination, checked, and the abort error. */
import { AetherError } from '../errors.js';
import { RKNOT_ALIGNMENT, type RknotHeader, type RknotMetadata } from '../formats/rknot-read.js';

export interface LoadPlan {
  /** destination of the data section: 64-byte aligned, at least header.dataSize bytes */
  dest: Uint8Array;
}

/** plan(meta, header) -> the data section's destination (at least dataSize bytes, 64-byte aligned), or an error naming the source. */
export async function makeDest(plan: (meta: RknotMetadata, header: RknotHeader) => LoadPlan | Promise<LoadPlan>, meta: RknotMetadata,
  header: RknotHeader, name: string): Promise<Uint8Array> {
  const p = await plan(meta, header);
  const d = p?.dest;
  if (!(d instanceof Uint8Array)) throw new AetherError('invalid_argument', `${name}: plan() must return { dest: Uint8Array }`);
  if (d.byteLength < header.dataSize) throw new AetherError('invalid_argument', `${name}: plan() returned ${d.byteLength} bytes, the data section needs ${header.dataSize}`);
  if (d.byteOffset % RKNOT_ALIGNMENT !== 0) throw new AetherError('invalid_argument', `${name}: plan() returned a destination at byte offset ${d.byteOffset}, expected a multiple of ${RKNOT_ALIGNMENT}`);
  return d.subarray(0, header.dataSize);
}

export function abortError(name: string, signal: AbortSignal): AetherError {
  return new AetherError('aborted', `${name}: load aborted`, { file: name, reason: String(signal.reason ?? '') });
}
