// The completion scripts in real shells: every command, alias and flag of
// the command tree is offered where it belongs (bash), and zsh and fish load
// theirs and complete the same way.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import type { Command } from 'commander';
import { describe, it } from 'node:test';
import { completionScript } from './completion.ts';
import { buildProgram } from './program.ts';

const io = { out() {}, err() {}, env: {}, cwd: '/' };
const has = (shell: string) => spawnSync(shell, ['-c', 'exit 0']).status === 0;

interface Case {
  words: string[];
  expect: string[];
}

/** For each command: what completing an empty word after it must offer (its subcommands with their aliases, and its flags). */
function cases(cmd: Command, typed: string[], inherited: string[]): Case[] {
  const flags = cmd.options.flatMap((o) => [o.short, o.long]).filter((w): w is string => w !== undefined);
  const names = cmd.commands.flatMap((c) => [c.name(), ...c.aliases()]);
  const own: Case = { words: typed, expect: [...names, ...flags, ...inherited, '--help'] };
  const choices = cmd.options
    .filter((o) => o.argChoices?.length)
    .map((o) => ({ words: [...typed, o.long ?? (o.short as string)], expect: o.argChoices ?? [] }));
  const below = cmd.commands.flatMap((c) => {
    // Reached by an alias where there is one: aliases lead to the same command.
    const word = c.aliases()[0] ?? c.name();
    return cases(c, [...typed, word], typed.length === 0 ? flags : inherited);
  });
  return [own, ...choices, ...below];
}

function bashCompletions(script: string, all: Case[]): string[][] {
  const lines = [
    script,
    't() { COMP_WORDS=(flint "$@" ""); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _flint_complete; echo "${COMPREPLY[*]}"; }',
    ...all.map((c) => `t ${c.words.map((w) => `'${w}'`).join(' ')}`),
  ];
  const out = execFileSync('bash', ['--norc', '--noprofile', '-c', lines.join('\n')], { encoding: 'utf8' });
  return out.split('\n').slice(0, all.length).map((l) => l.split(' ').filter(Boolean));
}

describe('flint completion', () => {
  it('bash offers every command, alias and flag of the tree, and the choices of flags that have them', async () => {
    const program = await buildProgram(io);
    const all = cases(program, [], []);
    assert.ok(all.length > 80, `${all.length} cases`);
    const got = bashCompletions(completionScript(program, 'bash'), all);
    for (const [i, c] of all.entries()) {
      for (const w of c.expect) assert.ok(got[i].includes(w), `flint ${c.words.join(' ')} <TAB> offers ${w} (got: ${got[i].join(' ')})`);
    }
  });

  it('bash skips flag values when finding the command: `flint -n fn env l` completes environment commands', async () => {
    const script = completionScript(await buildProgram(io), 'bash');
    const out = execFileSync('bash', ['--norc', '--noprofile', '-c', `${script}\nCOMP_WORDS=(flint -n fn env l); COMP_CWORD=4; _flint_complete; echo "\${COMPREPLY[*]}"`], { encoding: 'utf8' });
    assert.equal(out.trim(), 'list');
  });

  it('zsh loads its script and describes the commands', { skip: !has('zsh') && 'zsh is not installed' }, async () => {
    const script = completionScript(await buildProgram(io), 'zsh');
    execFileSync('zsh', ['-n'], { input: script });
    // compsys's functions played by stubs that print what they were given.
    const driver = [
      'compdef() { :; }',
      '_describe() { print -r -- "${(j: :)${(P)4}}" }',
      'compadd() { shift; print -r -- "$*" }',
      '_files() { print -r -- files }',
      script,
      't() { words=("$@"); CURRENT=${#words}; _flint }',
      't flint fn ""',
      't flint fn list -o ""',
      't flint fn create --code ""',
    ].join('\n');
    const [fn, formats, file] = execFileSync('zsh', ['-f', '-c', driver], { encoding: 'utf8' }).trim().split('\n');
    assert.match(fn, /(^| )list:List functions( |$)/);
    assert.match(fn, /(^| )--namespace:/);
    assert.equal(formats, 'table wide json yaml');
    assert.equal(file, 'files');
  });

  it('fish completes through its own `complete -C`', { skip: !has('fish') && 'fish is not installed' }, async () => {
    const script = completionScript(await buildProgram(io), 'fish');
    const run = (line: string) =>
      execFileSync('fish', ['--no-config', '-c', `${script}\ncomplete -C ${JSON.stringify(line)}`], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[0]);
    assert.deepEqual(run('flint fn l').sort(), ['list', 'log', 'logs']);
    assert.deepEqual(run('flint -n fn env l'), ['list']);
    assert.deepEqual(run('flint fn list -o ').sort(), ['json', 'table', 'wide', 'yaml']);
    assert.ok(run('flint fn create --').includes('--fntimeout'));
    assert.deepEqual(run('flint completion ').filter((w) => !w.startsWith('-')).sort(), ['bash', 'fish', 'zsh']);
  });
});
