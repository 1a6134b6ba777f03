// The benchmark's SVG charts, drawn with Vega-Lite (compiled to Vega and
// rendered to SVG headless: no browser, no DOM, no canvas), written to
// bench/charts/ beside RESULTS.md on each run for the parts that ran:
//   peers-throughput.svg  each peer's req/s over bare node:http's;
//   peers-latency.svg     each peer's added p50 and p99;
//   cold-start.svg        the distribution of Flint's cold starts from the
//                         warm pool beside forking a fresh node;
//   cold-start-storms.svg each cold-start storm's first calls beside as
//                         many concurrent forks (bench/storm.ts).
// Bars are medians over rounds, lines the min-max, dots the single rounds.
import fs from 'node:fs';
import path from 'node:path';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { PeerSummary, PeersResult, StormResult } from './results.ts';

export const CHARTS_DIR = path.join(import.meta.dirname, 'charts');

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';
const FONT = { font: 'sans-serif', title: { fontSize: 14, subtitleFontSize: 11 } };

export interface ColdStarts {
  /** Flint's first calls from the warm pool, µs. */
  flintUs: number[];
  /** Forks of a fresh node serving one request, µs. */
  forkUs: number[];
}

function subtitle(r: PeersResult, when: Date): string {
  return `wrk 1 thread, ${r.connections} connections, ${r.rounds} rounds of ${r.seconds} s, ${when.toISOString().slice(0, 10)}: bar = median, line = min-max, dots = rounds`;
}

type Layer = Record<string, unknown>;
/** A spec as plain data (the layers are built generically); compile() checks it, and the tests render each. */
const spec = (o: Record<string, unknown>) => o as unknown as TopLevelSpec;

/** Bars of each peer's median with a min-max rule and a dot per round, and a dashed target line. */
function spreadLayers(
  spreads: { peer: string; median: number; min: number; max: number }[],
  rounds: { peer: string; value: number }[],
  title: string,
  target?: { value: number; label: string },
): Layer[] {
  const x = { field: 'peer', type: 'nominal', sort: null, title: null, axis: { labelAngle: -20 } };
  const layers: Layer[] = [
    { data: { values: spreads }, mark: { type: 'bar', color: '#4c78a8', width: { band: 0.6 } }, encoding: { x, y: { field: 'median', type: 'quantitative', title } } },
    { data: { values: spreads }, mark: { type: 'rule', color: '#222', strokeWidth: 1.5 }, encoding: { x, y: { field: 'min', type: 'quantitative' }, y2: { field: 'max' } } },
    { data: { values: rounds }, mark: { type: 'point', color: '#222', size: 18, filled: true, opacity: 0.6 }, encoding: { x, y: { field: 'value', type: 'quantitative' } } },
  ];
  if (target) {
    layers.push(
      { data: { values: [target] }, mark: { type: 'rule', color: '#c0392b', strokeDash: [5, 3] }, encoding: { y: { field: 'value', type: 'quantitative' } } },
      { data: { values: [target] }, mark: { type: 'text', color: '#c0392b', align: 'left', dx: 4, dy: -6, x: 0 }, encoding: { y: { field: 'value', type: 'quantitative' }, text: { field: 'label' } } },
    );
  }
  return layers;
}

type Figure = 'ratio' | 'addedP50' | 'addedP99';

function peerLayers(r: PeersResult, summaries: PeerSummary[], figure: Figure, title: string, target?: { value: number; label: string }): Layer[] {
  const peers = summaries.filter((s) => s.name !== r.baseline);
  return spreadLayers(
    peers.map((s) => ({ peer: s.name, ...s[figure] })),
    peers.flatMap((s) => s.perRound[figure].map((value) => ({ peer: s.name, value }))),
    title,
    target,
  );
}

const chartWidth = (r: PeersResult) => Math.max(220, 85 * (r.summaries.length - 1));

export function throughputSpec(r: PeersResult, when = new Date()): TopLevelSpec {
  return spec({
    $schema: SCHEMA,
    title: { text: 'Throughput over bare node:http in the same round', subtitle: subtitle(r, when) },
    width: chartWidth(r),
    height: 260,
    config: FONT,
    layer: peerLayers(r, r.summaries, 'ratio', 'req/s ÷ bare node:http', { value: r.targets.ratio, label: `router target ≥ ${r.targets.ratio}x` }),
  });
}

