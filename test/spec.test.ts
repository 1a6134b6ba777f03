// Spec directories end to end: `flint spec init|validate|apply|list|destroy`
// with the real CLI against a real server, Fission spec files included, and
// the cases that must write nothing.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

const run = (cwd: string, args: string[]) => flint(server, args, { cwd });

function ok(cwd: string, args: string[]): string {
  const r = run(cwd, args);
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

async function get(urlPath: string): Promise<{ status: number; text: string }> {
  const res = await fetch(server.routerUrl + urlPath);
  return { status: res.status, text: await res.text() };
}

/** A project: code under src/, specs under specs/ (with a fresh deployment uid). */
function project(name: string, code: string, specs: string): string {
  const dir = path.join(work, name);
  fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'src', 'hello.js'), code);
  ok(dir, ['spec', 'init']);
  fs.writeFileSync(path.join(dir, 'specs', 'app.yaml'), specs);
  return dir;
}

const code = (text: string) => `module.exports = async () => ({ status: 200, body: ${JSON.stringify(text)} });\n`;

// What `fission fn create --spec` and `fission route create --spec` write, empty fields and all.
const FISSION_SPECS = `apiVersion: fission.io/v1
kind: Environment
metadata: {creationTimestamp: null, name: spec-node, namespace: default}
spec:
  builder: {}
  imagepullsecret: ""
  keeparchive: false
  poolsize: 1
  resources: {}
  runtime: {image: fission/node-env}
  version: 2
---
kind: ArchiveUploadSpec
name: hello-js
include: ["src/*.js"]
---
apiVersion: fission.io/v1
kind: Package
metadata: {creationTimestamp: null, name: spec-hello-pkg, namespace: default}
spec:
  deployment: {checksum: {}, type: url, url: "archive://hello-js"}
  environment: {name: spec-node, namespace: default}
  source: {checksum: {}}
status: {buildstatus: pending, lastUpdateTimestamp: "2024-05-01T10:00:00Z"}
---
apiVersion: fission.io/v1
kind: Function
metadata: {creationTimestamp: null, name: spec-hello, namespace: default}
spec:
  InvokeStrategy:
    ExecutionStrategy: {ExecutorType: poolmgr, MaxScale: 0, MinScale: 0, SpecializationTimeout: 120, TargetCPUPercent: 0}
    StrategyType: execution
  concurrency: 500
  environment: {name: spec-node, namespace: default}
  functionTimeout: 60
  idletimeout: 120
  package: {functionName: "", packageref: {name: spec-hello-pkg, namespace: default}}
  requestsPerPod: 1
  resources: {}
---
apiVersion: fission.io/v1
kind: HTTPTrigger
metadata: {creationTimestamp: null, name: spec-hello, namespace: default}
spec:
  createingress: false
  functionref: {functionweights: null, name: spec-hello, type: name}
  host: ""
  ingressconfig: {annotations: null, host: "*", path: /spec-hello, tls: ""}
  method: GET
  methods: [GET]
  prefix: ""
  relativeurl: /spec-hello
`;

before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-spec-'));
  server = await startServer();
});

