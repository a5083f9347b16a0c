/**
 * Model cache for URL sources in browsers (Cache API; works in the engine worker and on the page).
 *
 * Two caches per name: `<name>` holds the file bodies keyed by URL, `<name>:meta` a small JSON record
 * per URL written only after a download was loaded and verified ({ size, etag, lastModified }). The
 * meta record is the commit marker: a body without one (a download that failed or was aborted) is
 * never used.
 *
 * Before reuse: the body's size must equal the recorded size, and when the server answers a HEAD request
 * its ETag / Last-Modified / Content-Length must still match (offline: the cached copy is used). While
 * loading, the streaming loader verifies every tensor's CRC-32. A failure of either check evicts the
 * entry and the caller downloads again.
 *
 * Downloads are tee'd: one branch feeds the loader, the other the cache. A tee pulls at the pace of the
 * faster branch, so if the cache writes more slowly than the loader reads, chunks queue in memory.
 */
import { AetherError } from '../errors.js';

export const DEFAULT_CACHE_NAME = 'aether-models-v1';

interface CacheMeta { url: string; size: number; etag: string | null; lastModified: string | null; storedAt: number }

export function cacheAvailable(): boolean {
  return typeof caches !== 'undefined' && typeof caches.open === 'function';
}

const metaName = (name: string): string => `${name}:meta`;

/** Delete one URL from the cache (both records). */
export async function evictCached(name: string, url: string): Promise<void> {
  const [bodies, metas] = await Promise.all([caches.open(name), caches.open(metaName(name))]);
  await Promise.all([bodies.delete(url), metas.delete(url)]);
}

/** Remove every cached model under `name`. */
export async function clearModelCache(name = DEFAULT_CACHE_NAME): Promise<void> {
  if (!cacheAvailable()) return;
  await Promise.all([caches.delete(name), caches.delete(metaName(name))]);
}

/** URLs and sizes of the verified models under `name`. */
export async function listCachedModels(name = DEFAULT_CACHE_NAME): Promise<{ url: string; size: number; storedAt: number }[]> {
  if (!cacheAvailable()) return [];
  const metas = await caches.open(metaName(name));
  const out: { url: string; size: number; storedAt: number }[] = [];
  for (const req of await metas.keys()) {
    const r = await metas.match(req);
    if (!r) continue;
    const m = (await r.json()) as CacheMeta;
    out.push({ url: m.url, size: m.size, storedAt: m.storedAt });
  }
  return out;
}

export type CachedLookup =
  | { state: 'hit'; blob: Blob }
  | { state: 'miss' }
  | { state: 'evicted'; reason: string };

/** Look `url` up; a cached copy that fails the size or freshness check is evicted. */
export async function lookupCached(name: string, url: string, signal?: AbortSignal): Promise<CachedLookup> {
  const [bodies, metas] = await Promise.all([caches.open(name), caches.open(metaName(name))]);
  const [body, metaRes] = await Promise.all([bodies.match(url), metas.match(url)]);
  if (!metaRes) {
    if (body) await bodies.delete(url); // an unfinished download
    return { state: 'miss' };
  }
  let reason: string | null = null;
  let blob: Blob | null = null;
  const meta = (await metaRes.json()) as CacheMeta;
  if (!body) reason = 'the cached body is missing';
  else {
    blob = await body.blob();
    if (blob.size !== meta.size) reason = `cached size ${blob.size} bytes, expected ${meta.size}`;
    else reason = await staleReason(url, meta, signal);
  }
  if (reason === null && blob) return { state: 'hit', blob };
  await evictCached(name, url);
  return { state: 'evicted', reason: reason ?? 'invalid entry' };
}

/** Why the server's copy differs from the cached one, or null (same, or the server cannot be asked). */
async function staleReason(url: string, meta: CacheMeta, signal?: AbortSignal): Promise<string | null> {
  let res: Response;
  try {
    res = await fetch(url, { method: 'HEAD', cache: 'no-store', signal });
  } catch {
    if (signal?.aborted) throw new AetherError('aborted', `${url}: load aborted`, { file: url });
    return null; // offline: the cached copy is all there is
  }
  if (!res.ok) return null;
  const etag = res.headers.get('etag'), lm = res.headers.get('last-modified'), len = res.headers.get('content-length');
  if (etag && meta.etag && etag !== meta.etag) return `the server has a new version (ETag ${etag}, cached ${meta.etag})`;
  if (lm && meta.lastModified && lm !== meta.lastModified) return `the server has a new version (Last-Modified ${lm}, cached ${meta.lastModified})`;
  if (len !== null && /^\d+$/.test(len) && !res.headers.get('content-encoding') && Number(len) !== meta.size) {
    return `the server's size ${len} differs from the cached ${meta.size}`;
  }
  return null;
}

export interface CachingDownload {
  /** the branch for the loader */
  stream: ReadableStream<Uint8Array>;
  /** Content-Length, when the server sent it */
  size?: number;
  /** After a successful load: wait for the cache write and record the entry. Never throws; returns an error text or null. */
  commit(): Promise<string | null>;
  /** After a failed load: stop writing and delete whatever was written. Never throws. */
  discard(): Promise<void>;
}

/** Fetch `url`, writing the body to the cache while the caller streams it into the loader. */
export async function downloadToCache(name: string, url: string, signal?: AbortSignal): Promise<CachingDownload> {
  let res: Response;
  try {
    res = await fetch(url, { signal, cache: 'no-store' });
  } catch (e) {
    if (signal?.aborted) throw new AetherError('aborted', `${url}: load aborted`, { file: url });
    throw new AetherError('load_error', `${url}: fetch failed: ${(e as Error).message}`, { file: url });
  }
  if (!res.ok) throw new AetherError('load_error', `${url}: HTTP ${res.status} ${res.statusText}`, { file: url, status: res.status });
  if (!res.body) throw new AetherError('load_error', `${url}: the response has no body`, { file: url });
  const len = res.headers.get('content-length');
  const size = len !== null && !res.headers.get('content-encoding') && /^\d+$/.test(len) ? Number(len) : undefined;
  const [forLoader, forCache] = res.body.tee();
  let written = 0;
  const counter = new TransformStream<Uint8Array, Uint8Array>({ transform(chunk, c) { written += chunk.byteLength; c.enqueue(chunk); } });
  const stop = new AbortController();
  const bodies = await caches.open(name);
  const put = bodies.put(url, new Response(forCache.pipeThrough(counter, { signal: stop.signal }), {
    headers: { 'content-type': 'application/octet-stream' },
  }));
  put.catch(() => { /* reported by commit() */ });
  const meta: Omit<CacheMeta, 'size' | 'storedAt'> = { url, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') };
  return {
    stream: forLoader,
    size,
    async commit() {
      try {
        await put;
        const stored = await bodies.match(url);
        const storedSize = stored ? (await stored.blob()).size : -1;
        if (storedSize !== written || (size !== undefined && size !== written)) {
          await bodies.delete(url);
          return `the cache holds ${storedSize} bytes, ${written} were downloaded`;
        }
        const record: CacheMeta = { ...meta, size: written, storedAt: Date.now() };
        const metas = await caches.open(metaName(name));
        await metas.put(url, new Response(JSON.stringify(record), { headers: { 'content-type': 'application/json' } }));
        return null;
      } catch (e) {
        await bodies.delete(url).catch(() => false);
        return `cannot cache ${url}: ${(e as Error)?.message ?? e}`;
      }
    },
    async discard() {
      stop.abort();
      await put.catch(() => undefined);
      await bodies.delete(url).catch(() => false);
    },
  };
}
