// What a network namespace of its own costs a function with external
// network, in pairs taken alternately on one machine:
//   - cold start from the warm pool (first call of a new function), an
//     environment with external network vs one without: a pooled worker has
//     its namespace before the call, so this should not move;
//   - starting a worker until it answers its health probe (what a pool
//     refill or a newdeploy instance waits for), with vs without;
//   - making and deleting one namespace on its own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { startWorker } from '../src/executor/process/worker-process.ts';
import { EgressNetworks } from '../src/sandbox/egress.ts';
import { startServer } from '../test/helpers/server.ts';
import { createFunction, createResource, fmt, percentiles, timedFirstCall } from './lib.ts';

const SUBNET = '10.231.0.0/16';
const ms = (us: number) => fmt(us / 1000, 1);

export async function egressBench(sandbox: 'bubblewrap' | 'none', count: number): Promise<string[][]> {
  const names = ['cold start from warm pool, external network / without', 'worker start, external network / without', 'egress namespace create / delete'];
  const why = sandbox === 'none' ? 'BENCH_SANDBOX=none: unsandboxed workers share the host network' : new EgressNetworks({ subnet: SUBNET }).unavailable;
  if (why) return names.map((n) => [n, 'skipped', why, '']);
  const rows: string[][] = [];

  const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error'] });
  const router = new Pool(server.routerUrl, { connections: 1 });
  try {
    for (const [name, net] of [['plain', false], ['net', true]] as const) {
      await createResource(server.controllerUrl, 'environments', { metadata: { name }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 1, allowAccessToExternalNetwork: net } });
    }
    const plain: number[] = [];
    const net: number[] = [];
    for (let i = 0; i < count; i++) {
      await createFunction(server.controllerUrl, `plain-${i}`, { env: 'plain' });
      await createFunction(server.controllerUrl, `net-${i}`, { env: 'net' });
      // Both pools refilled (a worker start takes a few hundred ms on a busy 2-core machine), nothing starting
      // while either side is timed: a call that found its pool empty would time a whole worker start.
      await new Promise((r) => setTimeout(r, 1500));
      if (i % 2 === 0) {
        plain.push(await timedFirstCall(router, `plain-${i}`));
        net.push(await timedFirstCall(router, `net-${i}`));
      } else {
        net.push(await timedFirstCall(router, `net-${i}`));
        plain.push(await timedFirstCall(router, `plain-${i}`));
      }
    }
    const p = percentiles(plain);
    const n = percentiles(net);
    rows.push([names[0], `${fmt(n.p50 / p.p50, 2)}x`, `with p50 ${ms(n.p50)} ms (p99 ${ms(n.p99)} ms), without p50 ${ms(p.p50)} ms (p99 ${ms(p.p99)} ms)`, '']);
  } finally {
    await router.close();
    await server.stop();
  }

  const egress = new EgressNetworks({ subnet: SUBNET });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-egress-'));
  try {
    const with_: number[] = [];
    const without: number[] = [];
    const once = async (i: number, allowNetwork: boolean) => {
      const id = `bench-egress-${allowNetwork ? 'n' : 'p'}${i}`;
      const t0 = process.hrtime.bigint();
      const w = await startWorker({ id, runtime: 'node', instanceDir: path.join(work, id), sandbox, allowNetwork, egress, memoryMB: 256, onOutput() {} });
      (allowNetwork ? with_ : without).push(Number(process.hrtime.bigint() - t0) / 1000);
      await w.kill();
    };
    // The table and forwarding are made once, on first use: not part of a worker's start.
    await (await egress.create()).release();
    for (let i = 0; i < count; i++) {
      if (i % 2 === 0) {
        await once(i, false);
        await once(i, true);
      } else {
        await once(i, true);
        await once(i, false);
      }
    }
    const w = percentiles(with_);
    const o = percentiles(without);
    rows.push([names[1], `${fmt(w.p50 / o.p50, 2)}x`, `with p50 ${ms(w.p50)} ms (p99 ${ms(w.p99)} ms), without p50 ${ms(o.p50)} ms (p99 ${ms(o.p99)} ms): +${ms(w.p50 - o.p50)} ms`, '']);

    const made: number[] = [];
    const deleted: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = process.hrtime.bigint();
      const ns = await egress.create();
      const t1 = process.hrtime.bigint();
      await ns.release();
      made.push(Number(t1 - t0) / 1000);
      deleted.push(Number(process.hrtime.bigint() - t1) / 1000);
    }
    const c = percentiles(made);
    const d = percentiles(deleted);
    rows.push([names[2], `${ms(c.p50)} ms / ${ms(d.p50)} ms`, `create p50 ${ms(c.p50)} ms (p99 ${ms(c.p99)} ms), delete p50 ${ms(d.p50)} ms (p99 ${ms(d.p99)} ms)`, '']);
  } finally {
    await egress.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
  return rows;
}
