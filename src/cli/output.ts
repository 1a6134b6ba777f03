// Output: aligned tables (tabwriter style: one space of padding), and the
// -o forms of `get` and `list` for scripts.
import { type Command, Option } from 'commander';
import { usage } from './flags.ts';
import type { Io } from './io.ts';

type Cell = string | number | boolean | undefined;

export function table(io: Io, header: string[] | undefined, rows: Cell[][]): void {
  const cells = [...(header ? [header] : []), ...rows.map((r) => r.map((c) => (c === undefined || c === '' ? '' : String(c))))];
  const columns = Math.max(0, ...cells.map((r) => r.length));
  const widths = Array.from({ length: columns }, (_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  for (const r of cells) {
    io.out(
      `${r
        .map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i] + 1)))
        .join('')
        .trimEnd()}\n`,
    );
  }
}

/** One resource (or report) as YAML (the default) or JSON. */
export async function printObject(io: Io, obj: unknown, format: string | undefined): Promise<void> {
  if (format === undefined || format === 'yaml') {
    const { stringify } = await import('yaml');
    io.out(stringify(obj));
    return;
  }
  if (format === 'json') {
    io.out(`${JSON.stringify(obj, null, 2)}\n`);
    return;
  }
  throw usage(`unknown output format '${format}': use json or yaml`);
}

/** `-o yaml|json` of a get command; with a null default, the command's own form unless asked. */
export function outputOption(description = 'yaml or json', defaultFormat: string | null = 'yaml'): Option {
  const o = new Option('-o, --output <format>', description).choices(['yaml', 'json']);
  return defaultFormat === null ? o : o.default(defaultFormat);
}

export const LIST_FORMATS = ['table', 'wide', 'json', 'yaml'] as const;

export interface ListOutputFlags {
  output: string;
  /** False with --no-headers. */
  headers: boolean;
}

/** `-o table|wide|json|yaml` and `--no-headers`, as on every list command. */
export function withListOutput(cmd: Command): Command {
  return cmd
    .addOption(new Option('-o, --output <format>', 'table, wide (the table and AGE), json or yaml (the objects as the API returns them)').choices(LIST_FORMATS).default('table'))
    .option('--no-headers', 'print the table without its header line');
}

export interface Columns<T> {
  header: string[];
  row(item: T): Cell[];
}

/**
 * A list in the asked form: json and yaml print the items as the API
 * returned them (an array, so `jq '.[].metadata.name'` works); the table
 * forms print `columns`, and wide adds each object's AGE.
 */
export async function printList<T extends { metadata: { creationTimestamp?: string } }>(io: Io, items: T[], f: ListOutputFlags, columns: Columns<T>): Promise<void> {
  switch (f.output) {
    case 'json':
    case 'yaml':
      await printObject(io, items, f.output);
      return;
    case 'table':
    case 'wide': {
      const wide = f.output === 'wide';
      const header = wide ? [...columns.header, 'AGE'] : columns.header;
      const now = Date.now();
      table(
        io,
        f.headers === false ? undefined : header,
        items.map((x) => (wide ? [...columns.row(x), age(x.metadata.creationTimestamp, now)] : columns.row(x))),
      );
      return;
    }
    default:
      throw usage(`unknown output format '${f.output}': use ${LIST_FORMATS.join(', ')}`);
  }
}

/** kubectl's AGE (Kubernetes' HumanDuration): two units while they say something, one after. */
export function age(timestamp: string | undefined, now = Date.now()): string {
  const then = timestamp === undefined ? Number.NaN : Date.parse(timestamp);
  if (Number.isNaN(then)) return '<none>';
  const seconds = Math.trunc((now - then) / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}
