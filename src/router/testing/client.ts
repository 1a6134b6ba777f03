// Test-side HTTP: node:http so any header (Host included) can be sent, no
// connection reuse so nothing outlives a test.
import http from 'node:http';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text(): string;
  json(): any;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export function call(base: string, path: string, opts: CallOptions = {}): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text: () => body.toString(),
            json: () => JSON.parse(body.toString()),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Polls until `check` returns a truthy value; fails with the last value after `ms`. */
export async function waitFor<T>(check: () => Promise<T> | T, what: string, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
