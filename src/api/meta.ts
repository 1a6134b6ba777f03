import { type Static, Type } from '@sinclair/typebox';
import { API_VERSION, DNS1123_LABEL, DNS1123_MAX, FISSION_API_VERSION } from './names.ts';

export { API_VERSION, DEFAULT_NAMESPACE, DNS1123_LABEL, DNS1123_MAX, FISSION_API_VERSION, SYSTEM_NAMESPACE } from './names.ts';
/** A name or namespace wherever one is sent: in an object, a reference or a URL. */
export const Dns1123Label = (description?: string) =>
  Type.String({ minLength: 1, maxLength: DNS1123_MAX, pattern: DNS1123_LABEL, ...(description ? { description } : {}) });
/** The apiVersions a write may carry: Flint's own, or Fission's (converted on the way in). */
export const ApiVersion = Type.Union([Type.Literal(API_VERSION), Type.Literal(FISSION_API_VERSION)]);

export const StringMap = Type.Record(Type.String(), Type.String());

export const ObjectMeta = Type.Object(
  {
    name: Dns1123Label(),
    namespace: Type.Optional(Dns1123Label()),
    uid: Type.Optional(Type.String()),
    resourceVersion: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
    generation: Type.Optional(Type.Integer({ minimum: 0 })),
    creationTimestamp: Type.Optional(Type.String()),
    labels: Type.Optional(StringMap),
    annotations: Type.Optional(StringMap),
  },
  { additionalProperties: false },
);
export type ObjectMeta = Static<typeof ObjectMeta>;

/** Metadata as the store hands it out: every server-set field present. */
export interface StoredMeta extends ObjectMeta {
  namespace: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp: string;
}

export const ObjectRef = Type.Object(
  {
    name: Dns1123Label(),
    // Absent: the referring object's own namespace.
    namespace: Type.Optional(Dns1123Label()),
  },
  { additionalProperties: false },
);
export type ObjectRef = Static<typeof ObjectRef>;

const Quantity = Type.Union([Type.String({ pattern: '^[0-9]+(\\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$' }), Type.Number()]);
const ResourceList = Type.Object(
  { cpu: Type.Optional(Quantity), memory: Type.Optional(Quantity) },
  { additionalProperties: false },
);
export const Resources = Type.Object(
  { requests: Type.Optional(ResourceList), limits: Type.Optional(ResourceList) },
  { additionalProperties: false },
);
export type Resources = Static<typeof Resources>;
