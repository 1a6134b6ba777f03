import { readFileSync } from 'node:fs';

/** The package version, read once: the CLI and `GET /v1/info` report it. */
export const VERSION: string = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
