// Kubernetes mode on a real Kubernetes control plane (etcd, kube-apiserver
// with RBAC, the controller manager's ReplicaSet and Deployment controllers,
// the scheduler) with the project's node agent as its one node. `flint
// server --set mode=kubernetes` runs outside the cluster as the chart's
// ServiceAccount, bound only by the chart's RBAC. The CLI drives
// environments, poolmgr and newdeploy functions, packages with builds,
// secrets and configmaps, routes with Ingresses, a message-queue trigger,
// updates, deletes, a crashed pod, an API-server restart and a Flint restart;
// then the API server's audit log says what Flint asked of it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type LocalBroker, startRedis } from '../scripts/local-brokers.ts';
import { RedisConnector } from '../src/mqtrigger/redis.ts';
import { findGo } from '../src/runtimes/go/launch.ts';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { FLINT_NAMESPACE, FUNCTION_NAMESPACE, startTestCluster, type TestCluster } from './helpers/kube-cluster.ts';
import { eventually, flintAsync, startServer, type TestServer } from './helpers/server.ts';

const FETCHER = 'ghcr.io/flint/flint:test';
const usable = await sandboxAvailable();
/** What the Python and Go environments need on this machine, as local mode does. */
const runtimesMissing = [fs.existsSync('/usr/bin/python3') ? '' : 'python3', findGo() ? '' : 'a Go toolchain'].filter(Boolean).join(' and ');

