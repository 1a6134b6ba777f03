// W3C Trace Context (https://www.w3.org/TR/trace-context/): reading and
// writing `traceparent`, and new trace and span ids.
import { randomFillSync } from 'node:crypto';
import type { SpanContext } from './types.ts';

/** The version this writes; later versions are read as the spec says (their first four fields). */
const VERSION = '00';
const LENGTH = 55;

function isLowerHex(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

function allZero(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (s.charCodeAt(i) !== 48) return false;
  return true;
}

/**
 * The span context a `traceparent` value names, or undefined when it is
 * malformed: wrong lengths or separators, upper-case or non-hex digits, an
 * all-zero trace or parent id, version `ff`, or a version-00 value with
 * anything after the flags. A value of a later version may carry more after
 * a `-`, which is ignored.
 */
export function parseTraceparent(value: string | undefined): SpanContext | undefined {
  if (value === undefined) return undefined;
  const v = value.length > LENGTH || value.charCodeAt(0) === 32 || value.charCodeAt(value.length - 1) === 32 ? value.trim() : value;
  if (v.length < LENGTH) return undefined;
  if (v.charCodeAt(2) !== 45 || v.charCodeAt(35) !== 45 || v.charCodeAt(52) !== 45) return undefined;
  if (!isLowerHex(v, 0, 2) || (v.charCodeAt(0) === 102 && v.charCodeAt(1) === 102)) return undefined;
  if (v.length > LENGTH && (v.startsWith(VERSION) || v.charCodeAt(LENGTH) !== 45)) return undefined;
  if (!isLowerHex(v, 3, 35) || allZero(v, 3, 35)) return undefined;
  if (!isLowerHex(v, 36, 52) || allZero(v, 36, 52)) return undefined;
  if (!isLowerHex(v, 53, 55)) return undefined;
  const flags = Number.parseInt(v.slice(53, 55), 16);
  return { traceId: v.slice(3, 35), spanId: v.slice(36, 52), sampled: (flags & 1) === 1 };
}

/** The `traceparent` value naming a span as the parent. */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `${VERSION}-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
}

// Random bytes drawn in blocks: one getrandom call per few hundred ids.
const POOL = Buffer.allocUnsafe(4096);
let at = POOL.length;

function randomHex(bytes: number): string {
  for (;;) {
    if (at + bytes > POOL.length) {
      randomFillSync(POOL);
      at = 0;
    }
    const from = at;
    at += bytes;
    const hex = POOL.toString('hex', from, at);
    // An all-zero id is invalid; 2^-64 at worst, but then draw again.
    if (!allZero(hex, 0, hex.length)) return hex;
  }
}

export function newTraceId(): string {
  return randomHex(16);
}

export function newSpanId(): string {
  return randomHex(8);
}
