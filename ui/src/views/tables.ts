// The lists: one table per kind, filtered by namespace and name, each row
// linking to its page. Cells are text: a hostile name shows as the
// characters it is.
import { html } from '../html.ts';
import type { Kind, Live, Resource } from '../live.ts';
import { href } from '../route.ts';
import { DeleteButton, fnRefNames, useLive } from './common.ts';

export interface Filter {
  namespace: string;
  name: string;
}

type Column = [string, (r: Resource) => unknown];

const refs = (r: Resource) => fnRefNames(r.spec.functionref).join(', ');
const COLUMNS: Record<Kind, Column[]> = {
  Environment: [
    ['Image', (r) => r.spec.runtime?.image],
    ['Builder', (r) => r.spec.builder?.image ?? ''],
    ['Pool size', (r) => r.spec.poolsize ?? 3],
  ],
  Function: [
    ['Environment', (r) => r.spec.environment?.name],
    ['Package', (r) => r.spec.package?.packageref?.name],
    ['Executor', (r) => r.spec.InvokeStrategy?.ExecutionStrategy?.ExecutorType ?? r.spec.invokeStrategy?.executionStrategy?.executorType ?? 'poolmgr'],
  ],
  Package: [
    ['Environment', (r) => r.spec.environment?.name],
    ['Build status', (r) => html`<span class=${`status ${r.status?.buildstatus ?? 'pending'}`}>${r.status?.buildstatus ?? 'pending'}</span>`],
  ],
  HTTPTrigger: [
    ['Methods', (r) => (r.spec.methods ?? [r.spec.method || 'GET']).join(', ')],
    ['URL', (r) => r.spec.relativeurl ?? `${r.spec.prefix ?? ''}*`],
    ['Host', (r) => r.spec.host ?? ''],
    ['Function', refs],
  ],
  MessageQueueTrigger: [
    ['Type', (r) => r.spec.messageQueueType],
    ['Topic', (r) => r.spec.topic],
    ['Function', refs],
    ['State', (r) => r.status?.state ?? ''],
  ],
  TimeTrigger: [
    ['Cron', (r) => r.spec.cron],
    ['Function', refs],
    ['Last outcome', (r) => r.status?.lastOutcome ?? ''],
  ],
  CanaryConfig: [
    ['Trigger', (r) => r.spec.trigger],
    ['New / old', (r) => `${r.spec.newfunction} / ${r.spec.oldfunction}`],
    ['Status', (r) => r.status?.status ?? ''],
  ],
};

const PAGE: Partial<Record<Kind, string>> = { Function: 'function', Package: 'package', MessageQueueTrigger: 'trigger', TimeTrigger: 'trigger', CanaryConfig: 'trigger' };

export const matches = (r: Resource, f: Filter) =>
  (f.namespace === '' || r.metadata.namespace === f.namespace) && (f.name === '' || r.metadata.name.includes(f.name));

function nameCell(r: Resource) {
  const page = PAGE[r.kind];
  if (!page) return r.metadata.name;
  const parts = page === 'trigger' ? [page, r.kind, r.metadata.namespace, r.metadata.name] : [page, r.metadata.namespace, r.metadata.name];
  return html`<a href=${href(...parts)}>${r.metadata.name}</a>`;
}

export function ResourceTable({ live, kind, filter, title }: { live: Live; kind: Kind; filter: Filter; title: string }) {
  useLive(live);
  const rows = live.list(kind).filter((r) => matches(r, filter));
  const cols = COLUMNS[kind];
  return html`<section class="table" data-kind=${kind}>
    <h2>${title} <small>(${rows.length})</small></h2>
    <table>
      <thead><tr><th>Namespace</th><th>Name</th>${cols.map(([t]) => html`<th>${t}</th>`)}<th></th></tr></thead>
      <tbody>
        ${rows.map(
          (r) => html`<tr key=${`${r.metadata.namespace}/${r.metadata.name}`} data-name=${r.metadata.name}>
            <td>${r.metadata.namespace}</td><td>${nameCell(r)}</td>${cols.map(([, cell]) => html`<td>${cell(r)}</td>`)}
            <td><${DeleteButton} r=${r} /></td>
          </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}

export function FilterBar({ live, filter, onChange }: { live: Live; filter: Filter; onChange: (f: Filter) => void }) {
  useLive(live);
  const namespaces = new Set<string>(['default']);
  for (const map of live.objects.values()) for (const r of map.values()) namespaces.add(r.metadata.namespace);
  return html`<div class="filters">
    <label>Namespace <select name="filter-namespace" value=${filter.namespace} onChange=${(e: any) => onChange({ ...filter, namespace: e.currentTarget.value })}>
      <option value="">all</option>
      ${[...namespaces].sort().map((n) => html`<option value=${n}>${n}</option>`)}
    </select></label>
    <label>Name <input name="filter-name" value=${filter.name} placeholder="contains" onInput=${(e: any) => onChange({ ...filter, name: e.currentTarget.value })} /></label>
    <span class="live-state">${live.state}</span>
  </div>`;
}
