/** aether inspect FILE [--json] [--verify] [--keys]: .rknot, GGUF or safetensors metadata and tensor table. */
import { parseArgs } from '../args.js';
import { AetherError } from '../../src/errors.js';
import { readGGUF } from '../../src/formats/gguf.js';
import { RKNOT_MAGIC } from '../../src/formats/rknot-read.js';
import { openRknot, verifyRknotFile } from '../../src/formats/rknot-node.js';
import { readSafetensorsModel } from '../../src/formats/safetensors.js';
import type { TokenizerData } from '../../src/tokenizer/types.js';

export const usage = `usage: aether inspect FILE [options]
  FILE        a .rknot file, a GGUF file, a .safetensors file or a Hugging Face folder
  --verify    (.rknot) read every tensor and check its checksum and block scales
  --json      print one JSON object`;

function tokenizerSummary(t: TokenizerData | undefined): Record<string, unknown> | undefined {
  if (!t) return undefined;
  const { tokens, scores, token_type, merges, chat_template, ...rest } = t;
  return {
    ...rest,
    n_tokens: tokens?.length,
    has_scores: !!scores,
    has_token_type: !!token_type,
    n_merges: merges?.length,
    chat_template: chat_template ? `${chat_template.length} chars` : undefined,
    first_tokens: tokens?.slice(0, 8),
  };
}

function summariseValue(v: unknown): unknown {
  if (Array.isArray(v)) return v.length > 8 ? { array_length: v.length, first: v.slice(0, 8) } : v;
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'string' && v.length > 200) return v.slice(0, 200) + `... (${v.length} chars)`;
  return v;
}

function table(rows: string[][]): string {
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (i >= 3 ? c.padStart(w[i]) : c.padEnd(w[i]))).join('  ').trimEnd()).join('\n') + '\n';
}

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, { options: { json: 'boolean', verify: 'boolean' } });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one FILE\n${usage}`);
  const file = positionals[0];
  const fs = await import('node:fs/promises');
  const st = await fs.stat(file).catch(() => undefined);
  if (!st) throw new AetherError('load_error', `${file}: no such file or directory`);
  let kind: 'rknot' | 'gguf' | 'safetensors';
  if (st.isDirectory() || file.endsWith('.safetensors')) kind = 'safetensors';
  else {
    const fh = await fs.open(file, 'r');
    const b = new Uint8Array(8);
    try { await fh.read(b, 0, 8, 0); } finally { await fh.close(); }
    if (b.every((x, i) => x === RKNOT_MAGIC[i])) kind = 'rknot';
    else if (String.fromCharCode(...b.subarray(0, 4)) === 'GGUF') kind = 'gguf';
    else throw new AetherError('format_error', `${file}: magic at byte 0: not a .rknot, GGUF or safetensors file`, { file });
  }

  let out: Record<string, unknown>;
  let rows: string[][];
  if (kind === 'rknot') {
    const { header, meta, fileSize } = await openRknot(file);
    let verified: string | undefined;
    if (v.verify) {
      const r = await verifyRknotFile(file);
      verified = `all ${r.tensors} checksums and block scales ok (${r.bytes} bytes)`;
    }
    const { config, tokenizer, tensors, format, ...optional } = meta;
    out = {
      file, kind, file_size: fileSize, version: header.version, data_offset: header.dataOffset, data_size: header.dataSize,
      format, config, tokenizer: tokenizerSummary(tokenizer),
      optional: Object.fromEntries(Object.entries(optional).map(([k, x]) => [k, k === 'source' || k === 'kv_cache' ? x : summariseValue(typeof x === 'object' && x && !Array.isArray(x) ? Object.keys(x) : x)])),
      ...(verified ? { verified } : {}),
      tensors: tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, offset: t.offset, bytes: t.bytes, checksum: t.checksum })),
    };
    rows = tensors.map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, String(t.offset), String(t.bytes), t.checksum]);
    rows.unshift(['name', 'dtype', 'shape', 'offset', 'bytes', 'checksum']);
  } else if (kind === 'gguf') {
    const g = await readGGUF(file);
    const metadata: Record<string, unknown> = {};
    for (const [k, x] of g.metadata) metadata[k] = k.startsWith('tokenizer.ggml.') ? summariseValue(x) : summariseValue(x);
    out = {
      file, kind, file_size: g.fileSize, version: g.version, alignment: g.alignment, data_offset: g.dataOffset,
      metadata, metadata_types: Object.fromEntries(g.metadataTypes),
      tensors: g.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.dims, offset: t.offset, bytes: t.bytes })),
    };
    rows = g.tensors.map((t) => [t.name, t.dtype, `[${t.dims.join(', ')}]`, String(t.offset), String(t.bytes)]);
    rows.unshift(['name', 'dtype', 'shape', 'offset', 'bytes']);
  } else {
    const m = await readSafetensorsModel(file);
    const ts = [...m.tensors.values()];
    out = {
      file, kind, files: m.files.map((f) => ({ path: f.path, size: f.fileSize, metadata: f.metadata })),
      tensors: ts.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, file: t.file, offset: t.offset, bytes: t.bytes })),
    };
    rows = ts.map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, String(t.offset), String(t.bytes)]);
    rows.unshift(['name', 'dtype', 'shape (PyTorch order)', 'offset', 'bytes']);
  }
  if (v.json) {
    process.stdout.write(JSON.stringify(out, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)) + '\n');
    return 0;
  }
  const { tensors: _t, ...head } = out;
  const lines: string[] = [];
  const flat = (x: unknown): string => {
    if (x && typeof x === 'object' && !Array.isArray(x)) return Object.entries(x).filter(([, y]) => y !== undefined).map(([k, y]) => `${k}=${flat(y)}`).join(' ');
    return JSON.stringify(x, (_k, y) => (typeof y === 'bigint' ? y.toString() : y));
  };
  for (const [k, x] of Object.entries(head)) {
    if (x === undefined) continue;
    if (k === 'metadata' || k === 'optional') {
      lines.push(`${k}:`);
      for (const [kk, y] of Object.entries(x as Record<string, unknown>)) lines.push(`  ${kk}: ${flat(y)}`);
    } else if (k === 'metadata_types') continue;
    else lines.push(`${k}: ${typeof x === 'string' ? x : flat(x)}`);
  }
  process.stdout.write(lines.join('\n') + `\n\n${rows.length - 1} tensors:\n` + table(rows));
  return 0;
}
