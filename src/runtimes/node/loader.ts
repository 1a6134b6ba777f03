// Loading the user's handler at specialization. The code is a file (a
// single-file function, often extensionless like /userfunc/deployarchive) or
// a directory (an unpacked package); CommonJS or ESM, loaded with require()
// or, for ESM with top-level await, import(); CommonJS arrives as the
// `default` export either way. Node 24 detects ESM syntax in extensionless
// and typeless .js files by itself, so no file is renamed or copied.
//
// The lookups are synchronous: a few stat calls on the worker's own code
// directory, while the request that specializes it waits. The promise API
// would send each through libuv's thread pool, and node:fs/promises (with the
// readline and fs-watch modules it loads) costs every worker about 2 ms of
// start-up CPU on a 2-core VM, measured, for these few calls.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { isModuleNamespaceObject } from 'node:util/types';
import { requireFromEntry } from './entry-require.ts';

export type Handler = (...args: any[]) => unknown;

/** The user's code could not be loaded: `status` is the specialize answer. */
export class LoadError extends Error {
  readonly status: number;
  constructor(status: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LoadError';
    this.status = status;
  }
}

const MODULE_EXTS = ['.js', '.mjs', '.cjs'];

function kind(p: string): 'file' | 'dir' | undefined {
  try {
    const st = fs.statSync(p, { throwIfNoEntry: false });
    return st?.isFile() ? 'file' : st?.isDirectory() ? 'dir' : undefined;
  } catch {
    return undefined;
  }
}

/** `base` as a module file: itself, with an extension added, or a directory's entry. */
function resolveModule(base: string, depth = 0): string | undefined {
  const k = kind(base);
  if (k === 'file') return base;
  for (const ext of MODULE_EXTS) {
    if (kind(base + ext) === 'file') return base + ext;
  }
  return k === 'dir' && depth < 4 ? entryOfDir(base, depth + 1) : undefined;
}

/** package.json `main`, else the only module file, else index.* or main.js. */
function entryOfDir(dir: string, depth = 0): string | undefined {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { main?: unknown };
    if (typeof pkg.main === 'string' && pkg.main !== '') {
      const main = path.resolve(dir, pkg.main);
      if (main !== dir) {
        const found = resolveModule(main, depth);
        if (found) return found;
      }
    }
  } catch {
    // no or unreadable package.json: fall through to the conventions
  }
  const modules = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile() && MODULE_EXTS.includes(path.extname(e.name)));
  if (modules.length === 1) return path.join(dir, modules[0].name);
  for (const name of ['index.js', 'index.mjs', 'index.cjs', 'main.js']) {
    if (kind(path.join(dir, name)) === 'file') return path.join(dir, name);
  }
  return undefined;
}

function inside(dir: string, file: string): boolean {
  const rel = path.relative(dir, file);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}



/**
 * require() first: the CommonJS loader is several times faster than import()
 * on a cold start, and Node 24 requires ES modules too. An ES module with
 * top-level await cannot be required (Node refuses it before running it), so
 * it goes through import(). Either way the result is shaped as import()
 * gives it: CommonJS exports as `default`. (One difference remains: an ES
 * module that exports the name "module.exports" is that export under require().)
 */
function loadModule(file: string): Record<string, unknown> | Promise<Record<string, unknown>> {
  let exported: unknown;
  try {
    exported = requireFromEntry(file);
  } catch (err) {
    const code = (err as { code?: unknown })?.code;
    if (code !== 'ERR_REQUIRE_ASYNC_MODULE' && code !== 'ERR_REQUIRE_ESM') throw err;
    // Only the entry's own top-level await is a reason to start again with
    // import(). A CommonJS entry that requires such a module has already run
    // up to that call, and import() would run it a second time, only to fail
    // the same way.
    const required = /\nRequired module: (.+)\n/.exec(String((err as Error).message))?.[1];
    if (required !== undefined && required !== file) throw err;
    return import(pathToFileURL(file).href) as Promise<Record<string, unknown>>;
  }
  return isModuleNamespaceObject(exported) ? (exported as Record<string, unknown>) : { default: exported };
}

