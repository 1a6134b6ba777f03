// `flint token create`: print a token and nothing else. A plain router token
// for a username and password comes from the router's login endpoint, as in
// Fission; anything more (a control-plane token, a scope, a lifetime) only
// the control plane issues, to the administrator, since it needs the
// signing key.
import type { Command } from 'commander';
import { isFlintError } from '../../api/errors.ts';
import { fetchToken } from '../../auth/client.ts';
import { basicAuthorization } from '../client.ts';
import { collect, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';

interface TokenFlags {
  username?: string;
  password?: string;
  authuri?: string;
  audience?: string;
  function?: string[];
  method?: string[];
  ttl?: string;
}

/** The API's field names, as the flags a user typed. */
const FLAG_OF: Record<string, string> = { audience: '--audience', functions: '--function', methods: '--method', ttl: '--ttl', namespace: '--namespace' };

async function checked(c: Ctx, f: TokenFlags) {
  // The request's schema, loaded here: building the schemas at start-up would slow every command.
  const { validateTokenRequest } = await import('../../api/token-request.ts');
  const body = {
    audience: f.audience,
    functions: f.function,
    namespace: f.function === undefined ? undefined : c.namespace,
    methods: f.method,
    ttl: f.ttl,
  };
  try {
    validateTokenRequest(body);
  } catch (err) {
    if (!isFlintError(err) || err.field === undefined) throw err;
    const field = err.field.replace(/\[\d+\]$/, '');
    throw usage(`${FLAG_OF[field] ?? field}${err.message.slice(err.field.length)}`);
  }
  return body;
}

export function registerToken(token: Command, ctx: () => Ctx): void {
  token
    .command('create')
    .description(
      'Print a token. With only --username and --password: a router token from the router\'s login. With --audience, --function, --method or --ttl: ' +
        'a token the control plane issues to the administrator (credentials: --username/--password, else the CLI\'s control-plane credentials)',
    )
    .option('--username <name>', "user name (the router secret's username)")
    .option('--password <password>', "password (the router secret's password)")
    .option('--authuri <path>', 'login path on the router (default: FLINT_AUTH_URI, else the server setting, else /auth/login)')
    .option('--audience <audience>', 'router (calls functions) or control-plane (the control-plane API)', 'router')
    .option('--function <name>', 'router tokens: a function the token may call, in --namespace; repeat for more (default: every function)', collect)
    .option('--method <method>', 'router tokens: an HTTP method the token may use; repeat for more (default: every method)', collect)
    .option('--ttl <duration>', 'lifetime, e.g. 90s, 10m, 1h30m, at most 24h (default: authentication.jwtExpiryTime)')
    .action(async (f: TokenFlags) => {
      const c = ctx();
      const body = await checked(c, f);
      if ((f.username === undefined) !== (f.password === undefined)) throw usage('give --username and --password together');
      const plain = f.audience === 'router' && f.function === undefined && f.method === undefined && f.ttl === undefined;
      if (plain && f.username !== undefined && f.password !== undefined) {
        const info = c.io.env.FLINT_ROUTER_URL && (f.authuri || c.io.env.FLINT_AUTH_URI) ? undefined : await c.client().info().catch(() => undefined);
        const routerUrl = c.io.env.FLINT_ROUTER_URL ?? info?.routerUrl ?? 'http://127.0.0.1:8080';
        const authUriPath = f.authuri ?? c.io.env.FLINT_AUTH_URI ?? info?.authentication.authUriPath;
        c.io.out(`${await fetchToken({ routerUrl, authUriPath, username: f.username, password: f.password })}\n`);
        return;
      }
      const login = f.username !== undefined && f.password !== undefined ? basicAuthorization(f.username, f.password) : undefined;
      const issued = await c.client().issueToken(body, login);
      c.io.out(`${issued.accesstoken}\n`);
    });
}
