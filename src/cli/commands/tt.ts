// `flint tt` (alias `timetrigger`): time triggers, as Fission's `fission tt`.
// `showschedule` prints the next due times of an expression from the
// control plane's clock, as the scheduler will compute them.
import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import { invalid, isFlintError } from '../../api/errors.ts';
import type { TimeTrigger } from '../../api/kinds.ts';
import { checkName, httpMethod, intFlag, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { createOrSave, SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';
import { type ListOutputFlags, outputOption, printList, printObject, withListOutput } from '../output.ts';

interface TtFlags {
  name?: string;
  function?: string;
  cron?: string;
  method?: string;
  subpath?: string;
}

const CRON_HELP = "schedule in UTC: 5 fields ('*/5 * * * *'), 6 with seconds first ('*/10 * * * * *'), '@every 1m', '@hourly'";

function addFlags(cmd: Command): Command {
  return cmd
    .option('--function <name>', 'function to call at each due time')
    .option('--cron <expression>', CRON_HELP)
    .option('--method <method>', 'HTTP method of the call (default POST)')
    .option('--subpath <path>', "path the function sees (default '/')");
}

function apply(spec: Partial<TimeTrigger['spec']>, f: TtFlags): void {
  if (f.function !== undefined) spec.functionref = { type: 'name', name: checkName('--function', f.function) };
  if (f.cron !== undefined) spec.cron = f.cron;
  if (f.method !== undefined) spec.method = httpMethod(f.method) as TimeTrigger['spec']['method'];
  if (f.subpath !== undefined) spec.subpath = f.subpath.startsWith('/') ? f.subpath : `/${f.subpath}`;
}

async function checkCron(cron: string): Promise<void> {
  const { scheduleProblem } = await import('../../api/cron.ts');
  const problem = scheduleProblem(cron);
  if (problem !== undefined) throw invalid('spec.cron', `'${cron}' is not a valid schedule: ${problem}`);
}

/** The control plane's clock, or this machine's when it cannot be asked. */
async function serverNow(c: Ctx): Promise<{ now: number; server: boolean }> {
  try {
    const info = (await c.client().json('GET', '/v1/info')) as { serverTime?: string };
    const t = info.serverTime ? Date.parse(info.serverTime) : Number.NaN;
    if (!Number.isNaN(t)) return { now: t, server: true };
  } catch {
    // Below: the schedule does not depend on the server.
  }
  c.io.err("Warning: the control plane's clock could not be read: the times are from this machine's\n");
  return { now: Date.now(), server: false };
}

/** Fission's form: the current time, then `Next <i> invocation:` per round, in UTC (RFC 3339). */
async function printSchedule(c: Ctx, cron: string, round: number): Promise<void> {
  const { nextDueTimes, parseSchedule, rfc3339 } = await import('../../api/cron.ts');
  const schedule = parseSchedule(cron);
  const { now, server } = await serverNow(c);
  c.io.out(`Current ${server ? 'Server' : 'Local'} Time: \t${rfc3339(Math.floor(now / 1000) * 1000)}\n`);
  const times = nextDueTimes(schedule, now, round);
  for (const [i, t] of times.entries()) c.io.out(`Next ${i + 1} invocation: \t${rfc3339(t)}\n`);
}

export function registerTt(tt: Command, ctx: () => Ctx): void {
  withSpecOutput(addFlags(tt.command('create').description('Create a time trigger').option('--name <name>', 'trigger name (default: a UUID)'))).action(
    async (f: TtFlags & SpecOutputFlags) => {
      const c = ctx();
      let name = f.name;
      if (name) checkName('--name', name);
      else {
        name = randomUUID();
        c.warn("--name will be soon marked as required flag, see 'help' for details");
      }
      if (!f.function) throw usage('need a function name to create a trigger, use --function');
      if (!f.cron) throw usage("need a cron spec like '0 30 * * *', '@every 1h30m', or '@hourly'; use --cron");
      const spec: Partial<TimeTrigger['spec']> = { cron: f.cron, functionref: { type: 'name', name: f.function }, method: 'POST', subpath: '/' };
      apply(spec, f);
      const out = SpecOutput.from(c, f);
      // The server checks the expression too; a spec file is checked here, since nothing else reads it before apply.
      if (out) await checkCron(f.cron);
      const obj = { kind: 'TimeTrigger' as const, metadata: { name, namespace: c.namespace }, spec: spec as TimeTrigger['spec'] };
      await createOrSave(c, out, obj, `timetrigger-${name}`, `trigger '${name}' created\n`);
      if (!out) await printSchedule(c, f.cron, 1);
    },
  );

  addFlags(tt.command('update').description('Update a time trigger').requiredOption('--name <name>', 'trigger name')).action(async (f: TtFlags) => {
    const c = ctx();
    const name = checkName('--name', f.name as string);
    // The scheduler writes the status at every run, which moves the resourceVersion: read again and retry.
    for (let attempt = 1; ; attempt++) {
      const cur = await c.client().get('TimeTrigger', c.namespace, name);
      apply(cur.spec, f);
      // The scheduler's status is its own: the server keeps the stored one.
      delete cur.status;
      try {
        await c.client().update(cur);
        break;
      } catch (err) {
        if (!isFlintError(err) || err.code !== 'FLINT_ERR_CONFLICT' || attempt >= 5) throw err;
      }
    }
    c.io.out(`trigger '${f.name}' updated\n`);
  });

  tt.command('get')
    .description('Show a time trigger, with its last run (status.lastFireTime, lastOutcome, lastStatusCode, lastError)')
    .requiredOption('--name <name>', 'trigger name')
    .addOption(outputOption())
    .action(async (f: { name: string; output: string }) => {
      const c = ctx();
      await printObject(c.io, await c.client().get('TimeTrigger', c.namespace, checkName('--name', f.name)), f.output);
    });

  withListOutput(tt.command('list').description('List time triggers').option('-A, --all-namespaces', 'every namespace').option('--function <name>', 'only triggers of this function')).action(
    async (f: { allNamespaces?: boolean; function?: string } & ListOutputFlags) => {
      const c = ctx();
      let items = await c.client().list('TimeTrigger', f.allNamespaces ? undefined : c.namespace);
      if (f.function) items = items.filter((t) => t.spec.functionref.name === f.function);
      await printList(c.io, items, f, {
        header: ['NAME', 'CRON', 'FUNCTION_NAME', 'METHOD', 'SUBPATH', 'READY'],
        // Ready: the scheduler follows the trigger's current spec.
        row: (t) => [t.metadata.name, t.spec.cron, t.spec.functionref.name, t.spec.method || 'POST', t.spec.subpath || '/', t.status?.observedGeneration === (t.metadata.generation ?? 1)],
      });
    },
  );

  tt.command('delete')
    .description('Delete a time trigger')
    .requiredOption('--name <name>', 'trigger name')
    .action(async (f: { name: string }) => {
      const c = ctx();
      await c.client().delete('TimeTrigger', c.namespace, checkName('--name', f.name));
      c.io.out(`trigger '${f.name}' deleted\n`);
    });

  tt.command('showschedule')
    .alias('show')
    .description("Print the next due times of a cron expression, from the control plane's clock (UTC)")
    .requiredOption('--cron <expression>', CRON_HELP)
    .option('--round <n>', 'how many due times', intFlag('--round', 1, 1000), 1)
    .action(async (f: { cron: string; round: number }) => {
      const c = ctx();
      await checkCron(f.cron);
      await printSchedule(c, f.cron, f.round);
    });
}
