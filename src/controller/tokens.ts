// `POST /v1/tokens`: the administrator's token counter. It takes the admin
// token, a control-plane token, or the administrator's username and password
// as Basic credentials (the app's auth hook checks which), and returns a
// token of the asked audience: control-plane tokens for the CLI where the
// admin token is not at hand, router tokens optionally scoped to some
// functions and methods, for handing to a client.
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { TokenRequestSchema, TokenResponseSchema, validateTokenRequest } from '../api/token-request.ts';
import type { TokenIssuer } from '../auth/issuer.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

export function registerTokenRoute(app: FastifyInstance, store: Store, issue: TokenIssuer | undefined): void {
  app.post(
    '/v1/tokens',
    {
      schema: {
        tags: ['system'],
        summary: 'Issue a token to the administrator',
        description:
          'Authorization: the admin token, a control-plane token, or Basic <username:password> of the router secret. ' +
          'A scoped router token (functions, methods) reaches only those; functions that do not exist yet are named in x-flint-warnings.',
        body: TokenRequestSchema,
        response: { 201: TokenResponseSchema, ...errorResponses(400, 401, 409, 429) },
      },
    },
    async (req, reply) => {
      if (issue === undefined) throw new FlintError('FLINT_ERR_CONFLICT', 'authentication is off: nothing takes tokens (start the server with --set authentication.enabled=true)');
      // The document says a body is required: a request without one is refused, not read as "all defaults".
      if (req.body === undefined || req.body === null) throw new FlintError('FLINT_ERR_VALIDATION', 'send the token request as a JSON object ({} asks for a router token with the defaults)');
      const request = validateTokenRequest(req.body);
      const missing: string[] = [];
      for (const key of request.functions ?? []) {
        const [namespace, name] = key.split('/');
        if ((await store.get('Function', namespace, name)) === undefined) missing.push(`function '${name}' does not exist (yet) in namespace '${namespace}'`);
      }
      if (missing.length > 0) reply.header('x-flint-warnings', JSON.stringify(missing));
      return reply.code(201).send(issue(request));
    },
  );
}
