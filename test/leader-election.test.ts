// Leader election (src/store/leader-election.ts) on a real control plane:
// three candidates for one Lease. Exactly one leads; a leader that stops
// hands over at once; one cut off from the API server (its calls failing,
// or hanging) gives the lead up before anyone may take it, and is replaced
// only once the Lease has gone unrenewed for its duration; one whose start
// is slow keeps its Lease meanwhile. Every 50 ms the test looks at all
// candidates: never two leaders at once. followLeader reports the holder
// and the URL it publishes.
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { type ControlPlane, startControlPlane } from '../scripts/kube/control-plane.ts';
import { FlintError } from '../src/api/errors.ts';
import { createKubeClient, type KubeClient } from '../src/store/kube-client.ts';
import { followLeader, LEADER_URL_ANNOTATION, LEASES, LeaderElection, type LeaseObject } from '../src/store/leader-election.ts';
import { eventually } from './helpers/server.ts';

const LEASE_MS = 2000;
const RETRY_MS = 200;
const NS = 'default';
const logger = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Mode = 'ok' | 'fail' | 'hang';

interface Candidate {
  name: string;
  election: LeaderElection;
  /** What its calls to the API server do from now on. */
  cut(mode: Mode): void;
  started: number;
  stoppedLeading: number;
  stopped: boolean;
}

