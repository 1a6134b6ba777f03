// Time triggers end to end: a real `flint server`, the real CLI, real
// sandboxed workers. A function that writes each call to its log counts the
// runs: a one-second schedule fires once per due time, across a restart
// (the run missed while the server was down made up once, nothing repeated);
// an update or a delete stops the old schedule; with authentication on the
// run carries a minted token; a bad expression is refused naming spec.cron;
// and a Fission spec directory's TimeTrigger fires once `spec apply` made it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;
let dataDir: string;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function run(args: string[], s: TestServer = server, cwd = work) {
  return flint(s, args, { cwd });
}

function ok(args: string[], s: TestServer = server, cwd = work): string {
  const r = run(args, s, cwd);
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Writes one line per call to its log: trigger, due time, method, path. */
const RECORDER = `module.exports = async (context) => {
  const h = context.request.headers;
  console.log(\`CALL \${h['x-flint-trigger-name'] || '-'} \${h['x-flint-scheduled-time'] || '-'} \${context.request.method} \${context.request.url}\`);
  return { status: 200, body: 'recorded\\n' };
};
`;

interface Call {
  trigger: string;
  due: string;
  method: string;
  url: string;
}

function callsIn(log: string, trigger: string): Call[] {
  return [...log.matchAll(/CALL (\S+) (\S+) (\S+) (\S+)/g)].map(([, t, due, method, url]) => ({ trigger: t, due, method, url })).filter((c) => c.trigger === trigger);
}

function calls(fn: string, trigger: string, s: TestServer = server): Call[] {
  return callsIn(ok(['fn', 'log', '--name', fn, '--recordcount', '100000'], s), trigger);
}

/**
 * Each due time called once, each a whole second in RFC 3339; returns the calls in due order. Runs that overlap (the
 * run missed during a restart made up as the next one comes due) may reach the function in either order: they are
 * two connections to the router, and nothing orders those.
 */
function assertOnce(list: Call[]): Call[] {
  const dues = list.map((c) => c.due).sort();
  assert.deepEqual(dues, [...new Set(dues)], `a due time called twice: ${dues.join(' ')}`);
  for (const d of dues) assert.match(d, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  return [...list].sort((x, y) => (x.due < y.due ? -1 : x.due > y.due ? 1 : 0));
}

function status(name: string, s: TestServer = server): Record<string, any> {
  return JSON.parse(ok(['tt', 'get', '--name', name, '-o', 'json'], s)).status ?? {};
}

before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-tt-sys-'));
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-tt-data-'));
  fs.writeFileSync(path.join(work, 'recorder.js'), RECORDER);
  server = await startServer({ dataDir, keepData: true });
  ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
  ok(['fn', 'create', '--name', 'recorder', '--env', 'nodejs', '--code', 'recorder.js']);
});

