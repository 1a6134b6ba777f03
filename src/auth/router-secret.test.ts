import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { dataLayout } from '../config/layout.ts';
import type { Values } from '../config/values.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import { ensureRouterSecret, readRouterSecret, routerCredentialsFile } from './router-secret.ts';
import { tempDir } from './testing.ts';

const AUTH: Values['authentication'] = {
  enabled: true,
  authUriPath: '/auth/login',
  authUsername: 'admin',
  jwtSigningKey: '',
  jwtExpiryTime: 120,
  jwtIssuer: 'flint',
};

describe('ensureRouterSecret', () => {
  it('creates the secret once and keeps it across a restart (fresh store handle)', async () => {
    const t = tempDir();
    try {
      const layout = dataLayout(t.dir);
      const s1 = openSqliteStore(layout.db);
      const first = await ensureRouterSecret(s1, AUTH, layout);
      assert.equal(first.username, 'admin');
      assert.match(first.password, /^[A-Za-z0-9_-]{43}$/, 'URL-safe, 256 bits');
      assert.match(first.signingKey, /^[A-Za-z0-9_-]{43}$/);
      const stored = await s1.get('Secret', 'flint', 'router');
      assert.deepEqual(stored?.data, { username: 'admin', password: first.password, jwtSigninKey: first.signingKey });
      await s1.close();

      const s2 = openSqliteStore(layout.db);
      const second = await ensureRouterSecret(s2, AUTH, layout);
      assert.deepEqual(second, first);
      const again = await s2.get('Secret', 'flint', 'router');
      assert.equal(again?.metadata.resourceVersion, stored?.metadata.resourceVersion, 'an unchanged secret is not rewritten');
      assert.deepEqual(await readRouterSecret(s2), first);
      await s2.close();
    } finally {
      t.cleanup();
    }
  });

  it('uses a configured signing key, rotates it when the configuration changes, and follows authUsername', async () => {
    const t = tempDir();
    try {
      const layout = dataLayout(t.dir);
      const store = openSqliteStore(layout.db);
      const a = await ensureRouterSecret(store, { ...AUTH, jwtSigningKey: 'key-one' }, layout);
      assert.equal(a.signingKey, 'key-one');
      const b = await ensureRouterSecret(store, { ...AUTH, jwtSigningKey: 'key-two' }, layout);
      assert.equal(b.signingKey, 'key-two');
      assert.equal(b.password, a.password, 'the password survives a rotation');
      assert.equal((await store.get('Secret', 'flint', 'router'))?.data?.jwtSigninKey, 'key-two');
      // An empty configured key keeps whatever is stored.
      const c = await ensureRouterSecret(store, AUTH, layout);
      assert.equal(c.signingKey, 'key-two');
      const d = await ensureRouterSecret(store, { ...AUTH, authUsername: 'root' }, layout);
      assert.equal(d.username, 'root');
      assert.equal((await store.get('Secret', 'flint', 'router'))?.data?.username, 'root');
      await store.close();
    } finally {
      t.cleanup();
    }
  });

  it('refills a password someone blanked, and adopts a Fission-style jwtSigningKey', async () => {
    const t = tempDir();
    try {
      const layout = dataLayout(t.dir);
      const store = openSqliteStore(layout.db);
      await store.create({
        apiVersion: 'flint.dev/v1',
        kind: 'Secret',
        metadata: { name: 'router', namespace: 'flint' } as any,
        data: { username: 'admin', password: '', jwtSigningKey: 'from-fission' },
      });
      const creds = await ensureRouterSecret(store, AUTH, layout);
      assert.equal(creds.signingKey, 'from-fission');
      assert.notEqual(creds.password, '');
      await store.close();
    } finally {
      t.cleanup();
    }
  });

  it('writes the credentials file with mode 0600 in a 0700 directory', async () => {
    const t = tempDir();
    try {
      const layout = dataLayout(t.dir);
      const store = openSqliteStore(layout.db);
      const creds = await ensureRouterSecret(store, AUTH, layout);
      const file = routerCredentialsFile(layout);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(fs.statSync(layout.private).mode & 0o777, 0o700);
      assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), {
        username: creds.username,
        password: creds.password,
        authUriPath: '/auth/login',
      });
      // A loosened file is replaced by a fresh 0600 one on the next start.
      fs.chmodSync(file, 0o644);
      await ensureRouterSecret(store, AUTH, layout);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.deepEqual(
        fs.readdirSync(layout.private).filter((f) => f.endsWith('.tmp')),
        [],
        'no temporary files are left behind',
      );
      await store.close();
    } finally {
      t.cleanup();
    }
  });
});
