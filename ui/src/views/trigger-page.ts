// One trigger (message queue, time, or a canary config): what it is, the
// state its manager last reported, and its last error.
import { html } from '../html.ts';
import type { Kind, Live } from '../live.ts';
import { DeleteButton, fnRefNames, useLive } from './common.ts';

const row = (label: string, value: unknown) => (value === undefined || value === '' ? null : html`<tr><th>${label}</th><td>${String(value)}</td></tr>`);

export function TriggerPage({ live, kind, namespace, name }: { live: Live; kind: Kind; namespace: string; name: string }) {
  useLive(live);
  const t = live.find(kind, namespace, name);
  if (!t) return html`<p class="muted">${kind} ${namespace}/${name} does not exist (or was deleted).</p>`;
  const s = t.status ?? {};
  let rows: unknown[];
  if (kind === 'MessageQueueTrigger') {
    rows = [
      row('Type', t.spec.messageQueueType),
      row('Topic', t.spec.topic),
      row('Response topic', t.spec.respTopic),
      row('Error topic', t.spec.errorTopic),
      row('State', s.state ?? 'not picked up yet'),
      row('Message', s.message),
      row('Since', s.lastTransitionTime),
      // The trigger manager's status has no lag figure: no broker connector reports one yet.
      row('Consumer lag', s.lag ?? 'not reported by this broker'),
      row('Last error', s.lastError),
      row('Last error at', s.lastErrorTime),
    ];
  } else if (kind === 'TimeTrigger') {
    rows = [row('Cron', t.spec.cron), row('Method', t.spec.method || 'POST'), row('Last run', s.lastFireTime), row('Outcome', s.lastOutcome), row('Status code', s.lastStatusCode), row('Duration ms', s.lastDurationMs), row('Last error', s.lastError)];
  } else {
    rows = [row('Route', t.spec.trigger), row('New function', t.spec.newfunction), row('Old function', t.spec.oldfunction), row('Status', s.status), row('Message', s.message), row('Failure rate %', s.failureRate), row('New weight', s.newWeight), row('Last step', s.lastStepTime)];
  }
  return html`<article class="trigger-page">
    <h2>${kind} <span class="name">${name}</span> <small>${namespace}</small> <${DeleteButton} r=${t} onDone=${() => (location.hash = '#/triggers')} /></h2>
    ${t.spec.functionref ? html`<p>Function ${fnRefNames(t.spec.functionref).join(', ')}</p>` : null}
    <table class="kv">${rows}</table>
  </article>`;
}
