// The web dashboard in a real browser (Debian's chromium driven by
// playwright-core) against a real `flint server` with authentication on:
// nothing shows before sign-in, sign-in with the router secret's password,
// a function created from pasted code, routed and invoked from the page
// (status, body, request id and that request's log lines), the log panel
// and the charts moving, a failing build's log streaming in, a refused
// create showing the API's error text, delete with a confirmation, and
// markup in a function's log, body and build log shown as text, never run.
// Also measures the page's transferred size and its time to first render
// (printed as `# dashboard:` lines; recorded in bench/RESULTS.md). With
// FLINT_UPDATE_SCREENSHOTS=1 it writes the screenshots of docs/dashboard.md.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { eventually, flint, REPO, startServer, type TestServer } from './helpers/server.ts';

const CHROMIUM = process.env.FLINT_CHROMIUM ?? '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
const SHOTS = process.env.FLINT_UPDATE_SCREENSHOTS === '1' ? path.join(REPO, 'docs', 'dashboard') : fs.mkdtempSync(path.join(os.tmpdir(), 'flint-shots-'));
/** Sets window.__xss if it ever runs: markup from a function must stay text. */
const XSS = '<img src=x onerror="window.__xss=1">';
const HELLO = `module.exports = async (context) => {
  console.log('served ${XSS} for', context.request.query.name ?? 'nobody');
  return { status: 200, headers: { 'content-type': 'text/html' }, body: 'hello from the dashboard ${XSS}' };
};
`;

let server: TestServer;
let work: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let password: string;
let adminToken: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

async function newPage(): Promise<Page> {
  const p = await context.newPage();
  // Deletes ask for a confirmation: the test confirms.
  p.on('dialog', (d) => void d.accept());
  return p;
}

async function noScriptRan(p: Page): Promise<void> {
  assert.equal(await p.evaluate(() => (globalThis as any).__xss), undefined, 'markup from a function ran as HTML');
}

