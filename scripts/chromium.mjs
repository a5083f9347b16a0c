// Debian's chromium driven by playwright-core (never a downloaded browser), launched the same way by the browser
// tests and the browser benches: headless, a fresh temporary profile per launch, no background traffic.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The browser binary: AETHER_CHROMIUM, else Debian's /usr/bin/chromium. */
export const CHROMIUM = process.env.AETHER_CHROMIUM ?? '/usr/bin/chromium';

export const CHROME_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Throws a clear error when the binary is missing (the browser tests fail rather than skip). */
export function requireChromium() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`chromium not found at ${CHROMIUM}: install it (scripts/setup.sh runs apt-get install chromium) or set AETHER_CHROMIUM`);
  }
}

/**
 * Launch chromium with a fresh profile folder (os.tmpdir()/PREFIX...): { ctx, page, dir, close }. close() closes the
 * browser and removes the profile. `prefix` also lets a caller find the browser's processes (their command lines
 * hold the profile path).
 */
export async function launchChromium({ prefix = 'aether-chromium-', viewport, args = [] } = {}) {
  requireChromium();
  const { chromium } = await import('playwright-core');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM, headless: false, args: [...CHROME_ARGS, ...args], ...(viewport ? { viewport } : {}),
    });
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const page = ctx.pages()[0] ?? await ctx.newPage();
  const close = async () => { await ctx.close().catch(() => {}); fs.rmSync(dir, { recursive: true, force: true }); };
  return { ctx, page, dir, close };
}
