// The message read-back endpoint (the product document's section 4.5), a
// Kafka-REST-proxy-like way to verify triggers: read a topic as a consumer
// group, and produce to it.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { FlintError, invalid } from '../api/errors.ts';
import { TopicParams, TopicReadQuery } from '../api/params.ts';
import { errorResponses } from './openapi.ts';

export interface TopicMessage {
  key: Buffer | null;
  value: Buffer;
  partition: number;
  offset: string;
}

/** A message read for a client: committed once the reply has gone out, given back otherwise. */
export interface TopicDelivery {
  readonly message: TopicMessage;
  commit(): void;
  giveBack(): void;
}

/** What the controller needs of a broker; the server supplies the Kafka one. */
export interface TopicAccess {
  /** `signal` aborts when the client leaves: the message, if one comes, stays for the next read. */
  read(topic: string, group: string, timeoutMs: number, signal?: AbortSignal): Promise<TopicDelivery | undefined>;
  produce(topic: string, msg: { key?: string | null; value: Buffer; headers?: Record<string, string> }): Promise<void>;
}

export const LONG_POLL_MS = 3000;
const Message = Type.Object({
  key: Type.Union([Type.String(), Type.Null()]),
  value: Type.String({ description: 'base64 of the message body' }),
  partition: Type.Integer(),
  offset: Type.Integer(),
});

