// Fans committed events out to watchers. Each watcher gets its own ordered
// queue, drained on a microtask, so a watcher never runs inside the writer's
// call stack and a slow or throwing watcher cannot reorder or block others.
import type { Watch, WatchEvent, WatchOptions } from './store.ts';

interface Subscriber {
  opts: WatchOptions;
  onEvent: (ev: WatchEvent) => void;
  queue: WatchEvent[];
  scheduled: boolean;
  closed: boolean;
  /** Events at or below this version were already replayed. */
  after: number;
}

export class WatchHub {
  readonly #subs = new Set<Subscriber>();

  /**
   * `after`: live events at or below this version are skipped (default: the last one replayed). A backend whose
   * events arrive from several ordered streams passes the watch's own starting version, so a late event of one
   * stream is not lost behind a newer one replayed from another.
   */
  subscribe(opts: WatchOptions, onEvent: (ev: WatchEvent) => void, replay: Array<[number, WatchEvent]>, after?: number): Watch {
    const sub: Subscriber = { opts, onEvent, queue: [], scheduled: false, closed: false, after: 0 };
    for (const [rv, ev] of replay) {
      if (this.#matches(sub, ev)) sub.queue.push(ev);
      sub.after = rv;
    }
    if (after !== undefined) sub.after = after;
    this.#subs.add(sub);
    this.#schedule(sub);
    return {
      close: () => {
        sub.closed = true;
        sub.queue.length = 0;
        this.#subs.delete(sub);
      },
    };
  }

  publish(rv: number, ev: WatchEvent): void {
    for (const sub of this.#subs) {
      if (rv <= sub.after || !this.#matches(sub, ev)) continue;
      sub.queue.push(ev);
      this.#schedule(sub);
    }
  }

  closeAll(): void {
    for (const sub of this.#subs) sub.closed = true;
    this.#subs.clear();
  }

  #matches(sub: Subscriber, ev: WatchEvent): boolean {
    const { kind, namespace } = sub.opts;
    return (kind === undefined || ev.object.kind === kind) && (namespace === undefined || ev.object.metadata.namespace === namespace);
  }

  #schedule(sub: Subscriber): void {
    if (sub.scheduled || sub.queue.length === 0) return;
    sub.scheduled = true;
    queueMicrotask(() => {
      sub.scheduled = false;
      while (!sub.closed && sub.queue.length > 0) {
        const ev = sub.queue.shift() as WatchEvent;
        try {
          sub.onEvent(ev);
        } catch (err) {
          // A watcher's bug must not break the store or other watchers.
          process.emitWarning(`store watcher threw: ${(err as Error).stack ?? err}`);
        }
      }
    });
  }
}
