// Every call the page makes goes through here: the control plane's own API,
// with the signed-in token on each request. The token is a short-lived
// control-plane token (never the admin token, the password or a router
// token), kept in sessionStorage so a reload keeps the session and closing
// the tab ends it.
const TOKEN_KEY = 'flint.dashboard.token';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  constructor(status: number, message: string, code?: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let token: string | undefined = sessionStorage.getItem(TOKEN_KEY) ?? undefined;
const signedOut = new Set<() => void>();

export const hasToken = () => token !== undefined;
export function setToken(t: string | undefined): void {
  token = t;
  if (t === undefined) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, t);
}
/** Runs when the API refuses the token (expired, or the server's key changed): the page shows the sign-in again. */
export function onSignedOut(fn: () => void): void {
  signedOut.add(fn);
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  return token === undefined ? extra : { ...extra, authorization: `Bearer ${token}` };
}

/** The API's error text: its JSON message (with the field), else the status line. */
async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text();
  try {
    const j = JSON.parse(text) as { message?: string; code?: string; field?: string };
    if (typeof j.message === 'string') return new ApiError(res.status, j.message, j.code);
  } catch {
    // not JSON
  }
  return new ApiError(res.status, `${res.status} ${res.statusText}${text ? `: ${text.slice(0, 500)}` : ''}`);
}

async function checked(res: Response): Promise<Response> {
  if (res.ok) return res;
  const err = await errorOf(res);
  if (res.status === 401 && token !== undefined) {
    setToken(undefined);
    for (const fn of signedOut) fn();
  }
  throw err;
}

export interface CallOptions {
  body?: unknown;
  /** Sent as is (an archive upload), not as JSON. */
  raw?: Blob;
  authorization?: string;
}

export async function call<T = any>(method: string, path: string, o: CallOptions = {}): Promise<{ data: T; headers: Headers }> {
  const h: Record<string, string> = o.authorization ? { authorization: o.authorization } : headers();
  let body: BodyInit | undefined;
  if (o.raw) {
    h['content-type'] = 'application/octet-stream';
    body = o.raw;
  } else if (o.body !== undefined) {
    h['content-type'] = 'application/json';
    body = JSON.stringify(o.body);
  }
  const res = await checked(await fetch(path, { method, headers: h, body }));
  const text = await res.text();
  return { data: (text ? JSON.parse(text) : undefined) as T, headers: res.headers };
}

export const get = <T = any>(path: string) => call<T>('GET', path).then((r) => r.data);

/**
 * A streaming GET (the watch, a log, metrics), read with fetch so the token
 * travels in a header, never in the URL. `onText` gets the decoded chunks;
 * resolves when the server ends the response, rejects on an error answer.
 */
export async function stream(path: string, accept: string, onText: (text: string) => void, signal: AbortSignal): Promise<void> {
  const res = await checked(await fetch(path, { headers: headers({ accept }), signal, cache: 'no-store' }));
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    onText(value);
  }
}

/** Server-sent events over stream(): calls `onEvent` with each event's name and parsed data. */
export function events(path: string, onEvent: (event: string, data: any) => void, signal: AbortSignal): Promise<void> {
  let buf = '';
  return stream(
    path,
    'text/event-stream',
    (text) => {
      buf += text;
      for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let event = 'message';
        let data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data += line.slice(6);
        }
        if (data !== '') onEvent(event, JSON.parse(data));
      }
    },
    signal,
  );
}

/** Basic credentials in UTF-8, as the server reads them (btoa alone takes Latin-1 only). */
export function basic(username: string, password: string): string {
  const bytes = new TextEncoder().encode(`${username}:${password}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return `Basic ${btoa(bin)}`;
}
