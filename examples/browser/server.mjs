#!/usr/bin/env node
/**
 * Static file server for the browser demo (node:http only). Serves the repository root, so the page can
 * import dist/, fetch wasm/ and models/, and map @huggingface/jinja to node_modules/.
 *
 *   node examples/browser/server.mjs [--port N] [--no-isolation] [--mount /gen/=DIR]     (or: npm run demo:browser)
 *
 * --mount PREFIX=DIR (opts.mounts) also serves DIR under the URL prefix, e.g. big generated models kept outside the
 * repository: --mount /gen/=/work/gen/scale serves /work/gen/scale/phi3-mini-4k-q4_0.rknot as /gen/phi3-mini-4k-q4_0.rknot.
 *
 * Port: --port, else $PORT, else 8080 (0: any free port); bound to 127.0.0.1. By default every response
 * carries COOP same-origin + COEP require-corp, which makes the page cross-origin isolated
 * (SharedArrayBuffer, so the engine can run several threads); --no-isolation leaves them out (one
 * thread). ETag / Last-Modified let the page's model cache notice a changed file.
 */
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.rknot': 'application/octet-stream',
  '.gguf': 'application/octet-stream',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.ts': 'text/plain; charset=utf-8',
};

/**
 * Start the server. Resolves to { server, url, close() } once listening.
 * @param {{ port?: number, host?: string, isolate?: boolean, root?: string, mounts?: Record<string, string>, log?: (line: string) => void }} [opts]
 */
export function startServer(opts = {}) {
  const root = path.resolve(opts.root ?? REPO_ROOT);
  const isolate = opts.isolate ?? true;
  const host = opts.host ?? '127.0.0.1';
  const log = opts.log ?? (() => {});

  const server = http.createServer((req, res) => {
    const send = (status, body, headers = {}) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
      res.end(req.method === 'HEAD' ? undefined : body);
      log(`${status} ${req.method} ${req.url}`);
    };
    if (isolate) {
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    }
    res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed\n', { allow: 'GET, HEAD' });

    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    } catch {
      return send(400, 'bad request\n');
    }
    if (pathname === '/') return send(302, '', { location: '/examples/browser/' });
    let base = root, rel = pathname;
    for (const [prefix, dir] of Object.entries(opts.mounts ?? {})) {
      if (pathname.startsWith(prefix)) { base = path.resolve(dir); rel = '/' + pathname.slice(prefix.length); break; }
    }
    const file = path.resolve(base, '.' + rel);
    if (file !== base && !file.startsWith(base + path.sep)) return send(403, 'forbidden\n');

    let st;
    try {
      st = fs.statSync(file);
    } catch {
      return send(404, `not found: ${pathname}\n`);
    }
    let target = file;
    if (st.isDirectory()) {
      if (!pathname.endsWith('/')) return send(301, '', { location: pathname + '/' });
      target = path.join(file, 'index.html');
      try { st = fs.statSync(target); } catch { return send(404, `no index.html in ${pathname}\n`); }
    }
    const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
    const headers = {
      'content-type': MIME[path.extname(target).toLowerCase()] ?? 'application/octet-stream',
      'content-length': String(st.size),
      'cache-control': 'no-cache',
      etag,
      'last-modified': st.mtime.toUTCString(),
    };
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, { etag, 'cache-control': 'no-cache' });
      res.end();
      log(`304 ${req.method} ${req.url}`);
      return;
    }
    res.writeHead(200, headers);
    if (req.method === 'HEAD') { res.end(); log(`200 HEAD ${req.url}`); return; }
    const stream = fs.createReadStream(target);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
    log(`200 GET ${req.url}`);
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 8080, host, () => {
      server.off('error', reject);
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
      const url = `http://${host}:${port}/`;
      resolve({
        server, url, port, isolate,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r(undefined)); }),
      });
    });
  });
}

function parsePort(v) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`invalid port '${v}'`);
  return n;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  let port = process.env.PORT ? parsePort(process.env.PORT) : 8080;
  let isolate = true;
  const mounts = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--port') port = parsePort(argv[++i]);
    else if (argv[i] === '--mount') {
      const m = /^(\/[^=]*\/)=(.+)$/.exec(argv[++i] ?? '');
      if (!m) { console.error('server.mjs: --mount expects /PREFIX/=DIR'); process.exit(2); }
      mounts[m[1]] = m[2];
    }
    else if (argv[i] === '--no-isolation') isolate = false;
    else if (argv[i] === '-h' || argv[i] === '--help') {
      console.log('usage: node examples/browser/server.mjs [--port N] [--no-isolation] [--mount /PREFIX/=DIR]   ($PORT, default 8080)');
      process.exit(0);
    } else {
      console.error(`server.mjs: unknown argument '${argv[i]}'`);
      process.exit(2);
    }
  }
  if (!fs.existsSync(path.join(REPO_ROOT, 'dist/src/browser/index.js'))) {
    console.error('server.mjs: dist/ is missing: run `npm run build` first');
  }
  const verbose = !!process.env.AETHER_SERVER_LOG;
  const s = await startServer({ port, isolate, mounts, log: verbose ? (l) => console.log(l) : undefined });
  console.log(`Aether demo: ${s.url}examples/browser/  (${isolate ? 'cross-origin isolated: COOP/COEP on' : 'not isolated: one thread'}; Ctrl-C to stop)`);
}
