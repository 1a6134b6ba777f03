// The node agent (scripts/kube/node-agent.ts) against a real control plane:
// it does a kubelet's part and nothing more. Pods the scheduler binds to it
// run and turn Ready from their probes; `kubectl logs` reaches their output
// through the API server, and nobody else reaches it (the log port wants
// the API server's client certificate); a pod whose Secret is missing waits,
// saying so, and starts once it exists; a pod whose image it cannot run
// waits with ErrImagePull; crashed containers restart per
// restartPolicy; graceful deletion finishes with the processes gone.
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, it } from 'node:test';
import { type ControlPlane, startControlPlane } from '../scripts/kube/control-plane.ts';
import { type NodeAgent, startNodeAgent } from '../scripts/kube/node-agent.ts';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { eventually } from './helpers/server.ts';

const usable = await sandboxAvailable();
const IMAGE = 'ghcr.io/flint/flint:test';

describe('node agent on a real control plane', { skip: !usable && 'bubblewrap is not usable here', timeout: 10 * 60_000 }, () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  const log: string[] = [];

  const getPod = async (name: string) => JSON.parse(await cp.kubectl(['get', 'pod', name, '-o', 'json']));
  const ready = (pod: any) => (pod.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
  function fetcherPod(name: string, extra: Record<string, unknown> = {}, env: unknown[] = []): string {
    return JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: {
        containers: [
          {
            name: 'fetcher',
            image: IMAGE,
            args: ['fetcher', '--port', '9100'],
            env,
            readinessProbe: { httpGet: { path: '/readiness-healthz', port: 9100 }, periodSeconds: 1 },
            // Burstable: the API server's qosClass stays as it set it when the agent writes status.
            resources: { requests: { cpu: '10m', memory: '32Mi' } },
          },
        ],
        ...extra,
      },
    });
  }

  before(async () => {
    cp = await startControlPlane({ log: (l) => log.push(l) });
    agent = await startNodeAgent({ controlPlane: cp, log: (l) => log.push(l) });
  });

  after(async () => {
    await agent?.stop();
    await cp?.stop();
  });

  it('registers a Ready node that the scheduler places pods on, without the not-ready taint', async () => {
    const node = JSON.parse(await cp.kubectl(['get', 'node', agent.nodeName, '-o', 'json']));
    assert.ok(node.status.conditions.some((c: any) => c.type === 'Ready' && c.status === 'True'));
    assert.deepEqual(node.spec.taints ?? [], []);
  });

  it('runs a pod, turns it Ready from its probe, and serves its output to kubectl logs through the API server', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: fetcherPod('logs') });
    await eventually(async () => ready(await getPod('logs')), 'the pod Ready', 60_000);
    const pod = await getPod('logs');
    assert.match(pod.status.podIP, /^127\./);
    assert.equal(pod.spec.nodeName, agent.nodeName);
    assert.match(await cp.kubectl(['logs', 'logs']), new RegExp(`fetcher listening on http://${pod.status.podIP.replaceAll('.', '\\.')}:9100`));
  });

  it("refuses anyone but the API server at its log port", async () => {
    const node = JSON.parse(await cp.kubectl(['get', 'node', agent.nodeName, '-o', 'json']));
    const port = node.status.daemonEndpoints.kubeletEndpoint.Port;
    // The right CA, but no client certificate: the handshake fails, before any path is read.
    const outcome = await new Promise<string>((resolve) => {
      const req = https.get({ host: '127.0.0.1', port, path: '/containerLogs/default/logs/fetcher', ca: cp.pki.ca, servername: agent.nodeName }, (res) => resolve(`answered ${res.statusCode}`));
      req.on('error', (err) => resolve(`refused: ${err.message}`));
    });
    assert.match(outcome, /^refused/);
  });

  it('keeps a pod whose Secret is missing waiting, saying why, and starts it once the Secret exists', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: fetcherPod('needs-secret', {}, [{ name: 'FLINT_FETCHER_TOKEN', valueFrom: { secretKeyRef: { name: 'later', key: 'token' } } }]) });
    await eventually(async () => (await getPod('needs-secret')).status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError', 'the waiting reason', 30_000);
    assert.match((await getPod('needs-secret')).status.message, /secret "later" not found/);
    await cp.kubectl(['create', 'secret', 'generic', 'later', '--from-literal=token=abc']);
    await eventually(async () => ready(await getPod('needs-secret')), 'the pod started once its Secret exists', 90_000);
  });

  it('leaves a pod whose image it cannot run waiting with ErrImagePull, naming the image', async () => {
    const pod = JSON.parse(fetcherPod('foreign'));
    pod.spec.containers[0].image = 'docker.io/library/redis:7';
    await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify(pod) });
    try {
      await eventually(async () => (await getPod('foreign')).status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImagePull', 'the waiting reason', 30_000);
      assert.match((await getPod('foreign')).status.message, /the node agent runs no image 'docker\.io\/library\/redis:7'/);
      assert.ok(!ready(await getPod('foreign')));
    } finally {
      await cp.kubectl(['delete', 'pod', 'foreign', '--wait=true', '--timeout=60s']);
    }
  });

  it('restarts a crashed container under restartPolicy Always and runs a Never pod to completion', async () => {
    await agent.crash('default', 'logs');
    await eventually(async () => {
      const pod = await getPod('logs');
      return pod.status.containerStatuses[0].restartCount === 1 && ready(pod);
    }, 'the container restarted and Ready again', 60_000);
    const once = JSON.parse(fetcherPod('once', { restartPolicy: 'Never' }));
    once.spec.containers[0].args = ['version'];
    delete once.spec.containers[0].readinessProbe;
    await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify(once) });
    await eventually(async () => (await getPod('once')).status?.phase === 'Succeeded', 'the pod Succeeded', 60_000);
    assert.equal((await getPod('once')).status.containerStatuses[0].state.terminated.exitCode, 0);
  });

  it('finishes graceful deletion: the object goes, with its processes', async () => {
    assert.ok(agent.pods().includes('default/logs'));
    await cp.kubectl(['delete', 'pod', 'logs', '--wait=true', '--timeout=60s']);
    assert.ok(!agent.pods().includes('default/logs'));
    await assert.rejects(getPod('logs'), /NotFound|not found/);
  });
});
