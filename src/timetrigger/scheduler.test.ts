// The scheduler against a real store (SQLite) and an HTTP server standing in
// for the router: each due time is called once, with its headers, and its
// outcome recorded; a restart makes up the run it missed, once; two
// schedulers on one store never both call a due time; an update or a delete
// stops the old schedule; stop() cuts a call off.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { TimeTrigger } from '../api/kinds.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import { TimeTriggerScheduler, type TimeTriggerSchedulerOptions } from './scheduler.ts';

interface Call {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  at: number;
}

let dir: string;
let store: Store;
let router: http.Server;
let routerUrl: string;
let calls: Call[];
/** How the stand-in router answers: status and body, after a delay. */
let answer: { status: number; body: string; delayMs: number };
let schedulers: TimeTriggerScheduler[];
let logLines: Array<{ ns: string; fn: string; line: string }>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quiet = pino({ level: 'silent' });

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-tt-'));
  store = openSqliteStore(path.join(dir, 'flint.db'));
  calls = [];
  logLines = [];
  schedulers = [];
  answer = { status: 200, body: 'ok', delayMs: 0 };
  router = http.createServer((req, res) => {
    calls.push({ method: req.method as string, url: req.url as string, headers: req.headers, at: Date.now() });
    req.resume();
    const timer = setTimeout(() => {
      res.statusCode = answer.status;
      res.end(answer.body);
    }, answer.delayMs);
    res.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((r) => router.listen(0, '127.0.0.1', r));
  routerUrl = `http://127.0.0.1:${(router.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const s of schedulers) await s.stop();
  router.closeAllConnections();
  await new Promise((r) => router.close(r));
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function scheduler(opts: Partial<TimeTriggerSchedulerOptions> = {}): TimeTriggerScheduler {
  const s = new TimeTriggerScheduler({
    store,
    logger: quiet,
    routerUrl: () => routerUrl,
    functionLog: (ns, fn, line) => {
      logLines.push({ ns, fn, line });
      return true;
    },
    ...opts,
  });
  schedulers.push(s);
  return s;
}

async function create(name: string, spec: Partial<TimeTrigger['spec']> = {}, namespace = 'default'): Promise<TimeTrigger> {
  return store.create<TimeTrigger>({
    apiVersion: 'flint.dev/v1',
    kind: 'TimeTrigger',
    metadata: { name, namespace },
    spec: { cron: '* * * * * *', functionref: { type: 'name', name: 'hello' }, method: 'POST', subpath: '/', ...spec },
    status: {},
  } as TimeTrigger);
}

/** A spec change as an administrator makes it, whatever the scheduler wrote to the status meanwhile (no resourceVersion). */
async function updateSpec(name: string, change: Partial<TimeTrigger['spec']>): Promise<void> {
  const t = (await store.get('TimeTrigger', 'default', name)) as TimeTrigger;
  const { resourceVersion: _rv, ...metadata } = t.metadata;
  await store.update({ ...t, metadata, spec: { ...t.spec, ...change }, status: undefined } as unknown as TimeTrigger);
}

const stored = async (name: string, ns = 'default') => (await store.get('TimeTrigger', ns, name)) as TimeTrigger;
const scheduled = (c: Call) => c.headers['x-flint-scheduled-time'] as string;

function assertOncePerDueTime(list: Call[]): void {
  const times = list.map(scheduled);
  assert.deepEqual(times, [...new Set(times)].sort(), `each due time once, in order: ${times.join(' ')}`);
  for (const t of times) assert.match(t, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
}

describe('time-trigger scheduler', { timeout: 60_000 }, () => {
  it('calls the function once per due time, with its headers, and records the outcome', async () => {
    await create('every-second', { method: 'PUT', subpath: '/report?x=1' }, 'team');
    await scheduler({ token: () => 'minted' }).start();
    await eventually(() => calls.length >= 3, 'three runs');
    const c = calls[0];
    assert.equal(c.method, 'PUT');
    assert.equal(c.url, '/flint-function/team/hello/report?x=1');
    assert.equal(c.headers['x-flint-trigger-name'], 'every-second');
    assert.equal(c.headers['x-flint-trigger-namespace'], 'team');
    assert.equal(c.headers.authorization, 'Bearer minted');
    assertOncePerDueTime(calls);
    // Called at its due time, not before.
    for (const call of calls) assert.ok(call.at >= Date.parse(scheduled(call)), `${call.at} before ${scheduled(call)}`);
    const t = await eventually(async () => {
      const s = await stored('every-second', 'team');
      return s.status?.lastOutcome === 'succeeded' ? s : undefined;
    }, 'a recorded outcome');
    assert.equal(t.status?.observedGeneration, 1);
    assert.equal(t.status?.lastStatusCode, 200);
    assert.equal(t.status?.lastError, '');
    assert.ok(typeof t.status?.lastDurationMs === 'number');
    assert.ok(calls.map(scheduled).includes(t.status?.lastFireTime as string));
    await eventually(() => logLines.length >= 2, 'lines in the function log');
    assert.equal(logLines[0].ns, 'team');
    assert.equal(logLines[0].fn, 'hello');
    // The first due time may pass before the scheduler starts (a busy machine), and is then made up and said to be:
    // a run at its due time says nothing more.
    const regular = /^time trigger 'every-second' due \S+Z: PUT \/report\?x=1 -> 200 in \d+ ms$/;
    const made = /^time trigger 'every-second' \(a run missed while no scheduler ran\) due \S+Z: PUT \/report\?x=1 -> 200 in \d+ ms$/;
    for (const l of logLines) assert.match(l.line, new RegExp(`${regular.source}|${made.source}`));
    await eventually(() => logLines.some((l) => regular.test(l.line)), 'a line for a run at its due time');
  });

  it('records a failed run: the status the function answered and its body', async () => {
    answer = { status: 500, body: 'the database is down', delayMs: 0 };
    await create('failing');
    await scheduler().start();
    const t = await eventually(async () => {
      const s = await stored('failing');
      return s.status?.lastOutcome === 'failed' ? s : undefined;
    }, 'a failed outcome');
    assert.equal(t.status?.lastStatusCode, 500);
    assert.equal(t.status?.lastError, 'the function answered 500: the database is down');
    assert.match(logLines[0].line, /-> failed after \d+ ms: the function answered 500: the database is down$/);
  });

  it('a restart neither repeats a due time nor loses the one missed meanwhile', async () => {
    await create('restarted');
    const first = scheduler();
    await first.start();
    await eventually(() => calls.length >= 2, 'runs before the restart');
    await first.stop();
    const before = calls.length;
    const lastBefore = Date.parse(scheduled(calls[before - 1]));
    // Down for more than two due times.
    await sleep(2500);
    assert.equal(calls.length, before, 'nothing runs while no scheduler does');
    const downUntil = Date.now();
    await scheduler().start();
    await eventually(() => calls.length >= before + 2, 'runs after the restart');
    assertOncePerDueTime(calls);
    // The first run after the restart is the missed one: the latest due time of the gap, made up once.
    const madeUp = Date.parse(scheduled(calls[before]));
    assert.ok(madeUp > lastBefore + 1000 && madeUp <= downUntil, `made up ${scheduled(calls[before])} (last before ${scheduled(calls[before - 1])})`);
    assert.match(logLines.find((l) => l.line.includes(scheduled(calls[before])))?.line ?? '', /a run missed while no scheduler ran/);
    const gap = calls.slice(before).filter((c) => Date.parse(scheduled(c)) <= downUntil);
    assert.equal(gap.length, 1, `one run for the gap: ${gap.map(scheduled).join(' ')}`);
  });

  it('two schedulers on one store call each due time once', async () => {
    await create('contested');
    await Promise.all([scheduler().start(), scheduler().start()]);
    await eventually(() => calls.length >= 4, 'runs');
    await sleep(300);
    assertOncePerDueTime(calls);
  });

  it('an update stops the old schedule and a delete stops it altogether', async () => {
    await create('changing');
    const s = scheduler();
    await s.start();
    await eventually(() => calls.length >= 1, 'a run');
    const t = await stored('changing');
    await updateSpec('changing', { cron: '0 0 1 1 *', subpath: '/yearly' });
    await sleep(200);
    const afterUpdate = calls.length;
    await sleep(1500);
    assert.equal(calls.length, afterUpdate, 'the every-second schedule stopped');
    const u = await eventually(async () => {
      const x = await stored('changing');
      return x.status?.observedGeneration === 2 ? x : undefined;
    }, 'the new generation followed');
    assert.ok(Date.parse(u.status?.activeSince as string) > Date.parse(t.status?.lastFireTime as string));
    assert.deepEqual(s.active(), ['default/changing']);

    await updateSpec('changing', { cron: '* * * * * *' });
    await eventually(() => calls.length > afterUpdate, 'runs again every second');
    await store.delete('TimeTrigger', 'default', 'changing');
    await sleep(200);
    const afterDelete = calls.length;
    await sleep(1500);
    assert.equal(calls.length, afterDelete, 'no run after the delete');
    assert.deepEqual(s.active(), []);
  });

  it('a scheduler that wakes late makes one run of the due times that passed, and says so', async () => {
    let skew = 0;
    await create('late');
    await scheduler({ now: () => Date.now() + skew }).start();
    await eventually(() => calls.length >= 1, 'a first run');
    // The clock jumps 3 s past the armed timer, as when the event loop was blocked.
    skew = 3000;
    await eventually(() => logLines.some((l) => /woke \d+ ms after its due time/.test(l.line)), 'the late wake-up said');
    const woke = logLines.find((l) => /woke/.test(l.line))?.line as string;
    const upTo = (/up to (\S+) make one run$/.exec(woke) as RegExpExecArray)[1];
    // Its run claims before the next due time's, which the late timer reaches at once.
    await eventually(() => calls.some((c) => scheduled(c) === upTo), `the run for the latest of them (${woke}; calls ${calls.map(scheduled).join(' ')})`);
    await eventually(() => calls.some((c) => Date.parse(scheduled(c)) > Date.parse(upTo)), 'the schedule going on');
    assertOncePerDueTime(calls);
  });

  it('stop() cuts a call under way off and records it', async () => {
    answer = { status: 200, body: 'slow', delayMs: 30_000 };
    await create('slow');
    const s = scheduler();
    await s.start();
    await eventually(() => calls.length >= 1, 'a call under way');
    const started = Date.now();
    await s.stop();
    assert.ok(Date.now() - started < 5000, 'stop did not wait for the call');
    const t = await stored('slow');
    assert.equal(t.status?.lastOutcome, 'failed');
    assert.match(t.status?.lastError ?? '', /cut off: the scheduler stopped/);
  });

  it('with no function log of its own, the run goes to the server log', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    await create('logged');
    await scheduler({ logger, functionLog: () => false }).start();
    await eventually(() => lines.some((l) => /time trigger 'logged' due .* -> 200 in/.test(l)), 'a line in the server log');
    assert.equal(JSON.parse(lines.find((l) => l.includes("'logged' due")) as string).function, 'hello');
  });
});
