// How long a `flint` command takes as a whole process, against `node -e 0`
// in the same run: flint version, fn list and fn test (the client side: a
// warm function answers at once). Three forms of the CLI, in rotating
// order within each round so the machine's drift hits them alike:
//   - now: bin/flint.js with the bundle (what npm install leaves);
//   - from sources: the same with FLINT_CLI_SOURCES=1 (an edited checkout);
//   - before: the CLI of CLI_BEFORE_REV (issue 27's starting point), from
//     `git archive`, run on the same node_modules; skipped without git.
// Each figure is the median over rounds; ratios are taken within a round,
// and their spread is reported with them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildCli } from '../scripts/build-cli.ts';
import { REPO, startServer } from '../test/helpers/server.ts';
import { deployHello, fmt } from './lib.ts';

/** The main issue 27's work on the CLI started from. */
export const CLI_BEFORE_REV = 'b8c6e60';

const COMMANDS: { label: string; args: string[]; expect: RegExp }[] = [
  { label: 'flint version', args: ['version'], expect: /^client: .*\nserver: / },
  { label: 'flint fn list', args: ['fn', 'list'], expect: /^NAME\s+ENV/ },
  { label: 'flint fn test', args: ['fn', 'test', '--name', 'hello'], expect: /^hello\n$/ },
];

/** The CLI as it was at `rev`, in a directory of its own, using the checkout's node_modules; undefined without git or the commit. */
export function checkoutOf(rev: string, dir: string): string | undefined {
  const tar = spawnSync('git', ['-C', REPO, 'archive', '--format=tar', rev, 'bin', 'src', 'package.json', 'charts'], { maxBuffer: 256 * 1024 * 1024 });
  if (tar.status !== 0) return undefined;
  fs.mkdirSync(dir, { recursive: true });
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: tar.stdout });
  if (untar.status !== 0) return undefined;
  fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
  return path.join(dir, 'bin', 'flint.js');
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const range = (xs: number[], digits = 2) => `${fmt(Math.min(...xs), digits)}-${fmt(Math.max(...xs), digits)}`;

export async function cliStartBench(sandbox: 'bubblewrap' | 'none', rounds: number): Promise<string[][]> {
  // The bundle of the code as it is now, whatever the checkout last built.
  await buildCli();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-cli-'));
  const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error'] });
  try {
    await deployHello(server.controllerUrl, 1);
    const env = { ...server.env, FLINT_CLI_SOURCES: '' };
    const before = checkoutOf(CLI_BEFORE_REV, path.join(work, 'before'));
    const node = process.execPath;
    const forms: { name: string; argv: (args: string[]) => string[]; env?: NodeJS.ProcessEnv }[] = [
      { name: 'now', argv: (a) => [path.join(REPO, 'bin', 'flint.js'), ...a] },
      { name: 'sources', argv: (a) => [path.join(REPO, 'bin', 'flint.js'), ...a], env: { FLINT_CLI_SOURCES: '1' } },
      ...(before ? [{ name: 'before', argv: (a: string[]) => [before, ...a] }] : []),
    ];
    /** Milliseconds from spawn to exit. */
    const time = (argv: string[], extra: NodeJS.ProcessEnv | undefined, expect?: RegExp) => {
      const t0 = process.hrtime.bigint();
      const r = spawnSync(node, argv, { cwd: work, env: { ...env, ...extra }, encoding: 'utf8', timeout: 30_000 });
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (r.status !== 0 || (expect && !expect.test(r.stdout))) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stdout}${r.stderr}`);
      return ms;
    };
    const rows: string[][] = [];
    for (const c of COMMANDS) {
      // Warm-up: the compile cache, the OS's file cache, the function's instance.
      for (const f of forms) for (let i = 0; i < 2; i++) time(f.argv(c.args), f.env, c.expect);
      const samples: Record<string, number[]> = { node: [] };
      for (const f of forms) samples[f.name] = [];
      const all = [{ name: 'node', argv: () => ['-e', '0'], env: undefined as NodeJS.ProcessEnv | undefined }, ...forms];
      for (let r = 0; r < rounds; r++) {
        // A different one goes first in each round.
        const order = all.map((_, i) => all[(i + r) % all.length]);
        for (const f of order) samples[f.name].push(time(f.argv(c.args), f.env, f.name === 'node' ? undefined : c.expect));
      }
      const perRound = (a: string, b: string) => samples[a].map((x, i) => x / samples[b][i]);
      const nowVsNode = perRound('now', 'node');
      const nowMs = median(samples.now);
      const nodeMs = median(samples.node);
      const parts = [
        `now ${fmt(nowMs, 1)} ms, node -e 0 ${fmt(nodeMs, 1)} ms (${range(nowVsNode)}x over ${rounds} rounds)`,
        `from sources ${fmt(median(samples.sources), 1)} ms (${fmt(median(perRound('sources', 'node')), 2)}x)`,
      ];
      if (before) {
        const nowVsBefore = perRound('now', 'before');
        parts.push(
          `before (${CLI_BEFORE_REV}) ${fmt(median(samples.before), 1)} ms (${fmt(median(perRound('before', 'node')), 2)}x node -e 0); now/before ${fmt(median(nowVsBefore), 3)}x (${range(nowVsBefore, 3)})`,
        );
      } else {
        parts.push(`before: skipped (no git, or ${CLI_BEFORE_REV} is not in this clone)`);
      }
      rows.push([`CLI start: ${c.label} / node -e 0`, `${fmt(median(nowVsNode), 2)}x`, parts.join('; '), '≤ 0.25x of before; stretch ≤ 1.5x node -e 0']);
    }
    return rows;
  } finally {
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const { readKnobs } = await import('./knobs.ts');
  const knobs = readKnobs();
  const rows = await cliStartBench(knobs.sandbox, knobs.cliRounds);
  console.log(['| benchmark | result | measured | target |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n'));
}
