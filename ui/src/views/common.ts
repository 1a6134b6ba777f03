// Small pieces every view uses: the live objects as a hook, the error
// line (the API's own text), and deleting with a confirmation.
import { useEffect, useState } from 'preact/hooks';
import { call } from '../api.ts';
import { html } from '../html.ts';
import { type Kind, type Live, PLURAL, type Resource } from '../live.ts';

/** Re-renders the calling view whenever the watch changes anything. */
export function useLive(live: Live): Live {
  const [, bump] = useState(0);
  useEffect(() => live.subscribe(() => bump((n) => n + 1)), [live]);
  return live;
}

export const ErrorLine = ({ error }: { error?: string }) => (error ? html`<p class="error" role="alert">${error}</p>` : null);

export function DeleteButton({ r, onDone }: { r: Resource; onDone?: () => void }) {
  const [error, setError] = useState<string>();
  const remove = async () => {
    // The name is shown as text in the browser's own dialog.
    if (!confirm(`Delete ${r.kind} ${r.metadata.namespace}/${r.metadata.name}?`)) return;
    try {
      await call('DELETE', `/v1/namespaces/${encodeURIComponent(r.metadata.namespace)}/${PLURAL[r.kind as Kind]}/${encodeURIComponent(r.metadata.name)}`);
      onDone?.();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return html`<span><button class="danger" onClick=${remove}>Delete</button><${ErrorLine} error=${error} /></span>`;
}

export const fnRefNames = (ref: any): string[] =>
  ref?.type === 'function-weights' && ref.functionweights ? Object.keys(ref.functionweights) : ref?.name ? [ref.name] : [];