describe('kubernetes mode on a real control plane', { skip: !usable && 'bubblewrap is not usable here', timeout: 20 * 60_000 }, () => {
  let cluster: TestCluster;
  let server: TestServer;
  let redis: LocalBroker;
  let work: string;
  const clusterLog: string[] = [];
  const started = Date.now();
  /** When the API server was restarted (epoch ms). */
  const restarting = { from: 0, to: 0 };
  const sets = () => [
    ...cluster.sets(FETCHER),
    'ingress.provider=kubernetes',
    'authentication.enabled=true',
    'redis.enabled=true',
    `redis.url=${redis.url}`,
    'logLevel=info',
  ];

  let credentials: NodeJS.ProcessEnv = {};
  const diagnostics = () => `${server?.output().split('\n').slice(-40).join('\n')}\n--- cluster ---\n${clusterLog.slice(-30).join('\n')}`;
  async function ok(args: string[]): Promise<string> {
    const r = await flintAsync(server, args, { cwd: work, env: credentials });
    assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}\n${diagnostics()}`);
    return r.stdout;
  }
  async function kubectlJson(args: string[]): Promise<any> {
    return JSON.parse(await cluster.controlPlane.kubectl([...args, '-o', 'json']));
  }
  const functionPods = async (selector: string) => (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'pods', '-l', selector])).items as any[];
  async function call(route: string, token: string): Promise<{ status: number; text: string }> {
    const res = await fetch(`${server.routerUrl}${route}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, text: await res.text() };
  }
  const login = async () => (await ok(['token', 'create', '--username', 'admin', '--password', credentials.FLINT_PASSWORD as string])).trim();

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kube-'));
    [cluster, redis] = await Promise.all([startTestCluster({ log: (l) => clusterLog.push(l) }), startRedis()]);
    server = await startServer({ sets: sets(), keepData: true });
    fs.writeFileSync(path.join(work, 'hello.js'), "module.exports = async () => { console.log('hello was called'); return { status: 200, body: 'hello from a pod\\n' }; };\n");
    // Larger than a package may hold inline: uploaded to the control plane, and downloaded by the pod's fetcher.
    fs.writeFileSync(path.join(work, 'big.js'), `// ${'x'.repeat(300 * 1024)}\nmodule.exports = async () => ({ status: 200, body: 'big and fetched\\n' });\n`);
  });

  after(async () => {
    await server?.stop();
    await cluster?.stop();
    await redis?.stop();
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it("keeps resources as custom resources and an environment's pool as a Deployment whose pods run on the node", async () => {
    await ok(['env', 'create', '--name', 'nodejs', '--image', 'ghcr.io/fission/node-env:latest', '--builder', 'flint/node-builder', '--poolsize', '2']);
    const env = await kubectlJson(['-n', 'default', 'get', 'environments.flint.dev', 'nodejs']);
    assert.equal(env.spec.runtime.image, 'ghcr.io/fission/node-env:latest');
    // The real ReplicaSet controller makes the pods, the scheduler binds them, the node agent runs them.
    await eventually(async () => (await functionPods('executorType=poolmgr,managed=true')).filter((p) => p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')).length === 2, 'two ready pool pods', 120_000);
    const [pool] = (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'deployments'])).items;
    assert.equal(pool.spec.template.spec.containers[1].image, FETCHER);
    assert.ok((await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'secret', 'router'])).data, 'the router Secret of authentication');
    credentials = {
      FLINT_USERNAME: 'admin',
      FLINT_PASSWORD: (await ok(['secret', 'get', '--name', 'router', '--namespace', FLINT_NAMESPACE, '--key', 'password'])).trim(),
      FLINT_DATA_DIR: path.join(work, 'not-the-data-dir'),
    };
  });

  it('runs a function in a claimed pool pod, exposes its route through an Ingress and reads its log through the API server', async () => {
    await ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
    await ok(['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello', '--createingress']);
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), 'hello from a pod\n');
    const [pod] = await functionPods('functionName=hello');
    assert.ok(pod, 'a pod specialized for the function');
    assert.equal(pod.metadata.labels.managed, 'false');
    // Released by its ReplicaSet, which made a replacement: the pool is whole again. (The Deployment held a replica
    // more for hello's first call, given back once it claimed this pod: a pod the ReplicaSet is stopping for that is
    // not the pool's any more.)
    assert.equal(pod.metadata.ownerReferences, undefined);
    await eventually(async () => {
      const [pool] = (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'deployments', '-l', 'executorType=poolmgr'])).items;
      const ready = (await functionPods('executorType=poolmgr,managed=true')).filter(
        (p) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'),
      );
      return pool?.spec.replicas === 2 && ready.length === 2;
    }, 'the pool refilled: its Deployment back at 2 replicas, 2 ready pods');
    const ingress = await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'ingress', 'hello']);
    assert.equal(ingress.spec.rules[0].http.paths[0].path, '/hello');
    assert.deepEqual(await call('/hello', await login()), { status: 200, text: 'hello from a pod\n' });
    // The API server's pods/log proxy reaches the node agent: fn log reads the same as in local mode.
    await eventually(async () => (await ok(['fn', 'log', '--name', 'hello'])).includes('[stdout] hello was called'), "the pod's output in fn log");
    assert.match(await ok(['fn', 'log', '--name', 'hello']), new RegExp(`\\[flint\\] pod ${pod.metadata.name} specialized`));
  });

  it('fires a time trigger from the executor, its status written through the status subresource', async () => {
    await ok(['tt', 'create', '--name', 'tick', '--function', 'hello', '--cron', '@every 1s']);
    const tt = await eventually(async () => {
      const t = await kubectlJson(['-n', 'default', 'get', 'timetriggers.flint.dev', 'tick']);
      return t.status?.lastOutcome === 'succeeded' ? t : undefined;
    }, 'a run recorded in the custom resource', 60_000);
    assert.equal(tt.status.lastStatusCode, 200);
    assert.match(tt.status.lastFireTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // Through the router with a minted token (authentication is on), and in the function's log.
    await eventually(async () => /\[flint\] time trigger 'tick' due \S+Z: POST \/ -> 200 in \d+ ms/.test(await ok(['fn', 'log', '--name', 'hello'])), "the run in the function's log");
    await ok(['tt', 'delete', '--name', 'tick']);
  });

  it("has the fetcher download an uploaded archive from the control plane, with a token of its own", async () => {
    await ok(['fn', 'create', '--name', 'big', '--env', 'nodejs', '--code', 'big.js']);
    assert.equal(await ok(['fn', 'test', '--name', 'big']), 'big and fetched\n');
  });

  it("gives functions the cluster's Secrets and ConfigMaps", async () => {
    await ok(['secret', 'create', '--name', 'creds', '--from-literal', 'token=s3cret']);
    await ok(['configmap', 'create', '--name', 'settings', '--from-literal', 'color=blue']);
    assert.equal((await kubectlJson(['-n', 'default', 'get', 'secret', 'creds'])).data.token, Buffer.from('s3cret').toString('base64'));
    fs.writeFileSync(
      path.join(work, 'cfg.js'),
      `const fs = require('node:fs');
       module.exports = async () => ({ status: 200, body: fs.readFileSync('/secrets/default/creds/token', 'utf8') + ' ' + fs.readFileSync('/configs/default/settings/color', 'utf8') });\n`,
    );
    await ok(['fn', 'create', '--name', 'cfg', '--env', 'nodejs', '--code', 'cfg.js', '--secret', 'creds', '--configmap', 'settings']);
    assert.equal(await ok(['fn', 'test', '--name', 'cfg']), 's3cret blue');
  });

  it('builds a source package and runs the result in a pod', async () => {
    const src = path.join(work, 'built');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'build.sh'), '#!/bin/sh\nset -e\ncp -R "$SRC_PKG" "$DEPLOY_PKG"\necho "module.exports = \'made by the build\';" > "$DEPLOY_PKG/stamp.js"\n', { mode: 0o755 });
    fs.writeFileSync(path.join(src, 'index.js'), "module.exports = async () => ({ status: 200, body: require('./stamp.js') });\n");
    await ok(['package', 'create', '--env', 'nodejs', '--src', src, '--name', 'built', '--buildcmd', './build.sh']);
    await eventually(async () => /^Status:\s+succeeded/m.test(await ok(['package', 'info', '--name', 'built'])), 'the build', 240_000);
    assert.equal((await kubectlJson(['-n', 'default', 'get', 'packages.flint.dev', 'built'])).status.buildstatus, 'succeeded');
    await ok(['fn', 'create', '--name', 'built', '--pkg', 'built', '--entrypoint', 'index']);
    assert.equal(await ok(['fn', 'test', '--name', 'built']), 'made by the build');
  });

  /** Calls `fn`, whose answer names the pod it ran in: the pod it claimed, of its environment's image. */
  async function answersFromItsPod(fn: string, image: string, greeting: string): Promise<void> {
    const answer = await ok(['fn', 'test', '--name', fn]);
    const [pod] = await functionPods(`functionName=${fn}`);
    assert.ok(pod, `a pod specialized for ${fn}`);
    assert.equal(answer, `${greeting} ${pod.metadata.name}`);
    assert.equal(pod.spec.containers[0].image, image);
  }

  it("runs Python and Go functions on their environments' pool pods, the Go one built from source", { skip: runtimesMissing ? `no ${runtimesMissing} here` : false }, async () => {
    await ok(['env', 'create', '--name', 'python', '--image', 'flint/python-env', '--poolsize', '1']);
    await ok(['env', 'create', '--name', 'go', '--image', 'flint/go-env', '--builder', 'flint/go-builder', '--poolsize', '1']);
    fs.writeFileSync(path.join(work, 'hello.py'), "import os\n\ndef main():\n    return 'hello from python in ' + os.environ.get('HOSTNAME', '?')\n");
    await ok(['fn', 'create', '--name', 'py', '--env', 'python', '--code', 'hello.py']);
    await answersFromItsPod('py', 'flint/python-env', 'hello from python in');

    const src = path.join(work, 'hello-go');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'hello.go'), 'package main\n\nimport (\n\t"net/http"\n\t"os"\n)\n\nfunc Handler(w http.ResponseWriter, r *http.Request) {\n\tw.Write([]byte("hello from go in " + os.Getenv("HOSTNAME")))\n}\n');
    await ok(['package', 'create', '--env', 'go', '--src', src, '--name', 'hello-go']);
    await eventually(async () => /^Status:\s+succeeded/m.test(await ok(['package', 'info', '--name', 'hello-go'])), 'the Go build', 300_000);
    await ok(['fn', 'create', '--name', 'hello-go', '--pkg', 'hello-go', '--entrypoint', 'Handler']);
    await answersFromItsPod('hello-go', 'flint/go-env', 'hello from go in');
  });

  it('runs a newdeploy function on a Deployment of its own, kept at minscale', async () => {
    await ok(['fn', 'create', '--name', 'dedicated', '--env', 'nodejs', '--code', 'hello.js', '--executortype', 'newdeploy', '--minscale', '1', '--maxscale', '3']);
    await eventually(async () => (await functionPods('executorType=newdeploy,functionName=dedicated')).length === 1, "the function's pod", 120_000);
    assert.equal(await ok(['fn', 'test', '--name', 'dedicated']), 'hello from a pod\n');
    const [d] = (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'deployments', '-l', 'executorType=newdeploy,functionName=dedicated'])).items;
    assert.equal(d.spec.replicas, 1);
  });

  it('answers a message-queue trigger and sends the answer to the response topic', async () => {
    fs.writeFileSync(path.join(work, 'worker.js'), "module.exports = async (ctx) => ({ status: 200, body: 'got ' + ctx.request.body.n });\n");
    await ok(['fn', 'create', '--name', 'worker', '--env', 'nodejs', '--code', 'worker.js']);
    await ok(['mqt', 'create', '--name', 'jobs', '--function', 'worker', '--mqtype', 'redis', '--topic', 'jobs', '--resptopic', 'done']);
    assert.ok((await kubectlJson(['-n', 'default', 'get', 'messagequeuetriggers.flint.dev', 'jobs'])).spec);
    const conn = new RedisConnector({ url: redis.url });
    const answers: string[] = [];
    const sub = await conn.subscribe({ group: 'test', topic: 'done', onMessage: async (m) => void answers.push(m.value.toString()) });
    try {
      await conn.publish('jobs', { value: JSON.stringify({ n: 7 }) });
      await eventually(() => answers.includes('got 7'), 'the answer on the response stream', 90_000).catch((err) => {
        throw new Error(`${(err as Error).message}\n${diagnostics()}`);
      });
    } finally {
      await sub.close();
      await conn.close();
    }
    // The trigger manager's status lands in the custom resource's status subresource, which the CLI shows.
    await eventually(async () => (await kubectlJson(['-n', 'default', 'get', 'messagequeuetriggers.flint.dev', 'jobs'])).status?.state === 'consuming', 'the status in the custom resource', 30_000);
    assert.match(await ok(['mqt', 'list']), /^jobs\s.*\sconsuming$/m);
  });

  it('moves to new pods on fn update and removes what fn delete and route delete leave', async () => {
    fs.writeFileSync(path.join(work, 'hello2.js'), "module.exports = async () => ({ status: 200, body: 'hello, updated\\n' });\n");
    const [before] = await functionPods('functionName=hello');
    await ok(['fn', 'update', '--name', 'hello', '--code', 'hello2.js']);
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), 'hello, updated\n');
    await eventually(async () => !(await functionPods('functionName=hello')).some((p) => p.metadata.name === before.metadata.name), 'the old pod deleted');
    await ok(['route', 'delete', '--name', 'hello']);
    await eventually(async () => (await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'ingress'])).items.length === 0, 'the Ingress deleted');
    await ok(['fn', 'delete', '--name', 'big']);
    await eventually(async () => (await functionPods('functionName=big')).length === 0, "the deleted function's pods gone");
  });

  it("replaces a function pod whose containers crashed, and keeps serving", async () => {
    const [pod] = await functionPods('functionName=hello');
    await cluster.agent.crash(FUNCTION_NAMESPACE, pod.metadata.name);
    // The pod restarts empty (restartPolicy Always): the executor must notice and specialize anew rather than route to it.
    await eventually(async () => (await flintAsync(server, ['fn', 'test', '--name', 'hello'], { cwd: work, env: credentials })).stdout === 'hello, updated\n', 'the function answering after the crash', 60_000);
  });

  it('rolls a canary out on a route, its status in the custom resource', async () => {
    await ok(['route', 'create', '--name', 'canary', '--url', '/canary', '--function', 'hello', '--weight', '100', '--function', 'dedicated', '--weight', '0']);
    await ok(['canary', 'create', '--name', 'canary', '--httptrigger', 'canary', '--newfunction', 'dedicated', '--oldfunction', 'hello', '--increment-step', '50', '--increment-interval', '2s']);
    const token = await login();
    const cr = () => kubectlJson(['-n', 'default', 'get', 'canaryconfigs.flint.dev', 'canary']);
    let done = false;
    const answers: number[] = [];
    const load = (async () => {
      while (!done) {
        answers.push((await call('/canary', token)).status);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      await eventually(async () => (await cr()).status?.status === 'succeeded', 'the canary succeeded', 60_000, 250);
    } finally {
      done = true;
      await load;
    }
    const status = (await cr()).status;
    assert.equal(status.newWeight, 100);
    assert.equal(status.failureRate, 0);
    assert.deepEqual((await kubectlJson(['-n', 'default', 'get', 'httptriggers.flint.dev', 'canary'])).spec.functionref.functionweights, { hello: 0, dedicated: 100 });
    assert.ok(answers.length > 0 && answers.every((s) => s === 200), `answers: ${[...new Set(answers)]}`);
  });

  it('recovers from an API-server restart: watches resume and new functions run', async () => {
    restarting.from = Date.now();
    await cluster.controlPlane.restartApiServer();
    restarting.to = Date.now();
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), 'hello, updated\n');
    await ok(['fn', 'create', '--name', 'after-restart', '--env', 'nodejs', '--code', 'hello.js']);
    // The router learns of it from its watch, which reconnects within seconds of the restart.
    await eventually(async () => (await flintAsync(server, ['fn', 'test', '--name', 'after-restart'], { cwd: work, env: credentials })).stdout === 'hello from a pod\n', 'the new function answering', 30_000);
  });

  it('keeps everything in the cluster across a Flint restart', async () => {
    await server.stop();
    server = await startServer({ sets: sets(), dataDir: server.dataDir, keepData: true });
    assert.match(await ok(['fn', 'list']), /dedicated/);
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), 'hello, updated\n');
    assert.equal(await ok(['fn', 'test', '--name', 'dedicated']), 'hello from a pod\n');
  });

  it('asked the API server only what the chart allows, without polling, and wrote nothing while idle', async () => {
    // An idle minute: nothing changes, so nothing may be written to a Deployment (or anything else).
    const idleFrom = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 60_000));
    const idleTo = new Date().toISOString();
    const requests = cluster.flintRequests();
    const writes = requests.filter((e) => e.requestReceivedTimestamp > idleFrom && e.requestReceivedTimestamp < idleTo && ['create', 'update', 'patch', 'delete'].includes(e.verb));
    assert.deepEqual(
      writes.map((e) => `${e.verb} ${e.requestURI}`),
      [],
      'no writes in an idle minute',
    );
    // A restarting API server answers 403 until its RBAC caches are loaded; Flint asks again. Outside that window, none.
    const during = (e: { requestReceivedTimestamp: string }) => Date.parse(e.requestReceivedTimestamp) >= restarting.from && Date.parse(e.requestReceivedTimestamp) <= restarting.to;
    const forbidden = requests.filter((e) => e.responseStatus?.code === 403 && !during(e));
    assert.deepEqual(
      forbidden.map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.message}`),
      [],
      "no request the chart's RBAC refuses",
    );
    const minutes = (Date.now() - started) / 60_000;
    const lists = requests.filter((e) => e.verb === 'list');
    assert.ok(lists.length / minutes < 60, `list calls per minute bounded (no polling loop): ${lists.length} in ${minutes.toFixed(1)} min\n${summarize(lists)}`);
    assert.doesNotMatch(server.output(), /unknown field|Kubernetes API warning/i, 'no warnings from the API server');
  });
});

function summarize(events: Array<{ verb: string; objectRef?: { resource?: string; namespace?: string } }>): string {
  const counts = new Map<string, number>();
  for (const e of events) {
    const k = `${e.verb} ${e.objectRef?.resource}${e.objectRef?.namespace ? ` in ${e.objectRef.namespace}` : ''}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${n} ${k}`).join('\n');
}