after(async () => {
  await server?.stop();
  fs.rmSync(work, { recursive: true, force: true });
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('time triggers', { timeout: 300_000 }, () => {
  it('fires a one-second schedule once per due time and shows its last run', async () => {
    const created = ok(['tt', 'create', '--name', 'every-second', '--function', 'recorder', '--cron', '* * * * * *']);
    assert.match(created, /^trigger 'every-second' created\nCurrent Server Time: \t\S+Z\nNext 1 invocation: \t\S+Z\n$/);
    const seen = await eventually(() => {
      const c = calls('recorder', 'every-second');
      return c.length >= 3 ? c : undefined;
    }, 'three runs', 60_000, 200);
    assertOnce(seen);
    assert.deepEqual([...new Set(seen.map((c) => `${c.method} ${c.url}`))], ['POST /']);

    const st = await eventually(() => {
      const s = status('every-second');
      return s.lastOutcome === 'succeeded' ? s : undefined;
    }, 'a succeeded run in the status');
    assert.equal(st.lastStatusCode, 200);
    assert.equal(st.lastError, '');
    assert.match(st.lastFireTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.match(ok(['tt', 'get', '--name', 'every-second']), /lastFireTime: .*Z\n[\s\S]*lastOutcome: (succeeded|running)/);

    // The scheduler's own line for each run, in the function's log.
    assert.match(ok(['fn', 'log', '--name', 'recorder']), /\[flint\] time trigger 'every-second' due \S+Z: POST \/ -> 200 in \d+ ms/);

    const list = ok(['tt', 'list']).trim().split('\n');
    assert.deepEqual(list[0].split(/\s+/), ['NAME', 'CRON', 'FUNCTION_NAME', 'METHOD', 'SUBPATH', 'READY']);
    assert.match(list[1], /^every-second +\* \* \* \* \* \* +recorder +POST +\/ +true$/);
  });

  it('prints the next due times of an expression (showschedule)', () => {
    const out = ok(['tt', 'showschedule', '--cron', '*/15 * * * *', '--round', '3']).trim().split('\n');
    assert.equal(out.length, 4);
    const now = Date.parse(/^Current Server Time: \t(\S+)$/.exec(out[0])?.[1] ?? '');
    assert.ok(Math.abs(now - Date.now()) < 60_000, out[0]);
    const times = out.slice(1).map((l, i) => {
      const m = new RegExp(`^Next ${i + 1} invocation: \\t(\\S+)$`).exec(l);
      assert.ok(m, l);
      return Date.parse(m[1]);
    });
    for (const t of times) assert.equal(t % (15 * 60_000), 0);
    assert.deepEqual(times.slice(1).map((t, i) => t - times[i]), [15 * 60_000, 15 * 60_000]);
    assert.ok(times[0] > now && times[0] - now <= 15 * 60_000);
    assert.match(ok(['tt', 'show', '--cron', '@every 1h30m']), /^Current Server Time: \t\S+\nNext 1 invocation: \t\S+T(00|01|03|04|06|07|09|10|12|13|15|16|18|19|21|22):(00|30):00Z\n$/);
  });

  it('refuses a bad expression naming spec.cron and the reason', async () => {
    const r = run(['tt', 'create', '--name', 'bad', '--function', 'recorder', '--cron', '61 * * * *']);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /spec\.cron: '61 \* \* \* \*' is not a valid schedule: a value is out of range for the minute \(0-59\)/);
    const show = run(['tt', 'showschedule', '--cron', '* * *']);
    assert.equal(show.code, 2);
    assert.match(show.stderr, /spec\.cron: '\* \* \*' is not a valid schedule: expected 5 fields/);
    const res = await fetch(`${server.controllerUrl}/v1/namespaces/default/timetriggers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'bad' }, spec: { cron: '@every 500ms', functionref: { type: 'name', name: 'recorder' } } }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { code: string; field: string; message: string };
    assert.equal(body.code, 'FLINT_ERR_VALIDATION');
    assert.equal(body.field, 'spec.cron');
    assert.match(body.message, /shorter than the shortest interval, 1s/);
    assert.equal(run(['tt', 'get', '--name', 'bad']).code, 4, 'nothing was stored');
  });

  it('neither repeats a due time nor loses the one missed across a restart', async () => {
    await server.stop();
    // Read from the data directory: the log is kept across the restart.
    const before = callsIn(fs.readFileSync(path.join(dataDir, 'logs', 'default', 'recorder.log'), 'utf8'), 'every-second');
    const lastBefore = Date.parse(before[before.length - 1].due);
    // Down for more than two due times.
    await sleep(2500);
    const restartedAt = Date.now();
    server = await startServer({ dataDir, keepData: true });
    const after = await eventually(() => {
      const c = calls('recorder', 'every-second');
      return c.length >= before.length + 3 ? c : undefined;
    }, 'runs after the restart', 60_000, 200);
    const fresh = assertOnce(after).filter((c) => Date.parse(c.due) > lastBefore);
    // The first is the run missed while the server was down, made up once; the ones after it are the new server's own.
    const madeUp = Date.parse(fresh[0].due);
    assert.ok(madeUp >= lastBefore + 2000 && madeUp >= restartedAt - 1000 && madeUp <= restartedAt + 30_000, `made up ${fresh[0].due} (last before ${new Date(lastBefore).toISOString()})`);
    const log = ok(['fn', 'log', '--name', 'recorder', '--recordcount', '100000']);
    assert.match(log, new RegExp(`time trigger 'every-second' \\(a run missed while no scheduler ran\\) due ${fresh[0].due}: POST / -> 200`));
    // After it every due time has its run, except where the scheduler woke late (a busy server) and says which due times made one.
    for (let i = 1; i < fresh.length; i++) {
      if (Date.parse(fresh[i].due) - Date.parse(fresh[i - 1].due) === 1000) continue;
      assert.ok(log.includes(`the due times up to ${fresh[i].due} make one run`), `no run for the due times between ${fresh[i - 1].due} and ${fresh[i].due}`);
    }
  });

  it('stops the old schedule on update and on delete', async () => {
    ok(['tt', 'update', '--name', 'every-second', '--cron', '0 0 1 1 *']);
    await sleep(1500);
    const settled = calls('recorder', 'every-second').length;
    await sleep(2500);
    assert.equal(calls('recorder', 'every-second').length, settled, 'the one-second schedule stopped with the update');
    assert.equal(status('every-second').observedGeneration, 2);

    ok(['tt', 'update', '--name', 'every-second', '--cron', '*/2 * * * * *', '--subpath', '/two', '--method', 'GET']);
    const two = await eventually(() => {
      const c = calls('recorder', 'every-second').slice(settled);
      return c.length >= 2 ? c : undefined;
    }, 'runs of the updated schedule', 30_000, 200);
    for (const c of two) {
      assert.equal(`${c.method} ${c.url}`, 'GET /two');
      assert.equal(Date.parse(c.due) % 2000, 0, c.due);
    }
    ok(['tt', 'delete', '--name', 'every-second']);
    await sleep(1500);
    const gone = calls('recorder', 'every-second').length;
    await sleep(3000);
    assert.equal(calls('recorder', 'every-second').length, gone, 'no run after the delete');
    assertOnce(calls('recorder', 'every-second'));
  });

  it("applies a Fission spec directory's time trigger, which fires", async () => {
    const dir = path.join(work, 'fission-app');
    fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'src', 'recorder.js'), RECORDER);
    ok(['spec', 'init'], server, dir);
    fs.writeFileSync(path.join(dir, 'specs', 'app.yaml'), FISSION_SPECS);
    const applied = ok(['spec', 'apply'], server, dir);
    for (const line of ['1 environment created: spec-node', '1 package created: spec-recorder-pkg', '2 functions created: spec-recorder, spec-recorder-v2', '2 httptriggers created: spec-recorder, spec-canary', '1 timetrigger created: spec-tick', '1 canaryconfig created: spec-canary']) {
      assert.match(applied, new RegExp(`^${line}$`, 'm'));
    }
    const fired = await eventually(() => {
      const c = calls('spec-recorder', 'spec-tick');
      return c.length >= 2 ? c : undefined;
    }, 'the spec time trigger firing', 60_000, 200);
    assertOnce(fired);
    assert.equal(`${fired[0].method} ${fired[0].url}`, 'POST /tick');
    const res = await fetch(`${server.routerUrl}/spec-recorder`);
    assert.equal(res.status, 200);
    assert.match(ok(['spec', 'apply'], server, dir), /nothing to change \(8 resources up to date\)/);
    assert.match(ok(['canary', 'get', '--name', 'spec-canary'], server, dir), /spec-canary/);
    assert.match(ok(['spec', 'destroy'], server, dir), /1 timetrigger deleted: spec-tick/);
  });

  it('calls through the router with a minted token when authentication is on', async () => {
    const secured = await startServer({ sets: ['authentication.enabled=true'] });
    try {
      ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1'], secured);
      ok(['fn', 'create', '--name', 'recorder', '--env', 'nodejs', '--code', 'recorder.js'], secured);
      // Without a token the router refuses the very path the trigger calls.
      assert.equal((await fetch(`${secured.routerUrl}/flint-function/recorder`, { method: 'POST' })).status, 401);
      ok(['tt', 'create', '--name', 'secured', '--function', 'recorder', '--cron', '@every 1s'], secured);
      const seen = await eventually(() => {
        const c = calls('recorder', 'secured', secured);
        return c.length >= 2 ? c : undefined;
      }, 'runs with authentication on', 60_000, 200);
      assertOnce(seen);
      const st = await eventually(() => {
        const s = status('secured', secured);
        return s.lastOutcome === 'succeeded' ? s : undefined;
      }, 'a succeeded run');
      assert.equal(st.lastStatusCode, 200);
    } finally {
      await secured.stop();
    }
  });
});

// What `fission ... --spec` writes: an environment, a package of local code, functions, HTTP triggers, a time trigger and a canary config.
const FISSION_SPECS = `apiVersion: fission.io/v1
kind: Environment
metadata: {creationTimestamp: null, name: spec-node, namespace: default}
spec:
  builder: {}
  imagepullsecret: ""
  keeparchive: false
  poolsize: 1
  resources: {}
  runtime: {image: fission/node-env}
  version: 2
---
kind: ArchiveUploadSpec
name: recorder-js
include: ["src/recorder.js"]
---
apiVersion: fission.io/v1
kind: Package
metadata: {creationTimestamp: null, name: spec-recorder-pkg, namespace: default}
spec:
  deployment: {checksum: {}, type: url, url: "archive://recorder-js"}
  environment: {name: spec-node, namespace: default}
  source: {checksum: {}}
status: {buildstatus: pending, lastUpdateTimestamp: "2024-05-01T10:00:00Z"}
---
apiVersion: fission.io/v1
kind: Function
metadata: {creationTimestamp: null, name: spec-recorder, namespace: default}
spec:
  InvokeStrategy:
    ExecutionStrategy: {ExecutorType: poolmgr, MaxScale: 0, MinScale: 0, SpecializationTimeout: 120, TargetCPUPercent: 0}
    StrategyType: execution
  concurrency: 500
  environment: {name: spec-node, namespace: default}
  functionTimeout: 60
  idletimeout: 120
  package: {functionName: "", packageref: {name: spec-recorder-pkg, namespace: default}}
  requestsPerPod: 1
  resources: {}
---
apiVersion: fission.io/v1
kind: HTTPTrigger
metadata: {creationTimestamp: null, name: spec-recorder, namespace: default}
spec:
  createingress: false
  functionref: {functionweights: null, name: spec-recorder, type: name}
  host: ""
  ingressconfig: {annotations: null, host: "*", path: /spec-recorder, tls: ""}
  method: GET
  methods: [GET]
  prefix: ""
  relativeurl: /spec-recorder
---
apiVersion: fission.io/v1
kind: TimeTrigger
metadata: {creationTimestamp: null, name: spec-tick, namespace: default}
spec:
  cron: "@every 1s"
  functionref: {functionweights: null, name: spec-recorder, type: name}
  method: POST
  subpath: /tick
---
apiVersion: fission.io/v1
kind: Function
metadata: {creationTimestamp: null, name: spec-recorder-v2, namespace: default}
spec:
  environment: {name: spec-node, namespace: default}
  package: {functionName: "", packageref: {name: spec-recorder-pkg, namespace: default}}
---
apiVersion: fission.io/v1
kind: HTTPTrigger
metadata: {creationTimestamp: null, name: spec-canary, namespace: default}
spec:
  functionref: {functionweights: {spec-recorder: 100, spec-recorder-v2: 0}, name: "", type: function-weights}
  method: GET
  relativeurl: /spec-canary
---
apiVersion: fission.io/v1
kind: CanaryConfig
metadata: {creationTimestamp: null, name: spec-canary, namespace: default}
spec:
  trigger: spec-canary
  newfunction: spec-recorder-v2
  oldfunction: spec-recorder
  weightincrement: 50
  duration: 1m
  failurethreshold: 10
  failureType: status-code
`;
