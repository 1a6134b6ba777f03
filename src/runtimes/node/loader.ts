// Loads the user's handler once, at specialization. Accepts a file (also an
// extensionless one, as Fission's single-file functions are) or a directory,
// CommonJS or ESM, and the entrypoint forms "", "func" and "file.func".
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export type Handler = (context: unknown, callback?: (...args: any[]) => void) => unknown;

const requireFrom = createRequire(import.meta.url);

function looksLikeEsm(source: string): boolean {
  return /^\s*(import\s[^(]|export\s)/m.test(source);
}

async function loadModule(file: string): Promise<any> {
  const ext = path.extname(file);
  if (ext === '.mjs') return import(pathToFileURL(file).href);
  if (ext === '' || ext === '.js') {
    const source = fs.readFileSync(file, 'utf8');
    if (looksLikeEsm(source)) {
      // An extensionless ESM file cannot be imported as is: give it a
      // name Node loads as a module, in a private temporary directory.
      const copy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fn-')), `${path.basename(file, ext) || 'index'}.mjs`);
      fs.writeFileSync(copy, source);
      return import(pathToFileURL(copy).href);
    }
  }
  return requireFrom(file);
}

function resolveInDir(dir: string, name: string): string {
  for (const candidate of [name, `${name}.js`, `${name}.mjs`, `${name}.cjs`, path.join(name, 'index.js')]) {
    const p = path.join(dir, candidate);
    if (fs.existsSync(p) && fs.statSync(p).isFile()) return p;
  }
  throw new Error(`module '${name}' not found in ${dir}`);
}

function mainOfDir(dir: string): string {
  const pkgFile = path.join(dir, 'package.json');
  if (fs.existsSync(pkgFile)) {
    const main = JSON.parse(fs.readFileSync(pkgFile, 'utf8')).main;
    if (typeof main === 'string') return resolveInDir(dir, main.replace(/^\.\//, ''));
  }
  return resolveInDir(dir, 'index');
}

function pick(mod: any, exportName: string | undefined, where: string): Handler {
  let fn: unknown;
  if (!exportName) {
    fn = typeof mod === 'function' ? mod : (mod?.default ?? mod?.['module.exports']);
    if (fn && typeof fn === 'object' && typeof (fn as any).default === 'function') fn = (fn as any).default;
  } else {
    fn = mod?.[exportName] ?? mod?.default?.[exportName];
  }
  if (typeof fn !== 'function') {
    const what = exportName ? `export '${exportName}'` : 'a default export or module.exports function';
    throw new Error(`${where} has no ${what} that is a function`);
  }
  return fn as Handler;
}

export async function loadHandler(filepath: string, functionName?: string): Promise<Handler> {
  if (!fs.existsSync(filepath)) throw new Error(`code not found at ${filepath}`);
  const entry = (functionName ?? '').trim();
  if (fs.statSync(filepath).isDirectory()) {
    const dot = entry.lastIndexOf('.');
    if (dot > 0) {
      const file = resolveInDir(filepath, entry.slice(0, dot));
      return pick(await loadModule(file), entry.slice(dot + 1), file);
    }
    const main = mainOfDir(filepath);
    return pick(await loadModule(main), entry || undefined, main);
  }
  // A single file: "file.func" names the file itself, so only the export counts.
  const dot = entry.lastIndexOf('.');
  const exportName = dot >= 0 ? entry.slice(dot + 1) : entry;
  return pick(await loadModule(filepath), exportName || undefined, path.basename(filepath));
}
