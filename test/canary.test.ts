// Canary deployments end to end: a real `flint server`, the real CLI, real
// sandboxed functions and real HTTP traffic through the router, whose own
// counters the canary controller judges each interval by. Intervals are
// seconds long (`--increment-interval 2s`) so a rollout takes a few.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;
let dataDir: string;

function run(args: string[]) {
  return flint(server, args, { cwd: work });
}

function ok(args: string[]): string {
  const r = run(args);
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function refused(args: string[], message: RegExp): void {
  const r = run(args);
  assert.notEqual(r.code, 0, `flint ${args.join(' ')} should fail:\n${r.stdout}`);
  assert.match(r.stderr, message);
}

function createFn(name: string, code: string) {
  const file = path.join(work, `${name}.js`);
  fs.writeFileSync(file, code);
  ok(['fn', 'create', '--name', name, '--env', 'nodejs', '--code', file]);
}

async function api(method: string, p: string, body?: unknown) {
  const res = await fetch(`${server.controllerUrl}${p}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
}

const canary = async (name: string) => (await api('GET', `/v1/namespaces/default/canaryconfigs/${name}`)).json;
const weights = async (route: string): Promise<Record<string, number>> => (await api('GET', `/v1/namespaces/default/httptriggers/${route}`)).json.spec.functionref.functionweights;

interface Answer {
  at: number;
  status: number;
  body: string;
}

/** Requests one after another until stopped, to the router the server has now (it moves on a restart). */
function traffic(url: string): { answers: Answer[]; errors: number; stop(): Promise<void> } {
  const answers: Answer[] = [];
  let stopped = false;
  const state = { answers, errors: 0, stop: async () => {} };
  const loop = (async () => {
    while (!stopped) {
      try {
        const res = await fetch(server.routerUrl + url, { signal: AbortSignal.timeout(10_000) });
        answers.push({ at: Date.now(), status: res.status, body: (await res.text()).trim() });
      } catch {
        // A server restarting: nothing listens for a moment.
        state.errors++;
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  state.stop = async () => {
    stopped = true;
    await loop;
  };
  return state;
}

/** Every distinct weight of `fn` on the route, in order, polled until stopped. */
function weightHistory(route: string, fn: string): { seen: Array<{ at: number; weight: number }>; stop(last?: number): Promise<void> } {
  const seen: Array<{ at: number; weight: number }> = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const w = (await weights(route))[fn];
        if (seen.at(-1)?.weight !== w) seen.push({ at: Date.now(), weight: w });
      } catch {
        // The control plane restarting.
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    seen,
    /** Stops once the poll has seen the route at `last` (it may lag the canary's status by a poll). */
    stop: async (last?: number) => {
      if (last !== undefined) await eventually(() => seen.at(-1)?.weight === last, `the route's weight at ${last}`);
      stopped = true;
      await loop;
    },
  };
}

async function statusOf(name: string, want: string, timeoutMs = 30_000) {
  return eventually(async () => {
    const cc = await canary(name);
    return cc.status?.status === want ? cc : undefined;
  }, `canary ${name} ${want}`, timeoutMs, 100);
}

