// `npm run kubectl -- <args>`: the kubectl built into the control-plane binary
// (build.ts), for the cluster $KUBECONFIG names (`npm run kube` prints it).
import { spawnSync } from 'node:child_process';
import { ensureKube } from './build.ts';

const r = spawnSync(ensureKube(), ['kubectl', ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(r.status ?? 1);
