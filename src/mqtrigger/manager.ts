// The trigger manager: one consumer per MessageQueueTrigger. Each message is
// POSTed to the function through the router; a 2xx answer goes to respTopic,
// and after 1 + maxRetries failed attempts `Request returned failure: <status>`
// goes to errorTopic. The message is committed only after that, so nothing is
// lost when the manager or the broker restarts (at-least-once, in order
// within a partition). Each trigger's state (consuming, waiting for a broker
// or a secret, failed by its broker) is published as its status when it
// changes (status.ts).
import type { Logger } from 'pino';
import { Agent } from 'undici';
import { kafkaTriggerSettings } from '../api/kafka-trigger.ts';
import { natsConsumer } from '../api/nats-trigger.ts';
import { redisGroup } from '../api/queue-trigger.ts';
import type { MessageQueueTrigger } from '../api/kinds.ts';
import type { Store, Watch } from '../store/store.ts';
import type { Tracer } from '../tracing/types.ts';
import type { Connector, Handled, OutgoingMessage, QueueMessage, Subscription } from './connector.ts';
import { errorText } from './error-text.ts';
import { type TriggerState, TriggerStatusWriter } from './status.ts';
import type { ConnectorLease } from './trigger-connectors.ts';
import { passTraceparent, TriggerTrace } from './trigger-trace.ts';

export interface TriggerManagerOptions {
  store: Store;
  logger: Logger;
  /**
   * The connector a trigger consumes from and publishes its answers to, or
   * why there is none yet (its broker is not configured, its secret is
   * missing). Asked again each time the consumer (re)starts; released when it stops.
   */
  connector(trigger: MessageQueueTrigger): Promise<ConnectorLease | string>;
  routerUrl(): string;
  /** A bearer token for the router when authentication is on. */
  token?: () => string | undefined;
  /** First retry delay; doubles per attempt (capped at 10 s). */
  retryBaseMs?: number;
  /** Spans for each message handled (tracing.otlpEndpoint); without it, a message's traceparent is passed on as it came. */
  tracer?: Tracer;
  /** First wait before a consumer that failed or waits tries again; doubles per attempt (capped at 10 s). Default 500 ms. */
  reconnectBaseMs?: number;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host', 'upgrade', 'te', 'trailer']);

/** The trigger's consumer group: its metadata may name its own (Kafka's and Redis's `consumerGroup`, NATS's durable `consumer`). */
export function consumerGroup(t: MessageQueueTrigger): string {
  const type = t.spec.messageQueueType;
  const m = t.spec.metadata;
  const own = type === 'kafka' ? kafkaTriggerSettings(m).group : type === 'redis' ? redisGroup(m) : type === 'nats-jetstream' ? natsConsumer(m) : undefined;
  return own ?? `flint-mqt-${t.metadata.namespace}-${t.metadata.name}`;
}

interface Running {
  trigger: MessageQueueTrigger;
  specKey: string;
  sub?: Subscription;
  /** This subscription's answers, published one after another in message order. */
  outbox: Promise<void>;
  stopped: boolean;
  /** The last subscription started: a retry after it need not back off. */
  healthy: boolean;
  loop: Promise<void>;
  /** Ends the wait between two attempts at once: the trigger is being stopped. */
  wake: () => void;
}

/** Tells the trigger's state to `status` unless the trigger is being stopped (its successor, if any, says its own). */
function say(r: Running, status: TriggerStatusWriter, state: TriggerState): void {
  if (r.stopped) return;
  const { namespace, name, generation } = r.trigger.metadata;
  status.report(namespace, name, generation, state);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits `ms`, or less if `r` is halted meanwhile. */
function pause(r: Running, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    r.wake = () => {
      clearTimeout(t);
      resolve();
    };
  });
}

export class TriggerManager {
  readonly #o: TriggerManagerOptions;
  readonly #running = new Map<string, Running>();
  /** Keep-alive connections to the router, shared by every trigger. */
  readonly #http = new Agent({ keepAliveTimeout: 30_000, connections: 64 });
  #watch: Watch | undefined;
  #status: TriggerStatusWriter;

  constructor(opts: TriggerManagerOptions) {
    this.#o = opts;
    this.#status = this.#statusWriter();
  }

