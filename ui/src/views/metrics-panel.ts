// A function's charts and instances, pushed by the control plane (GET
// .../metrics?follow=true as server-sent events): requests per second,
// p50/p99 latency, 5xx answers and cold starts over the last minutes,
// sampled from the routers' own counters, and the executor's instances.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { events } from '../api.ts';
import { html } from '../html.ts';

interface Sample {
  t: number;
  rps: number;
  p50: number | null;
  p99: number | null;
  errors: number;
  coldStarts: number;
  instances: number | null;
}

const KEEP = 300;
/** The charts always show the last ten minutes, whatever the samples span (one sample would stretch the axis over years). */
const WINDOW_SECONDS = 600;

interface ChartDef {
  id: string;
  title: string;
  series: Array<{ label: string; value: (s: Sample) => number | null; stroke: string }>;
}

const CHARTS: ChartDef[] = [
  { id: 'rps', title: 'Requests per second', series: [{ label: 'req/s', value: (s) => s.rps, stroke: '#1c7ed6' }] },
  {
    id: 'latency',
    title: 'Latency (ms)',
    series: [
      { label: 'p50', value: (s) => (s.p50 === null ? null : s.p50 * 1000), stroke: '#2b8a3e' },
      { label: 'p99', value: (s) => (s.p99 === null ? null : s.p99 * 1000), stroke: '#e67700' },
    ],
  },
  { id: 'errors', title: 'Errors (5xx)', series: [{ label: 'errors', value: (s) => s.errors, stroke: '#c92a2a' }] },
  { id: 'cold', title: 'Cold starts', series: [{ label: 'cold starts', value: (s) => s.coldStarts, stroke: '#7048e8' }] },
];

function Chart({ def, samples }: { def: ChartDef; samples: Sample[] }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot>(null);
  const data = [samples.map((s) => s.t / 1000), ...def.series.map((se) => samples.map(se.value))] as uPlot.AlignedData;
  useEffect(() => {
    plot.current = new uPlot(
      {
        width: 420,
        height: 160,
        scales: { x: { time: true, range: (_u: uPlot, _min: number, max: number) => [max - WINDOW_SECONDS, max] } },
        series: [{}, ...def.series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, spanGaps: false }))], axes: [{}, { size: 50 }], legend: { show: true } },
      data,
      el.current!,
    );
    return () => plot.current?.destroy();
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
  }, [samples]);
  return html`<figure class="chart" data-chart=${def.id}><figcaption>${def.title}</figcaption><div ref=${el}></div></figure>`;
}

function Instances({ report }: { report: any }) {
  if (!report) return html`<p class="muted">Instances: not reported by this server</p>`;
  const busy = report.items.filter((i: any) => i.active > 0).length;
  return html`<div class="instances">
    <p><b>Specialized</b> <span class="instances-count">${report.items.length}</span> (busy ${busy}, idle ${report.items.length - busy}) · <b>Starting</b> ${report.starting}
      ${report.warmPool === undefined ? null : html` · <b>Warm pool</b> <span class="warm-pool">${report.warmPool}</span> generic workers of the environment`}
      ${report.budget ? html` · <b>Budget</b> ${report.budget.instances}/${report.budget.maxInstances} workers, ${report.budget.memoryMB}/${report.budget.maxMemoryMB} MB` : null}</p>
    <table>
      <thead><tr><th>Instance</th><th>State</th><th>Current code</th><th>Active</th><th>Served</th><th>Age s</th><th>Idle s</th></tr></thead>
      <tbody>${report.items.map(
        (i: any) => html`<tr><td>${i.name}</td><td>${i.state}</td><td>${i.current ? 'yes' : 'no'}</td><td>${i.active}</td><td>${i.served}</td><td>${i.ageSeconds}</td><td>${i.idleSeconds}</td></tr>`,
      )}</tbody>
    </table>
  </div>`;
}

export function MetricsPanel({ namespace, name }: { namespace: string; name: string }) {
  const [samples, setSamples] = useState<Sample[]>([]);
  const [report, setReport] = useState<any>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    events(
      `/v1/namespaces/${encodeURIComponent(namespace)}/functions/${encodeURIComponent(name)}/metrics?follow=true`,
      (event, data) => {
        if (event === 'history') setSamples(data.samples);
        else if (event === 'sample') setSamples((old) => [...old, data].slice(-KEEP));
        else if (event === 'instances') setReport(data);
      },
      abort.signal,
    ).catch((err) => {
      if (!abort.signal.aborted) setError((err as Error).message);
    });
    return () => abort.abort();
  }, [namespace, name]);
  const total = Math.round(samples.reduce((n, s) => n + s.rps, 0) * 1000) / 1000;
  return html`<section class="card" id="metrics-panel" data-samples=${samples.length} data-rps-total=${total}>
    <h3>Last minutes</h3>
    ${error ? html`<p class="error">${error}</p>` : null}
    <div class="charts">${CHARTS.map((def) => html`<${Chart} key=${def.id} def=${def} samples=${samples} />`)}</div>
    <h3>Instances</h3>
    <${Instances} report=${report} />
  </section>`;
}
