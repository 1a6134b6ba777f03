// Signing in: the admin token, or the administrator's username and password,
// is exchanged at POST /v1/tokens for a control-plane token that lives a few
// hours; only that token is kept. Nothing else is asked of the API first.
import { useState } from 'preact/hooks';
import { basic, call, setToken } from '../api.ts';
import { html } from '../html.ts';
import { ErrorLine } from './common.ts';

const SESSION_TTL = '8h';

export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [error, setError] = useState<string>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = (e.currentTarget as HTMLFormElement).elements as any;
    setError(undefined);
    const admin = f.token.value.trim();
    const authorization = admin ? `Bearer ${admin}` : basic(f.username.value, f.password.value);
    try {
      const r = await call<{ accesstoken: string }>('POST', '/v1/tokens', { body: { audience: 'control-plane', ttl: SESSION_TTL }, authorization });
      setToken(r.data.accesstoken);
      (e.currentTarget as HTMLFormElement | null)?.reset();
      onSignedIn();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return html`<form class="card signin" name="signin" onSubmit=${submit}>
    <h2>Sign in to Flint</h2>
    <p>Authentication is on. Use the admin token (<code>.flint-data/private/admin-token</code>), or the username and password of the router secret.</p>
    <label>Admin token <input name="token" type="password" autocomplete="off" /></label>
    <p class="muted">or</p>
    <label>Username <input name="username" autocomplete="username" value="admin" /></label>
    <label>Password <input name="password" type="password" autocomplete="current-password" /></label>
    <button type="submit">Sign in</button>
    <${ErrorLine} error=${error} />
  </form>`;
}
