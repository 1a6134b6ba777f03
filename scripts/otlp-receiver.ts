// A real OTLP trace receiver for tests and benchmarks: the OpenTelemetry
// Collector's OTLP receiver in the small Go module tools/otlp-receiver,
// built once and kept in the user's cache directory under a hash of that
// module's files (as scripts/kube/build.ts keeps the control plane), so a
// fresh clone on the same machine builds nothing. $FLINT_OTLP_RECEIVER_BIN
// names a binary built elsewhere. `node scripts/otlp-receiver.ts` builds it
// and prints its path (.ci/run does, so its build time is no test's).
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ensureGoModuleBinary, type GoModule, goModuleBinaryPath } from './go-module.ts';
import { goBinary } from './kube/build.ts';
import { freePort } from './local-brokers.ts';

const REPO = path.resolve(import.meta.dirname, '..');
export const OTLP_MODULE_DIR = path.join(REPO, 'tools', 'otlp-receiver');
const MODULE: GoModule = {
  dir: OTLP_MODULE_DIR,
  files: ['go.mod', 'go.sum', 'main.go'],
  cacheName: 'otlp-receiver',
  binary: 'otlp-receiver',
  what: "the OTLP receiver (tools/otlp-receiver, the OpenTelemetry Collector's otlpreceiver): a minute or two on a cold Go cache, once per machine",
  env: { GOFLAGS: '-mod=mod', CGO_ENABLED: '0' },
};

/** Where the binary is (or will be) for the module as it is now. */
export function otlpReceiverPath(): string {
  return process.env.FLINT_OTLP_RECEIVER_BIN || goModuleBinaryPath(MODULE);
}

/** The binary's path, built first when the cache has none for this module. */
export function ensureOtlpReceiver(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): string {
  const bin = otlpReceiverPath();
  if (fs.existsSync(bin)) return bin;
  if (process.env.FLINT_OTLP_RECEIVER_BIN) throw new Error(`FLINT_OTLP_RECEIVER_BIN names ${bin}, which does not exist`);
  return ensureGoModuleBinary(MODULE, goBinary(), log);
}

/** One OTLP span as the collector's ptrace JSON gives it (ids in hex). */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
  status?: { code?: number; message?: string };
  /** The resource's service.name (added here, from the span's resource). */
  service: string;
}

export interface OtlpReceiver {
  /** The base URL to give an exporter (`tracing.otlpEndpoint`); traces go to `<endpoint>/v1/traces`. */
  endpoint: string;
  /** Every span received so far, in arrival order. */
  spans(): ReceivedSpan[];
  stop(): Promise<void>;
}

function attr(attrs: ReceivedSpan['attributes'], key: string): unknown {
  const a = attrs?.find((x) => x.key === key);
  return a === undefined ? undefined : Object.values(a.value)[0];
}

/** A span's attribute value (string, int as the JSON gives it, bool), undefined when absent. */
export function spanAttr(span: ReceivedSpan, key: string): unknown {
  return attr(span.attributes, key);
}

/** Starts the receiver on a free loopback port, writing into a file of its own in `dir`. */
export async function startOtlpReceiver(dir: string): Promise<OtlpReceiver> {
  const bin = ensureOtlpReceiver();
  const port = await freePort();
  const out = path.join(dir, `otlp-${port}.jsonl`);
  const child: ChildProcess = spawn(bin, ['-endpoint', `127.0.0.1:${port}`, '-out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (c) => (err += c));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the OTLP receiver did not start:\n${err}`)), 30_000);
    const check = () => {
      if (err.includes('listening on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stderr!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the OTLP receiver exited with ${code}:\n${err}`));
    });
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans() {
      if (!fs.existsSync(out)) return [];
      const spans: ReceivedSpan[] = [];
      for (const line of fs.readFileSync(out, 'utf8').split('\n')) {
        if (line === '') continue;
        const doc = JSON.parse(line) as {
          resourceSpans?: { resource?: { attributes?: ReceivedSpan['attributes'] }; scopeSpans?: { spans?: Omit<ReceivedSpan, 'service'>[] }[] }[];
        };
        for (const rs of doc.resourceSpans ?? []) {
          const service = String(attr(rs.resource?.attributes, 'service.name') ?? '');
          for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service });
        }
      }
      return spans;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

if (import.meta.main) {
  process.stdout.write(`${ensureOtlpReceiver()}\n`);
}
