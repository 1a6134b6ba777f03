// Entry point of the Node.js runtime: `node server.ts [--socket <path> | --port <n>]`.
// Serves on a Unix socket (FLINT_SOCKET or --socket: local mode, where the
// executor starts it in a sandbox) or on a TCP port (--port, default 8888:
// kubernetes mode, as Fission's environment containers do).
import fs from 'node:fs';
import http from 'node:http';
import { closeWebSockets, createRuntimeServer, WARMUP_HEADER, WARMUP_PATH } from './app.ts';
import { parseOptions } from './options.ts';
import { tagRequestOutput } from './request-log.ts';
import { warmUp } from './warmup.ts';

const opts = parseOptions(process.argv.slice(2), process.env);
tagRequestOutput(process.stdout);
tagRequestOutput(process.stderr);
// Only a worker that warms up calls itself, so only it needs the token. node:crypto is loaded for it alone: its
// first load is about a tenth of the runtime's start-up CPU, which a worker a request waits for should not pay.
const warmupToken = opts.warmUp ? process.getBuiltinModule('node:crypto').randomUUID() : undefined;
const server = createRuntimeServer(opts, warmupToken);

let stopping = false;
function shutdown(code: number): void {
  if (stopping) return;
  stopping = true;
  // In-flight requests finish; idle keep-alive connections close now, and
  // open WebSockets are told the worker is going away.
  server.close(() => process.exit(code));
  server.closeIdleConnections();
  closeWebSockets(server);
  setTimeout(() => process.exit(code), Number(process.env.FLINT_SHUTDOWN_GRACE_MS) || 5000).unref();
}

// A promise the function forgot to await must not take down the requests in
// flight on this worker; the error still lands in the function's log.
process.on('unhandledRejection', (reason) => {
  process.stderr.write(`unhandled rejection in function: ${(reason as Error)?.stack ?? String(reason)}\n`);
});
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));
if (opts.exitOnStdinEof) {
  process.stdin.on('end', () => shutdown(0));
  process.stdin.on('error', () => shutdown(0));
  process.stdin.resume();
}

server.on('error', (err) => {
  process.stderr.write(`flint-runtime: cannot listen: ${err.message}\n`);
  process.exit(1);
});

/**
 * The router opens a connection per request in flight, so a new instance gets as many at once as requests waited
 * for it, and Node accepts one per pass of its loop. A Unix socket refuses a connect outright once this queue is full
 * (the kernel caps it at net.core.somaxconn); Node's default is 511.
 */
const BACKLOG = 4096;

/** One request to ourselves through the whole request path; errors are ignored. */
function selfWarm(token: string): void {
  const body = JSON.stringify({ warm: true });
  // A wildcard listener answers on the IPv4 loopback (a `::` one too); a specific address only on itself.
  const host = opts.host === '0.0.0.0' || opts.host === '::' || opts.host === '' ? '127.0.0.1' : opts.host;
  const target = opts.socket ? { socketPath: opts.socket } : { host, port: opts.port };
  const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), [WARMUP_HEADER]: token };
  const req = http.request({ ...target, method: 'POST', path: `${WARMUP_PATH}?a=1`, agent: false, headers }, (res) => res.resume());
  req.on('error', () => {});
  req.end(body);
}

// Not a top-level await: the bundle (server.bundle.cjs) is CommonJS.
void (warmupToken !== undefined ? warmUp() : Promise.resolve()).then(() => {
  const listening = warmupToken !== undefined ? () => selfWarm(warmupToken) : undefined;
  if (opts.socket) {
    // A socket file left by an earlier worker would make listen fail with EADDRINUSE.
    fs.rmSync(opts.socket, { force: true });
    server.listen({ path: opts.socket, backlog: BACKLOG }, listening);
  } else {
    server.listen({ port: opts.port, host: opts.host, backlog: BACKLOG }, listening);
  }
});
