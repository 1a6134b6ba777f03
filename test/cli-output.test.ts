// The CLI's output for scripts, against a real server: every list command's
// -o json and -o yaml parse to the objects the API returns, -o wide adds
// AGE, and --no-headers drops the header line; get commands take -o too.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function ok(args: string[], cwd?: string): string {
  const r = flint(server, args, { cwd });
  assert.equal(r.code, 0, `flint ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function apiList(plural: string): Promise<{ metadata: { name: string } }[]> {
  const res = await fetch(`${server.controllerUrl}/v1/namespaces/default/${plural}`);
  return ((await res.json()) as { items: { metadata: { name: string } }[] }).items;
}

/** Each list command, the API collection it shows, and the name it must show. */
const LISTS: { args: string[]; plural: string; name: string; cwd?: () => string }[] = [
  { args: ['env', 'list'], plural: 'environments', name: 'nodejs' },
  { args: ['pkg', 'list'], plural: 'packages', name: 'p' },
  { args: ['fn', 'list'], plural: 'functions', name: 'hello' },
  { args: ['route', 'list'], plural: 'httptriggers', name: 'r' },
  { args: ['mqt', 'list'], plural: 'messagequeuetriggers', name: 'q' },
  { args: ['secret', 'list'], plural: 'secrets', name: 's' },
  { args: ['configmap', 'list'], plural: 'configmaps', name: 'c' },
  { args: ['canary', 'list'], plural: 'canaryconfigs', name: 'cc' },
];

describe('CLI output for scripts', { timeout: 90_000 }, () => {
  before(async () => {
    server = await startServer({ sets: ['executor.sandbox=none', 'executor.poolSize=0'] });
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-output-'));
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ body: "hi" });');
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '0']);
    ok(['pkg', 'create', '--name', 'p', '--env', 'nodejs', '--code', path.join(work, 'hello.js')]);
    ok(['fn', 'create', '--name', 'hello', '--pkg', 'p']);
    ok(['route', 'create', '--name', 'r', '--function', 'hello', '--url', '/hello']);
    ok(['mqt', 'create', '--name', 'q', '--function', 'hello', '--mqtype', 'redis', '--topic', 'jobs']);
    ok(['secret', 'create', '--name', 's', '--from-literal', 'k=v']);
    ok(['configmap', 'create', '--name', 'c', '--from-literal', 'k=v']);
    ok(['fn', 'create', '--name', 'hello2', '--pkg', 'p']);
    ok(['route', 'create', '--name', 'rc', '--url', '/rc', '--function', 'hello', '--weight', '100', '--function', 'hello2', '--weight', '0']);
    ok(['canary', 'create', '--name', 'cc', '--httptrigger', 'rc', '--newfunction', 'hello2', '--oldfunction', 'hello', '--increment-interval', '10m']);
  });
  after(async () => {
    await server?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  for (const l of LISTS) {
    it(`${l.args.join(' ')}: -o json and -o yaml are the API's objects, -o wide adds AGE, --no-headers drops the header`, async () => {
      const api = await apiList(l.plural);
      assert.ok(api.some((o) => o.metadata.name === l.name));
      const json = JSON.parse(ok([...l.args, '-o', 'json']));
      assert.deepEqual(json, api);
      assert.deepEqual(parse(ok([...l.args, '-o', 'yaml'])), api);

      const table = ok(l.args).trimEnd().split('\n');
      const wide = ok([...l.args, '-o', 'wide']).trimEnd().split('\n');
      assert.match(wide[0], /^NAME\s.*\sAGE$/);
      assert.equal(wide.length, table.length);
      assert.match(wide[1], /\s\d+s$/, 'an age in seconds');
      // Without the header the columns are as wide as the data alone (as kubectl's).
      const bare = ok([...l.args, '--no-headers']).trimEnd().split('\n');
      const words = (line: string) => line.split(/\s+/);
      assert.deepEqual(bare.map(words), table.slice(1).map(words));
      assert.equal(bare.length, api.length);
    });
  }

  it('spec list takes -o json too: the resources the spec directory applied', () => {
    const project = path.join(work, 'project');
    fs.mkdirSync(project);
    ok(['spec', 'init', '--name', 'demo'], project);
    fs.writeFileSync(path.join(project, 'specs', 'cm.yaml'), 'apiVersion: flint.dev/v1\nkind: ConfigMap\nmetadata:\n  name: from-spec\ndata:\n  a: b\n');
    ok(['spec', 'apply'], project);
    const listed = JSON.parse(ok(['spec', 'list', '-o', 'json'], project)) as { kind: string; metadata: { name: string } }[];
    assert.deepEqual(
      listed.map((r) => `${r.kind}/${r.metadata.name}`),
      ['ConfigMap/from-spec'],
    );
  });

  it('get commands print one object as json or yaml; a format they do not take is a usage error', () => {
    for (const args of [
      ['env', 'get', '--name', 'nodejs'],
      ['fn', 'getmeta', '--name', 'hello'],
      ['fn', 'get', '--name', 'hello'],
      ['pkg', 'info', '--name', 'p'],
      ['route', 'get', '--name', 'r'],
      ['mqt', 'get', '--name', 'q'],
      ['secret', 'get', '--name', 's'],
      ['configmap', 'get', '--name', 'c'],
      ['canary', 'get', '--name', 'cc'],
    ]) {
      const obj = JSON.parse(ok([...args, '-o', 'json'])) as { metadata: { name: string } };
      assert.equal(obj.metadata.name, args[3], args.join(' '));
      assert.equal((parse(ok([...args, '-o', 'yaml'])) as { metadata: { name: string } }).metadata.name, args[3]);
    }
    const bad = flint(server, ['fn', 'list', '-o', 'xml']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^Error: option '-o, --output <format>' argument 'xml' is invalid\. Allowed choices are table, wide, json, yaml\./);
  });

  it('fn get without -o still prints the code, and pkg info the summary', () => {
    assert.equal(ok(['fn', 'get', '--name', 'hello']), 'module.exports = async () => ({ body: "hi" });');
    assert.match(ok(['pkg', 'info', '--name', 'p']), /^Name:\s+p\nEnvironment:\s+nodejs\n/);
  });
});
