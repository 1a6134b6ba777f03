import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chooseResolvConf, HOST_RESOLV_CONF, nameservers, SYSTEMD_UPSTREAM_RESOLV_CONF } from './resolv.ts';

const files = (map: Record<string, string>) => (f: string) => map[f];
const noAddresses = new Set<string>();

describe('resolv.conf for sandboxes with external network', () => {
  it('reads nameservers, dropping an IPv6 zone', () => {
    assert.deepEqual(nameservers('# c\nsearch x\nnameserver 10.0.0.2\n  nameserver fe80::1%eth0\noptions edns0\n'), ['10.0.0.2', 'fe80::1']);
  });

  it("keeps the host's file when its resolver is on the network", () => {
    assert.deepEqual(chooseResolvConf(files({ [HOST_RESOLV_CONF]: 'nameserver 10.255.255.53\n' }), noAddresses), { file: HOST_RESOLV_CONF });
  });

  it("uses systemd-resolved's upstream servers when the host's file names only its loopback stub", () => {
    const r = chooseResolvConf(files({ [HOST_RESOLV_CONF]: 'nameserver 127.0.0.53\n', [SYSTEMD_UPSTREAM_RESOLV_CONF]: 'nameserver 192.168.1.1\n' }), noAddresses);
    assert.deepEqual(r, { file: SYSTEMD_UPSTREAM_RESOLV_CONF });
  });

  it('warns when every resolver is on the host itself: loopback without an upstream file, or a host address', () => {
    const loop = chooseResolvConf(files({ [HOST_RESOLV_CONF]: 'nameserver 127.0.0.1\n' }), noAddresses);
    assert.equal(loop.file, HOST_RESOLV_CONF);
    assert.match(loop.warning!, /127\.0\.0\.1.*on the host itself.*no DNS/);
    const own = chooseResolvConf(files({ [HOST_RESOLV_CONF]: 'nameserver 192.0.2.2\n' }), new Set(['192.0.2.2']));
    assert.match(own.warning!, /192\.0\.2\.2/);
    assert.match(chooseResolvConf(files({}), noAddresses).warning!, /cannot be read/);
    assert.match(chooseResolvConf(files({ [HOST_RESOLV_CONF]: '# empty\n' }), noAddresses).warning!, /names no nameserver/);
  });
});
