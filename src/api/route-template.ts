// Route path templates: `/users/{id}` and `/files/{path:.+}`. `{name}` matches
// one segment; `{name:regex}` matches the regex, which may span segments. The
// parser lives in `api` because validation (refuse a bad template at create
// time) and the router (match it) must agree on the grammar.
import { FlintError } from './errors.ts';

export interface CompiledTemplate {
  /** The template as written. */
  source: string;
  /** Anchored at the start; at the end too for exact templates. */
  regex: RegExp;
  params: string[];
  /** Literal text before the first `{`: used to order and prefilter routes. */
  literalPrefix: string;
  hasParams: boolean;
  prefix: boolean;
}

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;

function escapeLiteral(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Splits a template into literal text and `{...}` groups, balancing braces inside regexes. */
function tokenize(template: string, field: string): Array<{ literal: string } | { name: string; pattern?: string }> {
  const out: Array<{ literal: string } | { name: string; pattern?: string }> = [];
  let i = 0;
  let lit = '';
  while (i < template.length) {
    const c = template[i];
    if (c === '}') throw new FlintError('FLINT_ERR_VALIDATION', `${field}: unbalanced '}' in route template '${template}'`, { field });
    if (c !== '{') {
      lit += c;
      i++;
      continue;
    }
    let depth = 1;
    let j = i + 1;
    while (j < template.length && depth > 0) {
      if (template[j] === '\\') j++;
      else if (template[j] === '{') depth++;
      else if (template[j] === '}') depth--;
      j++;
    }
    if (depth !== 0) throw new FlintError('FLINT_ERR_VALIDATION', `${field}: unbalanced '{' in route template '${template}'`, { field });
    if (lit) out.push({ literal: lit });
    lit = '';
    const inner = template.slice(i + 1, j - 1);
    const colon = inner.indexOf(':');
    const name = colon < 0 ? inner : inner.slice(0, colon);
    if (!PARAM_NAME.test(name)) {
      throw new FlintError('FLINT_ERR_VALIDATION', `${field}: bad parameter name '${name}' in route template '${template}'`, { field });
    }
    out.push(colon < 0 ? { name } : { name, pattern: inner.slice(colon + 1) });
    i = j;
  }
  if (lit) out.push({ literal: lit });
  return out;
}

export function compileTemplate(template: string, opts: { prefix: boolean; field?: string }): CompiledTemplate {
  const field = opts.field ?? 'template';
  const tokens = tokenize(template, field);
  const params: string[] = [];
  let src = '^';
  let literalPrefix = '';
  let seenParam = false;
  for (const t of tokens) {
    if ('literal' in t) {
      src += escapeLiteral(t.literal);
      if (!seenParam) literalPrefix += t.literal;
      continue;
    }
    seenParam = true;
    if (params.includes(t.name)) {
      throw new FlintError('FLINT_ERR_VALIDATION', `${field}: parameter '${t.name}' appears twice in '${template}'`, { field });
    }
    params.push(t.name);
    const pattern = t.pattern ?? '[^/]+';
    try {
      new RegExp(pattern);
    } catch (err) {
      throw new FlintError('FLINT_ERR_VALIDATION', `${field}: bad regular expression '${pattern}' for parameter '${t.name}': ${(err as Error).message}`, { field });
    }
    // A named group per parameter; the user's own groups stay usable inside it.
    src += `(?<p${params.length - 1}>${pattern})`;
  }
  if (!opts.prefix) src += '$';
  let regex: RegExp;
  try {
    regex = new RegExp(src);
  } catch (err) {
    throw new FlintError('FLINT_ERR_VALIDATION', `${field}: route template '${template}' does not compile: ${(err as Error).message}`, { field });
  }
  return { source: template, regex, params, literalPrefix, hasParams: params.length > 0, prefix: opts.prefix };
}

/** Matches a path; returns the parameters (and the matched length for prefixes) or undefined. */
export function matchTemplate(
  t: CompiledTemplate,
  path: string,
): { params: Record<string, string>; matchedLength: number } | undefined {
  if (!t.hasParams) {
    const hit = t.prefix ? path.startsWith(t.literalPrefix) : path === t.literalPrefix;
    return hit ? { params: {}, matchedLength: t.literalPrefix.length } : undefined;
  }
  const m = t.regex.exec(path);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  const groups = m.groups ?? {};
  for (let i = 0; i < t.params.length; i++) params[t.params[i]] = groups[`p${i}`] ?? '';
  return { params, matchedLength: m[0].length };
}