  #statusWriter(): TriggerStatusWriter {
    return new TriggerStatusWriter({
      store: this.#o.store,
      onError: (key, err) => this.#o.logger.warn({ trigger: key, err: errorText(err) }, "the trigger's status could not be written; trying again"),
    });
  }

  async start(): Promise<void> {
    // A manager started again after stop() writes statuses again.
    this.#status = this.#statusWriter();
    const { items, resourceVersion } = await this.#o.store.list('MessageQueueTrigger');
    for (const t of items) this.#upsert(t);
    this.#watch = this.#o.store.watch({ kind: 'MessageQueueTrigger', sinceResourceVersion: resourceVersion }, (ev) => {
      const t = ev.object as MessageQueueTrigger;
      if (ev.type === 'DELETED') void this.#remove(t);
      else this.#upsert(t);
    });
  }

  async stop(): Promise<void> {
    this.#watch?.close();
    await Promise.all([...this.#running.values()].map((r) => this.#halt(r)));
    this.#running.clear();
    await this.#status.stop();
    await this.#http.close().catch(() => {});
  }

  /** Trigger keys with a live consumer (tests, status). */
  active(): string[] {
    return [...this.#running.keys()];
  }

  /** Waits until the status writes under way are done (tests). */
  statusSettled(): Promise<void> {
    return this.#status.settled();
  }

  #upsert(t: MessageQueueTrigger): void {
    const key = `${t.metadata.namespace}/${t.metadata.name}`;
    const specKey = JSON.stringify(t.spec);
    const cur = this.#running.get(key);
    if (cur && cur.specKey === specKey) {
      cur.trigger = t;
      return;
    }
    const start = () => {
      const r: Running = { trigger: t, specKey, outbox: Promise.resolve(), stopped: false, healthy: false, loop: Promise.resolve(), wake: () => {} };
      r.loop = this.#run(r);
      this.#running.set(key, r);
    };
    if (cur) {
      // An update takes effect by restarting the consumer: it resumes at the
      // group's committed offset, so nothing is skipped or repeated.
      this.#running.delete(key);
      void this.#halt(cur).then(start);
    } else start();
  }

  async #remove(t: MessageQueueTrigger): Promise<void> {
    const key = `${t.metadata.namespace}/${t.metadata.name}`;
    const cur = this.#running.get(key);
    if (!cur) return;
    this.#running.delete(key);
    this.#status.forget(t.metadata.namespace, t.metadata.name);
    await this.#halt(cur);
    this.#o.logger.info({ trigger: key }, 'trigger deleted: consumer stopped');
  }

  async #halt(r: Running): Promise<void> {
    r.stopped = true;
    r.wake();
    // A subscription still being made is closed by #consume when it arrives.
    await r.sub?.close().catch(() => {});
    await r.loop.catch(() => {});
  }

  async #run(r: Running): Promise<void> {
    const log = this.#o.logger.child({ trigger: `${r.trigger.metadata.namespace}/${r.trigger.metadata.name}` });
    const base = this.#o.reconnectBaseMs ?? 500;
    let backoff = base;
    let waitingFor = '';
    while (!r.stopped) {
      const got = await this.#o.connector(r.trigger).catch((err: unknown) => new Error(`its connector could not be made: ${errorText(err)}`));
      if (r.stopped) {
        if (got instanceof Error || typeof got === 'string') return;
        await got.release();
        return;
      }
      if (got instanceof Error || typeof got === 'string') {
        const why = typeof got === 'string' ? got : got.message;
        // Said once per reason: a trigger may wait a long time for a broker or a secret.
        if (why !== waitingFor) log.warn({ type: r.trigger.spec.messageQueueType }, `the trigger waits: ${why}`);
        waitingFor = why;
        say(r, this.#status, typeof got === 'string' ? { state: 'waiting', message: got } : { state: 'error', message: got.message });
      } else {
        waitingFor = '';
        await this.#consume(r, got.connector, log).finally(async () => {
          // Answers still being published go out before their connector may close.
          await r.outbox.catch(() => {});
          await got.release();
        });
        backoff = r.healthy ? base : backoff;
      }
      if (r.stopped) return;
      await pause(r, backoff);
      backoff = Math.min(backoff * 2, 10_000);
    }
  }

  /** One subscription, until it stops; r.healthy says whether it got going. */
  async #consume(r: Running, connector: Connector, log: Logger): Promise<void> {
    r.healthy = false;
    const group = consumerGroup(r.trigger);
    // Whether the subscription is live: a client's word on its broker counts only then.
    let live = false;
    try {
      // Output topics exist before the first answer is published, so no
      // answer depends on a broker creating a topic on the fly.
      for (const t of [r.trigger.spec.respTopic, r.trigger.spec.errorTopic]) if (t) await connector.ensureTopic(t);
      // A new subscription's answers queue behind any the last one left in flight.
      r.outbox = r.outbox.catch(() => {});
      const from = r.trigger.spec.messageQueueType === 'kafka' ? kafkaTriggerSettings(r.trigger.spec.metadata).from : undefined;
      const onBrokerTrouble = (problem: string | undefined) => {
        if (!live) return;
        if (problem !== undefined) log.warn({ problem }, 'the consumer lost its broker; its client reconnects');
        else log.info('the consumer has its broker back');
        say(r, this.#status, problem === undefined ? { state: 'consuming' } : { state: 'error', message: problem });
      };
      const sub = await connector.subscribe({ group, topic: r.trigger.spec.topic, from, onMessage: (m) => this.#handle(r, connector, m, log), onBrokerTrouble });
      r.sub = sub;
      // Halted while subscribing: #halt had no subscription to close yet.
      if (r.stopped) {
        await sub.close();
        return;
      }
      log.info({ topic: r.trigger.spec.topic, group }, 'consuming');
      r.healthy = true;
      live = true;
      say(r, this.#status, { state: 'consuming' });
      await r.sub.done;
      live = false;
      if (!r.stopped) {
        log.warn('the broker ended the subscription; reconnecting');
        say(r, this.#status, { state: 'error', message: 'the broker ended the subscription' });
      }
    } catch (err) {
      live = false;
      if (!r.stopped) {
        const text = errorText(err);
        log.warn({ err: text }, 'consumer stopped; reconnecting');
        say(r, this.#status, { state: 'error', message: text });
      }
    }
  }

  /**
   * Publishes after every answer queued before it; once one fails, the later
   * ones fail without publishing, so an output topic never gets an answer
   * ahead of an earlier message's (the subscription stops and redelivers).
   */
  #publishInOrder(r: Running, connector: Connector, topic: string, msg: OutgoingMessage): Handled {
    const settled = r.outbox.then(() => connector.publish(topic, msg));
    // Observed by the connector; this keeps a connector that stopped early from leaving it unhandled.
    settled.catch(() => {});
    r.outbox = settled;
    return { settled };
  }

  /**
   * Calls the function (with retries) and resolves once it answered; the
   * answer's publication is the returned `settled`, so the connector can
   * hand over the next message while it is under way.
   */
  async #handle(r: Running, connector: Connector, m: QueueMessage, log: Logger): Promise<Handled | undefined> {
    const t = r.trigger;
    const spec = t.spec;
    const ns = t.metadata.namespace;
    const fnName = spec.functionref.name as string;
    const origin = this.#o.routerUrl();
    const fnPath = `/flint-function/${ns === 'default' ? '' : `${ns}/`}${fnName}`;
    const url = origin + fnPath;
    log.info({ value: m.value.toString(), partition: m.partition, offset: m.offset }, 'message received');
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(m.headers)) if (!HOP_BY_HOP.has(k.toLowerCase())) headers[k] = v;
    headers['content-type'] = spec.contentType ?? 'application/json';
    headers['x-flint-mqtrigger-topic'] = spec.topic;
    headers['x-flint-mqtrigger-resptopic'] = spec.respTopic ?? '';
    headers['x-flint-mqtrigger-errortopic'] = spec.errorTopic ?? '';
    const trace = this.#o.tracer === undefined ? undefined : new TriggerTrace(this.#o.tracer, t, m);
    const attempts = 1 + (spec.maxRetries ?? 0);
    let failure = '';
    for (let i = 0; i < attempts; i++) {
      const token = this.#o.token?.();
      if (token) headers.authorization = `Bearer ${token}`;
      if (r.stopped && i > 0) {
        trace?.end(undefined, 'the trigger stopped during retries');
        throw new Error('trigger stopped during retries');
      }
      log.info({ url, attempt: i + 1, of: attempts }, 'calling function');
      trace?.callStart(headers, url, i + 1);
      try {
        const res = await this.#http.request({ origin, path: fnPath, method: 'POST', headers, body: m.value });
        const body = Buffer.from(await res.body.arrayBuffer());
        trace?.callEnd(res.statusCode);
        log.info({ status: res.statusCode, body: body.toString().slice(0, 1000) }, 'function answered');
        if (res.statusCode >= 200 && res.statusCode < 300) {
          if (spec.respTopic) {
            const out: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) {
              if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
            }
            return this.#answer(r, connector, m, trace, spec.respTopic, { key: m.key, value: body, headers: out });
          }
          trace?.end(undefined);
          return undefined;
        }
        failure = `Request returned failure: ${res.statusCode}`;
      } catch (err) {
        failure = `Request returned failure: ${(err as Error).message}`;
        trace?.callEnd((err as Error).message);
        log.warn({ err: (err as Error).message }, 'calling the function failed');
      }
      if (i < attempts - 1) await sleep(Math.min((this.#o.retryBaseMs ?? 100) * 2 ** i, 10_000));
    }
    log.warn({ failure, errorTopic: spec.errorTopic }, 'giving up on the message');
    if (spec.errorTopic) return this.#answer(r, connector, m, trace, spec.errorTopic, { key: m.key, value: failure, headers: {} }, failure);
    trace?.end(undefined, failure);
    return undefined;
  }

  /**
   * Publishes a message's outcome to `topic` with trace context: the
   * message's own `traceparent` (tracing off), or a `send` span's.
   */
  #answer(r: Running, connector: Connector, m: QueueMessage, trace: TriggerTrace | undefined, topic: string, msg: OutgoingMessage & { headers: Record<string, string> }, failure?: string): Handled {
    if (trace === undefined) {
      passTraceparent(m, msg.headers);
      return this.#publishInOrder(r, connector, topic, msg);
    }
    const span = trace.send(topic, msg.headers);
    const handled = this.#publishInOrder(r, connector, topic, msg);
    trace.end({ span, settled: handled.settled }, failure);
    return handled;
  }
}

export function createTriggerManager(opts: TriggerManagerOptions): TriggerManager {
  return new TriggerManager(opts);
}
