// `flint secret` and `flint configmap`: key/value data functions can read.
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { ConfigMap, Secret } from '../../api/kinds.ts';
import { checkName, collect, keyValue, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { type ListOutputFlags, outputOption, printList, printObject, withListOutput } from '../output.ts';

interface DataFlags {
  name: string;
  fromLiteral?: string[];
  fromFile?: string[];
}

function dataOf(c: Ctx, f: DataFlags): Record<string, string> | undefined {
  if (!f.fromLiteral && !f.fromFile) return undefined;
  const data: Record<string, string> = {};
  for (const l of f.fromLiteral ?? []) {
    const [k, v] = keyValue('--from-literal', l, { allowEqualsInValue: true });
    data[k] = v;
  }
  for (const spec of f.fromFile ?? []) {
    const eq = spec.indexOf('=');
    const key = eq > 0 ? spec.slice(0, eq) : path.basename(spec);
    const file = path.resolve(c.io.cwd, eq > 0 ? spec.slice(eq + 1) : spec);
    try {
      data[key] = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw usage(`--from-file: cannot read '${file}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  return data;
}

function register(cmd: Command, ctx: () => Ctx, kind: 'Secret' | 'ConfigMap'): void {
  const word = kind === 'Secret' ? 'secret' : 'configmap';
  const withData = (x: Command) =>
    x
      .option('--from-literal <key=value>', 'a key and its value (repeatable)', collect)
      .option('--from-file <[key=]file>', "a key and the file holding its value (default key: the file's name; repeatable)", collect);

  withData(cmd.command('create').description(`Create a ${word}`).requiredOption('--name <name>', `${word} name`)).action(async (f: DataFlags) => {
    const c = ctx();
    checkName('--name', f.name);
    await c.client().create<Secret | ConfigMap>({ kind, metadata: { name: f.name, namespace: c.namespace }, data: dataOf(c, f) ?? {} });
    c.io.out(`${word} '${f.name}' created\n`);
  });

  withData(cmd.command('update').description(`Replace a ${word}'s data`).requiredOption('--name <name>', `${word} name`)).action(async (f: DataFlags) => {
    const c = ctx();
    const cur = await c.client().get(kind, c.namespace, checkName('--name', f.name));
    const data = dataOf(c, f);
    if (!data) throw usage('need --from-literal or --from-file');
    cur.data = data;
    await c.client().update(cur);
    c.io.out(`${word} '${f.name}' updated\n`);
  });

  cmd
    .command('get')
    .description(`Show a ${word}, or one of its values with --key`)
    .requiredOption('--name <name>', `${word} name`)
    .option('--key <key>', 'print only this value')
    .addOption(outputOption())
    .action(async (f: { name: string; key?: string; output: string }) => {
      const c = ctx();
      const obj = await c.client().get(kind, c.namespace, checkName('--name', f.name));
      if (f.key !== undefined) {
        const v = obj.data?.[f.key];
        if (v === undefined) throw usage(`${word} '${f.name}' has no key '${f.key}'`);
        c.io.out(`${v}\n`);
        return;
      }
      await printObject(c.io, obj, f.output);
    });

  withListOutput(cmd.command('list').description(`List ${word}s`).option('-A, --all-namespaces', 'every namespace')).action(
    async (f: { allNamespaces?: boolean } & ListOutputFlags) => {
      const c = ctx();
      const items = await c.client().list(kind, f.allNamespaces ? undefined : c.namespace);
      await printList(c.io, items, f, { header: ['NAME', 'KEYS', 'NAMESPACE'], row: (o) => [o.metadata.name, Object.keys(o.data ?? {}).join(','), o.metadata.namespace] });
    },
  );

  cmd
    .command('delete')
    .description(`Delete a ${word}`)
    .requiredOption('--name <name>', `${word} name`)
    .action(async (f: { name: string }) => {
      const c = ctx();
      await c.client().delete(kind, c.namespace, checkName('--name', f.name));
      c.io.out(`${word} '${f.name}' deleted\n`);
    });
}

export function registerSecret(cmd: Command, ctx: () => Ctx): void {
  register(cmd, ctx, 'Secret');
}

export function registerConfigMap(cmd: Command, ctx: () => Ctx): void {
  register(cmd, ctx, 'ConfigMap');
}
