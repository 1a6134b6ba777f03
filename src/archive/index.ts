// The archive layer: content-addressed storage and safe zip handling.
export { sha256File } from './checksum.ts';
export { LocalArchiveStore } from './local-store.ts';
export type { ArchiveInfo, ArchiveStore, PutOptions } from './store.ts';
export { isZipBuffer, isZipFile, zipDirectory, zipFiles } from './zip-create.ts';
export { DEFAULT_EXTRACT_LIMITS, type ExtractLimits, extractZip } from './zip-extract.ts';
export { type InspectLimits, inspectZip } from './zip-inspect.ts';
