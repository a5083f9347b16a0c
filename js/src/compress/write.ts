/**
 * Node: copy a .rknot file with metadata sections replaced or added, tensors dropped, and new tensors
 * appended (aether analyze -o, aether compress). Copied tensors are streamed from the source file; new ones
 * are given as bytes. Returns the written file's size.
 */
import { AetherError } from '../errors.js';
import { nodeFs, openForRead, readExact } from '../formats/fileio.js';
import { openRknot } from '../formats/rknot-node.js';
import { writeRknot, type RknotWriteMetadata } from '../formats/rknot-write.js';
import type { DTypeName } from '../formats/dtypes.js';

const CHUNK = 4 << 20;

export interface NewTensor { name: string; dtype: DTypeName; shape: number[]; data: Uint8Array }

export interface CopyOptions {
  /** top-level metadata keys to set (replacing the source's) */
  sections?: Record<string, unknown>;
  /** names of source tensors to leave out */
  drop?: Set<string>;
  /** tensors to add (after the copied ones, in this order) */
  add?: NewTensor[];
  /** features to add to format.required_features */
  requiredFeatures?: string[];
}

export async function copyRknot(src: string, out: string, opts: CopyOptions = {}): Promise<number> {
  await nodeFs();
  const path = await import('node:path');
  if (path.resolve(src) === path.resolve(out)) throw new AetherError('invalid_argument', `the output ${out} must differ from the input`);
  const { header, meta, fileSize } = await openRknot(src);
  const { format, tensors, ...rest } = meta;
  const kept = tensors.filter((t) => !opts.drop?.has(t.name));
  const added = opts.add ?? [];
  const names = new Set(kept.map((t) => t.name));
  for (const t of added) {
    if (names.has(t.name)) throw new AetherError('invalid_argument', `tensor '${t.name}' is already in ${src}`);
    names.add(t.name);
  }
  const req = [...new Set([...(format.required_features ?? []), ...(opts.requiredFeatures ?? [])])];
  const wmeta = {
    ...rest, ...(opts.sections ?? {}),
    format: { required_features: req, optional_features: format.optional_features },
    tensors: [...kept.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })), ...added.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape }))],
  } as unknown as RknotWriteMetadata;
  const fh = await openForRead(src);
  try {
    const byName = new Map(kept.map((t) => [t.name, t]));
    const newByName = new Map(added.map((t) => [t.name, t]));
    const r = await writeRknot(out, wmeta, (spec) => {
      const n = newByName.get(spec.name);
      if (n) return n.data;
      return (async function* () {
        const t = byName.get(spec.name)!;
        for (let o = 0; o < t.bytes; o += CHUNK) {
          yield await readExact(fh, header.dataOffset + t.offset + o, Math.min(CHUNK, t.bytes - o), src, t.name, fileSize);
        }
      })();
    });
    return r.fileSize;
  } finally {
    await fh.close();
  }
}
