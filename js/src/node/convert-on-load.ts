/** Node only: a GGUF file or HF folder given to Aether.load is converted to a cached .rknot first. */
import { AetherError, throwIfAborted } from '../errors.js';

export async function resolveNodeSource(src: string, signal?: AbortSignal): Promise<string> {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const os = await import('node:os');
  let st: import('node:fs').Stats;
  try { st = fs.statSync(src); } catch (e) {
    if (/^(https?|file|blob|data):/.test(src)) return src;
    throw new AetherError('load_error', `cannot open model '${src}': ${(e as Error).message}`);
  }
  const isDir = st.isDirectory();
  let isGguf = false;
  if (!isDir) {
    const fd = fs.openSync(src, 'r');
    try {
      const b = Buffer.alloc(4);
      fs.readSync(fd, b, 0, 4, 0);
      isGguf = b.toString('latin1') === 'GGUF';
    } finally { fs.closeSync(fd); }
  }
  if (!isDir && !isGguf) return src;
  throwIfAborted(signal);
  // Cache key: absolute path + size + mtime (the input is never modified).
  const crypto = await import('node:crypto');
  const key = crypto.createHash('sha256').update(`${path.resolve(src)}|${st.size}|${st.mtimeMs}`).digest('hex').slice(0, 16);
  const dir = path.join(os.tmpdir(), 'aether-cache');
  fs.mkdirSync(dir, { recursive: true });
  const out = path.join(dir, `${path.basename(src).replace(/\.gguf$/i, '')}-${key}.rknot`);
  if (fs.existsSync(out)) return out;
  const { convertModel } = await import('../formats/convert.js');
  await convertModel(src, out, { quant: 'keep', signal } as any);
  return out;
}
