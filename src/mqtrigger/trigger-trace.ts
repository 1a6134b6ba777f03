// Trace context through a message-queue trigger. A message's `traceparent`
// header (Kafka record headers, NATS and RabbitMQ message headers) reaches
// the function through the router call, and the answer published to
// respTopic (or the failure to errorTopic) carries one of the same trace.
// With tracing off the message's own value is passed on as it came; with it
// on, the trigger's spans sit between: `process <topic>` (a child of the
// message's context, or a new trace), one `POST` per call of the function,
// and `send <topic>` for the answer, whose context the answer carries.
import type { MessageQueueTrigger } from '../api/kinds.ts';
import { SPAN_KIND, type Span, type Tracer } from '../tracing/types.ts';
import type { QueueMessage } from './connector.ts';

const TRACEPARENT = 'traceparent';

/** The message's `traceparent` header, whatever its case. */
export function traceparentOf(headers: Record<string, string>): string | undefined {
  const exact = headers[TRACEPARENT];
  if (exact !== undefined) return exact;
  for (const k of Object.keys(headers)) if (k.length === TRACEPARENT.length && k.toLowerCase() === TRACEPARENT) return headers[k];
  return undefined;
}

/** Sets `traceparent` in headers, replacing one of any case. */
function setTraceparent(headers: Record<string, string>, value: string): void {
  for (const k of Object.keys(headers)) if (k.length === TRACEPARENT.length && k !== TRACEPARENT && k.toLowerCase() === TRACEPARENT) delete headers[k];
  headers[TRACEPARENT] = value;
}

const SYSTEM: Record<MessageQueueTrigger['spec']['messageQueueType'], string> = {
  kafka: 'kafka',
  'nats-jetstream': 'nats',
  rabbitmq: 'rabbitmq',
  redis: 'redis',
};

/** Tracing off: an outgoing message carries the incoming one's `traceparent`, as it came. */
export function passTraceparent(from: QueueMessage, to: Record<string, string>): void {
  const tp = traceparentOf(from.headers);
  if (tp !== undefined) setTraceparent(to, tp);
}

/** One message's spans (tracing on). */
export class TriggerTrace {
  readonly #tracer: Tracer;
  readonly #process: Span;
  #call: Span | undefined = undefined;

  constructor(tracer: Tracer, t: MessageQueueTrigger, m: QueueMessage) {
    this.#tracer = tracer;
    const spec = t.spec;
    const span = tracer.startSpan(`process ${spec.topic}`, SPAN_KIND.consumer, tracer.extract(traceparentOf(m.headers)));
    if (span.recording) {
      span
        .set('messaging.system', SYSTEM[spec.messageQueueType])
        .set('messaging.operation.name', 'process')
        .set('messaging.destination.name', spec.topic)
        .set('messaging.destination.partition.id', String(m.partition))
        .set('flint.trigger', `${t.metadata.namespace}/${t.metadata.name}`)
        .set('flint.function.name', spec.functionref.name ?? '');
      if (spec.messageQueueType === 'kafka') span.set('messaging.kafka.offset', Number(m.offset));
    }
    this.#process = span;
  }

  /** One call of the function: `headers` (the router call's) get this call's `traceparent`. */
  callStart(headers: Record<string, string>, url: string, attempt: number): void {
    this.#call?.end();
    const call = this.#tracer.startSpan('POST', SPAN_KIND.client, this.#process.context);
    if (call.recording) call.set('http.request.method', 'POST').set('url.full', url).set('flint.attempt', attempt);
    this.#call = call;
    setTraceparent(headers, call.traceparent());
  }

  /** The call's answer (its status), or why there was none. */
  callEnd(status: number | string): void {
    const call = this.#call;
    if (call === undefined) return;
    this.#call = undefined;
    if (typeof status === 'number') {
      call.set('http.response.status_code', status);
      if (status < 200 || status >= 300) call.fail(`status ${status}`);
    } else call.fail(status);
    call.end();
  }

  /** A message about to be published to `topic`: its headers get the context of a `send` span, returned to be ended once published. */
  send(topic: string, headers: Record<string, string>): Span {
    const send = this.#tracer.startSpan(`send ${topic}`, SPAN_KIND.producer, this.#process.context);
    if (send.recording) send.set('messaging.operation.name', 'send').set('messaging.destination.name', topic);
    setTraceparent(headers, send.traceparent());
    return send;
  }

  /** The message is done: once `published` settles when there is one; `failure` when the function never answered 2xx. */
  end(published: { span: Span; settled: Promise<void> } | undefined, failure?: string): void {
    const p = this.#process;
    if (failure !== undefined) p.fail(failure);
    if (published === undefined) {
      p.end();
      return;
    }
    published.settled.then(
      () => {
        published.span.end();
        p.end();
      },
      (err: Error) => {
        published.span.fail(`publishing failed: ${err?.message ?? String(err)}`).end();
        p.fail('the answer was not published').end();
      },
    );
  }
}
