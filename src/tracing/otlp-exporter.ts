// Ended spans to an OTLP receiver over HTTP, as OTLP/JSON
// (https://opentelemetry.io/docs/specs/otlp/#otlphttp): batched, from a
// bounded queue, one export in flight at a time. Nothing here ever makes a
// request wait: a span that finds the queue full is dropped and counted, and
// so are the spans of an export that fails.
import { Agent, request } from 'undici';
import type { FinishedSpan, SpanSink } from './tracer.ts';
import type { AttributeValue } from './types.ts';

export interface ExporterOptions {
  /** The full URL spans are POSTed to (`<otlpEndpoint>/v1/traces`). */
  url: string;
  /** Resource attributes: service.name and the like. */
  resource: Record<string, AttributeValue>;
  /** The instrumentation scope's name and version. */
  scope: { name: string; version: string };
  /** Spans held at most; more are dropped. Default 4096. */
  maxQueue?: number;
  /** Spans per export at most. Default 512. */
  maxBatch?: number;
  /** How often the queue is sent when it holds less than a batch. Default 1000 ms. */
  intervalMs?: number;
  /** How long one export may take. Default 10 s. */
  timeoutMs?: number;
  /** A failed export, said by the caller however it logs (called at most once a minute). */
  onError?: (message: string) => void;
}

type OtlpValue = { stringValue: string } | { boolValue: boolean } | { intValue: string } | { doubleValue: number };

function otlpValue(v: AttributeValue): OtlpValue {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  return Number.isSafeInteger(v) ? { intValue: String(v) } : { doubleValue: v };
}

function otlpAttributes(flat: readonly (string | AttributeValue)[]): { key: string; value: OtlpValue }[] {
  const out: { key: string; value: OtlpValue }[] = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ key: flat[i] as string, value: otlpValue(flat[i + 1]) });
  return out;
}

/** A performance.now() time as OTLP's decimal string of Unix nanoseconds. */
export function unixNanos(ms: number): string {
  const abs = performance.timeOrigin + ms;
  const whole = Math.floor(abs);
  return (BigInt(whole) * 1_000_000n + BigInt(Math.round((abs - whole) * 1e6))).toString();
}

/** An ExportTraceServiceRequest in OTLP/JSON: hex ids, enums as integers, 64-bit integers as strings. */
export function encodeSpans(spans: readonly FinishedSpan[], resource: Record<string, AttributeValue>, scope: { name: string; version: string }): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: otlpAttributes(Object.entries(resource).flat()) },
        scopeSpans: [
          {
            scope,
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId === '' ? {} : { parentSpanId: s.parentSpanId }),
              name: s.name,
              kind: s.kind,
              startTimeUnixNano: unixNanos(s.startMs),
              endTimeUnixNano: unixNanos(s.endMs),
              attributes: otlpAttributes(s.attributes),
              status: s.statusCode === 0 ? {} : { code: s.statusCode, message: s.statusMessage },
            })),
          },
        ],
      },
    ],
  });
}

export class OtlpHttpExporter implements SpanSink {
  readonly #o: ExporterOptions;
  readonly #url: URL;
  readonly #maxQueue: number;
  readonly #maxBatch: number;
  readonly #timeoutMs: number;
  readonly #agent = new Agent({ keepAliveTimeout: 30_000, connections: 2 });
  readonly #timer: NodeJS.Timeout;
  #queue: FinishedSpan[] = [];
  #inFlight: Promise<void> | undefined = undefined;
  #soon = false;
  #lastError = 0;
  #closed = false;
  /** Spans the receiver accepted. */
  exported = 0;
  /** Spans dropped: the queue was full, or an export failed or was refused. */
  dropped = 0;

  constructor(opts: ExporterOptions) {
    this.#o = opts;
    this.#url = new URL(opts.url);
    this.#maxQueue = opts.maxQueue ?? 4096;
    this.#maxBatch = opts.maxBatch ?? 512;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#timer = setInterval(() => this.#flush(), opts.intervalMs ?? 1000);
    this.#timer.unref();
  }

  /** Spans waiting to be sent. */
  get queued(): number {
    return this.#queue.length;
  }

  add(span: FinishedSpan): void {
    if (this.#queue.length >= this.#maxQueue || this.#closed) {
      this.#drop(1);
      return;
    }
    this.#queue.push(span);
    // A full batch goes out without waiting for the timer, but after the work at hand.
    if (this.#queue.length >= this.#maxBatch && !this.#soon && this.#inFlight === undefined) {
      this.#soon = true;
      setImmediate(() => {
        this.#soon = false;
        this.#flush();
      });
    }
  }

  #drop(n: number): void {
    this.dropped += n;
  }

  #error(message: string): void {
    const now = Date.now();
    if (now - this.#lastError < 60_000) return;
    this.#lastError = now;
    this.#o.onError?.(message);
  }

  /** Starts an export of the next batch unless one is under way; resolves when that export ends. */
  #flush(): Promise<void> {
    if (this.#inFlight !== undefined) return this.#inFlight;
    if (this.#queue.length === 0) return Promise.resolve();
    const batch = this.#queue.length <= this.#maxBatch ? this.#queue : this.#queue.slice(0, this.#maxBatch);
    this.#queue = this.#queue.length <= this.#maxBatch ? [] : this.#queue.slice(this.#maxBatch);
    const p = this.#send(batch).finally(() => {
      this.#inFlight = undefined;
      if (this.#queue.length >= this.#maxBatch) this.#flush();
    });
    this.#inFlight = p;
    return p;
  }

  async #send(batch: FinishedSpan[]): Promise<void> {
    try {
      const body = encodeSpans(batch, this.#o.resource, this.#o.scope);
      const res = await request(this.#url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        dispatcher: this.#agent,
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
      const text = await res.body.text();
      if (res.statusCode < 200 || res.statusCode >= 300) {
        this.#drop(batch.length);
        this.#error(`the OTLP receiver at ${this.#url} answered ${res.statusCode}: ${text.slice(0, 200)}; ${batch.length} spans dropped`);
        return;
      }
      // A partial success names the spans it refused.
      let rejected = 0;
      if (text.includes('rejectedSpans')) {
        try {
          rejected = Number((JSON.parse(text) as { partialSuccess?: { rejectedSpans?: string | number } }).partialSuccess?.rejectedSpans ?? 0) || 0;
        } catch {}
      }
      if (rejected > 0) this.#drop(rejected);
      this.exported += batch.length - rejected;
    } catch (err) {
      this.#drop(batch.length);
      this.#error(`exporting spans to ${this.#url} failed: ${(err as Error).message}; ${batch.length} spans dropped`);
    }
  }

  /** Sends what is queued (for up to `timeoutMs`), then stops; spans added later are dropped. */
  async shutdown(timeoutMs = 5000): Promise<void> {
    clearInterval(this.#timer);
    const deadline = Date.now() + timeoutMs;
    while ((this.#queue.length > 0 || this.#inFlight !== undefined) && Date.now() < deadline) {
      const left = deadline - Date.now();
      await Promise.race([this.#flush(), new Promise((r) => setTimeout(r, left).unref())]);
    }
    if (this.#queue.length > 0) this.#drop(this.#queue.length);
    this.#queue = [];
    this.#closed = true;
    await this.#agent.close().catch(() => {});
  }
}
