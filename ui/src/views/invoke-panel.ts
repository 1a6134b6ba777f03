// Calls the function from the page: the control plane sends the request
// through the router with a token it mints for this one call (POST
// .../invoke), and the page shows status, headers, body, duration and the
// request id, with the log lines of that request. The body is text in a
// <pre>: a function answering with markup shows markup, it does not run.
import { useState } from 'preact/hooks';
import { call } from '../api.ts';
import { html } from '../html.ts';
import { ErrorLine } from './common.ts';
import { LogLines } from './log-panel.ts';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

interface Result {
  status: number;
  headers: Record<string, string>;
  body: string;
  truncated: boolean;
  durationMs: number;
  requestId?: string;
}

/** `Name: value` per line. */
function headerLines(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf(':');
    if (line.trim() === '') continue;
    if (i <= 0) throw new Error(`a header line needs "Name: value", got '${line}'`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/** `name=value` per line (or &-separated). */
function queryPairs(text: string): Array<[string, string]> {
  return text
    .split(/[\n&]/)
    .map((p) => p.trim())
    .filter(Boolean)
    .map((p) => {
      const i = p.indexOf('=');
      return (i < 0 ? [p, ''] : [p.slice(0, i), p.slice(i + 1)]) as [string, string];
    });
}

export function InvokePanel({ namespace, name }: { namespace: string; name: string }) {
  const [result, setResult] = useState<Result>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = (e.currentTarget as HTMLFormElement).elements as any;
    setError(undefined);
    setBusy(true);
    try {
      const method = f.method.value;
      const body: Record<string, unknown> = { method, path: f.path.value || '/', headers: headerLines(f.headers.value), query: queryPairs(f.query.value) };
      if (f.body.value !== '') body.body = f.body.value;
      const r = await call<Result>('POST', `/v1/namespaces/${encodeURIComponent(namespace)}/functions/${encodeURIComponent(name)}/invoke`, { body });
      setResult(r.data);
    } catch (err) {
      setResult(undefined);
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return html`<section class="card" id="invoke-panel">
    <h3>Invoke</h3>
    <form name="invoke" onSubmit=${submit}>
      <label>Method <select name="method">${METHODS.map((m) => html`<option>${m}</option>`)}</select></label>
      <label>Path <input name="path" placeholder="/" /></label>
      <label class="wide">Headers <textarea name="headers" rows="2" placeholder="Content-Type: application/json"></textarea></label>
      <label class="wide">Query <textarea name="query" rows="2" placeholder="name=value"></textarea></label>
      <label class="wide">Body <textarea name="body" rows="3"></textarea></label>
      <button type="submit" disabled=${busy}>${busy ? 'Calling…' : 'Invoke'}</button>
    </form>
    <${ErrorLine} error=${error} />
    ${
      result
        ? html`<div class="result">
            <p><b>Status</b> <span class="invoke-status">${result.status}</span> · <b>Duration</b> <span class="invoke-duration">${result.durationMs} ms</span>
              ${result.requestId ? html` · <b>Request id</b> <code class="invoke-request-id">${result.requestId}</code>` : null}</p>
            <details><summary>Headers</summary>
              <table>${Object.entries(result.headers).map(([k, v]) => html`<tr><td>${k}</td><td>${v}</td></tr>`)}</table>
            </details>
            <pre class="invoke-body">${result.body}</pre>${result.truncated ? html`<p>(cut at 1 MiB)</p>` : null}
            ${result.requestId ? html`<h4>Log lines of this request</h4><${LogLines} namespace=${namespace} name=${name} requestId=${result.requestId} />` : null}
          </div>`
        : null
    }
  </section>`;
}
