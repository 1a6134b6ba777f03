// One function: its spec, its code (when it is inline), its routes and
// triggers, charts and instances, a test call, and its live log.
import { html } from '../html.ts';
import type { Live, Resource } from '../live.ts';
import { href } from '../route.ts';
import { DeleteButton, fnRefNames, useLive } from './common.ts';
import { NewRouteForm, UpdateCodeForm } from './forms.ts';
import { InvokePanel } from './invoke-panel.ts';
import { LogPanel } from './log-panel.ts';
import { MetricsPanel } from './metrics-panel.ts';

/** The package's code as text when it is an inline archive of text (a zip or an uploaded archive is named, not shown). */
function codeOf(pkg: Resource | undefined): string {
  const a = pkg?.spec.deployment ?? pkg?.spec.source;
  if (!a) return '(no package)';
  if (a.type === 'url') return `(archive ${a.url})`;
  try {
    const bytes = Uint8Array.from(atob(a.literal ?? ''), (c) => c.charCodeAt(0));
    if (bytes[0] === 0x50 && bytes[1] === 0x4b) return '(a zip archive)';
    return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  } catch {
    return '(unreadable)';
  }
}

export function FunctionPage({ live, namespace, name }: { live: Live; namespace: string; name: string }) {
  useLive(live);
  const fn = live.find('Function', namespace, name);
  if (!fn) return html`<p class="muted">Function ${namespace}/${name} does not exist (or was deleted).</p>`;
  const pkgRef = fn.spec.package?.packageref;
  const pkg = pkgRef ? live.find('Package', pkgRef.namespace ?? namespace, pkgRef.name) : undefined;
  const uses = (r: Resource) => r.metadata.namespace === namespace && fnRefNames(r.spec.functionref).includes(name);
  const routes = live.list('HTTPTrigger').filter(uses);
  const triggers = [...live.list('MessageQueueTrigger'), ...live.list('TimeTrigger')].filter(uses);
  return html`<article class="function-page">
    <h2>Function <span class="name">${name}</span> <small>${namespace}</small> <${DeleteButton} r=${fn} onDone=${() => (location.hash = '#/functions')} /></h2>
    <p>Environment <b>${fn.spec.environment?.name}</b> · Package ${pkgRef ? html`<a href=${href('package', pkgRef.namespace ?? namespace, pkgRef.name)}>${pkgRef.name}</a>` : '-'}
      ${pkg ? html` (<span class=${`status ${pkg.status?.buildstatus}`}>${pkg.status?.buildstatus ?? 'pending'}</span>)` : null}
      ${fn.spec.package?.functionName ? html` · Entrypoint <code>${fn.spec.package.functionName}</code>` : null}</p>
    <details open><summary>Code</summary><pre class="code">${codeOf(pkg)}</pre></details>
    <${UpdateCodeForm} fn=${fn} />
    <section class="card"><h3>Routes</h3>
      <ul class="routes">${routes.map((r) => html`<li>${(r.spec.methods ?? [r.spec.method || 'GET']).join(',')} <code>${r.spec.relativeurl ?? `${r.spec.prefix}*`}</code> (${r.metadata.name}) <${DeleteButton} r=${r} /></li>`)}</ul>
      <${NewRouteForm} live=${live} fnName=${name} namespace=${namespace} />
    </section>
    <section class="card"><h3>Triggers</h3>
      <ul>${triggers.map((t) => html`<li><a href=${href('trigger', t.kind, t.metadata.namespace, t.metadata.name)}>${t.kind} ${t.metadata.name}</a></li>`)}</ul>
    </section>
    <${MetricsPanel} namespace=${namespace} name=${name} />
    <${InvokePanel} namespace=${namespace} name=${name} />
    <${LogPanel} namespace=${namespace} name=${name} />
  </article>`;
}
