// Turns the administrator's checked token request (POST /v1/tokens) into a
// signed token. Only the control plane issues these: it holds the signing
// key, and it has already made sure the caller is the administrator.
import type { TokenRequest, TokenResponse } from '../api/token-request.ts';
import { AUDIENCE_NAMES } from './audiences.ts';
import { TokenScope } from './scope.ts';
import type { TokenService } from './tokens.ts';

export type TokenIssuer = (req: TokenRequest) => TokenResponse;

/** `username`: the administrator's (the router secret's), written into each token's `sub` and `username`. */
export function createTokenIssuer(tokens: TokenService, username: string): TokenIssuer {
  return (req) => {
    const scoped = req.functions !== undefined || req.methods !== undefined;
    const audience = AUDIENCE_NAMES[req.audience];
    const issued = tokens.issueFor({
      audience,
      username,
      ttlSeconds: req.ttlSeconds ?? tokens.expirySeconds,
      scope: scoped ? new TokenScope(req.functions, req.methods) : undefined,
    });
    return { accesstoken: issued.token, tokentype: 'Bearer', audience, expiresAt: new Date(issued.expiresAt).toISOString() };
  };
}
