import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import type { HTTPTrigger } from '../../api/kinds.ts';
import { applyIngressFlags, routeListHost } from '../../ingress/flags.ts';
import { checkName, collect, httpMethod, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { createOrSave, SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';
import { type ListOutputFlags, outputOption, printList, printObject, withListOutput } from '../output.ts';

interface RouteFlags {
  name?: string;
  url?: string;
  prefix?: string;
  keepprefix?: boolean;
  method?: string[];
  function?: string[];
  weight?: number[];
  host?: string;
  createingress?: string | boolean;
  ingressrule?: string;
  ingressannotation?: string[];
  ingresstls?: string;
}

function addFlags(cmd: Command): Command {
  return cmd
    .option('--url <url>', "exact path, may hold parameters: /users/{id} (a leading '/' is added)")
    .option('--prefix <prefix>', 'path prefix: /api matches /api and /api/...')
    .option('--keepprefix', 'pass the prefix on to the function instead of stripping it')
    .option('--method <method>', 'HTTP method (repeatable; default GET)', collect)
    .option('--function <name>', 'function to call (repeat with --weight for a canary split)', collect)
    .option('--weight <percent>', 'weight of each --function, adding up to 100', (v: string, prev: number[] = []) => [...prev, Number(v)])
    .option('--host <host>', 'match only requests for this Host')
    .option('--createingress [bool]', 'expose the route through the ingress')
    .option('--ingressrule <host=path>', "ingress host and path ('*' any host; '-' clears)")
    .option('--ingressannotation <key=value>', "ingress annotation (repeatable; '-' clears)", collect)
    .option('--ingresstls <secret>', "TLS secret for the ingress ('-' clears)");
}

function functionRef(f: RouteFlags): HTTPTrigger['spec']['functionref'] | undefined {
  const fns = f.function ?? [];
  if (fns.length === 0) return undefined;
  for (const n of fns) checkName('--function', n);
  if (fns.length === 1 && !f.weight?.length) return { type: 'name', name: fns[0] };
  if (fns.length !== 2 || f.weight?.length !== 2) throw usage('a canary split needs exactly two --function flags with a --weight each');
  if (f.weight.some((w) => !Number.isInteger(w) || w < 0)) throw usage('--weight must be a whole number of percent');
  if (f.weight[0] + f.weight[1] !== 100) throw usage('the --weight values must add up to 100');
  return { type: 'function-weights', functionweights: { [fns[0]]: f.weight[0], [fns[1]]: f.weight[1] } };
}

function applyIngress(c: Ctx, spec: HTTPTrigger['spec'], f: RouteFlags): HTTPTrigger['spec'] {
  const { spec: next, warnings } = applyIngressFlags(spec, {
    createingress: f.createingress,
    ingressrule: f.ingressrule,
    ingressannotation: f.ingressannotation,
    ingresstls: f.ingresstls,
  });
  for (const w of warnings) c.warn(w);
  return next;
}

export function registerRoute(route: Command, ctx: () => Ctx): void {

  withSpecOutput(addFlags(route.command('create').description('Create a route').option('--name <name>', 'route name (default: a UUID)'))).action(async (f: RouteFlags & SpecOutputFlags) => {
    const c = ctx();
    const ref = functionRef(f);
    if (!ref) throw usage('need a function name to create a trigger, use --function');
    if (!f.url && !f.prefix) throw usage('you need to supply either --prefix or --url');
    if (f.url && f.prefix) c.warn('Prefix will take precedence over URL/RelativeURL');
    let name = f.name;
    if (name) checkName('--name', name);
    else {
      name = randomUUID();
      c.warn("--name will be soon marked as required flag, see 'help' for details");
    }
    const url = f.url ? (f.url.startsWith('/') ? f.url : `/${f.url}`) : undefined;
    const prefix = f.prefix ? (f.prefix.startsWith('/') ? f.prefix : `/${f.prefix}`) : undefined;
    if (url === '/' && !prefix) throw usage('url with only root path is not allowed');
    const methods = (f.method?.length ? f.method : ['GET']).map(httpMethod) as HTTPTrigger['spec']['methods'];
    const spec = applyIngress(c, { relativeurl: url, prefix, keepPrefix: f.keepprefix === true, methods, functionref: ref, host: f.host }, f);
    await createOrSave(c, SpecOutput.from(c, f), { kind: 'HTTPTrigger', metadata: { name, namespace: c.namespace }, spec }, `route-${name}`, `trigger '${name}' created\n`);
  });

  addFlags(route.command('update').description('Update a route').requiredOption('--name <name>', 'route name')).action(async (f: RouteFlags) => {
    const c = ctx();
    const cur = await c.client().get('HTTPTrigger', c.namespace, checkName('--name', f.name as string));
    const ref = functionRef(f);
    if (ref) cur.spec.functionref = ref;
    if (f.url) cur.spec.relativeurl = f.url.startsWith('/') ? f.url : `/${f.url}`;
    if (f.prefix) cur.spec.prefix = f.prefix.startsWith('/') ? f.prefix : `/${f.prefix}`;
    if (f.keepprefix) cur.spec.keepPrefix = true;
    if (f.method?.length) {
      cur.spec.methods = f.method.map(httpMethod) as HTTPTrigger['spec']['methods'];
      delete cur.spec.method;
    }
    if (f.host !== undefined) cur.spec.host = f.host === '-' ? undefined : f.host;
    cur.spec = applyIngress(c, cur.spec, f);
    await c.client().update(cur);
    c.io.out(`trigger '${f.name}' updated\n`);
  });

  route
    .command('get')
    .description('Show a route')
    .requiredOption('--name <name>', 'route name')
    .addOption(outputOption())
    .action(async (f: { name: string; output: string }) => {
      const c = ctx();
      await printObject(c.io, await c.client().get('HTTPTrigger', c.namespace, checkName('--name', f.name)), f.output);
    });

  withListOutput(
    route.command('list').description('List routes').option('-A, --all-namespaces', 'every namespace').option('--function <name>', 'only routes to this function'),
  ).action(async (f: { allNamespaces?: boolean; function?: string } & ListOutputFlags) => {
      const c = ctx();
      let items = await c.client().list('HTTPTrigger', f.allNamespaces ? undefined : c.namespace);
      if (f.function) items = items.filter((t) => t.spec.functionref.name === f.function || Object.hasOwn(t.spec.functionref.functionweights ?? {}, f.function as string));
      await printList(c.io, items, f, {
        header: ['NAME', 'METHOD', 'HOST', 'URL', 'INGRESS', 'FUNCTION_NAME'],
        row: (t) => {
          const methods = [...new Set([...(t.spec.methods ?? []), ...(t.spec.method ? [t.spec.method] : [])])];
          const ref = t.spec.functionref;
          const fnName = (ref.type ?? 'name') === 'name' ? ref.name : Object.entries(ref.functionweights ?? {}).map(([n, w]) => `${n}:${w}`).join(' ');
          return [t.metadata.name, `[${(methods.length ? methods : ['GET']).join(' ')}]`, routeListHost(t.spec), t.spec.prefix || t.spec.relativeurl, t.spec.createingress === true, fnName];
        },
      });
    });

  route
    .command('delete')
    .description('Delete a route')
    .option('--name <name>', 'route name')
    .option('--function <name>', 'delete every route to this function')
    .action(async (f: { name?: string; function?: string }) => {
      const c = ctx();
      if (!f.name && !f.function) throw usage('need --name or --function');
      const names = f.name
        ? [checkName('--name', f.name)]
        : (await c.client().list('HTTPTrigger', c.namespace)).filter((t) => t.spec.functionref.name === f.function).map((t) => t.metadata.name);
      for (const n of names) {
        await c.client().delete('HTTPTrigger', c.namespace, n);
        c.io.out(`trigger '${n}' deleted\n`);
      }
    });
}
