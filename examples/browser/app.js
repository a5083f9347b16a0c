// Aether browser demo: no framework, no bundler. Served from the repo root by server.mjs, so the package's
// browser entry is ../../dist/src/browser/index.js (in an app: `import { Aether } from 'aether-wasm'`).
import { Aether, AetherError } from '../../dist/src/browser/index.js';

const $ = (id) => document.getElementById(id);
const SHIPPED_MODEL = new URL('../../models/tiny-llama-a-q8_0.rknot', location.href).href;
const WASM_DIR = new URL('../../wasm/', location.href);
const FFN_MODULES = ['ffn-fused', 'ffn-saturated'];

/** Demo state, also read by tests/browser.test.mjs. */
const demo = {
  Aether,
  model: null,
  features: Aether.probeFeatures(),
  /** { tokens, text, stats, threads, crossOriginIsolated, warnings, chat } of the last generation */
  lastRun: null,
  /** load events of the last load (progress events left out) */
  loadEvents: [],
  ffnModulesFound: [],
  ffnActive: null,
  loadCtl: null,
  genCtl: null,
};
window.aetherDemo = demo;

// ---- small helpers ----
function log(line) {
  const el = $('log');
  el.textContent += `${new Date().toLocaleTimeString()}  ${line}\n`;
  el.scrollTop = el.scrollHeight;
}
function setStatus(state, text) {
  const el = $('status');
  el.dataset.state = state;
  el.textContent = text;
}
const mib = (n) => (n / (1 << 20)).toFixed(1) + ' MiB';
const num = (id) => Number($(id).value);
function describe(e) {
  return e instanceof AetherError ? `${e.code}: ${e.message}` : `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
}
function busy(loading, generating) {
  $('load').disabled = loading || generating;
  $('cancel-load').disabled = !loading;
  $('generate').disabled = loading || generating || !demo.model;
  $('stop').disabled = !generating;
  $('apply-ffn').disabled = loading || !demo.model;
}

// ---- features ----
function showFeatures() {
  const f = demo.features;
  const badge = (ok, text, title) => `<span class="badge ${ok ? 'ok' : 'no'}" title="${title}">${text}</span>`;
  $('badges').innerHTML = [
    badge(f.simd, `SIMD128 ${f.simd ? '✓' : '✗'}`, 'WebAssembly.validate on a SIMD probe'),
    badge(f.crossOriginIsolated, f.crossOriginIsolated ? 'cross-origin isolated' : 'not isolated', 'COOP/COEP headers'),
    badge(f.threads, f.threads ? `threads ✓ (${navigator.hardwareConcurrency} cores)` : 'one thread', 'SharedArrayBuffer + shared wasm memory'),
  ].join('');
  $('threads').value = f.threads ? Math.min(4, navigator.hardwareConcurrency || 2) : 1;
  if (!f.simd) setStatus('error', 'this browser has no WebAssembly SIMD128: Aether cannot run here');
  if (!f.crossOriginIsolated) log('the page is not cross-origin isolated (no COOP/COEP headers): the engine runs on one thread');
}

async function probeFfnModules() {
  const found = [];
  for (const name of FFN_MODULES) {
    const ok = await Promise.all([`${name}.wasm`, `${name}-st.wasm`].map((f) =>
      fetch(new URL(f, WASM_DIR), { method: 'HEAD' }).then((r) => r.ok, () => false)));
    if (ok.every(Boolean)) found.push(name);
  }
  demo.ffnModulesFound = found;
  const box = $('ffn-modules');
  box.checked = found.length > 0;
  box.disabled = found.length === 0;
  box.parentElement.title = found.length ? `found in wasm/: ${found.join(', ')}` : 'no FFN module in wasm/ (dense only)';
}

// ---- load ----
async function loadModel() {
  const kind = document.querySelector('input[name=src]:checked').value;
  let source;
  if (kind === 'shipped') source = SHIPPED_MODEL;
  else if (kind === 'url') source = $('model-url').value.trim();
  else source = $('model-file').files[0];
  if (!source) { setStatus('error', kind === 'url' ? 'enter a model URL' : 'choose a .rknot or .gguf file'); return; }

  if (demo.model) { await demo.model.dispose(); demo.model = null; }
  $('warnings').innerHTML = '';
  $('model-info').innerHTML = '';
  $('ffn-error').textContent = '';
  demo.loadEvents = [];
  demo.loadCtl = new AbortController();
  busy(true, false);
  setStatus('loading', 'loading…');
  $('progress').value = 0;
  const t0 = performance.now();
  const name = typeof source === 'string' ? source : source.name;
  log(`load ${name}`);
  try {
    const modules = $('ffn-modules').checked ? demo.ffnModulesFound : [];
    const model = await Aether.load(source, {
      threads: num('threads'),
      nCtx: $('n-ctx').value ? num('n-ctx') : undefined,
      kvDtype: $('kv-dtype').value || undefined,
      cache: $('use-cache').checked,
      modules,
      signal: demo.loadCtl.signal,
      onProgress: (e) => {
        if (e.type === 'progress') {
          $('progress').value = e.total ? e.loaded / e.total : 0;
          $('progress-text').textContent = `${mib(e.loaded)} / ${e.total ? mib(e.total) : '?'}`;
        } else {
          demo.loadEvents.push(e);
          log(`cache ${e.state}${e.reason ? `: ${e.reason}` : ''}`);
        }
      },
    });
    demo.model = model;
    const secs = (performance.now() - t0) / 1000;
    $('progress').value = 1;
    setStatus('ready', `ready (${secs.toFixed(2)} s)`);
    for (const w of model.warnings) {
      const li = document.createElement('li');
      li.textContent = w;
      $('warnings').append(li);
    }
    const c = model.config;
    const info = {
      arch: c.arch, layers: c.n_layers, dim: c.dim, 'hidden dim': c.hidden_dim, heads: `${c.n_heads} (kv ${c.n_kv_heads})`,
      vocab: c.vocab_size, context: model.nCtx, threads: model.threads, modules: modules.join(', ') || 'core',
      memory: `weights ${mib(model.memory.weights)} + KV cache ${mib(model.memory.kvCache)} (${model.memory.kvDtype.k}/${model.memory.kvDtype.v}) + scratch ${mib(model.memory.scratch)}`,
    };
    $('model-info').innerHTML = Object.entries(info).map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('');
    log(`loaded: ${c.arch}, ${c.n_layers} layers, ${model.threads} thread(s), ${secs.toFixed(2)} s`);
    drawChart(null);
  } catch (e) {
    setStatus(e?.name === 'AbortError' ? 'idle' : 'error', e?.name === 'AbortError' ? 'load cancelled' : describe(e));
    log(`load failed: ${describe(e)}`);
  } finally {
    demo.loadCtl = null;
    busy(false, false);
  }
}

// ---- generate ----
function generateOptions(signal) {
  const greedy = $('greedy').checked;
  return {
    maxTokens: num('max-tokens'), greedy, seed: num('seed'), repeatPenalty: num('repeat-penalty'),
    ...(greedy ? {} : { temperature: num('temperature'), topK: num('top-k'), topP: num('top-p'), minP: num('min-p') }),
    signal,
  };
}

async function generate() {
  const model = demo.model;
  if (!model) return;
  const prompt = $('prompt').value;
  const chat = $('chat').checked;
  demo.genCtl = new AbortController();
  busy(false, true);
  setStatus('generating', 'generating…');
  $('gen-error').textContent = '';
  const out = $('output');
  out.innerHTML = '';
  const promptEl = document.createElement('span');
  promptEl.className = 'prompt';
  promptEl.textContent = chat ? `User: ${prompt}\nAssistant:` : prompt;
  const genEl = document.createElement('span');
  genEl.className = 'gen';
  const genText = document.createTextNode('');
  genEl.append(genText);
  out.append(promptEl, genEl);

  const tokens = [];
  let text = '';
  const t0 = performance.now();
  let tFirst = 0;
  const stats = $('gen-stats');
  try {
    const opts = generateOptions(demo.genCtl.signal);
    const it = chat ? model.chat([{ role: 'user', content: prompt }], opts) : model.generate(prompt, opts);
    for await (const piece of it) {
      const now = performance.now();
      if (!tFirst) tFirst = now;
      if (piece.token >= 0) tokens.push(piece.token);
      text += piece.text;
      genText.appendData(piece.text);
      out.scrollTop = out.scrollHeight;
      const tps = tokens.length > 1 ? ((tokens.length - 1) * 1000) / (now - tFirst) : 0;
      stats.innerHTML = `<b>${tokens.length}</b> tokens · <b>${tps.toFixed(1)}</b> tok/s · first token after ${(tFirst - t0).toFixed(0)} ms`;
      if (tokens.length % 4 === 0) void updateChart();
    }
    const s = model.stats;
    demo.lastRun = {
      tokens, text, stats: s, threads: model.threads, crossOriginIsolated: model.crossOriginIsolated,
      warnings: [...model.warnings], chat,
    };
    stats.innerHTML = `<b>${s.generatedTokens}</b> tokens · decode <b>${s.decodeTps.toFixed(1)}</b> tok/s · ` +
      `prefill ${s.prefillTokens} tok at ${s.prefillTps.toFixed(1)} tok/s · ${model.threads} thread(s) · ${s.finishReason}`;
    setStatus('done', 'done');
    log(`generated ${s.generatedTokens} tokens, ${s.decodeTps.toFixed(1)} tok/s (${s.finishReason})`);
  } catch (e) {
    if (e?.name === 'AbortError') {
      setStatus('done', `stopped after ${tokens.length} tokens`);
      log(`stopped after ${tokens.length} tokens`);
    } else {
      setStatus('error', 'generation failed');
      $('gen-error').textContent = describe(e);
      log(`generate failed: ${describe(e)}`);
    }
  } finally {
    demo.genCtl = null;
    busy(false, false);
    await updateChart();
  }
}

// ---- FFN mode and chart ----
async function applyFfnMode() {
  const model = demo.model;
  if (!model) return;
  const mode = $('ffn-mode').value;
  const sparsity = num('sparsity');
  $('ffn-error').textContent = '';
  try {
    await model.setFfnMode(mode, undefined, mode === 'dynamic' ? { sparsity } : undefined);
    log(`FFN mode: ${mode}${mode === 'dynamic' ? ` (sparsity ${sparsity})` : ''}`);
  } catch (e) {
    $('ffn-error').textContent = `FFN mode '${mode}' is unavailable: ${describe(e)}`;
    log(`FFN mode ${mode} failed: ${describe(e)}`);
  }
}

async function updateChart() {
  if (!demo.model) return;
  try {
    demo.ffnActive = await demo.model.ffnActive();
    drawChart(demo.ffnActive);
  } catch { /* disposed meanwhile */ }
}

function drawChart(values) {
  const canvas = $('ffn-chart');
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = '#5d6576';
  const model = demo.model;
  if (!model || !values) {
    g.fillText(model ? 'generate to see the active neurons of each layer' : 'load a model', 8, 20);
    return;
  }
  const H = model.config.hidden_dim;
  const left = 34, bottom = h - 18, top = 8, n = values.length;
  const bw = (w - left - 8) / n;
  g.strokeStyle = '#d9dde5';
  for (const f of [0, 0.5, 1]) {
    const y = bottom - f * (bottom - top);
    g.beginPath(); g.moveTo(left, y); g.lineTo(w - 8, y); g.stroke();
    g.fillText(`${Math.round(f * 100)}%`, 2, y + 4);
  }
  values.forEach((v, l) => {
    const frac = Math.max(0, Math.min(1, v / H));
    const x = left + l * bw + bw * 0.15;
    const bh = frac * (bottom - top);
    g.fillStyle = '#2457c5';
    g.fillRect(x, bottom - bh, bw * 0.7, bh);
    g.fillStyle = '#5d6576';
    g.textAlign = 'center';
    g.fillText(String(l), x + bw * 0.35, h - 4);
    if (bw > 28) {
      const inside = bh > 24; // label inside the bar (white) when it is tall, above it otherwise
      g.fillStyle = inside ? '#fff' : '#5d6576';
      g.fillText(String(v), x + bw * 0.35, inside ? bottom - bh + 14 : bottom - bh - 4);
    }
    g.textAlign = 'start';
  });
}

// ---- wiring ----
$('load').onclick = loadModel;
$('cancel-load').onclick = () => demo.loadCtl?.abort();
$('clear-cache').onclick = async () => { await Aether.clearModelCache(); log('model cache cleared'); };
$('generate').onclick = generate;
$('stop').onclick = () => demo.genCtl?.abort();
$('apply-ffn').onclick = applyFfnMode;
$('sparsity').oninput = () => { $('sparsity-value').textContent = num('sparsity').toFixed(2); };
$('model-url').onfocus = () => { document.querySelector('input[name=src][value=url]').checked = true; };
$('model-file').onchange = () => { document.querySelector('input[name=src][value=file]').checked = true; };
$('greedy').onchange = () => {
  for (const id of ['temperature', 'top-k', 'top-p', 'min-p']) $(id).disabled = $('greedy').checked;
};

showFeatures();
drawChart(null);
busy(false, false);
await probeFfnModules();
document.body.dataset.ready = '1';
