// A function's log, following live (GET .../logs?follow=true, read as a
// stream), optionally only the lines of one request id. Lines are text
// nodes: whatever a function prints is shown, never interpreted.
import { useEffect, useRef, useState } from 'preact/hooks';
import { stream } from '../api.ts';
import { html } from '../html.ts';

const MAX_LINES = 2000;

export function LogLines({ namespace, name, requestId }: { namespace: string; name: string; requestId?: string }) {
  const [lines, setLines] = useState<string[]>([]);
  const [error, setError] = useState<string>();
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    setLines([]);
    setError(undefined);
    const abort = new AbortController();
    const q = new URLSearchParams({ follow: 'true', tail: '200' });
    if (requestId) q.set('requestId', requestId);
    let partial = '';
    stream(
      `/v1/namespaces/${encodeURIComponent(namespace)}/functions/${encodeURIComponent(name)}/logs?${q}`,
      'text/plain',
      (text) => {
        const parts = (partial + text).split('\n');
        partial = parts.pop() ?? '';
        if (parts.length) setLines((old) => [...old, ...parts].slice(-MAX_LINES));
      },
      abort.signal,
    ).catch((err) => {
      if (!abort.signal.aborted) setError((err as Error).message);
    });
    return () => abort.abort();
  }, [namespace, name, requestId]);
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [lines]);
  return html`<div class="log">
    ${error ? html`<p class="error">${error}</p>` : null}
    <pre ref=${pre} class="log-lines">${lines.join('\n')}</pre>
  </div>`;
}

export function LogPanel({ namespace, name }: { namespace: string; name: string }) {
  const [requestId, setRequestId] = useState('');
  return html`<section class="card" id="log-panel">
    <h3>Log <small>following</small></h3>
    <label>Request id <input name="log-request-id" value=${requestId} placeholder="all requests" onChange=${(e: any) => setRequestId(e.currentTarget.value.trim())} /></label>
    <${LogLines} namespace=${namespace} name=${name} requestId=${requestId || undefined} />
  </section>`;
}
