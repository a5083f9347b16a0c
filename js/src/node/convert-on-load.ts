/**
 * Node only: a Hugging Face folder (and, for the tools that read a .rknot file itself: profile, compress, analyze, ...,
 * a GGUF file) is converted to a cached .rknot first (os.tmpdir()/aether-cache). Aether.load passes `gguf: 'direct'`:
 * it loads a GGUF file directly (loader/gguf.ts), as it does a .rknot.
 */
import { AetherError, throwIfAborted } from '../errors.js';

export async function resolveNodeSource(src: string, signal?: AbortSignal, opts: { gguf?: 'convert' | 'direct' } = {}): Promise<string> {
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
  if (!isDir && opts.gguf !== 'direct') {
    const fd = fs.openSync(src, 'r');
    try {
      const b = Buffer.alloc(4);
      fs.readSync(fd, b, 0, 4, 0);
      isGguf = b.toString('latin1') === 'GGUF';
    } finally { fs.closeSync(fd); }
  }
  if (!isDir && !isGguf) return src;
  throwIfAborted(signal);
  const key = await cacheKey(src, isDir);
  const dir = path.join(os.tmpdir(), 'aether-cache');
  fs.mkdirSync(dir, { recursive: true });
  // <name>-<8 hex of the source's absolute path>-<key>.rknot: the conversions of one source share the prefix
  const crypto = await import('node:crypto');
  const prefix = `${path.basename(src).replace(/\.gguf$/i, '')}-${crypto.createHash('sha256').update(path.resolve(src)).digest('hex').slice(0, 8)}-`;
  const out = path.join(dir, `${prefix}${key}.rknot`);
  if (fs.existsSync(out)) return out;
  const { convertModel } = await import('../formats/convert.js');
  await convertModel(src, out, { quant: 'keep', signal } as any);
  // conversions of earlier versions of this source (the file at this path replaced or edited since) can never be
  // served again: remove them, so a re-downloaded 2 GB GGUF does not leave its old 2 GB conversion behind
  for (const f of fs.readdirSync(dir)) {
    if (f.startsWith(prefix) && f.endsWith('.rknot') && f !== path.basename(out)) fs.rmSync(path.join(dir, f), { force: true });
  }
  return out;
}

/** Files up to this size are keyed by their content (config.json, tokenizer files); bigger ones by size, mtime, inode. */
const CONTENT_KEY_MAX = 64 << 20;

/**
 * Cache key of a conversion input: the converter version, the absolute path, and for every file of the input (the
 * GGUF file, or every file of the HF folder) its name, size, mtime and inode, plus the sha256 of the content of
 * the small ones. Editing config.json or a tokenizer file in place (even keeping its size and mtime) changes the key.
 */
export async function cacheKey(src: string, isDir: boolean): Promise<string> {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const crypto = await import('node:crypto');
  const { CONVERTER_VERSION } = await import('../formats/convert.js');
  const h = crypto.createHash('sha256');
  h.update(`${CONVERTER_VERSION}\0${path.resolve(src)}\0`);
  const files = isDir ? fs.readdirSync(src).sort().map((n) => path.join(src, n)) : [src];
  for (const f of files) {
    let st: import('node:fs').Stats;
    try { st = fs.statSync(f); } catch { continue; }
    if (!st.isFile()) continue;
    h.update(`${path.basename(f)}\0${st.size}\0${st.mtimeMs}\0${st.ino}\0`);
    if (st.size <= CONTENT_KEY_MAX) h.update(fs.readFileSync(f));
  }
  return h.digest('hex').slice(0, 16);
}
