// One small HTTP request over a worker's Unix socket, for the control calls
// (health probe, specialize). The data path uses the router's pooled client.
import http from 'node:http';

export interface UnixReply {
  status: number;
  text: string;
}

export function unixRequest(
  socketPath: string,
  method: string,
  urlPath: string,
  opts: { body?: unknown; timeoutMs: number; signal?: AbortSignal },
): Promise<UnixReply> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const done = <T>(fn: (v: T) => void) => (v: T) => {
      clearTimeout(timer);
      fn(v);
    };
    resolve = done(resolve);
    reject = done(reject);
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const headers: http.OutgoingHttpHeaders = payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
    const req = http.request({ socketPath, method, path: urlPath, headers, agent: false, signal: opts.signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        // Control answers are small; anything huge is cut, not buffered.
        if (size < 64 * 1024) chunks.push(c);
        size += c.length;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    // A deadline for the whole exchange, not just socket inactivity.
    timer = setTimeout(() => req.destroy(new TimeoutError(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    req.on('error', reject);
    req.end(payload);
  });
}

export class TimeoutError extends Error {}
