// Character classes of HTTP/1.1 (RFC 9110 5.1, 5.5), as lookup tables: they
// run on every header name and value the router reads or writes.

const TOKEN_CHARS = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TOKEN_CHARS[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TOKEN_CHARS[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TOKEN_CHARS[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TOKEN_CHARS[c] = 1;

/** Tab, space, visible ASCII and obs-text (bytes above 0x7f, as latin1). */
const VALUE_CHARS = new Uint8Array(256);
VALUE_CHARS[0x09] = 1;
for (let c = 0x20; c <= 0x7e; c++) VALUE_CHARS[c] = 1;
for (let c = 0x80; c <= 0xff; c++) VALUE_CHARS[c] = 1;

/**
 * Visible ASCII: what a request target may hold. A target is URI syntax (RFC
 * 9112 3.2), where any other byte is percent-encoded; a proxy in front that
 * cleans one up differently could route it elsewhere.
 */
const TARGET_CHARS = new Uint8Array(256);
for (let c = 0x21; c <= 0x7e; c++) TARGET_CHARS[c] = 1;

/** Letters, digits, `+`, `-` and `.`: what follows a URI scheme's first letter (RFC 3986 3.1). */
const SCHEME_CHARS = new Uint8Array(256);
for (const c of '+-.') SCHEME_CHARS[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) SCHEME_CHARS[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) SCHEME_CHARS[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) SCHEME_CHARS[c] = 1;

/** `s` is a non-empty token. Characters above U+00FF fail: heads are latin1. */
export function isToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || TOKEN_CHARS[c] === 0) return false;
  }
  return true;
}

export function isFieldValue(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || VALUE_CHARS[c] === 0) return false;
  }
  return true;
}

/** `s[from, to)` is a valid request target (no space, no control character). */
export function isTarget(s: string, from = 0, to = s.length): boolean {
  if (to <= from) return false;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || TARGET_CHARS[c] === 0) return false;
  }
  return true;
}

/** What an authority may hold (RFC 3986 3.2): unreserved, %, sub-delims, `:`, `@`, `[` and `]`. */
const AUTHORITY_CHARS = new Uint8Array(256);
for (let c = 0x21; c <= 0x7e; c++) AUTHORITY_CHARS[c] = 1;
for (const c of '"#/<>?\\^`{|}') AUTHORITY_CHARS[c.charCodeAt(0)] = 0;

/**
 * `s[from, to)` is `scheme://authority` and maybe more, as an absolute-form
 * target is (RFC 9112 3.2.2). Its authority stands in for Host when the
 * router matches routes, so it must be one.
 */
export function isAbsoluteTarget(s: string, from: number, to: number): boolean {
  const first = s.charCodeAt(from) | 0x20;
  if (first < 0x61 || first > 0x7a) return false;
  for (let i = from + 1; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x3a) {
      if (!s.startsWith('//', i + 1)) return false;
      for (let j = i + 3; j < to; j++) {
        const a = s.charCodeAt(j);
        if (a === 0x2f || a === 0x3f) return true;
        if (a > 0xff || AUTHORITY_CHARS[a] === 0) return false;
      }
      return true;
    }
    if (c > 0xff || SCHEME_CHARS[c] === 0) return false;
  }
  return false;
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/**
 * `s` without the spaces and tabs around it (OWS, RFC 9110 5.6.3).
 * String.prototype.trim() takes more (a no-break space among them), which
 * would read `\xa0chunked` as `chunked` where other parsers do not.
 */
export function trimOws(s: string): string {
  let from = 0;
  let to = s.length;
  while (from < to && isOws(s.charCodeAt(from))) from++;
  while (to > from && isOws(s.charCodeAt(to - 1))) to--;
  return from === 0 && to === s.length ? s : s.slice(from, to);
}

/** Whether a comma-separated list (lower-cased) has `token` as one of its members (RFC 9110 5.6.1). */
export function listHas(list: string, token: string): boolean {
  for (const item of list.split(',')) if (trimOws(item) === token) return true;
  return false;
}
