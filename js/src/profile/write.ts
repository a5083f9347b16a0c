/** Node: copy a .rknot file with new metadata sections (`saturation`, `attention_heads`, `kv_policy`; tensor bytes
 * unchanged, re-checksummed by the writer). */
import { AetherError } from '../errors.js';
import { nodeFs, openForRead, readExact } from '../formats/fileio.js';
import { openRknot } from '../formats/rknot-node.js';
import { writeRknot, type RknotWriteMetadata } from '../formats/rknot-write.js';
import type { SaturationMeta } from '../formats/saturation.js';

const CHUNK = 4 << 20;

export async function writeSaturated(src: string, out: string, saturation: SaturationMeta): Promise<number> {
  return writeWithSections(src, out, { saturation });
}

/** Copy `src` to `out` with the given top-level metadata sections set (replacing any of the same name). */
export async function writeWithSections(src: string, out: string, sections: Record<string, unknown>): Promise<number> {
  await nodeFs();
  const path = await import('node:path');
  if (path.resolve(src) === path.resolve(out)) throw new AetherError('invalid_argument', `the output ${out} must differ from the input`);
  const { header, meta, fileSize } = await openRknot(src);
  const { format, tensors, ...rest } = meta;
  const wmeta = { ...rest, format: { required_features: format.required_features, optional_features: format.optional_features },
    tensors: tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })), ...sections } as unknown as RknotWriteMetadata;
  const fh = await openForRead(src);
  try {
    const byName = new Map(tensors.map((t) => [t.name, t]));
    const r = await writeRknot(out, wmeta, (spec) => (async function* () {
      const t = byName.get(spec.name)!;
      for (let o = 0; o < t.bytes; o += CHUNK) {
        yield await readExact(fh, header.dataOffset + t.offset + o, Math.min(CHUNK, t.bytes - o), src, t.name, fileSize);
      }
    })());
    return r.fileSize;
  } finally {
    await fh.close();
  }
}
