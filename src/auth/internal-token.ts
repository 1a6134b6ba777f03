// The token the routers and the executor service authenticate each other
// with in kubernetes mode: a random secret kept as the Secret `executor` in
// the control plane's namespace, made by whichever process needs it first.
// The executor service runs on the pod network, where function pods could
// reach it too: without this, a function could lease, release or revoke
// other functions' instances, or read their reports.
import { isFlintError } from '../api/errors.ts';
import type { Secret } from '../api/kinds.ts';
import { API_VERSION, type ObjectMeta, SYSTEM_NAMESPACE } from '../api/meta.ts';
import type { Store } from '../store/store.ts';
import { randomSecret } from './secret-util.ts';

export const INTERNAL_TOKEN_SECRET = 'executor';
const KEY = 'token';

export async function ensureInternalToken(store: Store): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const current = await store.get('Secret', SYSTEM_NAMESPACE, INTERNAL_TOKEN_SECRET);
    const token = current?.data?.[KEY];
    if (token) return token;
    const data = { ...current?.data, [KEY]: randomSecret(32) };
    try {
      if (current) await store.update({ ...current, data });
      else {
        const metadata: ObjectMeta = { name: INTERNAL_TOKEN_SECRET, namespace: SYSTEM_NAMESPACE, labels: { 'app.kubernetes.io/managed-by': 'flint', 'app.kubernetes.io/component': 'executor' } };
        await store.create({ apiVersion: API_VERSION, kind: 'Secret', metadata: metadata as Secret['metadata'], data });
      }
    } catch (err) {
      // Another replica wrote first: read what it wrote.
      const raced = isFlintError(err) && (err.code === 'FLINT_ERR_ALREADY_EXISTS' || err.code === 'FLINT_ERR_CONFLICT');
      if (raced && attempt < 5) continue;
      throw err;
    }
  }
}

/** The token without making it, for those that must not write Secrets (the routers); undefined until the executor made it. */
export async function readInternalToken(store: Store): Promise<string | undefined> {
  return (await store.get('Secret', SYSTEM_NAMESPACE, INTERNAL_TOKEN_SECRET))?.data?.[KEY] || undefined;
}
