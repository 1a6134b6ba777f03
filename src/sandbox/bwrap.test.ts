import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { execFileSync } from 'node:child_process';
import { BWRAP, bwrapArgs, sandboxAvailable, sandboxCommand, type SandboxSpec } from './bwrap.ts';
import { NSENTER } from './egress.ts';

const spec: SandboxSpec = { binds: [], binaries: [], tmpSizeBytes: 1 << 20, hostname: 'w1' };

describe('sandbox command line', () => {
  it("without network: bwrap's own fresh network namespace, no resolver", () => {
    const argv = sandboxCommand(spec, ['/bin/true']);
    assert.equal(argv[0], BWRAP);
    assert.ok(argv.includes('--unshare-all'));
    assert.equal(argv.includes('--share-net'), false);
    assert.equal(argv.includes('/etc/resolv.conf'), false);
  });

  it("shows the host's /etc/localtime as the same link into the zone database where the host has one, else the file", () => {
    const argv = sandboxCommand(spec, ['/bin/true']);
    const at = argv.indexOf('/etc/localtime', argv.indexOf('--hostname'));
    let target: string | undefined;
    try {
      target = path.resolve('/etc', fs.readlinkSync('/etc/localtime'));
    } catch {}
    if (target?.startsWith('/usr/share/zoneinfo/') && fs.existsSync(target)) assert.deepEqual(argv.slice(at - 2, at + 1), ['--symlink', target, '/etc/localtime']);
    else assert.deepEqual(argv.slice(at - 2, at + 1), ['--ro-bind-try', '/etc/localtime', '/etc/localtime']);
  });

  it('with network: bwrap entered into the egress namespace, keeping it, never the host network', () => {
    const argv = sandboxCommand({ ...spec, network: { netnsPath: '/run/netns/flint-1-0', resolvConf: '/run/systemd/resolve/resolv.conf' } }, ['/bin/true']);
    assert.deepEqual(argv.slice(0, 4), [NSENTER, '--net=/run/netns/flint-1-0', '--', BWRAP]);
    // --share-net keeps the namespace bwrap was started in; it must come after --unshare-all, which it undoes for the network only.
    assert.ok(argv.indexOf('--share-net') > argv.indexOf('--unshare-all'));
    const at = argv.indexOf('/etc/resolv.conf');
    assert.deepEqual(argv.slice(at - 2, at + 1), ['--ro-bind-try', '/run/systemd/resolve/resolv.conf', '/etc/resolv.conf']);
  });

  it('with network: of /etc/ssl and /etc/pki only what TLS clients trust, never their private keys', () => {
    const argv = sandboxCommand({ ...spec, network: { netnsPath: '/run/netns/flint-1-0', resolvConf: '/etc/resolv.conf' } }, ['/bin/true']);
    assert.ok(argv.includes('/etc/ssl/certs'));
    for (const whole of ['/etc/ssl', '/etc/pki']) assert.equal(argv.includes(whole), false, whole);
    assert.equal(argv.some((a) => a.includes('private')), false);
  });

  it("a networked sandbox sees the host's CA certificates and not /etc/ssl/private, which the uid mapping would let it read", async (t) => {
    if (!(await sandboxAvailable())) return t.skip('bubblewrap cannot build a sandbox on this machine');
    if (!fs.existsSync('/etc/ssl/certs')) return t.skip('no /etc/ssl/certs on this machine');
    // The namespace given is not entered (bwrapArgs is the command after nsenter): the host's network is kept for this look.
    const args = bwrapArgs({ ...spec, network: { netnsPath: '/run/netns/unused', resolvConf: '/etc/resolv.conf' } }, ['/bin/sh', '-c', 'ls /etc/ssl; ls /etc/ssl/certs | head -1; ls /etc/ssl/private 2>&1 || true']);
    const out = execFileSync(BWRAP, args, { encoding: 'utf8' });
    const lines = out.split('\n');
    assert.ok(lines.includes('certs'), out);
    assert.equal(lines.includes('private'), false, out);
    assert.match(out, /No such file or directory/);
  });
});
