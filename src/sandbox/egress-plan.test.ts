import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isFlintError } from '../api/errors.ts';
import { hostLinkCommands, innerLinkCommands, linkFor, netnsName, nftRuleset, ownerOf, parseSubnet, tableName } from './egress-plan.ts';

describe('egress plan', () => {
  it('cuts /30 links from the subnet: the host end is the gateway, the inner end the sandbox', () => {
    const s = parseSubnet('10.231.0.0/16');
    assert.equal(s.slots, 16384);
    assert.deepEqual(linkFor(s, 0), { slot: 0, hostAddress: '10.231.0.1', innerAddress: '10.231.0.2', veth: 'flv0' });
    assert.deepEqual(linkFor(s, 16383), { slot: 16383, hostAddress: '10.231.255.253', innerAddress: '10.231.255.254', veth: 'flv16383' });
    assert.throws(() => linkFor(s, 16384), RangeError);
    assert.ok(linkFor(s, 16383).veth.length <= 15, 'interface names hold 15 characters');
    assert.equal(parseSubnet('172.31.224.0/24').slots, 64);
  });

  it('refuses a subnet that is not an IPv4 network from /12 to /24, naming the install value', () => {
    for (const bad of ['10.231.0.0', '10.231.0.0/8', '10.231.0.0/25', '10.231.0.1/16', '300.1.0.0/16', 'fd00::/64']) {
      assert.throws(
        () => parseSubnet(bad),
        (err) => isFlintError(err) && err.code === 'FLINT_ERR_CONFIG' && err.field === 'executor.egressSubnet',
        bad,
      );
    }
  });

  it('names namespaces and tables after the owning server, and reads the owner back', () => {
    assert.equal(netnsName(4242, 7), 'flint-4242-7');
    assert.equal(tableName(4242), 'flint_4242');
    assert.equal(ownerOf('flint-4242-7'), 4242);
    assert.equal(ownerOf('flint_4242'), 4242);
    for (const other of ['flint-x-1', 'flinttest-inet-1', 'flint_', 'docker', 'flint-12']) assert.equal(ownerOf(other), undefined, other);
  });

  it('moves the inner end into the namespace in the same command that makes the pair', () => {
    const link = linkFor(parseSubnet('10.231.0.0/16'), 5);
    assert.deepEqual(hostLinkCommands(link, 'flint-1-0'), ['link add flv5 type veth peer name eth0 netns flint-1-0', 'addr add 10.231.0.21/30 dev flv5', 'link set flv5 up']);
    assert.deepEqual(innerLinkCommands(link), ['addr add 10.231.0.22/30 dev eth0', 'link set lo up', 'link set eth0 up', 'route add default via 10.231.0.21']);
  });

  it('drops what comes from a function to the host, to other functions and to link-local; masquerades the rest', () => {
    const rules = nftRuleset('flint_9', parseSubnet('10.231.0.0/16'));
    const chain = (name: string) => rules.slice(rules.indexOf(`chain ${name} {`), rules.indexOf('}', rules.indexOf(`chain ${name} {`)));
    assert.match(rules, /^table inet flint_9 \{/);
    assert.match(chain('input'), /hook input priority -10; policy accept;\n\s+iifname "flv\*" drop$/m);
    const forward = chain('forward').split('\n').map((l) => l.trim());
    const at = (rule: string) => forward.indexOf(rule);
    // Drops come before the accept that lets the rest out.
    for (const drop of ['iifname "flv*" oifname "flv*" drop', 'iifname "flv*" ip daddr 169.254.0.0/16 drop', 'iifname "flv*" ip daddr 10.231.0.0/16 drop', 'iifname "flv*" meta nfproto ipv6 drop']) {
      assert.ok(at(drop) > 0 && at(drop) < at('iifname "flv*" accept'), drop);
    }
    assert.ok(at('oifname "flv*" ct state established,related accept') < at('oifname "flv*" drop'), 'into a function only replies');
    assert.match(chain('postrouting'), /ip saddr 10\.231\.0\.0\/16 oifname != "flv\*" masquerade/);
  });
});
