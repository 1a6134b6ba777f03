// `flint canary`: Fission's canary configs. The control plane checks that
// both functions exist and that the route weighs them; the canary controller
// then moves the route's weights (docs/canary.md).
import { type Command, Option } from 'commander';
import { isFlintError } from '../../api/errors.ts';
import type { CanaryConfig } from '../../api/kinds.ts';
import { canaryState } from '../../api/canary.ts';
import { canaryIntervalProblem } from '../../api/duration.ts';
import { CANARY_FAILURE_TYPES } from '../../api/names.ts';
import { checkName, intFlag, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { type ListOutputFlags, outputOption, printList, printObject, table, withListOutput } from '../output.ts';
import { createOrSave, SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';

interface CanaryFlags {
  name: string;
  newfunction?: string;
  oldfunction?: string;
  httptrigger?: string;
  incrementStep?: number;
  incrementInterval?: string;
  failureThreshold?: number;
  failureType?: string;
}

const HEADER = ['NAME', 'TRIGGER', 'FUNCTION-N', 'FUNCTION-N-1', 'WEIGHT-INCREMENT', 'INTERVAL', 'FAILURE-THRESHOLD', 'FAILURE-TYPE', 'STATUS'];
const row = (c: CanaryConfig) => [
  c.metadata.name,
  c.spec.trigger,
  c.spec.newfunction,
  c.spec.oldfunction,
  c.spec.weightincrement ?? 20,
  c.spec.duration ?? '2m',
  c.spec.failurethreshold ?? 10,
  c.spec.failureType ?? 'status-code',
  canaryState(c),
];

/** The flags both create and update take, with Fission's defaults on create only. */
function tuning(cmd: Command, defaults: boolean): Command {
  const d = <T>(v: T) => (defaults ? v : undefined);
  return cmd
    .option('--increment-step <percent>', 'weight moved to the new function at each step', intFlag('--increment-step', 1, 100), d(20))
    .option('--increment-interval <duration>', 'time between two steps, as Go writes durations: 30s, 2m, 1h30m (at least 1s)', d('2m'))
    .option(
      '--failure-threshold <percent>',
      "the new function's 5xx answers over one interval, in percent of its requests, above which the canary is rolled back",
      intFlag('--failure-threshold', 0, 100),
      d(10),
    );
}

function checkInterval(v: string | undefined): void {
  if (v === undefined) return;
  const problem = canaryIntervalProblem(v);
  if (problem) throw usage(`--increment-interval ${problem}`);
}

export function registerCanary(canary: Command, ctx: () => Ctx): void {
  withSpecOutput(
    tuning(
      canary
        .command('create')
        .description("Create a canary config: move a route's traffic from --oldfunction to --newfunction step by step, back to --oldfunction if it fails")
        .requiredOption('--name <name>', 'canary config name')
        .requiredOption('--newfunction <name>', 'the new version of the function')
        .requiredOption('--oldfunction <name>', 'the stable version of the function')
        .requiredOption('--httptrigger <name>', 'the route whose weights move; it must weigh both functions'),
      true,
    ).addOption(new Option('--failure-type <type>', 'what counts as a failure: status-code (a 5xx answer)').choices([...CANARY_FAILURE_TYPES]).default('status-code')),
  ).action(async (f: CanaryFlags & SpecOutputFlags) => {
    const c = ctx();
    checkName('--name', f.name);
    checkName('--newfunction', f.newfunction as string);
    checkName('--oldfunction', f.oldfunction as string);
    checkName('--httptrigger', f.httptrigger as string);
    if (f.newfunction === f.oldfunction) throw usage('--newfunction and --oldfunction must name different functions');
    checkInterval(f.incrementInterval);
    const obj = {
      kind: 'CanaryConfig' as const,
      metadata: { name: f.name, namespace: c.namespace },
      spec: {
        trigger: f.httptrigger as string,
        newfunction: f.newfunction as string,
        oldfunction: f.oldfunction as string,
        weightincrement: f.incrementStep,
        duration: f.incrementInterval,
        failurethreshold: f.failureThreshold,
        failureType: f.failureType as CanaryConfig['spec']['failureType'],
      },
    };
    await createOrSave(c, SpecOutput.from(c, f), obj, `canaryconfig-${f.name}`, `canary config '${f.name}' created\n`);
  });

  tuning(
    canary
      .command('update')
      .description('Update a canary config; a changed one starts its rollout again, from the weights the route has now')
      .requiredOption('--name <name>', 'canary config name'),
    false,
  ).action(async (f: CanaryFlags) => {
    const c = ctx();
    checkName('--name', f.name);
    if (f.incrementStep === undefined && f.incrementInterval === undefined && f.failureThreshold === undefined) {
      throw usage('nothing to update: give --increment-step, --increment-interval or --failure-threshold');
    }
    checkInterval(f.incrementInterval);
    // The canary controller writes the status at every step, which moves the resourceVersion: read again and retry.
    for (let attempt = 1; ; attempt++) {
      const cur = await c.client().get('CanaryConfig', c.namespace, f.name);
      if (f.incrementStep !== undefined) cur.spec.weightincrement = f.incrementStep;
      if (f.incrementInterval !== undefined) cur.spec.duration = f.incrementInterval;
      if (f.failureThreshold !== undefined) cur.spec.failurethreshold = f.failureThreshold;
      try {
        await c.client().update(cur);
        break;
      } catch (err) {
        if (!isFlintError(err) || err.code !== 'FLINT_ERR_CONFLICT' || attempt >= 5) throw err;
      }
    }
    c.io.out(`canary config '${f.name}' updated\n`);
  });

  canary
    .command('get')
    .description('Show a canary config: its settings and status (with -o, the whole object: the last failure rate and the message)')
    .requiredOption('--name <name>', 'canary config name')
    .addOption(outputOption('yaml or json (default: the table)', null))
    .action(async (f: { name: string; output?: string }) => {
      const c = ctx();
      const cc = await c.client().get('CanaryConfig', c.namespace, checkName('--name', f.name));
      if (f.output !== undefined) await printObject(c.io, cc, f.output);
      else table(c.io, HEADER, [row(cc)]);
    });

  withListOutput(canary.command('list').description('List canary configs').option('-A, --all-namespaces', 'every namespace')).action(
    async (f: { allNamespaces?: boolean } & ListOutputFlags) => {
      const c = ctx();
      const items = await c.client().list('CanaryConfig', f.allNamespaces ? undefined : c.namespace);
      await printList(c.io, items, f, { header: HEADER, row });
    },
  );

  canary
    .command('delete')
    .description("Delete a canary config; the route keeps the weights it has")
    .requiredOption('--name <name>', 'canary config name')
    .action(async (f: { name: string }) => {
      const c = ctx();
      await c.client().delete('CanaryConfig', c.namespace, checkName('--name', f.name));
      c.io.out(`canary config '${f.name}' deleted\n`);
    });
}
