// Renders every command's help into docs/cli-reference.md. The file is
// committed; a test regenerates it and fails on a diff.
import fs from 'node:fs';
import type { Command } from 'commander';
import { buildProgram } from './program.ts';

export const REFERENCE_FILE = new URL('../../docs/cli-reference.md', import.meta.url);

function walk(cmd: Command, path: string[], out: string[]): void {
  const name = [...path, cmd.name()].join(' ');
  const help = cmd.helpInformation().replace(/[ \t]+$/gm, '').trimEnd();
  out.push(`## ${name}\n\n\`\`\`\n${help}\n\`\`\`\n`);
  for (const sub of cmd.commands) walk(sub, [...path, cmd.name()], out);
}

export async function renderReference(): Promise<string> {
  const program = await buildProgram({ out() {}, err() {}, env: {}, cwd: '/' });
  // Help text wraps at the terminal width; pin it so the file is stable.
  program.configureHelp({ helpWidth: 100 });
  const apply = (c: Command) => {
    c.configureHelp({ helpWidth: 100 });
    for (const s of c.commands) apply(s);
  };
  apply(program);
  const out = ['# flint command reference\n', 'Generated from the command definitions by `npm run generate`; do not edit by hand.\n'];
  walk(program, [], out);
  return `${out.join('\n')}`;
}

export async function writeReference(): Promise<void> {
  fs.writeFileSync(REFERENCE_FILE, await renderReference());
}
