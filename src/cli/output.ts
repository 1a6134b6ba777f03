// Output: aligned tables (tabwriter style: one space of padding), and the
// -o json|yaml forms of `get`.
import type { Io } from './io.ts';

export function table(io: Io, header: string[], rows: Array<Array<string | number | boolean | undefined>>): void {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === undefined || c === '' ? '' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  for (const r of cells) {
    io.out(
      `${r
        .map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i] + 1)))
        .join('')
        .trimEnd()}\n`,
    );
  }
}

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
  throw new Error(`unknown output format '${format}': use json or yaml`);
}
