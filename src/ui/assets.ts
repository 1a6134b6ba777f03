// The dashboard's static files (src/ui/static, built by `npm run build:ui`
// and committed), read once at start-up into memory with a gzip copy each.
// A request is answered by looking its path up in this table: no request
// path is ever joined to a directory, so no `..`, encoding or link can
// reach another file.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';

export const STATIC_DIR = path.join(import.meta.dirname, 'static');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
};

export interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

/** File name (e.g. `app.js`) -> asset; only the regular files directly in `dir` whose type is known. */
export function loadAssets(dir: string = STATIC_DIR): Map<string, Asset> {
  const out = new Map<string, Asset>();
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names) {
    const type = TYPES[path.extname(name)];
    if (type === undefined) continue;
    const file = path.join(dir, name);
    if (!fs.lstatSync(file).isFile()) continue;
    const body = fs.readFileSync(file);
    out.set(name, { type, body, gzip: gzipSync(body, { level: 9 }), etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });
  }
  return out;
}
