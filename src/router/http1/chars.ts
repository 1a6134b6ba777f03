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

/** Visible ASCII and obs-text: what a request target may hold. */
const TARGET_CHARS = new Uint8Array(256);
for (let c = 0x21; c <= 0x7e; c++) TARGET_CHARS[c] = 1;
for (let c = 0x80; c <= 0xff; c++) TARGET_CHARS[c] = 1;

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
