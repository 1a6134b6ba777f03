// The dashboard's entry: asks /v1/info (public) whether authentication is
// on, shows the sign-in until there is a token, then the views, all fed by
// one live watch of the store.
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { get, hasToken, onSignedOut, setToken } from './api.ts';
import { html } from './html.ts';
import { type Kind, Live } from './live.ts';
import { href, useRoute } from './route.ts';
import './style.css';
import { NewFunctionForm, NewRouteForm } from './views/forms.ts';
import { FunctionPage } from './views/function-page.ts';
import { PackagePage } from './views/package-page.ts';
import { SignIn } from './views/signin.ts';
import { type Filter, FilterBar, ResourceTable } from './views/tables.ts';
import { TriggerPage } from './views/trigger-page.ts';

interface Info {
  version: string;
  mode: string;
  authentication: { enabled: boolean };
}

const NAV: Array<[string, string]> = [
  ['functions', 'Functions'],
  ['environments', 'Environments'],
  ['packages', 'Packages'],
  ['routes', 'Routes'],
  ['triggers', 'Triggers'],
];

function List({ live, page, filter }: { live: Live; page: string; filter: Filter }) {
  const table = (kind: Kind, title: string) => html`<${ResourceTable} live=${live} kind=${kind} filter=${filter} title=${title} />`;
  switch (page) {
    case 'environments':
      return table('Environment', 'Environments');
    case 'packages':
      return table('Package', 'Packages');
    case 'routes':
      return html`${table('HTTPTrigger', 'Routes')}<${NewRouteForm} live=${live} />`;
    case 'triggers':
      return html`${table('MessageQueueTrigger', 'Message-queue triggers')}${table('TimeTrigger', 'Time triggers')}${table('CanaryConfig', 'Canaries')}`;
    default:
      return html`${table('Function', 'Functions')}<${NewFunctionForm} live=${live} />`;
  }
}

function Shell({ info, onSignOut }: { info: Info; onSignOut: () => void }) {
  const live = useMemo(() => new Live(), []);
  useEffect(() => {
    void live.start();
    return () => live.stop();
  }, [live]);
  const [filter, setFilter] = useState<Filter>({ namespace: '', name: '' });
  const route = useRoute();
  const [page = 'functions', a, b, c] = route;
  let body: unknown;
  if (page === 'function' && a && b) body = html`<${FunctionPage} key=${`${a}/${b}`} live=${live} namespace=${a} name=${b} />`;
  else if (page === 'package' && a && b) body = html`<${PackagePage} live=${live} namespace=${a} name=${b} />`;
  else if (page === 'trigger' && a && b && c) body = html`<${TriggerPage} live=${live} kind=${a} namespace=${b} name=${c} />`;
  else body = html`<${FilterBar} live=${live} filter=${filter} onChange=${setFilter} /><${List} live=${live} page=${page} filter=${filter} />`;
  return html`<header>
      <h1><a href="#/">Flint</a></h1>
      <nav>${NAV.map(([id, label]) => html`<a href=${href(id)} class=${page === id ? 'active' : ''}>${label}</a>`)}</nav>
      <span class="muted">${info.mode} · ${info.version}</span>
      ${info.authentication.enabled ? html`<button name="signout" onClick=${onSignOut}>Sign out</button>` : null}
    </header>
    <main>${body}</main>`;
}

function App() {
  const [info, setInfo] = useState<Info>();
  const [error, setError] = useState<string>();
  const [signedIn, setSignedIn] = useState(hasToken());
  useEffect(() => {
    get<Info>('/v1/info').then(setInfo, (err) => setError((err as Error).message));
    onSignedOut(() => setSignedIn(false));
  }, []);
  if (error) return html`<p class="error">Cannot reach the control plane: ${error}</p>`;
  if (!info) return html`<p class="muted">Loading…</p>`;
  if (info.authentication.enabled && !signedIn) return html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  const signOut = () => {
    setToken(undefined);
    setSignedIn(false);
  };
  return html`<${Shell} info=${info} onSignOut=${signOut} />`;
}

render(html`<${App} />`, document.getElementById('app')!);
