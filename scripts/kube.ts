// `npm run kube`: a real Kubernetes control plane on loopback with one node
// agent, for trying kubernetes mode (docs/kubernetes.md). It prints the
// administrator's kubeconfig; everything is removed when it stops.
import { startControlPlane } from './kube/control-plane.ts';
import { startNodeAgent } from './kube/node-agent.ts';

const verbose = process.argv.includes('--verbose');
const cp = await startControlPlane({ log: (l) => console.error(l) });
const agent = await startNodeAgent({ controlPlane: cp, log: verbose ? (l) => console.error(l) : undefined });
console.log(`kubernetes ${cp.url} is up, with node ${agent.nodeName} (pods run as sandboxed processes on this machine)`);
console.log(`kubeconfig (administrator): ${cp.kubeconfig}`);
console.log(`  export KUBECONFIG=${cp.kubeconfig}`);
console.log('  npm run -s kubectl -- get nodes');
console.log(`API server: ${cp.url}`);
console.log(`its CA:     ${cp.caFile}`);
console.log(`audit log:  ${cp.auditLog}`);
console.log('stop with Ctrl-C');
const shutdown = async () => {
  await agent.stop();
  await cp.stop();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
