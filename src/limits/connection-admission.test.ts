import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConnectionAdmission, type ConnectionDrop } from './connection-admission.ts';

class Conn {
  readonly clientAddress: string;
  answering: boolean;
  constructor(clientAddress: string, answering = false) {
    this.clientAddress = clientAddress;
    this.answering = answering;
  }
}

function setup(maxConnections: number, maxConnectionsPerClient: number) {
  const drops: ConnectionDrop[] = [];
  const admission = new ConnectionAdmission<Conn>({ maxConnections, maxConnectionsPerClient }, (why) => drops.push(why));
  const open = new Set<Conn>();
  const evicted: Conn[] = [];
  const evict = (c: Conn) => {
    evicted.push(c);
    open.delete(c);
    admission.closed(c);
  };
  const connect = (address: string, answering = false): Conn | undefined => {
    if (!admission.admit(address, open, evict)) return undefined;
    const c = new Conn(address, answering);
    open.add(c);
    admission.opened(c);
    return c;
  };
  const close = (c: Conn) => {
    open.delete(c);
    admission.closed(c);
  };
  return { drops, open, evicted, connect, close };
}

describe('connection admission', () => {
  it('caps one client address, and frees its share as its connections close', () => {
    const t = setup(0, 2);
    const a = t.connect('10.0.0.1');
    assert.ok(a && t.connect('10.0.0.1'));
    assert.equal(t.connect('10.0.0.1'), undefined);
    assert.ok(t.connect('10.0.0.2'), 'another address is not held back');
    t.close(a);
    assert.ok(t.connect('10.0.0.1'));
    assert.deepEqual(t.drops, ['per_client']);
  });

  it('at the total cap, closes the oldest connection with no request under way to make room', () => {
    const t = setup(3, 0);
    const busy = t.connect('a', true);
    const idle1 = t.connect('b');
    const idle2 = t.connect('c');
    assert.ok(busy && idle1 && idle2);
    const fresh = t.connect('d');
    assert.ok(fresh);
    assert.deepEqual(t.evicted, [idle1], 'the oldest idle one, never the busy one');
    assert.equal(t.open.size, 3);
    assert.deepEqual(t.drops, ['evicted']);
  });

  it('refuses the newcomer when every connection is answering a request', () => {
    const t = setup(2, 0);
    t.connect('a', true);
    t.connect('b', true);
    assert.equal(t.connect('c'), undefined);
    assert.deepEqual(t.evicted, []);
    assert.deepEqual(t.drops, ['max']);
  });

  it('counts an evicted connection out of its address\'s share', () => {
    const t = setup(2, 2);
    t.connect('x');
    t.connect('x');
    assert.ok(t.connect('y'), 'evicts one of x');
    assert.ok(t.connect('x'), 'x is back under its share');
  });
});
