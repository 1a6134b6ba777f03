// The router secret: the login credentials and the JWT signing key, kept as
// the Secret `router` in the control plane's namespace so they survive
// restarts and every component (router, trigger manager) reads the same ones.
import path from 'node:path';
import { FlintError, isFlintError } from '../api/errors.ts';
import type { Secret } from '../api/kinds.ts';
import { API_VERSION, type ObjectMeta, SYSTEM_NAMESPACE } from '../api/meta.ts';
import type { DataLayout } from '../config/layout.ts';
import type { Values } from '../config/values.ts';
import type { Store } from '../store/store.ts';
import { randomSecret, writePrivateFile } from './secret-util.ts';

export const ROUTER_SECRET_NAME = 'router';
export const ROUTER_SECRET_NAMESPACE = SYSTEM_NAMESPACE;

/** Secret keys, spelled as the product document spells them. */
export const SECRET_KEYS = { username: 'username', password: 'password', signingKey: 'jwtSigninKey' } as const;
// Fission's chart names the key `jwtSigningKey`; a secret brought over from
// Fission is adopted instead of getting a fresh key that breaks its tokens.
const FISSION_SIGNING_KEY = 'jwtSigningKey';

export interface RouterCredentials {
  username: string;
  password: string;
  signingKey: string;
}

export interface RouterSecretLogger {
  info(obj: object, msg: string): void;
}

export type AuthValues = Values['authentication'];

/** `<data>/private/router-credentials.json`: the login for the administrator on this machine. */
export function routerCredentialsFile(layout: DataLayout): string {
  return path.join(layout.private, 'router-credentials.json');
}

function present(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** What the secret should hold, given what it holds now (if anything) and the install values. */
function desiredData(current: Record<string, string> | undefined, auth: AuthValues): Record<string, string> {
  const data = current ?? {};
  return {
    ...data,
    [SECRET_KEYS.username]: auth.authUsername,
    [SECRET_KEYS.password]: present(data[SECRET_KEYS.password]) ?? randomSecret(32),
    [SECRET_KEYS.signingKey]:
      present(auth.jwtSigningKey) ?? present(data[SECRET_KEYS.signingKey]) ?? present(data[FISSION_SIGNING_KEY]) ?? randomSecret(32),
  };
}

function credentialsOf(data: Record<string, string>): RouterCredentials {
  return { username: data[SECRET_KEYS.username], password: data[SECRET_KEYS.password], signingKey: data[SECRET_KEYS.signingKey] };
}

function changedKeys(before: Record<string, string> | undefined, after: Record<string, string>): string[] {
  if (!before) return ['created'];
  return Object.values(SECRET_KEYS).filter((k) => before[k] !== after[k]);
}

/**
 * Creates the router secret once, then keeps it: the password and a generated
 * signing key survive restarts. A configured `jwtSigningKey` that differs
 * from the stored one replaces it (rotation: tokens signed with the old key
 * stop verifying), and a changed `authUsername` replaces the username.
 * Also writes `<data>/private/router-credentials.json` (0600).
 */
export async function ensureRouterSecret(
  store: Store,
  auth: AuthValues,
  layout: DataLayout,
  opts: { logger?: RouterSecretLogger } = {},
): Promise<RouterCredentials> {
  // Another process (a second router replica) may write between our read and
  // our write; the store refuses the loser, which then starts over.
  for (let attempt = 0; ; attempt++) {
    const current = await store.get('Secret', ROUTER_SECRET_NAMESPACE, ROUTER_SECRET_NAME);
    const data = desiredData(current?.data, auth);
    const changed = changedKeys(current?.data, data);
    try {
      if (!current) {
        const metadata: ObjectMeta = {
          name: ROUTER_SECRET_NAME,
          namespace: ROUTER_SECRET_NAMESPACE,
          labels: { 'app.kubernetes.io/managed-by': 'flint', 'app.kubernetes.io/component': 'router' },
        };
        // The store fills in uid, resourceVersion and the rest.
        const secret: Secret = { apiVersion: API_VERSION, kind: 'Secret', metadata: metadata as Secret['metadata'], data };
        await store.create(secret);
      } else if (changed.length > 0) {
        await store.update({ ...current, data });
      }
    } catch (err) {
      const raced = isFlintError(err) && (err.code === 'FLINT_ERR_ALREADY_EXISTS' || err.code === 'FLINT_ERR_CONFLICT');
      if (raced && attempt < 5) continue;
      throw err;
    }
    if (changed.length > 0) {
      // Key names only: the values are secrets.
      opts.logger?.info({ secret: `${ROUTER_SECRET_NAMESPACE}/${ROUTER_SECRET_NAME}`, changed }, 'router secret written');
    }
    const creds = credentialsOf(data);
    writePrivateFile(
      routerCredentialsFile(layout),
      `${JSON.stringify({ username: creds.username, password: creds.password, authUriPath: auth.authUriPath }, null, 2)}\n`,
    );
    return creds;
  }
}

/**
 * Reads the router secret without writing it, for components that must not
 * create it (a trigger manager in its own process). Undefined when absent.
 */
export async function readRouterSecret(store: Store): Promise<RouterCredentials | undefined> {
  const secret = await store.get('Secret', ROUTER_SECRET_NAMESPACE, ROUTER_SECRET_NAME);
  if (!secret?.data) return undefined;
  const data = { ...secret.data };
  data[SECRET_KEYS.signingKey] ??= data[FISSION_SIGNING_KEY];
  const creds = credentialsOf(data);
  if (!present(creds.username) || !present(creds.password) || !present(creds.signingKey)) {
    throw new FlintError(
      'FLINT_ERR_CONFIG',
      `secret ${ROUTER_SECRET_NAMESPACE}/${ROUTER_SECRET_NAME} lacks one of the keys username, password, ${SECRET_KEYS.signingKey}`,
    );
  }
  return creds;
}
