// One package: its build status and build log, which the builder writes
// into the package's status while it runs; the watch pushes each write, so
// the log grows on the page as the build goes.
import { useState } from 'preact/hooks';
import { call } from '../api.ts';
import { html } from '../html.ts';
import type { Live } from '../live.ts';
import { DeleteButton, ErrorLine, useLive } from './common.ts';

export function PackagePage({ live, namespace, name }: { live: Live; namespace: string; name: string }) {
  useLive(live);
  const [error, setError] = useState<string>();
  const pkg = live.find('Package', namespace, name);
  if (!pkg) return html`<p class="muted">Package ${namespace}/${name} does not exist (or was deleted).</p>`;
  const status = pkg.status?.buildstatus ?? 'pending';
  const rebuild = async () => {
    setError(undefined);
    try {
      await call('POST', `/v1/namespaces/${encodeURIComponent(namespace)}/packages/${encodeURIComponent(name)}/rebuild`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return html`<article class="package-page">
    <h2>Package <span class="name">${name}</span> <small>${namespace}</small> <${DeleteButton} r=${pkg} onDone=${() => (location.hash = '#/packages')} /></h2>
    <p>Environment <b>${pkg.spec.environment?.name}</b> · Build status <span class=${`status ${status}`} id="build-status">${status}</span>
      ${status === 'failed' ? html` <button onClick=${rebuild}>Rebuild</button>` : null}</p>
    ${pkg.spec.buildcmd ? html`<p>Build command <code>${pkg.spec.buildcmd}</code></p>` : null}
    <${ErrorLine} error=${error} />
    <h3>Build log ${status === 'running' ? html`<small>(streaming)</small>` : null}</h3>
    <pre class="build-log">${pkg.status?.buildlog ?? ''}</pre>
  </article>`;
}
