/**
 * OpenAI-compatible HTTP server over one loaded model (`aether serve`; Node's http module, no framework).
 *
 *   POST /v1/chat/completions   POST /v1/completions   (JSON, or server-sent events with "stream": true)
 *   POST /v1/embeddings         GET /v1/models[/ID]     GET /health     GET /metrics (Prometheus text: the server's counters, then the model's metrics())
 *
 * One engine, so one request runs at a time: requests wait in a FIFO queue (answered in arrival order;
 * beyond `maxQueue` waiting requests: 429). A client that disconnects leaves the queue, or aborts its
 * generation, which frees the engine for the next one. Bad input (malformed JSON, fields of the wrong type
 * or out of range, bodies over `maxBodyBytes`) gets a 400 with OpenAI's error object
 * `{ error: { message, type, param, code } }`; an unknown route a 404. No request can stop the server:
 * every handler's failure is caught and answered (500 for what is not the client's fault).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AetherModel } from '../aether.js';
import { AetherError } from '../errors.js';
import { createChatCompletion, createCompletion, createEmbedding, parseChatRequest, parseCompletionRequest } from '../openai.js';
import { formatPrometheus, PROMETHEUS_CONTENT_TYPE } from '../runtime/metrics.js';
import { ServerMetrics, formatFamilies } from './server-metrics.js';

export interface ServeOptions {
  host?: string;
  /** 0: any free port (default 8080). */
  port?: number;
  /** Largest request body accepted (default 1 MiB). */
  maxBodyBytes?: number;
  /** Requests that may wait for the engine (default 256); more get 429. */
  maxQueue?: number;
  /** One line per request (default: none). */
  log?: (line: string) => void;
}

export interface RunningServer {
  server: http.Server;
  /** http://host:port */
  url: string;
  metrics: ServerMetrics;
  /** Stop accepting, abort what runs, close connections. The model is not disposed. */
  close(): Promise<void>;
}

/** OpenAI's error body. */
export interface ErrorBody { error: { message: string; type: string; param: string | null; code: string | null } }

class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly type = 'invalid_request_error', readonly param: string | null = null, readonly code: string | null = null) {
    super(message);
  }
}

/** An error as the HTTP status and OpenAI error body it is answered with. */
export function errorResponse(e: unknown): { status: number; body: ErrorBody } {
  if (e instanceof HttpError) return { status: e.status, body: { error: { message: e.message, type: e.type, param: e.param, code: e.code } } };
  if (e instanceof AetherError) {
    const param = typeof e.details?.param === 'string' ? e.details.param : null;
    switch (e.code) {
      case 'invalid_argument': case 'tokenizer_error':
        return { status: 400, body: { error: { message: e.message, type: 'invalid_request_error', param, code: null } } };
      case 'kv_cache_full':
        return { status: 400, body: { error: { message: e.message, type: 'invalid_request_error', param: param ?? 'messages', code: 'context_length_exceeded' } } };
      default:
        return { status: 500, body: { error: { message: `${e.code}: ${e.message}`, type: 'server_error', param: null, code: e.code } } };
    }
  }
  return { status: 500, body: { error: { message: `internal error: ${(e as Error)?.message ?? String(e)}`, type: 'server_error', param: null, code: null } } };
}

/** FIFO of jobs on the one engine. */
class EngineQueue {
  private readonly waiting: { run: () => Promise<void>; signal: AbortSignal; done: (e?: unknown) => void; onAbort: () => void }[] = [];
  private busy = false;

  constructor(private readonly metrics: ServerMetrics, private readonly maxQueue: number) {}

  get length(): number { return this.waiting.length; }

  /** Run `job` when the engine is free; rejects with an AbortError if `signal` aborts while waiting. */
  run(job: () => Promise<void>, signal: AbortSignal): Promise<void> {
    if (this.waiting.length >= this.maxQueue) {
      return Promise.reject(new HttpError(429, `the server has ${this.waiting.length} requests waiting; try again later`, 'rate_limit_error', null, 'queue_full'));
    }
    return new Promise<void>((resolve, reject) => {
      const entry = {
        run: job, signal,
        done: (e?: unknown) => { signal.removeEventListener('abort', entry.onAbort); if (e === undefined) resolve(); else reject(e); },
        onAbort: () => {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) { this.waiting.splice(i, 1); this.metrics.queueLength = this.waiting.length; entry.done(new AetherError('aborted', 'client disconnected while queued')); }
        },
      };
      if (signal.aborted) { reject(new AetherError('aborted', 'client disconnected')); return; }
      signal.addEventListener('abort', entry.onAbort, { once: true });
      this.waiting.push(entry);
      this.metrics.queueLength = this.waiting.length;
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      for (let e = this.waiting.shift(); e; e = this.waiting.shift()) {
        this.metrics.queueLength = this.waiting.length;
        this.metrics.inFlight = 1;
        try {
          await e.run();
          e.done();
        } catch (err) {
          e.done(err ?? new Error('job failed'));
        } finally {
          this.metrics.inFlight = 0;
        }
      }
    } finally {
      this.busy = false;
    }
  }
}

