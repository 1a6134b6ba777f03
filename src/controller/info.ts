import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { MQ_TYPES } from '../api/names.ts';

export interface ServerInfo {
  version: string;
  mode: 'local' | 'kubernetes';
  routerUrl: string;
  ingressUrl?: string;
  authentication: { enabled: boolean; authUriPath: string };
  /** The message-queue types whose broker the install configures (kafka.enabled, nats.enabled...). */
  messageQueueTypes?: Array<(typeof MQ_TYPES)[number]>;
}

export const ServerInfoSchema = Type.Object({
  version: Type.String(),
  mode: Type.Union([Type.Literal('local'), Type.Literal('kubernetes')]),
  routerUrl: Type.String(),
  ingressUrl: Type.Optional(Type.String()),
  authentication: Type.Object({ enabled: Type.Boolean(), authUriPath: Type.String() }),
  /** The control plane's clock (RFC 3339), for `flint tt showschedule`. */
  serverTime: Type.Optional(Type.String()),
  messageQueueTypes: Type.Optional(
    Type.Array(Type.Union(MQ_TYPES.map((t) => Type.Literal(t))), {
      description:
        "The message-queue types whose broker the install configures (kafka.enabled, nats.enabled, rabbitmq.enabled, redis.enabled). A trigger of another type consumes only from a server its own metadata names; otherwise it waits (its status says so) and `flint mqt create` warns.",
    }),
  ),
});

export function registerInfoRoutes(app: FastifyInstance, info: () => ServerInfo): void {
  app.get(
    '/healthz',
    { schema: { tags: ['system'], summary: 'Liveness', response: { 200: Type.Object({ status: Type.Literal('ok') }) } } },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/v1/info',
    { schema: { tags: ['system'], summary: 'Where the router is and how it is set up', response: { 200: ServerInfoSchema } } },
    async () => ({ ...info(), serverTime: new Date().toISOString() }),
  );
}
