/** Node: copy a .rknot file with a new `saturation` metadata section (tensor bytes unchanged, re-checksummed by the writer). */
import { AetherError } from '../errors.js';
import { openRknot, writeRknot, type RknotWriteMetadata } from '../formats/rknot.js';

const CHUNK = 4 << 20;

export async function writeSaturated(src: string, out: string, saturation: unknown): Promise<number> {
  const fsp = await import('node:fs/promises');
  const path = await import('node:path');
  if (path.resolve(src) === path.resolve(out)) throw new AetherError('invalid_argument', `the output ${out} must differ from the input`);
  const { header, meta } = await openRknot(src);
  const { format, tensors, ...rest } = meta;
  const wmeta = { ...rest, format: { required_features: format.required_features, optional_features: format.optional_features },
    tensors: tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })), saturation } as unknown as RknotWriteMetadata;
  const fh = await fsp.open(src, 'r');
  try {
    const byName = new Map(tensors.map((t) => [t.name, t]));
    const r = await writeRknot(out, wmeta, (spec) => (async function* () {
      const t = byName.get(spec.name)!;
      for (let o = 0; o < t.bytes; o += CHUNK) {
        const n = Math.min(CHUNK, t.bytes - o);
        const buf = new Uint8Array(n);
        let done = 0;
        while (done < n) {
          const { bytesRead } = await fh.read(buf, done, n - done, header.dataOffset + t.offset + o + done);
          if (bytesRead === 0) throw new AetherError('format_error', `${src}: unexpected end of file in tensor ${t.name}`);
          done += bytesRead;
        }
        yield buf;
      }
    })());
    return r.fileSize;
  } finally {
    await fh.close();
  }
}
