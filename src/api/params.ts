// The schemas of everything a control-plane request carries besides its
// body: path segments and query parameters. The controller checks every
// request against them (so a request the OpenAPI document allows is never
// refused for its parameters, and one it forbids always is), and the same
// schemas are what the document publishes.
//
// Patterns use explicit ASCII classes, never \s, \d or \w: clients generate
// and check them with other regex engines (Python's, Go's), where those
// classes take in more of Unicode than JavaScript's do.
import { Type } from '@sinclair/typebox';
import { SHA256_HEX } from './build-command.ts';
import { INSTANCE_PATTERN } from './function-log-line.ts';
import { KIND_NAMES } from './kinds.ts';
import { Dns1123Label } from './meta.ts';
import { REQUEST_ID_MAX, REQUEST_ID_PATTERN } from './request-id.ts';

// ---- label selectors ------------------------------------------------------------

/** A label key as a selector names it: Kubernetes' characters, with an optional `prefix/`. */
const LABEL_KEY = '[-A-Za-z0-9_./]+';
const LABEL_VALUE = '[-A-Za-z0-9_.]*';
/** `key=value`, `key==value`, `key!=value`, `key` (present) or `!key` (absent), spaces allowed around. */
const SELECTOR_TERM = ` *(?:${LABEL_KEY} *(?:==|!=|=) *${LABEL_VALUE}|!${LABEL_KEY}|${LABEL_KEY})? *`;
export const LABEL_SELECTOR_PATTERN = `^${SELECTOR_TERM}(?:,${SELECTOR_TERM})*$`;
export const LABEL_SELECTOR_MAX = 4096;

/** One term, spaces trimmed, split into what it asks; store backends use this to filter. */
export const LABEL_SELECTOR_TERMS = {
  compare: new RegExp(`^(${LABEL_KEY}) *(==|!=|=) *(${LABEL_VALUE})$`),
  absent: new RegExp(`^!(${LABEL_KEY})$`),
  present: new RegExp(`^(${LABEL_KEY})$`),
} as const;

export const LabelSelector = Type.String({
  maxLength: LABEL_SELECTOR_MAX,
  pattern: LABEL_SELECTOR_PATTERN,
  description: 'Comma-separated terms: key=value, key==value, key!=value, key (has the label), !key (lacks it). Empty: everything.',
});

// ---- shared pieces ---------------------------------------------------------------

/** A yes/no query flag: exactly `true` or `false`, so a typo is refused rather than read as no. */
export const BooleanFlag = (description: string) =>
  Type.Union([Type.Literal('true'), Type.Literal('false')], { description });
export const ResourceVersionParam = (description: string) => Type.String({ pattern: '^[0-9]+$', maxLength: 20, description });
export const Sha256Param = Type.String({ pattern: SHA256_HEX.source, description: '64 lowercase hex digits' });

/** Kafka's topic names: 1-249 of letters, digits, '.', '_', '-', but not '.' or '..' (written without look-ahead, which not every client's regex engine has). */
export const TOPIC_PATTERN = '^(?:[-A-Za-z0-9_][-A-Za-z0-9._]{0,248}|\\.[-A-Za-z0-9_][-A-Za-z0-9._]{0,247}|\\.\\.[-A-Za-z0-9._]{1,247})$';

// ---- per route -------------------------------------------------------------------

export const NamespaceParams = Type.Object({ namespace: Dns1123Label() });
export const NameParams = Type.Object({ namespace: Dns1123Label(), name: Dns1123Label() });
export const ListQuery = Type.Object({ labelSelector: Type.Optional(LabelSelector) });
export const DeleteQuery = Type.Object({
  force: Type.Optional(BooleanFlag('true: delete an environment or package even while a function uses it')),
  resourceVersion: Type.Optional(ResourceVersionParam('Refuse the delete (409) unless the object is still at this version')),
});
const KIND_ALTERNATIVES = `(?:${KIND_NAMES.join('|')})`;
export const WatchQuery = Type.Object({
  kind: Type.Optional(Type.Union(KIND_NAMES.map((k) => Type.Literal(k)))),
  kinds: Type.Optional(
    Type.String({
      pattern: `^${KIND_ALTERNATIVES}(?:,${KIND_ALTERNATIVES})*$`,
      maxLength: 512,
      description: 'Comma-separated kind names: only changes of these kinds (the dashboard follows its kinds and never the secrets)',
    }),
  ),
  namespace: Type.Optional(Dns1123Label()),
  resourceVersion: Type.Optional(ResourceVersionParam('Replay every change after this version first')),
});
export const LogQuery = Type.Object({
  follow: Type.Optional(BooleanFlag('true: keep the response open and send lines as they are written')),
  tail: Type.Optional(Type.String({ pattern: '^[0-9]{1,9}$', description: 'How many of the last lines to send (default 1000), counted after the filters' })),
  requestId: Type.Optional(
    Type.String({ pattern: REQUEST_ID_PATTERN, maxLength: REQUEST_ID_MAX, description: 'Only the lines the function wrote while serving this request (its X-Flint-Request-Id)' }),
  ),
  instance: Type.Optional(Type.String({ pattern: INSTANCE_PATTERN, maxLength: 253, description: 'Only the lines of this instance (a worker, or a pod in kubernetes mode: `flint fn pods`)' })),
  detail: Type.Optional(BooleanFlag("true: a header line naming the function, environment, namespace and instance wherever the instance changes (Fission's --detail)")),
});
export const MetricsQuery = Type.Object({
  follow: Type.Optional(BooleanFlag('true: keep the response open as server-sent events (history, then sample and instances per interval)')),
});
export const ArchiveParams = Type.Object({ sha256: Sha256Param });
export const UploadQuery = Type.Object({ sha256: Type.Optional(Sha256Param) });
export const TopicParams = Type.Object({ topic: Type.String({ pattern: TOPIC_PATTERN }) });
export const TopicReadQuery = Type.Object({ group: Type.String({ pattern: '^[-A-Za-z0-9._]{1,200}$', description: 'Consumer group' }) });