const ROUTES = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/models', '/health', '/metrics']);

/** Read the body up to `max` bytes (more: a 400, after the rest has been drained or the socket dropped). */
function readBody(req: http.IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    const chunks: Buffer[] = [];
    let size = 0, over = false;
    const tooLarge = () => new HttpError(400, `the request body exceeds ${max} bytes`, 'invalid_request_error', null, 'request_too_large');
    if (Number.isFinite(declared) && declared > max) {
      over = true;
      // do not wait for a body we will not read: answer now, the connection is closed after the answer
      reject(tooLarge());
      req.resume();
      return;
    }
    req.on('data', (c: Buffer) => {
      if (over) return;
      size += c.length;
      if (size > max) { over = true; chunks.length = 0; reject(tooLarge()); return; }
      chunks.push(c);
    });
    req.on('end', () => { if (!over) resolve(Buffer.concat(chunks)); });
    req.on('error', (e) => { if (!over) reject(e); });
  });
}

function parseJson(buf: Buffer): unknown {
  const text = buf.toString('utf8');
  if (!text.trim()) throw new HttpError(400, 'the request body is empty; expected a JSON object', 'invalid_request_error', null, 'invalid_json');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HttpError(400, `the request body is not valid JSON: ${(e as Error).message}`, 'invalid_request_error', null, 'invalid_json');
  }
}