after(async () => {
  await server?.stop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('flint spec', { timeout: 180_000 }, () => {
  it('applies Fission spec files, updates only what changed, deletes what was dropped, and destroys', async () => {
    const dir = project('app', code('from a spec\n'), FISSION_SPECS);
    assert.match(ok(dir, ['spec', 'validate']), /4 resources and 1 archives are valid/);

    const first = ok(dir, ['spec', 'apply']);
    assert.match(first, /^1 environment created: spec-node$/m);
    assert.match(first, /^1 package created: spec-hello-pkg$/m);
    assert.match(first, /^1 function created: spec-hello$/m);
    assert.match(first, /^1 httptrigger created: spec-hello$/m);
    await eventually(async () => ((await get('/spec-hello')).text === 'from a spec\n' ? true : undefined), 'the route answering');

    assert.match(ok(dir, ['spec', 'apply']), /^nothing to change \(4 resources up to date\)$/m);

    fs.writeFileSync(path.join(dir, 'src', 'hello.js'), code('changed\n'));
    assert.equal(ok(dir, ['spec', 'apply']).trim(), '1 package updated: spec-hello-pkg');
    await eventually(async () => ((await get('/spec-hello')).text === 'changed\n' ? true : undefined), 'the new code answering');

    assert.deepEqual(
      ok(dir, ['spec', 'list'])
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split(/\s+/).slice(0, 2).join(' ')),
      ['Environment spec-node', 'Package spec-hello-pkg', 'Function spec-hello', 'HTTPTrigger spec-hello'],
    );

    // Drop the route from the specs: a plain apply keeps it, --delete removes it.
    const specs = path.join(dir, 'specs', 'app.yaml');
    fs.writeFileSync(specs, FISSION_SPECS.slice(0, FISSION_SPECS.lastIndexOf('---\napiVersion: fission.io/v1\nkind: HTTPTrigger')));
    assert.match(ok(dir, ['spec', 'apply']), /nothing to change/);
    assert.equal((await get('/spec-hello')).status, 200);
    assert.equal(ok(dir, ['spec', 'apply', '--delete']).trim(), '1 httptrigger deleted: spec-hello');
    assert.equal((await get('/spec-hello')).status, 404);

    const gone = ok(dir, ['spec', 'destroy']);
    assert.match(gone, /1 function deleted: spec-hello/);
    assert.match(gone, /1 environment deleted: spec-node/);
    assert.equal(ok(dir, ['spec', 'list']).trim(), 'KIND NAME NAMESPACE');
    assert.equal(run(dir, ['fn', 'get', '--name', 'spec-hello']).code, 4);
  });

  it('refuses bad specs as a whole, naming each problem, and writes nothing', async () => {
    const dir = project(
      'bad',
      code('x'),
      `apiVersion: flint.dev/v1
kind: Environment
metadata: {name: bad-env}
spec: {runtime: {image: flint/node-env}}
---
apiVersion: flint.dev/v1
kind: Function
metadata: {name: Bad_Name}
spec: {environment: {name: bad-env}, package: {packageref: {name: p}}}
---
kind: Gadget
---
apiVersion: flint.dev/v1
kind: Package
metadata: {name: p}
spec: {environment: {name: bad-env}, deployment: {type: url, url: "archive://missing"}}
---
kind: ArchiveUploadSpec
name: outside
include: ["../secrets/*"]
`,
    );
    for (const cmd of [['spec', 'validate'], ['spec', 'apply']]) {
      const r = run(dir, cmd);
      assert.equal(r.code, 2, r.stdout + r.stderr);
      assert.match(r.stderr, /4 problems in the specs/);
      assert.match(r.stderr, /specs\/app\.yaml \(document 2\): Function 'Bad_Name': metadata\.name: 'Bad_Name' is not a valid name/);
      assert.match(r.stderr, /\(document 3\): unknown kind "Gadget"/);
      assert.match(r.stderr, /\(document 4\): Package 'p': spec\.deployment\.url: no ArchiveUploadSpec named 'missing'/);
      assert.match(r.stderr, /\(document 5\): ArchiveUploadSpec 'outside': '\.\.\/secrets\/\*' leaves the project directory/);
    }
    assert.equal(run(dir, ['env', 'get', '--name', 'bad-env']).code, 4, 'the valid environment was not created either');

    const noInit = path.join(work, 'no-init');
    fs.mkdirSync(noInit);
    const r = run(noInit, ['spec', 'apply']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /cannot read the spec directory .*specs.*run 'flint spec init' first/);
  });

  it("will not take over another spec directory's resources", async () => {
    const specs = `apiVersion: flint.dev/v1
kind: Environment
metadata: {name: shared-env}
spec: {runtime: {image: flint/node-env}, poolsize: 1}
`;
    const one = project('one', code('one'), specs);
    const two = project('two', code('two'), `${specs}---
apiVersion: flint.dev/v1
kind: Environment
metadata: {name: two-only}
spec: {runtime: {image: flint/node-env}, poolsize: 1}
`);
    ok(one, ['spec', 'apply']);
    const r = run(two, ['spec', 'apply']);
    assert.equal(r.code, 5, r.stdout + r.stderr);
    assert.match(r.stderr, /Environment 'shared-env' in namespace 'default' belongs to another spec directory .*nothing was applied/);
    assert.equal(run(two, ['env', 'get', '--name', 'two-only']).code, 4);
    ok(one, ['spec', 'destroy']);
  });

  it('refuses, before writing anything, what the server would refuse half-way', async () => {
    const env = (name: string) => `apiVersion: flint.dev/v1
kind: Environment
metadata: {name: ${name}}
spec: {runtime: {image: flint/node-env}, poolsize: 1}
`;
    // A route that collides with one created by hand.
    const hand = path.join(work, 'by-hand');
    fs.mkdirSync(hand);
    fs.writeFileSync(path.join(hand, 'f.js'), code('hand'));
    ok(hand, ['env', 'create', '--name', 'hand-env', '--image', 'flint/node-env', '--poolsize', '1']);
    ok(hand, ['fn', 'create', '--name', 'hand-fn', '--env', 'hand-env', '--code', 'f.js']);
    ok(hand, ['route', 'create', '--name', 'hand-route', '--url', '/taken', '--function', 'hand-fn']);
    const clash = project(
      'clash',
      code('x'),
      `${env('clash-env')}---
apiVersion: flint.dev/v1
kind: HTTPTrigger
metadata: {name: clash-route}
spec: {relativeurl: /taken, methods: [GET], functionref: {name: hand-fn}}
`,
    );
    const r = run(clash, ['spec', 'apply']);
    assert.equal(r.code, 5, r.stdout + r.stderr);
    assert.match(r.stderr, /HTTPTrigger 'clash-route' has the same host, URL and method as HTTPTrigger 'default\/hand-route'; nothing was applied/);
    assert.equal(run(clash, ['env', 'get', '--name', 'clash-env']).code, 4);

    // --delete of an environment that a function outside the specs uses.
    const owner = project('owner', code('x'), `${env('owned-env')}---\n${env('kept-env')}`);
    ok(owner, ['spec', 'apply']);
    ok(hand, ['fn', 'create', '--name', 'outside-fn', '--env', 'owned-env', '--code', 'f.js']);
    fs.writeFileSync(path.join(owner, 'specs', 'app.yaml'), `${env('kept-env')}---\n${env('new-env')}`);
    const d = run(owner, ['spec', 'apply', '--delete']);
    assert.equal(d.code, 5, d.stdout + d.stderr);
    assert.match(d.stderr, /--delete would remove Environment 'owned-env', which function 'outside-fn' still uses; nothing was applied/);
    assert.equal(run(owner, ['env', 'get', '--name', 'new-env']).code, 4);
    ok(hand, ['fn', 'delete', '--name', 'outside-fn']);
    assert.match(ok(owner, ['spec', 'apply', '--delete']), /1 environment created: new-env\n1 environment deleted: owned-env/);
  });

  it('writes specs from the create commands (--spec, --dry), which apply creates', async () => {
    const dir = path.join(work, 'generated');
    fs.mkdirSync(path.join(dir, 'lib'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'gen.js'), code('generated\n'));
    fs.writeFileSync(path.join(dir, 'lib', 'index.js'), code('from a directory\n'));
    const noInit = run(dir, ['env', 'create', '--spec', '--name', 'gen-env', '--image', 'flint/node-env']);
    assert.equal(noInit.code, 2);
    assert.match(noInit.stderr, /not a spec directory \(run 'flint spec init' first\)/);
    ok(dir, ['spec', 'init']);
    assert.equal(ok(dir, ['env', 'create', '--spec', '--name', 'gen-env', '--image', 'flint/node-env', '--poolsize', '1']).trim(), 'Saved to specs/environment-gen-env.yaml');
    ok(dir, ['fn', 'create', '--spec', '--name', 'gen-fn', '--env', 'gen-env', '--code', 'gen.js']);
    ok(dir, ['route', 'create', '--spec', '--name', 'gen-route', '--url', '/generated', '--function', 'gen-fn']);
    ok(dir, ['pkg', 'create', '--spec', '--name', 'gen-dir-pkg', '--env', 'gen-env', '--deploy', 'lib']);
    ok(dir, ['fn', 'create', '--spec', '--name', 'gen-dir-fn', '--env', 'gen-env', '--pkg', 'gen-dir-pkg', '--url', '/generated-dir']);
    ok(dir, ['mqt', 'create', '--spec', '--name', 'gen-mqt', '--function', 'gen-fn', '--mqtype', 'kafka', '--topic', 'gen-in']);
    const again = run(dir, ['fn', 'create', '--spec', '--name', 'gen-fn', '--env', 'gen-env', '--code', 'gen.js']);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /specs\/function-gen-fn\.yaml already exists/);
    assert.equal(run(dir, ['env', 'get', '--name', 'gen-env']).code, 4, '--spec creates nothing on the server');
    const outside = path.join(work, 'outside.js');
    fs.writeFileSync(outside, code('outside'));
    const refusals: Array<[string[], RegExp]> = [
      [['pkg', 'create', '--spec', '--env', 'gen-env', '--deploy', 'gen.js', '--deploychecksum', 'a'.repeat(64)], /--deploy: with --spec or --dry a checksum applies to a URL/],
      [['pkg', 'create', '--spec', '--env', 'gen-env', '--code', outside], /--code: '.*outside\.js' is not inside the project directory/],
      [['fn', 'create', '--spec', '--name', 'no-env', '--pkg', 'gen-dir-pkg'], /need --env argument \(with --spec the package is not looked up\)/],
    ];
    for (const [args, message] of refusals) {
      const r = run(dir, args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, message);
    }

    const dry = ok(dir, ['route', 'create', '--dry', '--name', 'dry-route', '--url', '/dry', '--function', 'gen-fn']);
    assert.match(dry, /^apiVersion: flint.dev\/v1\nkind: HTTPTrigger\n/);
    assert.ok(!fs.existsSync(path.join(dir, 'specs', 'route-dry-route.yaml')));

    const applied = ok(dir, ['spec', 'apply']);
    assert.match(applied, /^2 functions created: gen-dir-fn, gen-fn$/m);
    assert.match(applied, /^1 mqtrigger created: gen-mqt$/m);
    await eventually(async () => ((await get('/generated')).text === 'generated\n' ? true : undefined), 'the generated route');
    await eventually(async () => ((await get('/generated-dir')).text === 'from a directory\n' ? true : undefined), 'the route to the directory package');
    ok(dir, ['spec', 'destroy']);
  });
});
