// Every token Flint signs names one audience (`aud`), and each service takes
// only its own: a token a function could see in a request it served (a
// router token) must never open the control plane, where the router secret
// and every function's code live.

/** Function calls through the router: logins, `flint token create`, the trigger manager's tokens. */
export const ROUTER_AUDIENCE = 'flint-router';
/** The control-plane API, issued to the administrator only (POST /v1/tokens). */
export const CONTROL_PLANE_AUDIENCE = 'flint-control-plane';
/** Pool pods' fetchers: archive downloads from the control plane, and nothing else. */
export const ARCHIVES_AUDIENCE = 'flint-archives';

export type Audience = typeof ROUTER_AUDIENCE | typeof CONTROL_PLANE_AUDIENCE | typeof ARCHIVES_AUDIENCE;

/** The short names the API and the CLI take (`--audience control-plane`). */
export const AUDIENCE_NAMES = { router: ROUTER_AUDIENCE, 'control-plane': CONTROL_PLANE_AUDIENCE } as const;
export type AudienceName = keyof typeof AUDIENCE_NAMES;

const KNOWN: Record<string, string> = {
  [ROUTER_AUDIENCE]: 'a router token',
  [CONTROL_PLANE_AUDIENCE]: 'a control-plane token',
  [ARCHIVES_AUDIENCE]: "a fetcher's archive token",
};

function what(found: string | undefined): string {
  if (found === undefined) return 'this token names no audience';
  const known = KNOWN[found];
  return known === undefined ? 'this token is for another service' : `this is ${known} (audience ${found})`;
}

/** The 401 message for a valid token of the wrong audience at the router. */
export function routerAudienceRefusal(found: string | undefined): string {
  return `Unauthorized: ${what(found)}; the router takes router tokens (audience ${ROUTER_AUDIENCE}): flint token create`;
}

/** The 401 message for a valid token of the wrong audience at the control plane. */
export function controlPlaneAudienceRefusal(found: string | undefined): string {
  return `Unauthorized: ${what(found)}; the control plane takes the admin token or a control-plane token: flint token create --audience control-plane`;
}
