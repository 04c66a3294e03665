// The console's entry point: the session, the hash router and the frame
// around every page.
import { html, render, useState, useEffect } from '/vendor/htm-preact-standalone.module.js';
import { api, onSessionExpired } from './api.js';
import { Loading, go } from './ui.js';
import { Login, Signup } from './auth.js';
import { AccountList, AccountCreate } from './accounts.js';
import { AccountPage } from './account.js';
import { Tokens } from './tokens.js';
import { Members } from './members.js';

/** route reads the hash: "#/accounts/acc_1/users" → ["accounts", "acc_1", "users"]. */
function route() {
  return location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
}

function useRoute() {
  const [r, setR] = useState(route());
  useEffect(() => {
    const f = () => setR(route());
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return r;
}

function Header({ session, onLogout, path }) {
  const [busy, setBusy] = useState(false);
  const logout = async () => {
    setBusy(true);
    try { await api.logout(); } catch { /* the cookie is cleared either way below */ }
    setBusy(false);
    onLogout();
  };
  const link = (href, label, key) => html`<a href=${href} aria-current=${path[0] === key ? 'page' : undefined}>${label}</a>`;
  return html`<header class="top">
    <a class="brand" href="#/accounts">Contrail</a>
    <nav aria-label="Main">
      ${link('#/accounts', 'Accounts', 'accounts')}
      ${link('#/tokens', 'API tokens', 'tokens')}
      ${link('#/members', 'Members', 'members')}
    </nav>
    <div class="who">
      <span class="org" title=${session.user.email}>${session.organization.name}</span>
      <button type="button" onClick=${logout} disabled=${busy}>${busy ? 'Logging out…' : 'Log out'}</button>
    </div>
  </header>`;
}

function Page({ path }) {
  const [top, id, tab] = path;
  if (top === 'accounts' && id === 'new') return html`<${AccountCreate} />`;
  if (top === 'accounts' && id) return html`<${AccountPage} id=${id} tab=${tab || 'overview'} />`;
  if (top === 'tokens') return html`<${Tokens} />`;
  if (top === 'members') return html`<${Members} />`;
  return html`<${AccountList} />`;
}

function App() {
  const path = useRoute();
  // undefined: asking; null: logged out; else the session.
  const [session, setSession] = useState(undefined);
  const [note, setNote] = useState('');
  useEffect(() => {
    api.session().then(setSession, () => setSession(null));
    return onSessionExpired(() => {
      setNote('Your session has ended. Please log in again.');
      setSession(null);
    });
  }, []);
  useEffect(() => {
    const titles = { accounts: 'Accounts', tokens: 'API tokens', members: 'Members', login: 'Log in', signup: 'Sign up' };
    document.title = `${titles[path[0]] || 'Accounts'} · Contrail`;
  }, [path.join('/')]);
  if (session === undefined) return html`<main class="center"><${Loading} what="the console" /></main>`;
  if (session === null) {
    const done = (s) => { setNote(''); setSession(s); go('/accounts'); };
    return path[0] === 'signup'
      ? html`<${Signup} onDone=${done} />`
      : html`<${Login} onDone=${done} note=${note} />`;
  }
  if (path[0] === 'login' || path[0] === 'signup') {
    go('/accounts');
    return null;
  }
  return html`<${Header} session=${session} path=${path} onLogout=${() => { setSession(null); go('/login'); }} />
    <main id="main"><${Page} path=${path} /></main>`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
