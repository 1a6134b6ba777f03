import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';

export interface ServerInfo {
  version: string;
  mode: 'local' | 'kubernetes';
  routerUrl: string;
  ingressUrl?: string;
  authentication: { enabled: boolean; authUriPath: string };
}

export const ServerInfoSchema = Type.Object({
  version: Type.String(),
  mode: Type.Union([Type.Literal('local'), Type.Literal('kubernetes')]),
  routerUrl: Type.String(),
  ingressUrl: Type.Optional(Type.String()),
  authentication: Type.Object({ enabled: Type.Boolean(), authUriPath: Type.String() }),
  /** The control plane's clock (RFC 3339), for `flint tt showschedule`. */
  serverTime: Type.Optional(Type.String()),
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