/** Added p50 and p99, at full load and paced (when measured), a panel each. */
export function latencySpec(r: PeersResult, when = new Date()): TopLevelSpec {
  const panel = (summaries: PeerSummary[], how: string, figure: Figure, which: string, target?: { value: number; label: string }) => ({
    title: `added ${which}, ${how}`,
    width: chartWidth(r),
    height: 220,
    layer: peerLayers(r, summaries, figure, `added ${which}, µs`, target),
  });
  const target = { value: r.targets.addedP99Us, label: `router target ≤ ${r.targets.addedP99Us} µs` };
  const rows = [{ hconcat: [panel(r.summaries, 'full load', 'addedP50', 'p50'), panel(r.summaries, 'full load', 'addedP99', 'p99')] }];
  if (r.paced.length > 0) {
    const paced = `paced (${r.thinkMs} ms mean wait)`;
    rows.push({ hconcat: [panel(r.paced, paced, 'addedP50', 'p50'), panel(r.paced, paced, 'addedP99', 'p99', target)] });
  }
  return spec({
    $schema: SCHEMA,
    title: { text: "Latency added over bare node:http (the peer's percentile minus bare node's, same round)", subtitle: subtitle(r, when) },
    config: FONT,
    vconcat: rows,
  });
}

export function coldStartSpec(c: ColdStarts, when = new Date()): TopLevelSpec {
  const values = [
    ...c.flintUs.map((us) => ({ what: 'Flint, warm pool', ms: us / 1000 })),
    ...c.forkUs.map((us) => ({ what: 'fork node', ms: us / 1000 })),
  ];
  const y = { field: 'what', type: 'nominal', title: null, axis: { labelLimit: 300 } } as const;
  return spec({
    $schema: SCHEMA,
    title: { text: 'Cold start: Flint from the warm pool beside forking node', subtitle: [
        `first call of a new function (${c.flintUs.length}) and a fresh node serving one request (${c.forkUs.length}), one next to the other, ${when.toISOString().slice(0, 10)}`,
        'box = quartiles, whiskers = min-max, ticks = calls',
      ],
    },
    width: 480,
    height: 140,
    config: FONT,
    data: { values },
    layer: [
      { mark: { type: 'boxplot', extent: 'min-max', size: 28, opacity: 0.5 }, encoding: { y, x: { field: 'ms', type: 'quantitative', title: 'ms', scale: { zero: true } } } },
      { mark: { type: 'tick', color: '#222', opacity: 0.7, thickness: 1 }, encoding: { y, x: { field: 'ms', type: 'quantitative' } } },
    ],
  });
}

/** Each storm's first calls (from the storm's start) beside its forks, a row per runtime, size and burst. */
export function stormSpec(storms: StormResult[], when = new Date()): TopLevelSpec {
  const values = storms.flatMap((r) => {
    const storm = `${r.runtime}, ${r.n} at once, ${r.burst} burst`;
    return [
      ...r.calls.map((us) => ({ storm, what: 'Flint first calls', ms: us / 1000 })),
      ...r.forks.map((us) => ({ storm, what: 'concurrent forks', ms: us / 1000 })),
      ...(r.sandboxedForks ?? []).map((us) => ({ storm, what: 'forks in the sandbox', ms: us / 1000 })),
    ];
  });
  return spec({
    $schema: SCHEMA,
    title: { text: 'Cold-start storms: first calls of N new functions at once beside N concurrent forks', subtitle: [`time from the storm's start, ${when.toISOString().slice(0, 10)}`, 'box = quartiles, whiskers = min-max'] },
    config: FONT,
    data: { values },
    facet: { row: { field: 'storm', type: 'nominal', title: null, header: { labelAngle: 0, labelAlign: 'left', labelLimit: 260 } } },
    spec: {
      width: 480,
      height: 60,
      mark: { type: 'boxplot', extent: 'min-max', size: 18 },
      encoding: {
        y: { field: 'what', type: 'nominal', title: null },
        x: { field: 'ms', type: 'quantitative', title: 'ms', scale: { zero: true } },
        color: { field: 'what', type: 'nominal', legend: null },
      },
    },
    resolve: { scale: { x: 'independent' } },
  });
}

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Writes the charts of the parts given into `dir`; returns the files written. */
export async function writeCharts(data: { peers?: PeersResult; cold?: ColdStarts; storms?: StormResult[] }, dir = CHARTS_DIR): Promise<string[]> {
  const when = new Date();
  const charts: [string, TopLevelSpec][] = [];
  if (data.peers && data.peers.summaries.length > 1) {
    charts.push(['peers-throughput.svg', throughputSpec(data.peers, when)], ['peers-latency.svg', latencySpec(data.peers, when)]);
  }
  if (data.cold && data.cold.flintUs.length > 0) charts.push(['cold-start.svg', coldStartSpec(data.cold, when)]);
  if (data.storms?.some((r) => r.calls.length > 0)) charts.push(['cold-start-storms.svg', stormSpec(data.storms, when)]);
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const [name, spec] of charts) {
    const file = path.join(dir, name);
    fs.writeFileSync(file, `${await renderSvg(spec)}\n`);
    written.push(file);
  }
  return written;
}
