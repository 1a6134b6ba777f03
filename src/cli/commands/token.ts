// `flint token create`: log in to the router and print the token only.
import type { Command } from 'commander';
import { fetchToken } from '../../auth/client.ts';
import type { Ctx } from '../io.ts';

export function registerToken(program: Command, ctx: () => Ctx): void {
  program
    .command('token')
    .description('Router authentication tokens')
    .command('create')
    .description('Log in to the router and print a token')
    .requiredOption('--username <name>', "user name (the router secret's username)")
    .requiredOption('--password <password>', "password (the router secret's password)")
    .option('--authuri <path>', 'login path on the router (default: FLINT_AUTH_URI, else the server setting, else /auth/login)')
    .action(async (f: { username: string; password: string; authuri?: string }) => {
      const c = ctx();
      const info = c.io.env.FLINT_ROUTER_URL && (f.authuri || c.io.env.FLINT_AUTH_URI) ? undefined : await c.client().info().catch(() => undefined);
      const routerUrl = c.io.env.FLINT_ROUTER_URL ?? info?.routerUrl ?? 'http://127.0.0.1:8080';
      const authUriPath = f.authuri ?? c.io.env.FLINT_AUTH_URI ?? info?.authentication.authUriPath;
      c.io.out(`${await fetchToken({ routerUrl, authUriPath, username: f.username, password: f.password })}\n`);
    });
}
