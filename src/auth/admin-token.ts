// The control plane's admin token: a random 256-bit bearer secret kept in an
// owner-only file, so whoever can read the data directory as the server's
// user can drive the API, and nobody else can once authentication is on.
import fs from 'node:fs';
import path from 'node:path';
import type { DataLayout } from '../config/layout.ts';
import { randomSecret, readPrivateFile, writePrivateFile } from './secret-util.ts';

/** 43 URL-safe characters from 32 random bytes; anything shorter is not one of ours. */
const ADMIN_TOKEN_SHAPE = /^[A-Za-z0-9_-]{43,256}$/;

export function adminTokenFile(layout: DataLayout): string {
  return path.join(layout.private, 'admin-token');
}

/** The token in the file, or undefined when the file is absent or holds something else. */
export function readAdminToken(layout: DataLayout): string | undefined {
  const text = readPrivateFile(adminTokenFile(layout))?.trim();
  return text !== undefined && ADMIN_TOKEN_SHAPE.test(text) ? text : undefined;
}

/**
 * Returns the admin token, generating `<data>/private/admin-token` (0600) the
 * first time. An existing file is kept (delete it and restart to rotate) and
 * its mode is tightened to 0600 if someone loosened it.
 */
export function ensureAdminToken(layout: DataLayout): string {
  const file = adminTokenFile(layout);
  const existing = readAdminToken(layout);
  if (existing !== undefined) {
    if ((fs.statSync(file).mode & 0o077) !== 0) fs.chmodSync(file, 0o600);
    return existing;
  }
  const token = randomSecret(32);
  writePrivateFile(file, `${token}\n`);
  return token;
}
