// Helpers for the auth unit tests: a real loopback server and hand-built JWTs.
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface TestServer {
  url: string;
  close(): Promise<void>;
}

export async function listen(handler: http.RequestListener): Promise<TestServer> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export async function request(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** A JWT with any header and payload, HMAC-SHA256-signed with `key` (or unsigned when key is undefined). */
export function craftToken(header: object, payload: unknown, key: string | undefined): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const sig = key === undefined ? '' : createHmac('sha256', key).update(input).digest('base64url');
  return `${input}.${sig}`;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

export function tempDir(): { dir: string; cleanup(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-auth-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

