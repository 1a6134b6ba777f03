// The node agent's Service proxy (scripts/kube/service-proxy.ts), against a
// scripted API server: each Service on a loopback address of its own,
// connections spread over the ready pods its selector and targetPort name,
// a terminating pod used only while no other is ready, a Service with no
// endpoint refusing, and the names a pod's /etc/hosts gets.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../scripts/local-brokers.ts';
import { type PodView, type ServiceProxy, startServiceProxy } from '../scripts/kube/service-proxy.ts';
import type { KubeClient, KubeObject, KubeWatchEvent } from '../src/store/kube-client.ts';
import { eventually } from './helpers/server.ts';

/** Just what the proxy asks of the API server: list and watch Services. */
function scriptedServices(initial: KubeObject[]): { client: KubeClient; emit(ev: KubeWatchEvent): void } {
  const watchers = new Set<(ev: KubeWatchEvent) => void>();
  const client = {
    list: async () => ({ items: initial, metadata: { resourceVersion: '1' } }),
    watch: (_gvr: unknown, _ns: unknown, _opts: unknown, onEvent: (ev: KubeWatchEvent) => void) => {
      watchers.add(onEvent);
      let end: () => void = () => {};
      const done = new Promise<void>((r) => {
        end = r;
      });
      return {
        done,
        close() {
          watchers.delete(onEvent);
          end();
        },
      };
    },
  } as unknown as KubeClient;
  return {
    client,
    emit(ev) {
      for (const w of watchers) w(ev);
    },
  };
}

function service(name: string, port: number, selector: Record<string, string>): KubeObject {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'apps', resourceVersion: '1' }, spec: { selector, ports: [{ name: 'http', port, targetPort: 'web' }] } } as KubeObject;
}

/** GET / on a fresh connection: which pod answered, or the error. */
function ask(address: string): Promise<string> {
  return new Promise((resolve) => {
    http
      .get(`http://${address}/`, { agent: false }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(body));
      })
      .on('error', (err) => resolve(`error: ${(err as NodeJS.ErrnoException).code}`));
  });
}

describe("the node agent's Service proxy", () => {
  const servers: http.Server[] = [];
  const views: PodView[] = [];
  let proxy: ServiceProxy;
  let emit: (ev: KubeWatchEvent) => void;
  let port = 0;
  let changes = 0;

  before(async () => {
    for (const name of ['a', 'b', 'other']) {
      const server = http.createServer((_req, res) => res.end(name));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      servers.push(server);
      views.push({
        ip: '127.0.0.1',
        ready: true,
        terminating: false,
        // The Service names the pod's port; each pod listens on its own number.
        pod: { metadata: { name, namespace: 'apps', labels: { app: name === 'other' ? 'other' : 'web' } }, spec: { containers: [{ name: 'c', ports: [{ name: 'web', containerPort: (server.address() as AddressInfo).port }] }] } },
      });
    }
    port = await freePort();
    const scripted = scriptedServices([service('web', port, { app: 'web' })]);
    emit = scripted.emit;
    proxy = startServiceProxy({ client: scripted.client, block: 201, pods: () => views, onChange: () => changes++ });
    await eventually(async () => proxy.address('apps', 'web') !== undefined, 'the Service proxied');
  });

  after(async () => {
    await proxy?.stop();
    for (const s of servers) s.close();
  });

  it('spreads connections over the ready pods the selector picks, on the port the targetPort names', async () => {
    const address = `${proxy.address('apps', 'web')}:${port}`;
    assert.match(address, /^127\.201\.255\.\d+:\d+$/);
    const answers = new Set<string>();
    for (let i = 0; i < 4; i++) answers.add(await ask(address));
    assert.deepEqual([...answers].sort(), ['a', 'b']);
  });

  it('leaves out a pod that is not ready, and uses a terminating one only while no other is ready', async () => {
    const address = `${proxy.address('apps', 'web')}:${port}`;
    views[0].ready = false;
    assert.deepEqual([await ask(address), await ask(address)], ['b', 'b']);
    views[0].ready = true;
    views[0].terminating = true;
    assert.deepEqual([await ask(address), await ask(address)], ['b', 'b']);
    views[1].ready = false;
    assert.equal(await ask(address), 'a', 'the terminating pod still serves while nothing else can');
    views[0].ready = false;
    assert.match(await ask(address), /^error: (ECONNRESET|ECONNREFUSED)$/, 'no endpoint: the connection is refused');
    views[0].ready = true;
    views[0].terminating = false;
    views[1].ready = true;
  });

  it("names each Service as cluster DNS would, the bare name only in the pod's own namespace", () => {
    const address = proxy.address('apps', 'web');
    assert.deepEqual(proxy.hosts('apps'), [`${address}\tweb.apps.svc.cluster.local web.apps.svc web.apps web`]);
    assert.deepEqual(proxy.hosts('elsewhere'), [`${address}\tweb.apps.svc.cluster.local web.apps.svc web.apps`]);
  });

  it('follows Services as they come and go', async () => {
    const before = changes;
    const otherPort = await freePort();
    emit({ type: 'ADDED', object: service('other', otherPort, { app: 'other' }) });
    await eventually(async () => proxy.address('apps', 'other') !== undefined, 'the new Service proxied');
    assert.ok(changes > before, 'the node agent is told, to rewrite its pods’ /etc/hosts');
    assert.equal(await ask(`${proxy.address('apps', 'other')}:${otherPort}`), 'other');
    emit({ type: 'DELETED', object: service('other', otherPort, { app: 'other' }) });
    await eventually(async () => proxy.address('apps', 'other') === undefined, 'the deleted Service gone');
    assert.equal(proxy.hosts('apps').length, 1);
  });
});