async function importModule(file: string): Promise<Record<string, unknown>> {
  try {
    return await loadModule(file);
  } catch (err) {
    const e = err as Error;
    // CommonJS syntax errors carry "file:line" as the stack's first line; keep it.
    const first = typeof e?.stack === 'string' ? e.stack.slice(0, e.stack.indexOf('\n')) : '';
    const where = first.startsWith(`${file}:`) ? first : file;
    throw new LoadError(500, `cannot load ${where}: ${e?.name ?? 'Error'}: ${e?.message ?? String(err)}`, { cause: err });
  }
}

function own(obj: unknown, key: string): unknown {
  return (typeof obj === 'object' || typeof obj === 'function') && obj !== null && Object.hasOwn(obj, key)
    ? (obj as Record<string, unknown>)[key]
    : undefined;
}

/**
 * The export `name` of a module namespace, also found on a CommonJS
 * module.exports object (the `default`). No name: the default export, or a
 * transpiled module's `exports.default`.
 */
function pickExport(ns: Record<string, unknown>, name: string | undefined, file: string): Handler | undefined {
  let fn: unknown;
  if (name === undefined) {
    fn = ns.default;
    if (typeof fn !== 'function') fn = own(fn, 'default') ?? fn;
  } else {
    fn = own(ns, name) ?? own(ns.default, name);
  }
  if (fn === undefined) return undefined;
  if (typeof fn !== 'function') {
    throw new LoadError(500, `${name === undefined ? 'the default export' : `export '${name}'`} of ${file} is not a function (it is ${fn === null ? 'null' : typeof fn})`);
  }
  return fn as Handler;
}

async function exportOf(file: string, name: string | undefined): Promise<Handler> {
  const fn = pickExport(await importModule(file), name, file);
  if (fn) return fn;
  throw new LoadError(500, name === undefined ? `${file} has no default export (or module.exports)` : `${file} has no export '${name}'`);
}

/**
 * Resolves and loads the handler.
 * - file, no name: its default export / module.exports;
 * - file, "func": export func (for "file.func", export func too: the file is the module);
 * - directory, no name: the entry module's default export;
 * - directory, "file": module `file`'s default export, when such a module exists;
 * - directory, "file.func": module `file`, export func;
 * - directory, "func": export func of the entry module.
 */
export async function loadHandler(filepath: string, functionName: string | undefined): Promise<Handler> {
  const name = functionName?.trim() || undefined;
  const k = kind(filepath);
  if (k === undefined) {
    // v1 code paths may name the file without its extension.
    const withExt = resolveModule(filepath);
    if (withExt === undefined) throw new LoadError(404, `${filepath}: not found`);
    return loadFromFile(withExt, name);
  }
  if (k === 'file') return loadFromFile(filepath, name);
  return loadFromDir(filepath, name);
}

async function loadFromFile(file: string, name: string | undefined): Promise<Handler> {
  if (name === undefined) return exportOf(file, undefined);
  const ns = await importModule(file);
  const fn = pickExport(ns, name, file);
  if (fn) return fn;
  const dot = name.lastIndexOf('.');
  const tail = dot >= 0 ? pickExport(ns, name.slice(dot + 1), file) : undefined;
  if (tail) return tail;
  throw new LoadError(500, `${file} has no export '${dot >= 0 ? name.slice(dot + 1) : name}'`);
}

async function loadFromDir(dir: string, name: string | undefined): Promise<Handler> {
  if (name !== undefined) {
    const whole = path.resolve(dir, name);
    const asModule = inside(dir, whole) ? resolveModule(whole) : undefined;
    if (asModule) return exportOf(asModule, undefined);
    const dot = name.lastIndexOf('.');
    if (dot > 0) {
      const modulePath = path.resolve(dir, name.slice(0, dot));
      const module = inside(dir, modulePath) ? resolveModule(modulePath) : undefined;
      if (module) return exportOf(module, name.slice(dot + 1));
    }
  }
  const entry = entryOfDir(dir);
  if (entry === undefined) {
    throw new LoadError(
      500,
      `no entry module in ${dir}${name ? ` for '${name}'` : ''}: expected package.json "main", index.js, or a single .js/.mjs/.cjs file`,
    );
  }
  return exportOf(entry, name);
}
