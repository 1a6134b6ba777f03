// Kubernetes mode end to end, as far as this machine allows: a real `flint
// server --set mode=kubernetes` against the fake API server, with the fake
// kubelet running pool pods (the environment and `flint fetcher`) as real
// sandboxed processes. The CLI declares an environment, functions and a
// route with ingress; the router calls the functions in their pods.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { createKubeClient } from '../src/store/kube-client.ts';
import { storeResources } from './fake-kube/crd-resources.ts';
import { DEPLOYMENT_RESOURCE, type FakeKubelet, POD_RESOURCE, SERVICE_RESOURCE, startFakeKubelet } from './fake-kube/kubelet.ts';
import { type FakeKube, INGRESS_RESOURCE, startFakeKube } from './fake-kube/server.ts';
import { eventually, flintAsync, startServer, type TestServer } from './helpers/server.ts';

const FETCHER = 'ghcr.io/flint/flint:test';
const usable = await sandboxAvailable();

describe('kubernetes mode (fake API server, fake kubelet)', { skip: !usable && 'bubblewrap is not usable here', timeout: 240_000 }, () => {
  let fake: FakeKube;
  let kubelet: FakeKubelet;
  let server: TestServer;
  let work: string;
  const kubeletLog: string[] = [];
  const sets = () => ['mode=kubernetes', `kubernetes.apiServer=${fake.url}`, `kubernetes.fetcherImage=${FETCHER}`, 'ingress.provider=kubernetes', 'authentication.enabled=true'];

  let credentials: NodeJS.ProcessEnv = {};
  async function ok(args: string[]): Promise<string> {
    const r = await flintAsync(server, args, { cwd: work, env: credentials });
    assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}\n${server.output()}\n${kubeletLog.slice(-20).join('\n')}`);
    return r.stdout;
  }

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kube-'));
    fake = await startFakeKube({ resources: [...storeResources(), DEPLOYMENT_RESOURCE, POD_RESOURCE, SERVICE_RESOURCE, INGRESS_RESOURCE] });
    kubelet = startFakeKubelet({ client: createKubeClient({ baseUrl: fake.url }), fetcherImage: FETCHER, log: (l) => kubeletLog.push(l) });
    fake.setPodLogs(kubelet.logs);
    server = await startServer({ sets: sets(), keepData: true });
    fs.writeFileSync(path.join(work, 'hello.js'), "module.exports = async () => { console.log('hello was called'); return { status: 200, body: 'hello from a pod\\n' }; };\n");
    // Larger than a package may hold inline: uploaded to the control plane, and downloaded by the pod's fetcher.
    fs.writeFileSync(path.join(work, 'big.js'), `// ${'x'.repeat(300 * 1024)}\nmodule.exports = async () => ({ status: 200, body: 'big and fetched\\n' });\n`);
  });

  after(async () => {
    await server?.stop();
    await kubelet?.stop();
    await fake?.close();
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('keeps resources as custom resources and an environment\'s pool as a Deployment', async () => {
    await ok(['env', 'create', '--name', 'nodejs', '--image', 'ghcr.io/fission/node-env:latest', '--poolsize', '1']);
    const [env] = fake.objects('environments.flint.dev', 'default');
    assert.equal(env.spec.runtime.image, 'ghcr.io/fission/node-env:latest');
    await eventually(() => fake.objects('deployments.apps', 'flint-function').length === 1, 'the pool Deployment');
    const [pool] = fake.objects('deployments.apps', 'flint-function');
    assert.equal(pool.spec.template.spec.containers[1].image, FETCHER);
    // The router secret of authentication is a Secret of the cluster.
    assert.ok(fake.objects('secrets', 'flint').some((s) => s.metadata.name === 'router'));
    // From here on the CLI works as docs/kubernetes.md shows, away from the server's data directory: it exchanges the
    // administrator's username and password for a control-plane token, and logs in at the router for fn test.
    credentials = {
      FLINT_USERNAME: 'admin',
      FLINT_PASSWORD: (await ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'password'])).trim(),
      FLINT_DATA_DIR: path.join(work, 'not-the-data-dir'),
    };
  });

  it('runs a function in a pool pod and exposes its route through an Ingress', async () => {
    await ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
    await ok(['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello', '--createingress']);
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), 'hello from a pod\n');
    const pod = fake.objects('pods', 'flint-function').find((p) => p.metadata.labels.functionName === 'hello');
    assert.ok(pod, 'a pod specialized for the function');
    assert.equal(pod.metadata.labels.managed, 'false');
    await eventually(() => fake.objects('ingresses', 'flint').some((i) => i.metadata.name === 'hello'), 'the Ingress');
    // Through the router's public route too, with a token.
    const token = (await ok(['token', 'create', '--username', 'admin', '--password', credentials.FLINT_PASSWORD as string])).trim();
    const res = await fetch(`${server.routerUrl}/hello`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'hello from a pod\n');
    // fn log reads the pod's output, as it reads a worker's in local mode.
    await eventually(async () => (await ok(['fn', 'log', '--name', 'hello'])).includes('[stdout] hello was called'), "the pod's output in fn log");
    assert.match(await ok(['fn', 'log', '--name', 'hello']), new RegExp(`\\[flint\\] pod ${pod.metadata.name} specialized`));
  });

  it('has the fetcher download an uploaded archive from the control plane, with a token of its own', async () => {
    await ok(['fn', 'create', '--name', 'big', '--env', 'nodejs', '--code', 'big.js']);
    const [pkg] = fake.objects('packages.flint.dev', 'default').filter((p) => p.metadata.name.startsWith('big'));
    assert.equal(pkg.spec.deployment.type, 'url', 'the archive lives on the control plane');
    assert.equal(await ok(['fn', 'test', '--name', 'big']), 'big and fetched\n');
  });

  it('runs a newdeploy function on a Deployment of its own, kept at minscale', async () => {
    await ok(['fn', 'create', '--name', 'dedicated', '--env', 'nodejs', '--code', 'hello.js', '--executortype', 'newdeploy', '--minscale', '1', '--maxscale', '3']);
    const isMine = (d: any) => d.metadata.labels?.executorType === 'newdeploy' && d.metadata.labels?.functionName === 'dedicated';
    await eventually(() => fake.objects('deployments.apps', 'flint-function').some((d) => isMine(d) && d.spec.replicas === 1), "the function's Deployment");
    assert.equal(await ok(['fn', 'test', '--name', 'dedicated']), 'hello from a pod\n');
    assert.ok(
      fake.objects('pods', 'flint-function').every((p) => p.metadata.labels.functionName !== 'dedicated' || p.metadata.labels.executorType === 'newdeploy'),
      'no pool pod claimed for it',
    );
  });

  it('keeps everything in the cluster across a server restart', async () => {
    await server.stop();
    server = await startServer({ sets: sets(), dataDir: server.dataDir });
    assert.match(await ok(['fn', 'list']), /hello/);
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), 'hello from a pod\n');
    assert.equal(await ok(['fn', 'test', '--name', 'dedicated']), 'hello from a pod\n');
  });
});