describe('leader election on a real control plane', { timeout: 5 * 60_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient;
  const log: string[] = [];
  let candidates: Candidate[] = [];
  let sampler: NodeJS.Timeout | undefined;
  /** Moments when more than one candidate said it led. */
  let overlaps: string[] = [];
  let lease = '';
  let round = 0;

  before(async () => {
    cp = await startControlPlane({ log: (l) => log.push(l) });
    client = createKubeClient({ baseUrl: cp.url, ca: cp.pki.ca, token: cp.adminToken });
  });

  after(async () => {
    await cp?.stop();
  });

  beforeEach(() => {
    round++;
    lease = `flint-test-${round}`;
    candidates = [];
    overlaps = [];
    sampler = setInterval(() => {
      const leading = candidates.filter((c) => c.election.isLeader).map((c) => c.name);
      if (leading.length > 1) overlaps.push(`${new Date().toISOString()}: ${leading.join(', ')}`);
    }, 50);
  });

  afterEach(async () => {
    clearInterval(sampler);
    for (const c of candidates) c.cut('ok');
    await Promise.all(candidates.map((c) => c.election.stop()));
    assert.deepEqual(overlaps, [], 'never two leaders at once');
  });

  function candidate(name: string, o: { onStartedLeading?: () => Promise<void> } = {}): Candidate {
    let mode: Mode = 'ok';
    const hanging: Array<(err: unknown) => void> = [];
    const guard =
      <A extends unknown[], R>(f: (...a: A) => Promise<R>) =>
      (...a: A): Promise<R> => {
        if (mode === 'fail') return Promise.reject(new FlintError('FLINT_ERR_UNREACHABLE', `${name} is cut off from the API server`));
        // Hangs until healed (then fails), as a call into a partition does until its timeout.
        if (mode === 'hang') return new Promise<R>((_, reject) => hanging.push(reject));
        return f(...a);
      };
    const own: KubeClient = {
      ...client,
      get: guard(client.get.bind(client)) as KubeClient['get'],
      create: guard(client.create.bind(client)) as KubeClient['create'],
      replace: guard(client.replace.bind(client)) as KubeClient['replace'],
    };
    const c: Candidate = {
      name,
      started: 0,
      stoppedLeading: 0,
      stopped: false,
      cut(m) {
        mode = m;
        if (m !== 'hang') for (const reject of hanging.splice(0)) reject(new FlintError('FLINT_ERR_UNREACHABLE', 'healed'));
      },
      election: new LeaderElection({
        client: own,
        namespace: NS,
        name: lease,
        role: `test-${round}`,
        identity: name,
        leaseDurationMs: LEASE_MS,
        retryMs: RETRY_MS,
        annotations: { [LEADER_URL_ANNOTATION]: `http://${name}.test:8080` },
        onStartedLeading: async () => {
          c.started++;
          await o.onStartedLeading?.();
        },
        onStoppedLeading: () => {
          c.stoppedLeading++;
        },
        logger,
      }),
    };
    candidates.push(c);
    return c;
  }

  const leaders = () => candidates.filter((c) => c.election.isLeader);
  const oneLeader = async (what: string, timeoutMs = 10_000) => {
    const [l] = await eventually(() => (leaders().length === 1 ? leaders() : undefined), what, timeoutMs, 10);
    return l;
  };
  const read = async () => (await client.get<LeaseObject>(LEASES, NS, lease)) as LeaseObject;

  it('elects exactly one of three, which keeps leading; followLeader names it and its URL', async () => {
    for (const n of ['a', 'b', 'c']) candidate(n).election.start();
    const leader = await oneLeader('one leader');
    // Several lease durations: the same one leads, renewing, and started once.
    for (let i = 0; i < 12; i++) {
      await sleep(LEASE_MS / 5);
      assert.deepEqual(
        leaders().map((c) => c.name),
        [leader.name],
      );
    }
    assert.deepEqual(
      candidates.map((c) => [c.name, c.started, c.stoppedLeading]),
      candidates.map((c) => [c.name, c === leader ? 1 : 0, 0]),
    );
    const l = await read();
    assert.equal(l.spec?.holderIdentity, leader.name);
    assert.equal(l.spec?.leaseDurationSeconds, LEASE_MS / 1000);
    assert.ok(Date.now() - Date.parse(l.spec?.renewTime as string) < LEASE_MS, 'renewed within the duration');
    assert.equal(l.metadata.labels?.['flint.dev/leader-of'], `test-${round}`);
    const follow = followLeader(client, NS, `test-${round}`, () => {});
    try {
      await follow.ready;
      assert.deepEqual(follow.current(), { holder: leader.name, url: `http://${leader.name}.test:8080` });
    } finally {
      await follow.stop();
    }
    const nobody = followLeader(client, NS, 'nobody', () => {});
    try {
      await nobody.ready;
      assert.equal(nobody.current(), undefined, 'no Lease of that role');
    } finally {
      await nobody.stop();
    }
  });

  it('hands over within about retryMs when the leader stops, and followLeader follows', async () => {
    for (const n of ['a', 'b', 'c']) candidate(n).election.start();
    const first = await oneLeader('a first leader');
    const follow = followLeader(client, NS, `test-${round}`, () => {});
    try {
      await follow.ready;
      await eventually(() => follow.current()?.holder === first.name, 'followLeader naming the first leader', 5000);
      const transitions = (await read()).spec?.leaseTransitions ?? 0;
      await first.election.stop();
      const t0 = Date.now();
      assert.equal(first.election.isLeader, false);
      assert.equal(first.stoppedLeading, 0, 'a stop is not a loss');
      const second = await oneLeader('a second leader', LEASE_MS);
      const took = Date.now() - t0;
      assert.notEqual(second.name, first.name);
      assert.ok(took < RETRY_MS + 600, `took over after ${took} ms, not after the lease duration`);
      const l = await read();
      assert.equal(l.spec?.holderIdentity, second.name);
      assert.equal(l.spec?.leaseTransitions, transitions + 1);
      await eventually(
        () => follow.current()?.holder === second.name && follow.current()?.url === `http://${second.name}.test:8080`,
        'followLeader naming the second leader and its URL',
        5000,
      );
    } finally {
      await follow.stop();
    }
  });

  for (const mode of ['fail', 'hang'] as const) {
    it(`replaces a leader cut off from the API server (calls that ${mode}) only after the lease duration, and it stops leading first`, async () => {
      for (const n of ['a', 'b', 'c']) candidate(n).election.start();
      const first = await oneLeader('a first leader');
      const renewed = Date.parse((await read()).spec?.renewTime as string);
      first.cut(mode);
      const t0 = Date.now();
      await eventually(() => !first.election.isLeader, 'the cut-off leader giving the lead up', LEASE_MS * 3);
      const gaveUp = Date.now() - t0;
      assert.equal(first.stoppedLeading, 1, 'told it lost the lead');
      const second = await oneLeader('a second leader', LEASE_MS * 3);
      const took = Date.now() - t0;
      assert.notEqual(second.name, first.name);
      assert.ok(gaveUp < took, `gave up after ${gaveUp} ms, before the next took over after ${took} ms`);
      // Not before the Lease went unrenewed for its duration.
      const since = Date.now() - renewed;
      assert.ok(since >= LEASE_MS, `taken over ${since} ms after the last renewal`);
      assert.ok(took < LEASE_MS + 4 * RETRY_MS + 1000, `taken over ${took} ms after the cut`);
      // Healed: it stays a follower.
      first.cut('ok');
      await sleep(LEASE_MS);
      assert.deepEqual(
        leaders().map((c) => c.name),
        [second.name],
      );
    });
  }

  it('keeps renewing while a new leader starts slowly (onStartedLeading longer than the duration)', async () => {
    const slow = candidate('slow', {
      onStartedLeading: async () => {
        await sleep(LEASE_MS * 2);
      },
    });
    slow.election.start();
    await oneLeader('the slow one leading');
    candidate('b').election.start();
    candidate('c').election.start();
    for (let i = 0; i < 15; i++) {
      await sleep(LEASE_MS / 5);
      assert.deepEqual(
        leaders().map((c) => c.name),
        ['slow'],
        `after ${(i + 1) * (LEASE_MS / 5)} ms`,
      );
    }
    assert.equal((await read()).spec?.holderIdentity, 'slow');
  });

  it('gives the lead up when its start fails, and another may lead', async () => {
    const broken = candidate('broken', {
      onStartedLeading: async () => {
        throw new Error('cannot start');
      },
    });
    broken.election.start();
    await eventually(() => broken.started > 0, 'the start attempted', 5000);
    await broken.election.stop();
    candidate('b').election.start();
    const next = await oneLeader('another leader', LEASE_MS * 3);
    assert.equal(next.name, 'b');
  });
});
