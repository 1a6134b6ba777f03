// The worker's HTTP server: control routes (health, specialize) and, once
// specialized, everything else to the handler, WebSocket upgrades included.
import http from 'node:http';
import { invoke } from './invoke.ts';
import type { RuntimeOptions } from './options.ts';
import { inRequest } from './request-log.ts';
import { sendFunctionError, sendJson } from './respond.ts';
import { Specializer } from './specialize.ts';
import { offersWebSocket, type WebSocketUpgrades, webSocketUpgrades } from './ws-upgrade.ts';

export const WARMUP_PATH = '/flint-warmup';
/** Carries the worker's own per-process token on its warm-up call (server.ts). */
export const WARMUP_HEADER = 'x-flint-warmup';
const warmHandler = async (context: { request: { query: unknown; body: unknown } }) => ({
  status: 200,
  headers: { 'x-warm': '1' },
  body: { query: context.request.query, body: context.request.body },
});

type ControlRoute = 'healthz' | 'v1' | 'v2' | undefined;

const webSockets = new WeakMap<http.Server, WebSocketUpgrades>();

/** Asks the server's open WebSockets to close (1001), so a stopping worker need not wait out their clients. */
export function closeWebSockets(server: http.Server): void {
  webSockets.get(server)?.closeAll();
}

function controlRoute(req: http.IncomingMessage): ControlRoute {
  const url = req.url;
  if (req.method === 'GET') return url === '/healthz' ? 'healthz' : undefined;
  if (req.method === 'POST') return url === '/v2/specialize' ? 'v2' : url === '/specialize' ? 'v1' : undefined;
  return undefined;
}

/**
 * `warmupToken`: the secret the worker's call to itself carries. Only that
 * call reaches the built-in warm handler, generic or not: the executor may
 * specialize the worker before the call arrives, and the function must not
 * get it; nor may anyone else use the route.
 */
export function createRuntimeServer(opts: Pick<RuntimeOptions, 'codepath' | 'maxBodyBytes' | 'debug'>, warmupToken?: string): http.Server {
  const specializer = new Specializer(opts.codepath);
  const { maxBodyBytes } = opts;

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    if (warmupToken !== undefined && req.url?.startsWith(WARMUP_PATH) && req.headers[WARMUP_HEADER] === warmupToken) {
      // The worker's own warm-up call runs the request path once while the
      // worker is generic, so the function's first call is not the first
      // time this code runs.
      invoke(warmHandler, req, res, maxBodyBytes).catch((err) => sendFunctionError(res, err));
      return;
    }
    const handler = specializer.handler;
    // Requests the router forwards always name their function, so a function
    // may serve /healthz or /specialize itself; only the executor's own calls
    // (which carry no such header) reach the control routes.
    const route = handler !== undefined && req.headers['x-flint-function-name'] !== undefined ? undefined : controlRoute(req);
    if (route === undefined) {
      if (handler === undefined) {
        req.resume();
        sendJson(res, 503, { error: 'Generic container: no requests supported until specialized' });
        return;
      }
      inRequest(req, () => invoke(handler, req, res, maxBodyBytes).catch((err) => sendFunctionError(res, err)));
      return;
    }
    if (route === 'healthz') {
      res.statusCode = 200;
      res.setHeader('content-type', 'text/plain; charset=utf-8');
      res.setHeader('content-length', 3);
      res.end('ok\n');
      return;
    }
    specializer.handle(req, res, route === 'v2' ? 2 : 1).catch((err) => sendFunctionError(res, err));
  };

  const listener = opts.debug
    ? (req: http.IncomingMessage, res: http.ServerResponse) => {
        const start = process.hrtime.bigint();
        res.once('close', () => {
          const ms = Number(process.hrtime.bigint() - start) / 1e6;
          process.stderr.write(`flint-runtime: ${req.method} ${req.url} -> ${res.statusCode}${res.writableFinished ? '' : ' (aborted)'} ${ms.toFixed(1)}ms\n`);
        });
        onRequest(req, res);
      }
    : onRequest;

  const server = http.createServer({ requestTimeout: 0, shouldUpgradeCallback: offersWebSocket }, listener);
  // Longer than any client pool's idle timeout, so the worker never closes a
  // connection the router is about to reuse. Function timeouts are the router's job.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  // Upgrades never reach the control routes: those are plain HTTP. A message
  // may be as large as a request body, one limit for what a client can make
  // the worker hold.
  const upgrades = webSocketUpgrades({ handler: () => specializer.handler, maxPayload: maxBodyBytes, debug: opts.debug });
  webSockets.set(server, upgrades);
  server.on('upgrade', (req, socket, head) => inRequest(req, () => upgrades.onUpgrade(req, socket, head)));
  return server;
}
