// The throwaway PKI of a local control plane, made with openssl: a CA, the
// API server's serving certificate, the service-account signing key pair, a
// static token file naming each identity, and a kubeconfig per identity.
// Everything is private to its directory (0700): the CA key and the
// administrator's token open the whole cluster.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The nodes a node agent may register as; each has its own token (the Node authorizer knows it by name). */
export const NODE_NAMES = ['flint-node-0', 'flint-node-1', 'flint-node-2'] as const;

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  /** The CA certificate's PEM text. */
  ca: string;
  serverCert: string;
  serverKey: string;
  /** What the API server shows a node agent when it proxies `pods/log` to it (client authentication). */
  kubeletClientCert: string;
  kubeletClientKey: string;
  saPublic: string;
  saPrivate: string;
  tokenFile: string;
  adminToken: string;
  /** Each node's token (`system:node:<name>` in `system:nodes`). */
  nodeTokens: Record<string, string>;
  /** `system:kube-proxy`, whom the bootstrap policy binds to system:node-proxier: it reads Services and EndpointSlices. */
  proxyToken: string;
  kubeconfigs: { admin: string; controllerManager: string; scheduler: string };
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run('openssl', args, { cwd });
  } catch (err) {
    throw new Error(`openssl ${args[0]} failed (is openssl installed?): ${(err as { stderr?: string }).stderr || (err as Error).message}`);
  }
}

export function kubeconfig(server: string, caFile: string, user: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: flint-local`,
    `  cluster: { server: "${server}", certificate-authority: "${caFile}" }`,
    'users:',
    `- name: "${user}"`,
    `  user: { token: "${token}" }`,
    'contexts:',
    `- name: flint-local`,
    `  context: { cluster: flint-local, user: "${user}" }`,
    'current-context: flint-local',
    '',
  ].join('\n');
}

export async function makePki(dir: string, server: string): Promise<Pki> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const p = (f: string) => path.join(dir, f);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-subj', '/CN=flint-local-kube-ca'], dir);
  fs.writeFileSync(
    p('server.ext'),
    'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n',
  );
  await openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=kube-apiserver'], dir);
  await openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '30', '-extfile', 'server.ext'], dir);
  fs.writeFileSync(p('kubelet-client.ext'), 'extendedKeyUsage=clientAuth\n');
  await openssl(['req', ...ec, '-keyout', 'kubelet-client.key', '-out', 'kubelet-client.csr', '-subj', '/CN=kube-apiserver-kubelet-client'], dir);
  await openssl(['x509', '-req', '-in', 'kubelet-client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'kubelet-client.crt', '-days', '30', '-extfile', 'kubelet-client.ext'], dir);
  // Service-account tokens are signed with RSA (RS256), as every Kubernetes client expects.
  await openssl(['genrsa', '-out', 'sa.key', '2048'], dir);
  await openssl(['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);

  const token = () => randomBytes(24).toString('base64url');
  const adminToken = token();
  const cmToken = token();
  const schedToken = token();
  const proxyToken = token();
  const nodeTokens: Record<string, string> = {};
  for (const n of NODE_NAMES) nodeTokens[n] = token();
  const rows = [
    `${adminToken},flint-admin,flint-admin,"system:masters"`,
    `${cmToken},system:kube-controller-manager,system:kube-controller-manager`,
    `${schedToken},system:kube-scheduler,system:kube-scheduler`,
    `${proxyToken},system:kube-proxy,system:kube-proxy`,
    ...NODE_NAMES.map((n) => `${nodeTokens[n]},system:node:${n},system:node:${n},"system:nodes"`),
  ];
  fs.writeFileSync(p('tokens.csv'), `${rows.join('\n')}\n`, { mode: 0o600 });
  const kc = (file: string, user: string, t: string) => {
    fs.writeFileSync(p(file), kubeconfig(server, p('ca.crt'), user, t), { mode: 0o600 });
    return p(file);
  };
  return {
    dir,
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    ca: fs.readFileSync(p('ca.crt'), 'utf8'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    kubeletClientCert: p('kubelet-client.crt'),
    kubeletClientKey: p('kubelet-client.key'),
    saPublic: p('sa.pub'),
    saPrivate: p('sa.key'),
    tokenFile: p('tokens.csv'),
    adminToken,
    nodeTokens,
    proxyToken,
    kubeconfigs: {
      admin: kc('admin.kubeconfig', 'flint-admin', adminToken),
      controllerManager: kc('controller-manager.kubeconfig', 'system:kube-controller-manager', cmToken),
      scheduler: kc('scheduler.kubeconfig', 'system:kube-scheduler', schedToken),
    },
  };
}

/**
 * A serving certificate signed by the cluster's CA, for a node agent's HTTPS port (the API server's `pods/log` proxy
 * checks it against --kubelet-certificate-authority).
 */
export async function signServingCert(pki: Pki, name: string, ip: string): Promise<{ cert: string; key: string }> {
  const base = path.join(pki.dir, name);
  fs.writeFileSync(`${base}.ext`, `subjectAltName=IP:${ip},DNS:${name}\nextendedKeyUsage=serverAuth\n`);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=system:node:${name}`], pki.dir);
  await openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '30', '-extfile', `${name}.ext`], pki.dir);
  return { cert: fs.readFileSync(`${base}.crt`, 'utf8'), key: fs.readFileSync(`${base}.key`, 'utf8') };
}
