/**
 * The atlas chart (aether analyze --chart OUT.svg): one panel per score (sigma1/sigma2, stable rank, alpha,
 * activation-aware energy at 50% rank), x = layer, one line per matrix kind. Drawn with d3 (the npm packages
 * d3-scale: the axes' scales, "nice" domains, ticks and tick labels; d3-shape: the line paths) into an SVG 1.1
 * string (no DOM, no rendering dependency); checked by tests/compress.test.mjs.
 */
import { scaleLinear, scalePoint } from 'd3-scale';
import { line } from 'd3-shape';
import type { MatrixScores } from './analyze.js';

const COLORS: Record<string, string> = {
  attn_q: '#1f77b4', attn_k: '#aec7e8', attn_v: '#ff7f0e', attn_qkv: '#1f77b4', attn_output: '#ffbb78',
  ffn_gate: '#2ca02c', ffn_up: '#d62728', ffn_down: '#9467bd',
};

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export interface ChartPanel { key: keyof MatrixScores; title: string; threshold?: number }

export const DEFAULT_PANELS: ChartPanel[] = [
  { key: 'cliff', title: 'sigma1 / sigma2 (claimed threshold 8)', threshold: 8 },
  { key: 'stable_rank', title: 'stable rank ||W||F^2 / sigma1^2' },
  { key: 'alpha', title: 'power-law alpha of eig(W^T W)' },
  { key: 'aa_energy50', title: 'activation-aware energy at 50% rank' },
];

export function atlasSvg(matrices: MatrixScores[], opts: { title?: string; panels?: ChartPanel[] } = {}): string {
  const panels = (opts.panels ?? DEFAULT_PANELS).filter((p) => matrices.some((m) => Number.isFinite(m[p.key] as number)));
  const names = [...new Set(matrices.map((m) => m.name))];
  const layers = [...new Set(matrices.map((m) => m.layer))].sort((a, b) => a - b);
  const PW = 420, PH = 240, M = { l: 56, r: 16, t: 28, b: 36 }, cols = 2;
  const rows = Math.ceil(panels.length / cols);
  const W = cols * PW, H = 40 + rows * PH + 30;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(opts.title ?? 'spectral atlas')}</text>`);
  panels.forEach((p, pi) => {
    const ox = (pi % cols) * PW, oy = 40 + Math.floor(pi / cols) * PH;
    const vals = matrices.map((m) => m[p.key] as number).filter(Number.isFinite);
    if (p.threshold !== undefined) vals.push(p.threshold);
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (lo === hi) { lo -= 1; hi += 1; }
    const x0 = ox + M.l, x1 = ox + PW - M.r, y0 = oy + PH - M.b, y1 = oy + M.t;
    const xs = scalePoint<number>().domain(layers).range([x0, x1]).align(0.5).padding(layers.length > 1 ? 0 : 0.5);
    const ys = scaleLinear().domain([lo, hi]).range([y0, y1]).nice(4);
    const fmt = ys.tickFormat(4);
    out.push(`<g class="panel" data-score="${esc(String(p.key))}">`);
    out.push(`<text x="${(x0 + x1) / 2}" y="${oy + 16}" text-anchor="middle" font-size="12">${esc(p.title)}</text>`);
    out.push(`<path d="M${x0} ${y1}V${y0}H${x1}" fill="none" stroke="#333"/>`);
    for (const v of ys.ticks(4)) {
      const y = ys(v).toFixed(1);
      out.push(`<text x="${x0 - 4}" y="${(ys(v) + 3).toFixed(1)}" text-anchor="end">${esc(fmt(v))}</text><path d="M${x0} ${y}H${x1}" stroke="#eee"/>`);
    }
    // layer labels: every layer up to 16, else about 16 of them
    const every = Math.max(1, Math.ceil(layers.length / 16));
    layers.forEach((l, i) => { if (i % every === 0) out.push(`<text x="${xs(l)!.toFixed(1)}" y="${y0 + 14}" text-anchor="middle">${l}</text>`); });
    out.push(`<text x="${(x0 + x1) / 2}" y="${y0 + 28}" text-anchor="middle">layer</text>`);
    if (p.threshold !== undefined) out.push(`<path d="M${x0} ${ys(p.threshold).toFixed(1)}H${x1}" stroke="#000" stroke-dasharray="4 3"/>`);
    const path = line<MatrixScores>().x((m) => xs(m.layer)!).y((m) => ys(m[p.key] as number)).digits(1);
    for (const n of names) {
      const pts = layers.map((l) => matrices.find((m) => m.layer === l && m.name === n)).filter((m) => m && Number.isFinite(m[p.key] as number)) as MatrixScores[];
      if (pts.length === 0) continue;
      out.push(`<path class="series" data-matrix="${esc(n)}" d="${path(pts)}" fill="none" stroke="${COLORS[n] ?? '#777'}" stroke-width="1.5"/>`);
      for (const m of pts) out.push(`<circle cx="${xs(m.layer)!.toFixed(1)}" cy="${ys(m[p.key] as number).toFixed(1)}" r="2.5" fill="${COLORS[n] ?? '#777'}"/>`);
    }
    out.push('</g>');
  });
  const ly = H - 14;
  names.forEach((n, i) => {
    const x = 20 + i * 100;
    out.push(`<rect x="${x}" y="${ly - 8}" width="10" height="10" fill="${COLORS[n] ?? '#777'}"/><text x="${x + 14}" y="${ly + 1}">${esc(n)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