export function registerTopicRoutes(app: FastifyInstance, access: TopicAccess | undefined): void {
  const need = (): TopicAccess => {
    if (!access) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'no Kafka broker is configured: start the server with --set kafka.enabled=true --set kafka.brokers=<host:port>');
    return access;
  };

  app.get<{ Params: { topic: string }; Querystring: { group?: string } }>(
    '/topics/:topic/messages',
    {
      schema: {
        tags: ['topics'],
        summary: "Read a topic's next message as a consumer group",
        description: 'Long-polls about 3 s; 408 {"error":"long polling timeout"} when nothing new arrived.',
        params: TopicParams,
        querystring: TopicReadQuery,
        response: { 200: Message, 408: Type.Object({ error: Type.String() }, { description: 'Nothing new arrived while polling' }), ...errorResponses(503) },
      },
    },
    async (req, reply) => {
      const { topic } = req.params;
      const group = req.query.group as string;
      // A client that leaves mid-poll must not take a message with it.
      const gone = new AbortController();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) gone.abort();
      });
      const got = await need().read(topic, group, LONG_POLL_MS, gone.signal);
      if (!got) return reply.code(408).send({ error: 'long polling timeout' });
      // Committed only once the reply is written: a client gone by then, or a
      // reply that failed, leaves the message for the group's next read.
      const raw = reply.raw;
      if (raw.destroyed) {
        got.giveBack();
        return reply;
      }
      // A HEAD (fastify answers it with this handler) gets no body: nothing was delivered.
      const delivered = req.method === 'GET';
      raw.once('finish', () => (delivered && raw.statusCode === 200 ? got.commit() : got.giveBack()));
      raw.once('close', () => {
        if (!raw.writableFinished) got.giveBack();
      });
      const msg = got.message;
      return { key: msg.key === null ? null : msg.key.toString('utf8'), value: msg.value.toString('base64'), partition: msg.partition, offset: Number(msg.offset) };
    },
  );

  // Produce takes two forms. Flint's: a JSON object {key?, value, encoding?,
  // headers?}. kafka-pixy's (the proxy the product document's verification
  // setup uses): the raw body is the message and ?key= its key, told apart
  // by a key or sync parameter, or by a body that is not JSON. Its bytes are
  // read here as they came, then said in Flint's form, so one check and one
  // produce serve both.
  app.register(async (sub) => {
    const pixy = new WeakSet<object>();
    const isPixy = (query: unknown) => {
      const q = query as Record<string, unknown> | undefined;
      return q !== undefined && (q.key !== undefined || q.sync !== undefined);
    };
    const asFlint = (req: { query: unknown }, raw: Buffer) => {
      const key = (req.query as { key?: unknown }).key;
      return { key: typeof key === 'string' ? key : null, value: raw.toString('base64'), encoding: 'base64' };
    };
    sub.removeContentTypeParser(['application/json', 'text/plain']);
    sub.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, raw, done) => {
      if (isPixy(req.query)) {
        pixy.add(req);
        done(null, asFlint(req, raw as Buffer));
        return;
      }
      try {
        done(null, JSON.parse((raw as Buffer).toString('utf8')));
      } catch {
        done(new FlintError('FLINT_ERR_BAD_JSON', 'the body is not valid JSON'), undefined);
      }
    });
    sub.addContentTypeParser('*', { parseAs: 'buffer' }, (req, raw, done) => {
      pixy.add(req);
      done(null, asFlint(req, raw as Buffer));
    });
    // No body at all: kafka-pixy's form sends an empty message.
    sub.addHook('preValidation', async (req) => {
      if (req.body === undefined && req.method === 'POST' && isPixy(req.query)) {
        pixy.add(req);
        req.body = asFlint(req, Buffer.alloc(0));
      }
    });

    sub.post<{ Params: { topic: string }; Querystring: { key?: string; sync?: string }; Body: unknown }>(
      '/topics/:topic/messages',
      {
        schema: {
          tags: ['topics'],
          summary: 'Produce a message to a topic',
          description:
            'Body {key?, value, headers?} as application/json: value is text, or base64 with "encoding": "base64"; answers 204. ' +
            "Or kafka-pixy's form: the raw body (any content type) is the message and ?key= its key (with a key or sync parameter a JSON body is a message too); " +
            'answers 200 {} once the broker has the message.',
          params: TopicParams,
          querystring: Type.Object({
            key: Type.Optional(Type.String({ description: "kafka-pixy's form: the message key (the body is the message)" })),
            sync: Type.Optional(Type.String({ description: "kafka-pixy's form; Flint always answers after the broker has the message" })),
          }),
          body: Type.Object({
            // One type list, not anyOf: the validator coerces types, and would turn a null key into '' or '' into null (each another key).
            key: Type.Optional(Type.Unsafe<string | null>({ type: ['string', 'null'] })),
            value: Type.String(),
            encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
            headers: Type.Optional(Type.Record(Type.String(), Type.String())),
          }),
          response: {
            200: Type.Object({}, { description: "Produced (kafka-pixy's form)" }),
            204: Type.Null({ description: 'Produced' }),
            ...errorResponses(503),
          },
        },
      },
      async (req, reply) => {
        const { topic } = req.params;
        const b = req.body as { key?: unknown; value?: unknown; encoding?: unknown; headers?: unknown };
        if (!b || typeof b !== 'object') throw invalid('body', 'must be a JSON object {key?, value, headers?}');
        if (typeof b.value !== 'string') throw invalid('value', 'required, a string');
        if (b.key !== undefined && b.key !== null && typeof b.key !== 'string') throw invalid('key', 'must be a string or null');
        if (b.encoding !== undefined && b.encoding !== 'utf8' && b.encoding !== 'base64') throw invalid('encoding', "must be 'utf8' or 'base64'");
        if (b.headers !== undefined && (typeof b.headers !== 'object' || b.headers === null || Object.values(b.headers).some((v) => typeof v !== 'string'))) {
          throw invalid('headers', 'must map names to strings');
        }
        const value = Buffer.from(b.value, b.encoding === 'base64' ? 'base64' : 'utf8');
        await need().produce(topic, { key: (b.key as string | null | undefined) ?? null, value, headers: b.headers as Record<string, string> | undefined });
        // kafka-pixy's asynchronous answer; its sync answer adds partition and offset, which the connectors do not report.
        if (pixy.has(req)) return reply.code(200).send({});
        return reply.code(204).send();
      },
    );
  });
}
