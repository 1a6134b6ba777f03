// A reusable bearer token for Flint's own calls through the router
// (the message-queue trigger manager). Re-signing per message would cost an
// HMAC on both sides and defeat the router's verified-token cache.
import type { Audience } from './audiences.ts';
import type { TokenService } from './tokens.ts';

export interface MintedTokenSourceOptions {
  tokens: TokenService;
  /** `sub` of the minted tokens, e.g. `flint:mqtrigger`. */
  subject: string;
  /** Who takes the tokens; default the router. */
  audience?: Audience;
  /** Lifetime of each token; default 60 s. */
  ttlSeconds?: number;
  now?: () => number;
}

/**
 * Returns the current token (without the `Bearer ` prefix), minting a new one
 * once a third or less of the current one's life is left.
 */
export function createMintedTokenSource(opts: MintedTokenSourceOptions): () => string {
  const ttl = opts.ttlSeconds ?? 60;
  const now = opts.now ?? Date.now;
  let token = '';
  let renewAt = 0;
  return () => {
    const t = now();
    if (t >= renewAt) {
      token = opts.tokens.mint(opts.subject, ttl, opts.audience);
      // A whole second is lost to exp's rounding, hence the margin.
      renewAt = t + Math.max(0, (ttl * 2000) / 3 - 1000);
    }
    return token;
  };
}
