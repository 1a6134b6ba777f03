import { randomUUID } from 'node:crypto';
import { type Command, Option } from 'commander';
import type { InstancesReport } from '../../api/instances.ts';
import type { ExecutionStrategy, FunctionResource, HTTPTrigger, Package, StreamingProtocol } from '../../api/kinds.ts';
import { STREAMING_PROTOCOLS } from '../../api/names.ts';
import { checkName, collect, httpMethod, intFlag, kvMap, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';
import { type ListOutputFlags, outputOption, printList, printObject, table, withListOutput } from '../output.ts';
import { functionLog, invokeFunction } from './invoke.ts';
import { archivesFromFlags, specArchiveMaker } from './pkg.ts';

interface FnFlags {
  name: string;
  env?: string;
  code?: string;
  src?: string[];
  deploy?: string[];
  srcchecksum?: string;
  deploychecksum?: string;
  buildcmd?: string;
  pkg?: string;
  entrypoint?: string;
  executortype?: string;
  minscale?: number;
  maxscale?: number;
  targetcpu?: number;
  specializationtimeout?: number;
  fntimeout?: number;
  idletimeout?: number;
  concurrency?: number;
  requestsperpod?: number;
  onceonly?: boolean;
  streamingProtocol?: string;
  streamingIdleTimeout?: number;
  streamingMaxDuration?: number;
  secret?: string[];
  configmap?: string[];
  envVar?: string[];
  labels?: string[];
  url?: string;
  prefix?: string;
  method?: string[];
}

function addSpecFlags(cmd: Command): Command {
  return cmd
    .option('--env <name>', 'environment the function runs in')
    .option('--code <file>', 'a single source file (a package <fn>-<uuid> is made from it)')
    .option('--sourcearchive, --src <file|dir|url>', 'source the environment builder builds (repeatable)', collect)
    .option('--deployarchive, --deploy <file|dir|url>', 'ready-to-run code: a zip, a directory or files (repeatable)', collect)
    .option('--srcchecksum <sha256>', 'expected sha256 of the source archive')
    .option('--deploychecksum <sha256>', 'expected sha256 of the deploy archive')
    .option('--buildcmd <command>', "build command for --src (default: the environment builder's)")
    .option('--pkgname, --pkg <name>', 'an existing package')
    .option('--entry, --entrypoint <name>', "entrypoint in the package, e.g. 'handler' or 'file.func'")
    .option('--executortype <type>', 'poolmgr (warm pool, default) or newdeploy (dedicated instances)')
    .option('--minscale <n>', 'newdeploy: fewest instances', intFlag('--minscale', 0, 1000))
    .option('--maxscale <n>', 'newdeploy: most instances', intFlag('--maxscale', 1, 1000))
    .option('--targetcpu <percent>', 'newdeploy: CPU target for scaling', intFlag('--targetcpu', 1, 99))
    .option('--specializationtimeout <seconds>', 'how long loading the code may take', intFlag('--specializationtimeout', 1, 3600))
    .option('--ft, --fntimeout <seconds>', 'a call running longer gets 504', intFlag('--fntimeout', 1, 86400))
    .option('--idletimeout <seconds>', 'idle instances are stopped after this', intFlag('--idletimeout', 1, 86400))
    .option('--con, --concurrency <n>', 'most instances at once', intFlag('--concurrency', 1, 100000))
    .option('--rpp, --requestsperpod <n>', 'concurrent requests one instance takes', intFlag('--requestsperpod', 1, 10000))
    .option('--yolo, --onceonly', 'an instance serves one request, then stops')
    .option('--streaming-protocol <protocol>', `what the streaming limits apply to: ${STREAMING_PROTOCOLS.join(', ')} (default auto: both HTTP streams and WebSockets)`)
    .option('--streaming-idle-timeout <seconds>', 'a streamed response or WebSocket silent this long is closed (replaces --fntimeout inside a body; 0 removes it: streams get --fntimeout again, WebSockets no limit)', intFlag('--streaming-idle-timeout', 0, 86400))
    .option('--streaming-max-duration <seconds>', 'a streamed response or WebSocket is closed after this long (0 removes the limit)', intFlag('--streaming-max-duration', 0, 604800))
    .option('--secret <name>', 'a secret the function reads (repeatable)', collect)
    .option('--configmap <name>', 'a configmap the function reads (repeatable)', collect)
    .option('-e, --env-var <KEY=VALUE>', 'an environment variable (repeatable)', collect)
    .option('--labels <k=v,...>', 'labels, comma separated', (v: string, prev: string[] = []) => [...prev, ...v.split(',')]);
}

/** Fission names the package of `fn create --code` `<fn>-<uuid>`, at most 62 characters. */
export function codePackageName(fnName: string): string {
  return `${fnName}-${randomUUID()}`.slice(0, 62).replace(/-+$/, '');
}

function applySpec(spec: FunctionResource['spec'], f: FnFlags): void {
  if (f.executortype !== undefined && f.executortype !== 'poolmgr' && f.executortype !== 'newdeploy') {
    throw usage(`--executortype must be poolmgr or newdeploy, got '${f.executortype}'`);
  }
  const es: ExecutionStrategy = { ...spec.invokeStrategy?.executionStrategy };
  if (f.executortype) es.executorType = f.executortype as ExecutionStrategy['executorType'];
  const type = es.executorType ?? 'poolmgr';
  if (type === 'poolmgr' && (f.minscale !== undefined || f.maxscale !== undefined || f.targetcpu !== undefined)) {
    throw usage('to set target CPU or min/max scale for function, please specify "--executortype newdeploy"');
  }
  if (f.minscale !== undefined) es.minScale = f.minscale;
  if (f.maxscale !== undefined) es.maxScale = f.maxscale;
  if (type === 'newdeploy') {
    es.minScale ??= 1;
    es.maxScale ??= Math.max(es.minScale, 1);
    if (es.minScale > es.maxScale) throw usage(`minscale (${es.minScale}) can not be greater than maxscale (${es.maxScale})`);
  }
  if (f.targetcpu !== undefined) es.targetCPU = f.targetcpu;
  if (f.specializationtimeout !== undefined) es.specializationTimeout = f.specializationtimeout;
  if (Object.keys(es).length > 0) spec.invokeStrategy = { strategyType: 'execution', executionStrategy: es };
  if (f.fntimeout !== undefined) spec.functionTimeout = f.fntimeout;
  if (f.idletimeout !== undefined) spec.idletimeout = f.idletimeout;
  if (f.concurrency !== undefined) spec.concurrency = f.concurrency;
  if (f.requestsperpod !== undefined) spec.requestsPerPod = f.requestsperpod;
  if (f.onceonly) spec.onceOnly = true;
  if (f.streamingProtocol !== undefined || f.streamingIdleTimeout !== undefined || f.streamingMaxDuration !== undefined) {
    if (f.streamingProtocol !== undefined && !(STREAMING_PROTOCOLS as readonly string[]).includes(f.streamingProtocol)) {
      throw usage(`--streaming-protocol must be one of ${STREAMING_PROTOCOLS.join(', ')}, got '${f.streamingProtocol}'`);
    }
    const streaming = { ...spec.streaming };
    if (f.streamingProtocol !== undefined) streaming.protocol = f.streamingProtocol as StreamingProtocol;
    // 0 takes a limit away (the API refuses a limit of 0, so it can mean nothing else): `fn update` has no other way to.
    if (f.streamingIdleTimeout === 0) delete streaming.idleTimeoutSeconds;
    else if (f.streamingIdleTimeout !== undefined) streaming.idleTimeoutSeconds = f.streamingIdleTimeout;
    if (f.streamingMaxDuration === 0) delete streaming.maxDurationSeconds;
    else if (f.streamingMaxDuration !== undefined) streaming.maxDurationSeconds = f.streamingMaxDuration;
    if (Object.keys(streaming).length > 0) spec.streaming = streaming;
    else delete spec.streaming;
  }
  if (f.secret) spec.secrets = f.secret.map((n) => ({ name: checkName('--secret', n) }));
  if (f.configmap) spec.configmaps = f.configmap.map((n) => ({ name: checkName('--configmap', n) }));
  const vars = kvMap('--env-var', f.envVar, { allowEqualsInValue: true });
  if (vars) spec.env = { ...spec.env, ...vars };
  if (f.entrypoint !== undefined) spec.package.functionName = f.entrypoint;
}

const givesCode = (f: FnFlags) => Boolean(f.code || f.src || f.deploy);

async function createCodePackage(c: Ctx, fnName: string, envName: string, f: FnFlags, archives: Pick<Package['spec'], 'source' | 'deployment'>): Promise<string> {
  const pkgName = codePackageName(fnName);
  const spec: Package['spec'] = { environment: { name: envName, namespace: c.namespace }, ...archives };
  if (f.buildcmd) spec.buildcmd = f.buildcmd;
  await c.client().create<Package>({ kind: 'Package', metadata: { name: pkgName, namespace: c.namespace }, spec });
  c.io.out(`Package '${pkgName}' created\n`);
  return pkgName;
}

/** The route `fn create --url/--prefix` also makes, if asked. */
function routeOf(c: Ctx, f: FnFlags): (Omit<HTTPTrigger, 'metadata' | 'apiVersion'> & { metadata: { name: string; namespace: string } }) | undefined {
  if (!f.url && !f.prefix) return undefined;
  const methods = (f.method ?? []).map(httpMethod);
  const url = f.url && !f.url.startsWith('/') ? `/${f.url}` : f.url;
  return {
    kind: 'HTTPTrigger',
    metadata: { name: randomUUID(), namespace: c.namespace },
    spec: { relativeurl: url, prefix: f.prefix, methods: (methods.length ? methods : ['GET']) as HTTPTrigger['spec']['methods'], functionref: { type: 'name', name: f.name } },
  };
}

/**
 * `fn create --spec|--dry`: the function, and the package and archive its
 * code needs, into one spec file. With --pkg the environment comes from
 * --env (nothing is asked of the control plane).
 */
async function saveFunctionSpec(c: Ctx, out: SpecOutput, f: FnFlags): Promise<void> {
  if (!f.env) throw usage('need --env argument (with --spec the package is not looked up)');
  checkName('--env', f.env);
  const pkgName = f.pkg ? checkName('--pkg', f.pkg) : `${f.name}-pkg`;
  const spec: FunctionResource['spec'] = { environment: { name: f.env, namespace: c.namespace }, package: { packageref: { name: pkgName, namespace: c.namespace } } };
  applySpec(spec, f);
  if (givesCode(f)) {
    const pkg: Package['spec'] = { environment: { name: f.env, namespace: c.namespace }, ...(await archivesFromFlags(c, f, specArchiveMaker(out, pkgName))) };
    if (f.buildcmd) pkg.buildcmd = f.buildcmd;
    out.add({ kind: 'Package', metadata: { name: pkgName, namespace: c.namespace }, spec: pkg });
  }
  out.add({ kind: 'Function', metadata: { name: f.name, namespace: c.namespace, labels: kvMap('--labels', f.labels) }, spec });
  const route = routeOf(c, f);
  if (route) out.add(route);
  await out.save(`function-${f.name}`);
}

export function registerFn(fn: Command, ctx: () => Ctx): void {

  withSpecOutput(
    addSpecFlags(fn.command('create').description('Create a function').requiredOption('--name <name>', 'function name'))
      .option('--url <url>', 'also create a route with this URL')
      .option('--prefix <prefix>', 'also create a prefix route')
      .option('--method <method>', 'method of that route (repeatable, default GET)', collect),
  ).action(async (f: FnFlags & SpecOutputFlags) => {
      const c = ctx();
      checkName('--name', f.name);
      if (givesCode(f) && f.pkg) throw usage('use either --code/--src/--deploy or --pkg, not both');
      if (!givesCode(f) && !f.pkg) throw usage('need --code <file>, --src, --deploy or --pkg <package>');
      const out = SpecOutput.from(c, f);
      if (out) {
        await saveFunctionSpec(c, out, f);
        return;
      }
      let envName = f.env;
      if (f.pkg) {
        checkName('--pkg', f.pkg);
        const pkg = await c.client().get('Package', c.namespace, f.pkg);
        if (envName && envName !== pkg.spec.environment.name) {
          throw usage(`package '${f.pkg}' is for environment '${pkg.spec.environment.name}', not '${envName}'`);
        }
        envName = pkg.spec.environment.name;
      }
      if (!envName) throw usage('need --env argument');
      checkName('--env', envName);
      const spec: FunctionResource['spec'] = { environment: { name: envName, namespace: c.namespace }, package: { packageref: { name: f.pkg ?? '', namespace: c.namespace } } };
      applySpec(spec, f);
      // Flags and files are checked (and refused) before anything is asked of the server.
      const route = routeOf(c, f);
      const archives = givesCode(f) ? await archivesFromFlags(c, f) : undefined;
      if (await c.client().tryGet('Function', c.namespace, f.name)) throw usage(`a function with the same name already exists: '${f.name}'`);
      if (archives) spec.package.packageref.name = await createCodePackage(c, f.name, envName, f, archives);
      await c.client().create<FunctionResource>({ kind: 'Function', metadata: { name: f.name, namespace: c.namespace, labels: kvMap('--labels', f.labels) }, spec });
      c.io.out(`function '${f.name}' created\n`);
      if (route) {
        await c.client().create<HTTPTrigger>(route);
        c.io.out(`route created: [${route.spec.methods?.join(' ')}] ${f.prefix ?? route.spec.relativeurl} -> ${f.name}\n`);
      }
    });

  addSpecFlags(fn.command('update').description('Update a function (new code moves traffic to new instances)').requiredOption('--name <name>', 'function name')).action(
    async (f: FnFlags) => {
      const c = ctx();
      checkName('--name', f.name);
      if (givesCode(f) && f.pkg) throw usage('use either --code/--src/--deploy or --pkg, not both');
      const cur = await c.client().get('Function', c.namespace, f.name);
      if (f.env) cur.spec.environment = { name: checkName('--env', f.env), namespace: c.namespace };
      applySpec(cur.spec, f);
      if (f.pkg) cur.spec.package.packageref = { name: checkName('--pkg', f.pkg), namespace: c.namespace };
      if (givesCode(f)) {
        // New code goes into the function's package: a new source is built, then traffic moves.
        const archives = await archivesFromFlags(c, f);
        const ref = cur.spec.package.packageref;
        const pkg = await c.client().tryGet('Package', ref.namespace ?? c.namespace, ref.name);
        if (pkg) {
          Object.assign(pkg.spec, archives);
          if (f.buildcmd) pkg.spec.buildcmd = f.buildcmd;
          await c.client().update(pkg);
          c.io.out(`Package '${pkg.metadata.name}' updated\n`);
        } else {
          cur.spec.package.packageref = { name: await createCodePackage(c, f.name, cur.spec.environment.name, f, archives), namespace: c.namespace };
        }
      }
      const labels = kvMap('--labels', f.labels);
      if (labels) cur.metadata.labels = labels;
      await c.client().update(cur);
      c.io.out(`Function '${f.name}' updated\n`);
    },
  );

  fn.command('get')
    .description("Print a function's source code (with -o, the function object, as getmeta does)")
    .requiredOption('--name <name>', 'function name')
    .addOption(outputOption('json or yaml: the function object instead of its code', null))
    .action(async (f: { name: string; output?: string }) => {
      const c = ctx();
      const fnObj = await c.client().get('Function', c.namespace, checkName('--name', f.name));
      if (f.output !== undefined) {
        await printObject(c.io, fnObj, f.output);
        return;
      }
      const ref = fnObj.spec.package.packageref;
      const pkg = await c.client().get('Package', ref.namespace ?? c.namespace, ref.name);
      const archive = pkg.spec.deployment ?? pkg.spec.source;
      if (!archive?.literal) throw usage(`package '${ref.name}' keeps its code in an archive, not inline: use 'flint package getdeploy'`);
      c.io.out(Buffer.from(archive.literal, 'base64').toString('utf8'));
    });

  fn.command('getmeta')
    .description("Print a function's metadata and spec")
    .requiredOption('--name <name>', 'function name')
    .addOption(outputOption())
    .action(async (f: { name: string; output: string }) => {
      const c = ctx();
      await printObject(c.io, await c.client().get('Function', c.namespace, checkName('--name', f.name)), f.output);
    });

  withListOutput(fn.command('list').description('List functions').option('-A, --all-namespaces', 'every namespace')).action(
    async (f: { allNamespaces?: boolean } & ListOutputFlags) => {
      const c = ctx();
      const items = await c.client().list('Function', f.allNamespaces ? undefined : c.namespace);
      await printList(c.io, items, f, {
        header: ['NAME', 'ENV', 'EXECUTORTYPE', 'MINSCALE', 'MAXSCALE', 'MINCPU', 'MAXCPU', 'MINMEMORY', 'MAXMEMORY', 'SECRETS', 'CONFIGMAPS', 'NAMESPACE'],
        row: (x) => {
          const es = x.spec.invokeStrategy?.executionStrategy;
          return [
            x.metadata.name,
            x.spec.environment.name,
            es?.executorType ?? 'poolmgr',
            es?.minScale ?? 0,
            es?.maxScale ?? 0,
            String(x.spec.resources?.requests?.cpu ?? 0),
            String(x.spec.resources?.limits?.cpu ?? 0),
            String(x.spec.resources?.requests?.memory ?? 0),
            String(x.spec.resources?.limits?.memory ?? 0),
            (x.spec.secrets ?? []).map((s) => s.name).join(','),
            (x.spec.configmaps ?? []).map((s) => s.name).join(','),
            x.metadata.namespace,
          ];
        },
      });
    },
  );

  fn.command('delete')
    .description('Delete a function')
    .requiredOption('--name <name>', 'function name')
    .option('--ignorenotfound', 'succeed when it does not exist')
    .action(async (f: { name: string; ignorenotfound?: boolean }) => {
      const c = ctx();
      try {
        await c.client().delete('Function', c.namespace, checkName('--name', f.name));
      } catch (err) {
        if (f.ignorenotfound && (err as { code?: string }).code === 'FLINT_ERR_NOT_FOUND') return;
        throw err;
      }
      c.io.out(`function '${f.name}' deleted\n`);
    });

  fn.command('test')
    .description('Call a function through the router and print its answer')
    .requiredOption('--name <name>', 'function name')
    .option('--method <method>', 'HTTP method', 'GET')
    .option('-H, --header <"Name: value">', 'request header (repeatable)', collect)
    .option('-b, --body <text>', 'request body')
    .option('-q, --query <k=v>', 'query parameter (repeatable)', collect)
    .option('--subpath <path>', 'path below the function, e.g. /items/1')
    .option('-t, --timeout <seconds>', 'give up after this long', intFlag('--timeout', 1, 86400), 60)
    .action(async (f: { name: string; method: string; header?: string[]; body?: string; query?: string[]; subpath?: string; timeout: number }) => {
      const c = ctx();
      await invokeFunction(c, { ...f, name: checkName('--name', f.name), method: httpMethod(f.method) });
    });

  fn.command('pods')
    .alias('instances')
    .description("List a function's instances (local mode: its workers; in kubernetes mode use kubectl), and the instance budget")
    .requiredOption('--name <name>', 'function name')
    .addOption(new Option('-o, --output <format>', 'table, yaml or json').choices(['table', 'yaml', 'json']).default('table'))
    .option('--no-headers', 'print the table without its header line')
    .action(async (f: { name: string; output: string; headers: boolean }) => {
      const c = ctx();
      const name = checkName('--name', f.name);
      const report = await c.client().json<InstancesReport>('GET', `/v1/namespaces/${c.namespace}/functions/${name}/instances`);
      if (f.output !== 'table') {
        await printObject(c.io, report, f.output);
        return;
      }
      table(
        c.io,
        f.headers ? ['NAME', 'STATE', 'VERSION', 'ACTIVE', 'SERVED', 'AGE', 'IDLE'] : undefined,
        report.items.map((i) => [i.name, i.state, i.current ? 'current' : 'old', String(i.active), String(i.served), `${i.ageSeconds}s`, `${i.idleSeconds}s`]),
      );
      if (report.starting > 0) c.io.out(`${report.starting} starting\n`);
      const b = report.budget;
      if (b) c.io.out(`instance budget: ${b.instances} of ${b.maxInstances} instances, ${b.memoryMB} of ${b.maxMemoryMB} MB, all functions together\n`);
    });

  fn.command('log')
    .alias('logs')
    .description("Print a function's log: every instance's lines, in order")
    .requiredOption('--name <name>', 'function name')
    .option('-f, --follow', 'keep printing new lines')
    .option('--recordcount <n>', 'how many recent lines (of those the filters keep)', intFlag('--recordcount', 0, 1_000_000), 1000)
    .option('--request-id <id>', "only the lines written while serving this request (the router's X-Flint-Request-Id)")
    .option('--pod, --instance <name>', 'only the lines of this instance (flint fn pods lists them)')
    .option('-d, --detail', 'a header naming function, environment, namespace and instance wherever the instance changes')
    .action(async (f: { name: string; follow?: boolean; recordcount: number; requestId?: string; instance?: string; detail?: boolean }) => {
      const c = ctx();
      const name = checkName('--name', f.name);
      const res = await functionLog(c, name, { tail: f.recordcount, follow: f.follow, requestId: f.requestId, instance: f.instance, detail: f.detail });
      for await (const chunk of res.chunks()) c.io.out(chunk.toString('utf8'));
    });

}
