import { Type } from '@sinclair/typebox';

export const OPENAPI_INFO = {
  openapi: '3.1.0',
  info: {
    title: 'Flint control-plane API',
    version: '1',
    description: 'Resources (environments, functions, packages, triggers, secrets, configmaps), watch, and function logs.',
  },
};

export const ErrorBody = Type.Object(
  {
    code: Type.String({ description: 'Stable error code, FLINT_ERR_...' }),
    message: Type.String(),
    field: Type.Optional(Type.String({ description: 'Dotted path of the offending field' })),
  },
  { $id: 'Error' },
);

/** The committed copy of the document; a test regenerates it and fails on a diff. */
export const OPENAPI_FILE = new URL('../../docs/openapi.json', import.meta.url);

export async function renderOpenApi(app: { ready(): PromiseLike<unknown>; swagger(): unknown }): Promise<string> {
  await app.ready();
  return `${JSON.stringify(app.swagger(), null, 2)}\n`;
}