describe('web dashboard', { skip: hasChromium ? false : `chromium is not installed at ${CHROMIUM} (apt-get install chromium; .ci/run installs it)`, timeout: 300_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ui-'));
    server = await startServer({ sets: ['authentication.enabled=true'] });
    adminToken = fs.readFileSync(path.join(server.dataDir, 'private', 'admin-token'), 'utf8').trim();
    password = ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'password']).trim();
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--builder', 'flint/node-builder', '--poolsize', '1']);
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await newPage();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('shows nothing but the sign-in before signing in, and measures the page', async () => {
    ok(['fn', 'create', '--name', 'secret-looking-fn', '--env', 'nodejs', '--code', writeFile('s.js', HELLO)]);
    const asked: string[] = [];
    const p = await newPage();
    p.on('request', (r) => asked.push(new URL(r.url()).pathname));
    const started = Date.now();
    await p.goto(`${server.controllerUrl}/ui/`);
    await p.waitForSelector('form[name=signin]');
    const firstRender = Date.now() - started;
    // Runs in the page, where the timing entries have the sizes (typed loosely: this file is checked against Node's types).
    const perf = await p.evaluate(() => {
      const perfApi = (globalThis as any).performance;
      const nav = perfApi.getEntriesByType('navigation')[0];
      const res: Array<{ transferSize: number; decodedBodySize: number }> = perfApi.getEntriesByType('resource');
      const fcp: { startTime: number } | undefined = perfApi.getEntriesByName('first-contentful-paint')[0];
      return { transferred: nav.transferSize + res.reduce((n, r) => n + r.transferSize, 0), decoded: nav.decodedBodySize + res.reduce((n, r) => n + r.decodedBodySize, 0), fcp: fcp?.startTime };
    });
    console.log(`# dashboard: transferred ${perf.transferred} bytes (${perf.decoded} bytes unpacked) for the sign-in page; first contentful paint ${perf.fcp?.toFixed(0)} ms; sign-in form shown ${firstRender} ms after navigation`);
    const text = await p.textContent('body');
    assert.doesNotMatch(text ?? '', /secret-looking-fn|nodejs/, 'no data before sign-in');
    // Only the shell, its files and the public /v1/info were asked for.
    for (const a of asked) assert.ok(a.startsWith('/ui/') || a === '/v1/info', `asked ${a} before signing in`);
    await p.screenshot({ path: path.join(SHOTS, 'sign-in.png') });
    // A wrong password gets the API's own words.
    await p.fill('input[name=password]', 'not-the-password');
    await p.click('form[name=signin] button[type=submit]');
    await p.waitForSelector('form[name=signin] .error');
    assert.match((await p.textContent('form[name=signin] .error')) ?? '', /Unauthorized: invalid username or password/);
    await p.close();
  });

  it('signs in with the admin token, keeping only a control-plane token', async () => {
    const p = await newPage();
    await p.goto(`${server.controllerUrl}/ui/`);
    await p.fill('input[name=token]', adminToken);
    await p.click('form[name=signin] button[type=submit]');
    await p.waitForSelector('section[data-kind=Function] tr[data-name=secret-looking-fn]');
    const kept = await p.evaluate(() => Object.values((globalThis as any).sessionStorage as Record<string, string>).join(' '));
    assert.ok(!kept.includes(adminToken), 'the admin token is not kept');
    const payload = JSON.parse(Buffer.from(kept.split('.')[1], 'base64url').toString('utf8'));
    assert.equal(payload.aud, 'flint-control-plane');
    await p.click('button[name=signout]');
    await p.waitForSelector('form[name=signin]');
    await p.close();
  });

  it('signs in, creates a function from code, routes it, invokes it and sees its log and charts', async () => {
    await page.goto(`${server.controllerUrl}/ui/`);
    await page.fill('input[name=password]', password);
    await page.click('form[name=signin] button[type=submit]');
    await page.waitForSelector('form[name=new-function]');
    await page.waitForSelector('form[name=new-function] select[name=env] option[value=nodejs]', { state: 'attached' });
    await page.screenshot({ path: path.join(SHOTS, 'functions.png'), fullPage: true });

    // A refused create shows the API's error text.
    await page.fill('form[name=new-function] input[name=name]', 'Bad_Name');
    await page.fill('form[name=new-function] textarea[name=code]', HELLO);
    await page.click('form[name=new-function] button[type=submit]');
    await page.waitForSelector('form[name=new-function] .error');
    assert.match((await page.textContent('form[name=new-function] .error')) ?? '', /not a valid name|metadata\.name/);

    await page.fill('form[name=new-function] input[name=name]', 'hello');
    await page.fill('form[name=new-function] textarea[name=code]', HELLO);
    await page.click('form[name=new-function] button[type=submit]');
    await page.waitForSelector('section[data-kind=Function] tr[data-name=hello]');
    assert.match(ok(['fn', 'list']), /^hello\s/m);

    await page.click('section[data-kind=Function] tr[data-name=hello] a');
    await page.waitForSelector('.function-page');
    await page.fill('form[name=new-route] input[name=name]', 'hello');
    await page.fill('form[name=new-route] input[name=url]', '/hello');
    await page.click('form[name=new-route] button[type=submit]');
    await page.waitForSelector('ul.routes li >> text=/hello');
    assert.match(ok(['route', 'list']), /hello\s+\[?GET\]?\s.*\/hello/);

    await page.fill('form[name=invoke] textarea[name=query]', 'name=browser');
    await page.click('form[name=invoke] button[type=submit]');
    await page.waitForSelector('.invoke-body');
    assert.equal(await page.textContent('.invoke-body'), `hello from the dashboard ${XSS}`);
    assert.equal(await page.textContent('.invoke-status'), '200');
    const requestId = (await page.textContent('.invoke-request-id'))?.trim() ?? '';
    assert.ok(requestId.length > 0, 'the request id is shown');
    // That request's own log lines, and the live log panel.
    await page.waitForSelector(`#invoke-panel .log-lines >> text=served ${XSS} for browser`);
    await page.waitForSelector(`#log-panel .log-lines >> text=served ${XSS} for browser`);
    // The log filtered by the request id shows its line only.
    await page.fill('input[name=log-request-id]', requestId);
    await page.press('input[name=log-request-id]', 'Enter');
    await page.waitForSelector(`#log-panel .log-lines >> text=for browser`);

    // Traffic through the router moves the chart (pushed samples, not polled).
    const token = ok(['token', 'create', '--function', 'hello', '--ttl', '10m']).trim();
    await eventually(async () => {
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${server.routerUrl}/hello`, { headers: { authorization: `Bearer ${token}` } });
        await r.text();
      }
      const total = Number(await page.getAttribute('#metrics-panel', 'data-rps-total'));
      return total > 0 ? total : undefined;
    }, 'the requests chart counts the calls', 60_000, 1000);
    await page.waitForSelector('#metrics-panel .instances-count');
    await page.waitForSelector('#metrics-panel .warm-pool');
    await noScriptRan(page);
    // A few pushed samples, so the screenshot's charts have lines.
    await page.waitForFunction(() => Number((globalThis as any).document.querySelector('#metrics-panel').dataset.samples) >= 5, undefined, { timeout: 60_000 });
    await page.screenshot({ path: path.join(SHOTS, 'function.png'), fullPage: true });
  });

  it("streams a failing build's log onto the package page", async () => {
    const src = path.join(work, 'failing');
    fs.mkdirSync(src, { recursive: true });
    fs.writeFileSync(path.join(src, 'build.sh'), `#!/bin/sh\necho "building step one"\nsleep 3\necho '${XSS} step two breaks' >&2\nexit 7\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(src, 'index.js'), 'module.exports = async () => ({ body: "never" });\n');
    ok(['package', 'create', '--env', 'nodejs', '--src', src, '--name', 'failing', '--buildcmd', './build.sh']);
    await page.goto(`${server.controllerUrl}/ui/#/package/default/failing`);
    await page.waitForSelector('.build-log >> text=building step one');
    await page.waitForSelector('#build-status >> text=failed', { timeout: 60_000 });
    const log = (await page.textContent('.build-log')) ?? '';
    assert.match(log, /step two breaks/);
    assert.match(log, /exited with code 7/);
    await noScriptRan(page);
    await page.screenshot({ path: path.join(SHOTS, 'package.png'), fullPage: true });
  });

  it('deletes a function after a confirmation', async () => {
    await page.goto(`${server.controllerUrl}/ui/#/functions`);
    await page.waitForSelector('section[data-kind=Function] tr[data-name=hello]');
    await page.click('section[data-kind=Function] tr[data-name=secret-looking-fn] button.danger');
    await page.waitForSelector('section[data-kind=Function] tr[data-name=secret-looking-fn]', { state: 'detached' });
    assert.doesNotMatch(ok(['fn', 'list']), /secret-looking-fn/);
    await noScriptRan(page);
  });
});

function writeFile(name: string, text: string): string {
  const file = path.join(work, name);
  fs.writeFileSync(file, text);
  return file;
}
