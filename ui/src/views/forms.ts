// Creating things: a function from pasted code or an uploaded file (with
// its package, as `flint fn create --code` makes them), a new version of a
// function's code, and a route. The API checks every field as it does the
// CLI's requests, and its error text is shown as it comes.
import { useState } from 'preact/hooks';
import { call, get } from '../api.ts';
import { html } from '../html.ts';
import type { Live, Resource } from '../live.ts';
import { ErrorLine, useLive } from './common.ts';

/** Archives up to this size travel inside the package; larger ones are uploaded first (the CLI's rule). */
const MAX_LITERAL_BYTES = 256 * 1024;

function base64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

async function codeBytes(form: HTMLFormElement): Promise<Uint8Array> {
  const file = (form.elements.namedItem('file') as HTMLInputElement | null)?.files?.[0];
  if (file) return new Uint8Array(await file.arrayBuffer());
  return new TextEncoder().encode((form.elements.namedItem('code') as HTMLTextAreaElement).value);
}

/** The package's deployment archive: inline when small, else uploaded to the archive store. */
async function archiveOf(bytes: Uint8Array): Promise<Record<string, unknown>> {
  if (bytes.length === 0) throw new Error('give the code: paste it, or choose a file');
  if (bytes.length <= MAX_LITERAL_BYTES) return { type: 'literal', literal: base64(bytes) };
  const up = await call<{ url: string; checksum: unknown }>('POST', '/v1/archives', { raw: new Blob([bytes as BlobPart]) });
  return { type: 'url', url: up.data.url, checksum: up.data.checksum };
}

function randomSuffix(): string {
  const b = crypto.getRandomValues(new Uint8Array(6));
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
}

const value = (form: HTMLFormElement, name: string) => ((form.elements.namedItem(name) as HTMLInputElement | null)?.value ?? '').trim();
const ns = (n: string) => `/v1/namespaces/${encodeURIComponent(n || 'default')}`;

/**
 * A form's submit: runs `action` on the form, then shows what it returns
 * (a line saying what was done) or the API's error text.
 */
function useFormAction(action: (form: HTMLFormElement) => Promise<string>) {
  const [error, setError] = useState<string>();
  const [done, setDone] = useState<string>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    setError(undefined);
    setDone(undefined);
    try {
      setDone(await action(form));
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const outcome = html`<${ErrorLine} error=${error} />${done ? html`<p class="ok">${done}</p>` : null}`;
  return { submit, outcome };
}

export function NewFunctionForm({ live }: { live: Live }) {
  useLive(live);
  const { submit, outcome } = useFormAction(async (form) => {
    const name = value(form, 'name');
    const namespace = value(form, 'namespace') || 'default';
    const env = value(form, 'env');
    const entrypoint = value(form, 'entrypoint');
    const pkgName = `${name}-${randomSuffix()}`.slice(0, 62).replace(/-+$/, '');
    const deployment = await archiveOf(await codeBytes(form));
    await call('POST', `${ns(namespace)}/packages`, { body: { kind: 'Package', metadata: { name: pkgName, namespace }, spec: { environment: { name: env, namespace }, deployment } } });
    const fn = { kind: 'Function', metadata: { name, namespace }, spec: { environment: { name: env, namespace }, package: { packageref: { name: pkgName, namespace }, ...(entrypoint ? { functionName: entrypoint } : {}) } } };
    try {
      await call('POST', `${ns(namespace)}/functions`, { body: fn });
    } catch (err) {
      // The package was made for this function only: it goes with the refused function.
      await call('DELETE', `${ns(namespace)}/packages/${encodeURIComponent(pkgName)}`).catch(() => {});
      throw err;
    }
    form.reset();
    return `Function '${name}' created`;
  });
  const envs = live.list('Environment');
  return html`<form class="card" name="new-function" onSubmit=${submit}>
    <h3>New function</h3>
    <label>Name <input name="name" required /></label>
    <label>Namespace <input name="namespace" placeholder="default" /></label>
    <label>Environment <select name="env">${envs.map((e) => html`<option value=${e.metadata.name}>${e.metadata.namespace}/${e.metadata.name}</option>`)}</select></label>
    <label>Entrypoint <input name="entrypoint" placeholder="(the environment's default)" /></label>
    <label class="wide">Code <textarea name="code" rows="6" spellcheck="false" placeholder="module.exports = async (context) => ({ status: 200, body: 'hello' });"></textarea></label>
    <label>or a file <input type="file" name="file" /></label>
    <button type="submit">Create function</button>
    ${outcome}
  </form>`;
}

/** A new version of a function's code: its package gets the new deployment archive. */
export function UpdateCodeForm({ fn }: { fn: Resource }) {
  const { submit, outcome } = useFormAction(async (form) => {
    const ref = fn.spec.package.packageref;
    const path = `${ns(ref.namespace ?? fn.metadata.namespace)}/packages/${encodeURIComponent(ref.name)}`;
    const pkg = await get(path);
    const deployment = await archiveOf(await codeBytes(form));
    await call('PUT', path, { body: { ...pkg, spec: { ...pkg.spec, source: undefined, deployment } } });
    return 'Code updated';
  });
  return html`<form class="card" name="update-code" onSubmit=${submit}>
    <h3>Update code</h3>
    <label class="wide">Code <textarea name="code" rows="6" spellcheck="false"></textarea></label>
    <label>or a file <input type="file" name="file" /></label>
    <button type="submit">Update</button>
    ${outcome}
  </form>`;
}

export function NewRouteForm({ live, fnName, namespace }: { live: Live; fnName?: string; namespace?: string }) {
  useLive(live);
  const { submit, outcome } = useFormAction(async (form) => {
    const nsName = value(form, 'namespace') || namespace || 'default';
    const name = value(form, 'name') || crypto.randomUUID?.() || `route-${randomSuffix()}`;
    const methods = value(form, 'methods').split(/[ ,]+/).filter(Boolean).map((m) => m.toUpperCase());
    const spec = { relativeurl: value(form, 'url'), methods: methods.length ? methods : ['GET'], functionref: { type: 'name', name: value(form, 'function') } };
    const r = await call('POST', `${ns(nsName)}/httptriggers`, { body: { kind: 'HTTPTrigger', metadata: { name, namespace: nsName }, spec } });
    const warnings = r.headers.get('x-flint-warnings');
    return `Route '${name}' created${warnings ? ` (${JSON.parse(warnings).join('; ')})` : ''}`;
  });
  return html`<form class="card" name="new-route" onSubmit=${submit}>
    <h3>New route</h3>
    <label>Name <input name="name" placeholder="(a UUID)" /></label>
    ${namespace ? null : html`<label>Namespace <input name="namespace" placeholder="default" /></label>`}
    <label>URL <input name="url" required placeholder="/hello" /></label>
    <label>Methods <input name="methods" placeholder="GET" /></label>
    <label>Function <input name="function" required value=${fnName ?? ''} /></label>
    <button type="submit">Create route</button>
    ${outcome}
  </form>`;
}
