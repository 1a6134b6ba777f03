// The local-mode Store: one node:sqlite file in the data directory, in WAL
// mode so a killed server loses no committed write. Every write bumps one
// global resourceVersion and appends to an event log, which is what lets a
// watch resume from any recent resourceVersion.
import { isNoSpace, storageFull } from '../fsafe/no-space.ts';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { FlintError } from '../api/errors.ts';
import { type AnyResource, KINDS, type KindMap, type KindName } from '../api/kinds.ts';
import type { StoredMeta } from '../api/meta.ts';
import { WatchHub } from './watch-hub.ts';
import {
  type DeleteOptions,
  type ListOptions,
  type ListResult,
  parseLabelSelector,
  SelectorError,
  type Store,
  type Watch,
  type WatchEvent,
  type WatchEventType,
  type WatchOptions,
} from './store.ts';

export interface SqliteStoreOptions {
  /** How many events the log keeps for resuming watches. */
  eventRetention?: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  rv INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS events (
  rv INTEGER PRIMARY KEY, kind TEXT NOT NULL, namespace TEXT NOT NULL,
  type TEXT NOT NULL, body TEXT NOT NULL
);
`;

function now(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

export class SqliteStore implements Store {
  readonly #db: DatabaseSync;
  readonly #dir: string;
  readonly #retention: number;
  readonly #hub = new WatchHub();
  #rv: number;
  #closed = false;
  readonly #q: Record<string, StatementSync>;

  constructor(file: string, opts: SqliteStoreOptions = {}) {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    this.#dir = path.dirname(file);
    this.#db = new DatabaseSync(file);
    this.#db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;');
    this.#db.exec(SCHEMA);
    this.#retention = opts.eventRetention ?? 10_000;
    const row = this.#db.prepare("SELECT value FROM meta WHERE key = 'rv'").get() as { value: string } | undefined;
    this.#rv = row ? Number(row.value) : 0;
    this.#q = {
      get: this.#db.prepare('SELECT body FROM objects WHERE kind = ? AND namespace = ? AND name = ?'),
      listAll: this.#db.prepare('SELECT body FROM objects WHERE kind = ? ORDER BY namespace, name'),
      listNs: this.#db.prepare('SELECT body FROM objects WHERE kind = ? AND namespace = ? ORDER BY name'),
      upsert: this.#db.prepare(
        'INSERT INTO objects (kind, namespace, name, rv, body) VALUES (?, ?, ?, ?, ?) ' +
          'ON CONFLICT (kind, namespace, name) DO UPDATE SET rv = excluded.rv, body = excluded.body',
      ),
      remove: this.#db.prepare('DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?'),
      event: this.#db.prepare('INSERT INTO events (rv, kind, namespace, type, body) VALUES (?, ?, ?, ?, ?)'),
      prune: this.#db.prepare('DELETE FROM events WHERE rv <= ?'),
      setRv: this.#db.prepare("INSERT INTO meta (key, value) VALUES ('rv', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
      oldest: this.#db.prepare('SELECT MIN(rv) AS rv FROM events'),
      since: this.#db.prepare('SELECT rv, kind, namespace, type, body FROM events WHERE rv > ? ORDER BY rv'),
    };
  }

  #check(): void {
    if (this.#closed) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'store is closed');
  }

  async get<K extends KindName>(kind: K, namespace: string, name: string): Promise<KindMap[K] | undefined> {
    this.#check();
    const row = this.#q.get.get(kind, namespace, name) as { body: string } | undefined;
    return row ? (JSON.parse(row.body) as KindMap[K]) : undefined;
  }

  async list<K extends KindName>(kind: K, opts: ListOptions = {}): Promise<ListResult<KindMap[K]>> {
    this.#check();
    let match: ((l: Record<string, string> | undefined) => boolean) | undefined;
    if (opts.labelSelector) {
      try {
        match = parseLabelSelector(opts.labelSelector);
      } catch (err) {
        if (err instanceof SelectorError) throw new FlintError('FLINT_ERR_VALIDATION', err.message, { field: 'labelSelector' });
        throw err;
      }
    }
    const rows = (opts.namespace === undefined ? this.#q.listAll.all(kind) : this.#q.listNs.all(kind, opts.namespace)) as Array<{
      body: string;
    }>;
    let items = rows.map((r) => JSON.parse(r.body) as KindMap[K]);
    if (match) items = items.filter((o) => match(o.metadata.labels));
    return { items, resourceVersion: String(this.#rv) };
  }

  /** Runs a write in one transaction; the event reaches watchers only after commit. */
  #write(type: WatchEventType, obj: AnyResource, persist: (rv: number) => void): void {
    this.#db.exec('BEGIN IMMEDIATE');
    const rv = this.#rv + 1;
    try {
      obj.metadata.resourceVersion = String(rv);
      persist(rv);
      const body = JSON.stringify(obj);
      this.#q.event.run(rv, obj.kind, obj.metadata.namespace, type, body);
      this.#q.setRv.run(String(rv));
      if (rv % 100 === 0) this.#q.prune.run(rv - this.#retention);
      this.#db.exec('COMMIT');
    } catch (err) {
      try {
        this.#db.exec('ROLLBACK');
      } catch {
        // SQLite may have rolled back already (some I/O errors do); the write's own error is the one to report.
      }
      if (isNoSpace(err)) throw storageFull(this.#dir, err);
      throw err;
    }
    this.#rv = rv;
    this.#hub.publish(rv, { type, object: structuredClone(obj) });
  }

  async create<T extends AnyResource>(input: T): Promise<T> {
    this.#check();
    const obj = JSON.parse(JSON.stringify(input)) as T;
    const { kind } = obj;
    const ns = obj.metadata.namespace ?? 'default';
    const name = obj.metadata.name;
    if (this.#q.get.get(kind, ns, name)) {
      throw new FlintError('FLINT_ERR_ALREADY_EXISTS', `${kind} '${name}' already exists in namespace '${ns}'`, {
        field: 'metadata.name',
      });
    }
    const meta: StoredMeta = {
      ...obj.metadata,
      name,
      namespace: ns,
      uid: randomUUID(),
      resourceVersion: '0',
      generation: 1,
      creationTimestamp: now(),
    };
    obj.metadata = meta;
    if (KINDS[kind].hasStatus && !('status' in obj)) (obj as any).status = {};
    this.#write('ADDED', obj, (rv) => this.#q.upsert.run(kind, ns, name, rv, JSON.stringify(obj)));
    return obj;
  }

  #existing(obj: AnyResource): AnyResource {
    const ns = obj.metadata.namespace ?? 'default';
    const row = this.#q.get.get(obj.kind, ns, obj.metadata.name) as { body: string } | undefined;
    if (!row) throw new FlintError('FLINT_ERR_NOT_FOUND', `${obj.kind} '${obj.metadata.name}' not found in namespace '${ns}'`);
    const current = JSON.parse(row.body) as AnyResource;
    const want = obj.metadata.resourceVersion;
    if (want !== undefined && want !== current.metadata.resourceVersion) {
      throw new FlintError(
        'FLINT_ERR_CONFLICT',
        `${obj.kind} '${obj.metadata.name}' was modified (resourceVersion ${current.metadata.resourceVersion}, you sent ${want}): get it again and retry`,
        { field: 'metadata.resourceVersion' },
      );
    }
    return current;
  }

  async update<T extends AnyResource>(input: T): Promise<T> {
    this.#check();
    const current = this.#existing(input);
    const obj = JSON.parse(JSON.stringify(input));
    const cur = current as any;
    const changed = !sameJson(obj.spec, cur.spec) || !sameJson(obj.data, cur.data);
    obj.metadata = {
      ...obj.metadata,
      namespace: current.metadata.namespace,
      uid: current.metadata.uid,
      creationTimestamp: current.metadata.creationTimestamp,
      generation: current.metadata.generation + (changed ? 1 : 0),
    };
    if (KINDS[current.kind].hasStatus && obj.status === undefined) obj.status = cur.status;
    this.#write('MODIFIED', obj, (rv) =>
      this.#q.upsert.run(obj.kind, obj.metadata.namespace, obj.metadata.name, rv, JSON.stringify(obj)),
    );
    return obj;
  }

  async updateStatus<T extends AnyResource>(input: T): Promise<T> {
    this.#check();
    const current = this.#existing(input) as any;
    const obj = { ...current, metadata: { ...current.metadata }, status: structuredClone((input as any).status) };
    this.#write('MODIFIED', obj, (rv) =>
      this.#q.upsert.run(obj.kind, obj.metadata.namespace, obj.metadata.name, rv, JSON.stringify(obj)),
    );
    return obj;
  }

  async delete<K extends KindName>(kind: K, namespace: string, name: string, opts: DeleteOptions = {}): Promise<KindMap[K]> {
    this.#check();
    const current = this.#existing({
      kind,
      metadata: { name, namespace, resourceVersion: opts.resourceVersion },
    } as AnyResource) as KindMap[K];
    this.#write('DELETED', current, () => this.#q.remove.run(kind, namespace, name));
    return current;
  }

  watch(opts: WatchOptions, onEvent: (ev: WatchEvent) => void): Watch {
    this.#check();
    let replay: Array<[number, WatchEvent]> = [];
    if (opts.sinceResourceVersion !== undefined) {
      const since = Number(opts.sinceResourceVersion);
      if (!Number.isInteger(since) || since < 0) {
        throw new FlintError('FLINT_ERR_VALIDATION', `bad resourceVersion '${opts.sinceResourceVersion}'`, { field: 'resourceVersion' });
      }
      const oldest = (this.#q.oldest.get() as { rv: number | null }).rv;
      if (since < this.#rv && oldest !== null && since < oldest - 1) {
        throw new FlintError('FLINT_ERR_GONE', `resourceVersion ${since} is too old (oldest kept is ${oldest}): list again and watch from its resourceVersion`);
      }
      const rows = this.#q.since.all(since) as Array<{ rv: number; type: WatchEventType; body: string }>;
      replay = rows.map((r) => [r.rv, { type: r.type, object: JSON.parse(r.body) }]);
    }
    return this.#hub.subscribe(opts, onEvent, replay);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#hub.closeAll();
    this.#db.close();
  }
}

export function openSqliteStore(file: string, opts?: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(file, opts);
}
