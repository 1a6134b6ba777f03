// The chart's values.schema.json, rendered from the schema `flint server`
// checks its values with, so `helm install` refuses a bad value (naming it)
// before anything reaches the cluster, exactly as `flint server` would.
import path from 'node:path';
import { ValuesSchema } from './values.ts';

export const VALUES_SCHEMA_FILE = path.join(import.meta.dirname, '..', '..', 'charts', 'flint', 'values.schema.json');

export function renderValuesSchema(): string {
  const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: 'Flint install values', ...JSON.parse(JSON.stringify(ValuesSchema)) };
  return `${JSON.stringify(schema, null, 2)}\n`;
}