describe('canary deployments', () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-canary-'));
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-canary-data-'));
    server = await startServer({ dataDir });
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '2']);
    createFn('v1', "module.exports = async () => ({ status: 200, body: 'v1\\n' });");
    createFn('v2', "module.exports = async () => ({ status: 200, body: 'v2\\n' });");
    // Every other answer of each instance is a 500: half of them, whichever instance serves.
    createFn('flaky', "let n = 0;\nmodule.exports = async () => (n++ % 2 ? { status: 500, body: 'boom\\n' } : { status: 200, body: 'flaky\\n' });");
    for (const [route, fn] of [
      ['healthy', 'v2'],
      ['failing', 'flaky'],
      ['resume', 'v2'],
      ['checks', 'v2'],
    ]) {
      ok(['route', 'create', '--name', route, '--url', `/${route}`, '--function', 'v1', '--weight', '100', '--function', fn, '--weight', '0']);
    }
    ok(['route', 'create', '--name', 'single', '--url', '/single', '--function', 'v1']);
    await eventually(async () => (await fetch(`${server.routerUrl}/healthy`)).status === 200, 'the routes');
  });

  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses bad input, naming the flag or the field', async () => {
    const base = ['canary', 'create', '--name', 'bad', '--httptrigger', 'checks', '--newfunction', 'v2', '--oldfunction', 'v1'];
    refused([...base, '--increment-step', '0'], /--increment-step must be between 1 and 100, got 0/);
    refused([...base, '--failure-threshold', '101'], /--failure-threshold must be between 0 and 100, got 101/);
    refused([...base, '--increment-interval', '2d'], /--increment-interval '2d' is not a duration/);
    refused([...base, '--increment-interval', '100ms'], /--increment-interval '100ms' is shorter than the shortest interval, 1s/);
    refused(['canary', 'create', '--name', 'bad', '--httptrigger', 'checks', '--newfunction', 'nope', '--oldfunction', 'v1'], /spec\.newfunction.*function 'nope' not found in namespace 'default'/);
    refused(['canary', 'create', '--name', 'bad', '--httptrigger', 'nowhere', '--newfunction', 'v2', '--oldfunction', 'v1'], /spec\.trigger.*HTTPTrigger 'nowhere' not found/);
    refused(['canary', 'create', '--name', 'bad', '--httptrigger', 'single', '--newfunction', 'v2', '--oldfunction', 'v1'], /spec\.trigger.*calls one function/);
    refused(['canary', 'create', '--name', 'bad', '--httptrigger', 'checks', '--newfunction', 'flaky', '--oldfunction', 'v1'], /spec\.newfunction.*does not weigh function 'flaky'/);
    // The API itself, for clients other than the CLI.
    const spec = { trigger: 'checks', newfunction: 'v2', oldfunction: 'v1' };
    for (const [over, field] of [
      [{ weightincrement: 0 }, 'spec.weightincrement'],
      [{ weightincrement: 101 }, 'spec.weightincrement'],
      [{ failurethreshold: -1 }, 'spec.failurethreshold'],
      [{ failurethreshold: 101 }, 'spec.failurethreshold'],
      [{ duration: 'soon' }, 'spec.duration'],
      [{ duration: '0s' }, 'spec.duration'],
      [{ newfunction: 'ghost' }, 'spec.newfunction'],
      [{ oldfunction: 'v2' }, 'spec.newfunction'],
      [{ failureType: 'latency' }, 'spec.failureType'],
    ] as const) {
      const r = await api('POST', '/v1/namespaces/default/canaryconfigs', { metadata: { name: 'bad' }, spec: { ...spec, ...over } });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.code, 'FLINT_ERR_VALIDATION');
      assert.equal(r.json.field, field, JSON.stringify(r.json));
    }
    assert.equal((await api('GET', '/v1/namespaces/default/canaryconfigs')).json.items.length, 0, 'nothing half-written');
  });

  it('rolls a healthy new version out step by step to 100%, and says succeeded (created from a Fission spec)', async () => {
    ok(['spec', 'init']);
    fs.writeFileSync(
      path.join(work, 'specs', 'canary-healthy.yaml'),
      [
        'apiVersion: fission.io/v1',
        'kind: CanaryConfig',
        'metadata:',
        '  name: healthy',
        '  namespace: default',
        '  creationTimestamp: null',
        'spec:',
        '  trigger: healthy',
        '  newfunction: v2',
        '  oldfunction: v1',
        '  weightincrement: 40',
        '  duration: 2s',
        '  failurethreshold: 10',
        '  failureType: status-code',
        'status:',
        '  status: pending',
        '',
      ].join('\n'),
    );
    const load = traffic('/healthy');
    const history = weightHistory('healthy', 'v2');
    assert.match(ok(['spec', 'apply']), /1 canaryconfig created: healthy/);
    assert.match(ok(['canary', 'get', '--name', 'healthy']), /^NAME +TRIGGER +FUNCTION-N +FUNCTION-N-1 +WEIGHT-INCREMENT +INTERVAL +FAILURE-THRESHOLD +FAILURE-TYPE +STATUS\nhealthy +healthy +v2 +v1 +40 +2s +10 +status-code +pending\n$/);
    const done = await statusOf('healthy', 'succeeded');
    await history.stop(100);
    await load.stop();
    assert.deepEqual(await weights('healthy'), { v1: 0, v2: 100 });
    assert.deepEqual(
      history.seen.map((s) => s.weight),
      [0, 40, 80, 100],
    );
    assert.equal(done.status.failureRate, 0);
    assert.ok(done.status.requests > 0);
    assert.match(done.status.message, /^succeeded: all of 'v1''s traffic is on 'v2' \(100%\)/);
    assert.match(ok(['canary', 'list']), /\nhealthy +healthy +v2 +v1 +40 +2s +10 +status-code +succeeded\n/);
    const bodies = new Set(load.answers.map((a) => `${a.status} ${a.body}`));
    assert.deepEqual([...bodies].sort(), ['200 v1', '200 v2'], 'every answer a 2xx from one version or the other');
    // After the last step, v2 alone.
    const last = history.seen.at(-1)?.at ?? 0;
    assert.ok(load.answers.filter((a) => a.at > last + 500).every((a) => a.body === 'v2'));
  });

  it('rolls a new version that answers 500 half the time back after the first interval that crosses the threshold; the old one keeps answering', async () => {
    const load = traffic('/failing');
    const history = weightHistory('failing', 'flaky');
    assert.equal(
      ok(['canary', 'create', '--name', 'failing', '--httptrigger', 'failing', '--newfunction', 'flaky', '--oldfunction', 'v1', '--increment-step', '50', '--increment-interval', '2s', '--failure-threshold', '10']),
      "canary config 'failing' created\n",
    );
    const failed = await statusOf('failing', 'failed');
    await history.stop(0);
    const rolledBack = history.seen.at(-1)?.at ?? 0;
    // Traffic on after the rollback.
    await eventually(() => load.answers.filter((a) => a.at > rolledBack + 500).length >= 30, 'answers after the rollback', 20_000, 50);
    await load.stop();
    assert.deepEqual(await weights('failing'), { v1: 100, flaky: 0 });
    assert.deepEqual(
      history.seen.map((s) => s.weight),
      [0, 50, 0],
      'one step (not judged: the new version had no traffic yet), then the first judged interval rolled it back',
    );
    assert.ok(failed.status.failureRate >= 30 && failed.status.failureRate <= 70, `rate ${failed.status.failureRate}`);
    assert.equal(failed.status.newWeight, 0);
    assert.match(failed.status.message, /^failure rate [\d.]+% \(\d+ of \d+ requests to 'flaky' answered 5xx in the last 2s\) is above the threshold of 10%: all its traffic is back on 'v1'$/);
    assert.match(ok(['canary', 'get', '--name', 'failing']), /\nfailing +failing +flaky +v1 +50 +2s +10 +status-code +failed\n/);
    assert.match(ok(['canary', 'get', '--name', 'failing', '-o', 'yaml']), /failureRate: [\d.]+\n/);
    // During and after the rollback: the old version answered every request it got with a 2xx, and only the new one failed.
    const kinds = new Set(load.answers.map((a) => `${a.status} ${a.body}`));
    for (const k of kinds) assert.ok(['200 v1', '200 flaky', '500 boom'].includes(k), `an answer '${k}'`);
    assert.ok(kinds.has('500 boom'), 'the new version did fail while it had traffic');
    const after = load.answers.filter((a) => a.at > rolledBack + 500);
    assert.ok(after.length >= 30);
    assert.ok(after.every((a) => a.status === 200 && a.body === 'v1'), 'all traffic on the old version');
  });

  it('resumes after a restart mid-rollout without jumping weights: the next step one interval after the last recorded one', async () => {
    const load = traffic('/resume');
    const history = weightHistory('resume', 'v2');
    ok(['canary', 'create', '--name', 'resume', '--httptrigger', 'resume', '--newfunction', 'v2', '--oldfunction', 'v1', '--increment-step', '25', '--increment-interval', '4s']);
    await eventually(async () => (await weights('resume')).v2 === 50, 'v2 at 50%', 30_000, 50);
    const before = await canary('resume');
    assert.equal(before.status.newWeight, 50);
    const stepped = Date.parse(before.status.lastStepTime);
    await server.stop();
    server = await startServer({ dataDir });
    assert.equal((await weights('resume')).v2, 50, 'the weights as they were');
    const done = await statusOf('resume', 'succeeded', 40_000);
    await history.stop(100);
    await load.stop();
    assert.deepEqual(
      history.seen.map((s) => s.weight),
      [0, 25, 50, 75, 100],
      'one step at a time across the restart',
    );
    const at75 = history.seen.find((s) => s.weight === 75)?.at ?? 0;
    assert.ok(at75 >= stepped + 4000, `the first step after the restart came ${at75 - stepped} ms after the last recorded one`);
    assert.equal(done.status.newWeight, 100);
    assert.ok(load.answers.every((a) => a.status === 200), 'every answer a 2xx');
  });

  it('update starts a rollout again; delete leaves the weights', async () => {
    ok(['canary', 'create', '--name', 'checks', '--httptrigger', 'checks', '--newfunction', 'v2', '--oldfunction', 'v1', '--increment-interval', '10m']);
    refused(['canary', 'create', '--name', 'twice', '--httptrigger', 'checks', '--newfunction', 'v2', '--oldfunction', 'v1'], /canary config 'checks' is already rolling out on HTTPTrigger 'checks'/);
    await eventually(async () => (await canary('checks')).status?.lastStepTime, 'the rollout recorded');
    refused(['canary', 'update', '--name', 'checks'], /nothing to update/);
    assert.equal(ok(['canary', 'update', '--name', 'checks', '--increment-step', '100', '--increment-interval', '1s']), "canary config 'checks' updated\n");
    await statusOf('checks', 'succeeded');
    assert.deepEqual(await weights('checks'), { v1: 0, v2: 100 });
    assert.equal(ok(['canary', 'delete', '--name', 'checks']), "canary config 'checks' deleted\n");
    assert.deepEqual(await weights('checks'), { v1: 0, v2: 100 });
    refused(['canary', 'get', '--name', 'checks'], /CanaryConfig 'checks' not found/);
    assert.doesNotMatch(server.output(), /canary round failed|reading the routers' counters failed/);
  });
});
