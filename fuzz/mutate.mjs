// Byte- and JSON-level mutators of the seeded mutation fuzzer (fuzz/fuzz.mjs). Deterministic for a given seed.

/** xorshift32 */
export function makeRng(seed) {
  let s = (seed >>> 0) || 0x9e3779b9;
  const next = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
  return {
    u32: next,
    int: (n) => (n <= 1 ? 0 : next() % n),
    chance: (p) => next() / 2 ** 32 < p,
    pick: (a) => a[next() % a.length],
  };
}

// values that break parsers: zero, one, signs, powers of two +-1, the u32 / i32 / u64 / safe-integer edges
const INTERESTING_32 = [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 1023, 1024, 4095, 4096, 65535, 65536,
  0x7fff, 0x8000, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe, 0x10000000, 0x3fffffff];
const INTERESTING_64 = [0n, 1n, 0xffffffffn, 0x100000000n, 0x7fffffffffffffffn, 0xffffffffffffffffn, 0x20000000000000n, 0x1fffffffffffffn, 0x8000000000000000n];
const F32_SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 1e38, 3.4028235e38, -1, 1.17549435e-38, 1e-45];

/** One random mutation of `b` (a new array; `others` are seeds to splice with). */
export function mutateBytes(b, rng, others = []) { return mutateOwned(new Uint8Array(b), rng, others); }

/** One random mutation of `out`, in place when the length stays (returns the array to use). */
function mutateOwned(out, rng, others) {
  const n = out.length;
  const op = rng.int(12);
  const dv = () => new DataView(out.buffer, out.byteOffset, out.byteLength);
  switch (op) {
    case 0: if (n) out[rng.int(n)] ^= 1 << rng.int(8); break;                          // bit flip
    case 1: if (n) out[rng.int(n)] = rng.u32() & 0xff; break;                          // random byte
    case 2: if (n) out[rng.int(n)] = rng.pick([0, 1, 0x7f, 0x80, 0xff, 0x20, 0x22, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a]); break;
    case 3: if (n >= 4) dv().setUint32(rng.int(n - 3), rng.pick(INTERESTING_32), true); break;
    case 4: if (n >= 8) dv().setBigUint64(rng.int(n - 7), rng.pick(INTERESTING_64), true); break;
    case 5: if (n >= 4) dv().setFloat32(rng.int(n - 3) & ~3, rng.pick(F32_SPECIAL), true); break;
    case 6: { // delete a chunk
      if (!n) break;
      const a = rng.int(n), len = 1 + rng.int(Math.min(n - a, 256));
      out = concat(out.subarray(0, a), out.subarray(a + len));
      break;
    }
    case 7: { // duplicate a chunk
      if (!n) break;
      const a = rng.int(n), len = 1 + rng.int(Math.min(n - a, 256)), at = rng.int(n + 1);
      out = concat(out.subarray(0, at), out.slice(a, a + len), out.subarray(at));
      break;
    }
    case 8: out = out.subarray(0, rng.int(n + 1)).slice(); break;                        // truncate
    case 9: { // splice with another seed
      const o = others.length ? rng.pick(others) : out;
      const a = rng.int(n + 1), c = rng.int(o.length + 1);
      out = concat(out.subarray(0, a), o.subarray(c));
      break;
    }
    case 10: { // increment / decrement a little-endian u32 (counts, lengths, offsets)
      if (n < 4) break;
      const at = rng.int(n - 3) & ~3;
      dv().setUint32(at, (dv().getUint32(at, true) + (rng.chance(0.5) ? 1 : -1)) >>> 0, true);
      break;
    }
    default: { // overwrite a run with one byte
      if (!n) break;
      const a = rng.int(n), len = 1 + rng.int(Math.min(n - a, 32));
      out.fill(rng.u32() & 0xff, a, a + len);
    }
  }
  return out;
}

/** 1..k stacked byte mutations. */
export function mutateBytesN(b, rng, others, k = 4) {
  let out = new Uint8Array(b); // one copy, then in place
  const n = 1 + rng.int(k);
  for (let i = 0; i < n; i++) out = mutateOwned(out, rng, others);
  return out;
}

function concat(...parts) {
  const len = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(len);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

const JSON_VALUES = [null, true, false, 0, -1, 1, 0.5, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, -(2 ** 31), 1e308, -1e308, 1e-320,
  '', '0', '1', 'true', 'NaN', 'f32', 'q8_0', 'llama', 'gpt2', '\u0000', 'a'.repeat(300), [], [0], [[]], {}, { a: 1 }];

/** Mutate a parsed JSON value in place at a random path (returns the new root). */
export function mutateJson(root, rng) {
  const paths = [];
  const walk = (v, parent, key, depth) => {
    paths.push([parent, key, v]);
    if (depth > 6 || paths.length > 20000) return;
    if (Array.isArray(v)) {
      const step = v.length > 64 ? Math.ceil(v.length / 64) : 1;
      for (let i = rng.int(step); i < v.length; i += step) walk(v[i], v, i, depth + 1);
    } else if (v && typeof v === 'object') for (const k of Object.keys(v)) walk(v[k], v, k, depth + 1);
  };
  walk(root, null, null, 0);
  const [parent, key, v] = rng.pick(paths);
  const op = rng.int(7);
  let nv;
  if (op === 0) nv = rng.pick(JSON_VALUES);
  else if (op === 1 && typeof v === 'number') nv = rng.pick([v + 1, v - 1, v * 2, -v, v * 65536, Math.floor(v / 2), v + 0.5]);
  else if (op === 2 && Array.isArray(v)) { nv = v.slice(); if (nv.length && rng.chance(0.5)) nv.splice(rng.int(nv.length), 1); else nv.push(nv.length ? rng.pick(nv) : rng.pick(JSON_VALUES)); }
  else if (op === 3 && v && typeof v === 'object' && !Array.isArray(v)) { nv = { ...v }; const ks = Object.keys(nv); if (ks.length) delete nv[rng.pick(ks)]; }
  else if (op === 4 && typeof v === 'string') nv = rng.chance(0.5) ? v + v : v.slice(0, rng.int(v.length + 1));
  else if (op === 5 && v && typeof v === 'object' && !Array.isArray(v)) { nv = { ...v, [rng.pick(['dtype', 'shape', 'offset', 'bytes', 'type', 'id', 'content', 'special', 'vocab', 'merges'])]: rng.pick(JSON_VALUES) }; }
  else nv = rng.pick(JSON_VALUES);
  if (parent === null) return nv;
  parent[key] = nv;
  return root;
}
