// `flint token create`, and the token fetch `fn test` uses with FLINT_USERNAME/FLINT_PASSWORD.
import type { Command } from 'commander';
import { FlintError } from '../../api/errors.ts';
import type { Ctx } from '../io.ts';

export async function fetchToken(routerUrl: string, authUri: string, username: string, password: string): Promise<string> {
  const url = `${routerUrl.replace(/\/+$/, '')}${authUri.startsWith('/') ? authUri : `/${authUri}`}`;
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    throw new FlintError('FLINT_ERR_UNREACHABLE', `cannot reach the router at ${routerUrl}: ${e.cause?.code ?? e.message}`);
  }
  const text = await res.text();
  if (res.status === 404) {
    throw new FlintError('FLINT_ERR_NOT_FOUND', `the router has no login endpoint at ${url}: authentication may be off, or the auth URI is wrong`);
  }
  if (res.status === 401) throw new FlintError('FLINT_ERR_UNAUTHORIZED', 'invalid username or password');
  if (res.status !== 201 && res.status !== 200) throw new FlintError('FLINT_ERR_UNAUTHORIZED', `login failed with status ${res.status}: ${text}`);
  const token = (JSON.parse(text) as { accesstoken?: unknown }).accesstoken;
  if (typeof token !== 'string') throw new FlintError('FLINT_ERR_INTERNAL', 'the login answer had no access token');
  return token;
}

export function registerToken(program: Command, ctx: () => Ctx): void {
  program
    .command('token')
    .description('Router authentication tokens')
    .command('create')
    .description('Log in to the router and print a token')
    .requiredOption('--username <name>', 'user name (the router secret\'s username)')
    .requiredOption('--password <password>', "password (the router secret's password)")
    .option('--authuri <path>', 'login path on the router (default: from the control plane, else /auth/login)')
    .action(async (f: { username: string; password: string; authuri?: string }) => {
      const c = ctx();
      const router = c.io.env.FLINT_ROUTER_URL ?? (await c.client().info()).routerUrl;
      const authUri = f.authuri ?? c.io.env.FLINT_AUTH_URI ?? (await c.client().info().then((i) => i.authentication.authUriPath, () => '/auth/login'));
      c.io.out(`${await fetchToken(router, authUri, f.username, f.password)}\n`);
    });
}
