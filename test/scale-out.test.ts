// Kubernetes mode split into its roles on a real control plane (etcd,
// kube-apiserver with RBAC, controller manager, scheduler; function pods on
// the project's node agent): one controller, two executor replicas (one
// leads through the Lease flint-executor, one stands by) and two routers
// that ask the leader for addresses and cache them. Under steady traffic
// through both routers the executor leader is killed (SIGKILL, so it
// releases nothing): the standby takes over, warm calls keep answering from
// the routers' caches meanwhile, and the failed requests are counted. Then
// the trigger manager's leader is killed while Kafka messages flow: every
// message is answered on the response topic, duplicates only from
// at-least-once redelivery of those in flight.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type KafkaBroker, startKafka } from '../scripts/kafka-broker.ts';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { startTestCluster, type TestCluster } from './helpers/kube-cluster.ts';
import { eventually, flintAsync, type TestServer } from './helpers/server.ts';
import { type SplitCluster, startSplitCluster } from './helpers/split-cluster.ts';

const usable = await sandboxAvailable();

interface Traffic {
  ok: number;
  failed: Array<{ at: number; router: string; status: number | string }>;
  stop(): Promise<void>;
}

/** One request at a time through each router, until stopped. */
function steadyTraffic(routers: string[], route: string, expect: string): Traffic {
  const t: Traffic = { ok: 0, failed: [], stop: async () => {} };
  let running = true;
  const loops = routers.map(async (base) => {
    while (running) {
      try {
        const res = await fetch(`${base}${route}`, { signal: AbortSignal.timeout(10_000) });
        const text = await res.text();
        if (res.status === 200 && text === expect) t.ok++;
        else t.failed.push({ at: Date.now(), router: base, status: `${res.status} ${text.slice(0, 200)}` });
      } catch (err) {
        t.failed.push({ at: Date.now(), router: base, status: (err as Error).message });
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  });
  t.stop = async () => {
    running = false;
    await Promise.all(loops);
  };
  return t;
}

describe('kubernetes mode as separate roles: executor failover and trigger failover', { skip: !usable && 'bubblewrap is not usable here', timeout: 20 * 60_000 }, () => {
  let split: SplitCluster;
  // Kept apart from split: when the split cluster fails to start, after() still stops the control plane.
  let cluster: TestCluster | undefined;
  let kafka: KafkaBroker;
  let work: string;
  const clusterLog: string[] = [];

  async function ok(args: string[]): Promise<string> {
    const r = await flintAsync(split.controller, args, { cwd: work });
    assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}\n${split.diagnostics()}`);
    return r.stdout;
  }

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-scale-'));
    const [started, broker] = await Promise.all([startTestCluster({ log: (l) => clusterLog.push(l) }), startKafka()]);
    cluster = started;
    kafka = broker;
    split = await startSplitCluster({ cluster, executors: 2, routers: 2, sets: ['kafka.enabled=true', `kafka.brokers=${kafka.brokers}`, 'logLevel=info'] });
    fs.writeFileSync(path.join(work, 'hello.js'), "module.exports = async () => ({ status: 200, body: 'hello from a pod\\n' });\n");
    fs.writeFileSync(
      path.join(work, 'echo.js'),
      "module.exports = async (ctx) => { const b = typeof ctx.request.body === 'string' ? JSON.parse(ctx.request.body) : ctx.request.body; return { status: 200, body: 'seen ' + b.id }; };\n",
    );
  });

  after(async () => {
    await split?.stop();
    await cluster?.stop();
    await kafka?.destroy();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('elects one executor leader, and both routers serve a function through it', async () => {
    const leader = await eventually(() => split.leaderOf(), 'an executor leader', 30_000);
    assert.equal((await Promise.all(split.executors.map((e) => split.leaderOf([e])))).filter(Boolean).length, 1, 'exactly one leads');
    const lease = JSON.parse(await split.cluster.controlPlane.kubectl(['-n', 'flint', 'get', 'lease', 'flint-executor', '-o', 'json']));
    assert.equal(lease.metadata.annotations['flint.dev/leader-url'], leader.executorUrl, 'the Lease names where the leader serves');
    await ok(['env', 'create', '--name', 'nodejs', '--image', 'ghcr.io/fission/node-env:latest', '--poolsize', '3']);
    await ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', path.join(work, 'hello.js')]);
    await ok(['route', 'create', '--name', 'hello', '--function', 'hello', '--url', '/hello']);
    for (const r of split.routerUrls) {
      await eventually(async () => (await fetch(`${r}/hello`).then((x) => x.text())) === 'hello from a pod\n', `hello through ${r}`, 120_000);
    }
    // The leader writes the function's log; the controller, a process of its own, serves it.
    await eventually(async () => /\[flint\] pod \S+ specialized/.test(await ok(['fn', 'log', '--name', 'hello'])), "the leader's lines in fn log, through the controller", 30_000);
    // A newdeploy function (its own Deployment, one pod): the next test's failover must keep it warm too.
    await ok(['fn', 'create', '--name', 'dedicated', '--env', 'nodejs', '--code', path.join(work, 'hello.js'), '--executortype', 'newdeploy', '--minscale', '1', '--maxscale', '1', '--requestsperpod', '10']);
    for (const r of split.routerUrls) {
      await eventually(async () => (await fetch(`${r}/flint-function/dedicated`).then((x) => x.text())) === 'hello from a pod\n', `dedicated through ${r}`, 120_000);
    }
  });

  it('keeps warm calls answering through both routers while the executor leader is killed and the standby takes over', async () => {
    const traffic = steadyTraffic(split.routerUrls, '/hello', 'hello from a pod\n');
    // A newdeploy function's callers too. The routers retry a request whose pod refused it, so what tells an adopted
    // pod from a replaced one is the new leader's log of the function (below).
    const dedicated = steadyTraffic(split.routerUrls, '/flint-function/dedicated', 'hello from a pod\n');
    await new Promise((r) => setTimeout(r, 2000));
    const leader = (await split.leaderOf()) as TestServer;
    const killedAt = Date.now();
    await leader.kill();
    const next = await eventually(() => split.leaderOf(), 'the standby leading', 60_000);
    const tookOverS = (Date.now() - killedAt) / 1000;
    assert.notEqual(next, leader);
    // Traffic on past the takeover, so requests needing the new leader (grants it hands out) are counted too.
    await new Promise((r) => setTimeout(r, 5000));
    await traffic.stop();
    await dedicated.stop();
    console.log(`executor failover: the standby led ${tookOverS.toFixed(1)} s after the leader was killed; ${traffic.ok} requests answered, ${traffic.failed.length} failed; newdeploy ${dedicated.ok} answered, ${dedicated.failed.length} failed`);
    assert.deepEqual(traffic.failed, [], `warm calls failed during the failover:\n${split.diagnostics()}`);
    assert.ok(traffic.ok > 50, `traffic flowed (${traffic.ok} answers)`);
    assert.deepEqual(dedicated.failed, [], `warm newdeploy calls failed during the failover:\n${split.diagnostics()}`);
    assert.ok(dedicated.ok > 50, `newdeploy traffic flowed (${dedicated.ok} answers)`);
    // The new leader's log of the function, through the controller: the pod it adopted.
    await eventually(async () => /adopted from an earlier control plane/.test(await ok(['fn', 'log', '--name', 'dedicated'])), 'the adoption in fn log', 30_000);
    // A cold call needs the new leader: a function made after the failover.
    await ok(['fn', 'create', '--name', 'after', '--env', 'nodejs', '--code', path.join(work, 'hello.js')]);
    for (const r of split.routerUrls) {
      await eventually(async () => (await fetch(`${r}/flint-function/after`).then((x) => x.text())) === 'hello from a pod\n', `a cold call through ${r}`, 120_000);
    }
    // The killed replica comes back as the standby (Kubernetes would restart it).
    split.executors.splice(split.executors.indexOf(leader), 1);
    await split.startExecutor();
  });

  it('loses no Kafka message when the trigger manager’s leader is killed while messages flow', async () => {
    await ok(['fn', 'create', '--name', 'echo', '--env', 'nodejs', '--code', path.join(work, 'echo.js')]);
    await ok(['mqt', 'create', '--name', 'echoes', '--function', 'echo', '--mqtype', 'kafka', '--topic', 'fo-in', '--resptopic', 'fo-out']);
    const produce = async (id: number) => {
      const res = await fetch(`${split.controller.controllerUrl}/topics/fo-in/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ value: JSON.stringify({ id }) }),
      });
      assert.equal(res.status, 204, `produce ${id}: ${await res.text()}`);
    };
    // The consumer is up once a first message is answered.
    await produce(0);
    const seen: string[] = [];
    const readOne = async () => {
      const res = await fetch(`${split.controller.controllerUrl}/topics/fo-out/messages?group=failover-check`);
      // 408: nothing within the long poll.
      if (res.status !== 200) return undefined;
      const m = (await res.json()) as { value: string };
      return Buffer.from(m.value, 'base64').toString('utf8');
    };
    seen.push(await eventually(readOne, 'the first answer', 120_000));
    const total = 120;
    const leader = (await split.leaderOf()) as TestServer;
    let killed = false;
    for (let id = 1; id <= total; id++) {
      await produce(id);
      if (id === total / 3 && !killed) {
        killed = true;
        await leader.kill();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const deadline = Date.now() + 180_000;
    const unique = () => new Set(seen.filter((v) => v.startsWith('seen ')));
    while (unique().size < total + 1 && Date.now() < deadline) {
      const v = await readOne();
      if (v !== undefined) seen.push(v);
      else await new Promise((r) => setTimeout(r, 200));
    }
    const duplicates = seen.length - unique().size;
    console.log(`trigger failover: ${unique().size} of ${total + 1} messages answered, ${duplicates} answered twice (at-least-once redelivery)`);
    const missing = Array.from({ length: total + 1 }, (_, i) => `seen ${i}`).filter((v) => !unique().has(v));
    assert.deepEqual(missing, [], `messages lost:\n${split.diagnostics()}`);
    split.executors.splice(split.executors.indexOf(leader), 1);
  });
});