/** Start the server on an already loaded model. */
export async function serve(model: AetherModel, opts: ServeOptions = {}): Promise<RunningServer> {
  const maxBody = opts.maxBodyBytes ?? 1 << 20;
  const metrics = new ServerMetrics();
  const queue = new EngineQueue(metrics, opts.maxQueue ?? 256);
  const running = new Set<AbortController>();
  const created = Math.floor(Date.now() / 1000);
  const modelEntry = () => ({ id: model.modelId, object: 'model', created, owned_by: 'aether' });

  const send = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    if (res.headersSent) { res.end(); return; }
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': typeof body === 'string' ? PROMETHEUS_CONTENT_TYPE : 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  /** Write to a response, waiting when its buffer is full; false when the client is gone. */
  const write = (res: http.ServerResponse, s: string): Promise<boolean> => {
    if (res.destroyed || res.writableEnded) return Promise.resolve(false);
    if (res.write(s)) return Promise.resolve(true);
    return new Promise((r) => {
      const done = (ok: boolean) => { res.off('drain', onDrain); res.off('close', onClose); r(ok); };
      const onDrain = () => done(true), onClose = () => done(false);
      res.on('drain', onDrain); res.on('close', onClose);
    });
  };

  /** Generation endpoints: validate now, run when the engine is free, stream or answer once. */
  async function generation(kind: 'chat' | 'completion', body: unknown, res: http.ServerResponse, signal: AbortSignal): Promise<void> {
    const parsed = kind === 'chat' ? parseChatRequest(body, model.nCtx) : parseCompletionRequest(body); // 400 before queueing
    const req = body as Parameters<typeof createChatCompletion>[1] & Parameters<typeof createCompletion>[1];
    await queue.run(async () => {
      const t0 = performance.now(), before = model.stats;
      try {
        await run();
      } finally {
        const s = model.stats;
        if (s !== before) metrics.generation(s.promptTokens, s.generatedTokens, (performance.now() - t0) / 1000, s.finishReason ?? 'error');
      }
    }, signal);

    async function run(): Promise<void> {
      if (!parsed.stream) {
        const out = kind === 'chat' ? await createChatCompletion(model, { ...req, stream: false }, { signal }) : await createCompletion(model, { ...req, stream: false }, { signal });
        send(res, 200, out);
        return;
      }
      const it = kind === 'chat' ? await createChatCompletion(model, { ...req, stream: true }, { signal }) : await createCompletion(model, { ...req, stream: true }, { signal });
      const iter = it[Symbol.asyncIterator]();
      let first: IteratorResult<unknown>;
      try {
        first = await iter.next(); // errors of the request itself (prompt too long, bad token ids) come before any chunk: a 4xx
      } catch (e) {
        await iter.return?.();
        throw e;
      }
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
      try {
        for (let r = first; !r.done; r = await iter.next()) {
          if (!(await write(res, `data: ${JSON.stringify(r.value)}\n\n`))) throw new AetherError('aborted', 'client disconnected');
        }
        await write(res, 'data: [DONE]\n\n');
        res.end();
      } catch (e) {
        await iter.return?.();
        if ((e as Error)?.name !== 'AbortError' && !res.destroyed) {
          // headers are sent: report the error as an event, as OpenAI does, and end the stream
          await write(res, `data: ${JSON.stringify(errorResponse(e).body)}\n\n`);
          res.end();
          return;
        }
        throw e;
      }
    }
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, signal: AbortSignal): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    const post = async () => {
      if (method !== 'POST') throw new HttpError(405, `${path} expects POST`, 'invalid_request_error', null, 'method_not_allowed');
      return parseJson(await readBody(req, maxBody));
    };
    switch (path) {
      case '/v1/chat/completions': return generation('chat', await post(), res, signal);
      case '/v1/completions': return generation('completion', await post(), res, signal);
      case '/v1/embeddings': {
        const body = await post();
        await queue.run(async () => {
          const out = await createEmbedding({ modelId: model.modelId, embed: (t, o) => model.embedDetailed(typeof t === 'string' ? [t] : t, o) }, body as never, { signal });
          metrics.generation(out.usage.prompt_tokens, 0, 0, 'embedding');
          send(res, 200, out);
        }, signal);
        return;
      }
      case '/v1/models':
        if (method !== 'GET') throw new HttpError(405, `${path} expects GET`, 'invalid_request_error', null, 'method_not_allowed');
        return send(res, 200, { object: 'list', data: [modelEntry()] });
      case '/health':
        return send(res, 200, { status: 'ok', model: model.modelId, queue: queue.length, busy: metrics.inFlight > 0 });
      case '/metrics':
        return send(res, 200, formatFamilies(metrics.families({ model: model.modelId })) + formatPrometheus(model.metrics(), { labels: { model: model.modelId } }));
      default:
        if (path.startsWith('/v1/models/') && method === 'GET') {
          const id = decodeURIComponent(path.slice('/v1/models/'.length));
          if (id === model.modelId) return send(res, 200, modelEntry());
          throw new HttpError(404, `the model '${id}' does not exist (this server has '${model.modelId}')`, 'invalid_request_error', 'model', 'model_not_found');
        }
        throw new HttpError(404, `unknown route ${method} ${path}`, 'invalid_request_error', null, 'not_found');
    }
  }

  const server = http.createServer((req, res) => {
    const t0 = performance.now();
    const ac = new AbortController();
    running.add(ac);
    res.on('close', () => {
      running.delete(ac);
      if (!res.writableFinished) { metrics.aborted++; ac.abort(new AetherError('aborted', 'client disconnected')); }
    });
    const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
    const route = ROUTES.has(path) ? path : path.startsWith('/v1/models/') ? '/v1/models' : 'other';
    res.on('finish', () => {
      metrics.request(route, res.statusCode, (performance.now() - t0) / 1000);
      opts.log?.(`${new Date().toISOString()} ${req.method} ${req.url} ${res.statusCode} ${((performance.now() - t0) / 1000).toFixed(3)}s`);
    });
    handle(req, res, ac.signal).catch((e) => {
      if (ac.signal.aborted || res.destroyed) return; // the client is gone: nobody to answer
      const { status, body } = errorResponse(e);
      if (res.headersSent) { res.end(); return; }
      const close = e instanceof HttpError && e.code === 'request_too_large';
      send(res, status, body, close ? { Connection: 'close' } : {});
    }).catch(() => { try { res.destroy(); } catch { /* already gone */ } });
  });
  // malformed HTTP itself: answer 400 when the socket can still take it
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json\r\n\r\n' +
      JSON.stringify({ error: { message: 'malformed HTTP request', type: 'invalid_request_error', param: null, code: null } }));
    else socket.destroy();
  });
  server.keepAliveTimeout = 5000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 8080, opts.host ?? '127.0.0.1', () => { server.off('error', reject); resolve(); });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    server, metrics, url: `http://${host}:${addr.port}`,
    close: () => new Promise<void>((resolve) => {
      for (const ac of running) ac.abort(new AetherError('aborted', 'server closing'));
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
