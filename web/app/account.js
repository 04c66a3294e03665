// One account: its connection details, usage against its limits, the
// snippets to connect, and tabs for users, streams, usage charts and
// settings.
import { html, useState } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Confirm, CopyButton, Loaded, Snippet, go, useLoad, useSubmit } from './ui.js';
import { AccountForm } from './accounts.js';
import { Users } from './users.js';
import { Streams } from './streams.js';
import { UsageCharts } from './charts.js';
import { bytes, count, limit, slug } from './format.js';
import { snippets } from './snippets.js';

const tabs = [['overview', 'Overview'], ['users', 'Users'], ['streams', 'Streams'], ['usage', 'Usage'], ['settings', 'Settings']];

export function AccountPage({ id, tab }) {
  const st = useLoad(() => api.account(id), [id]);
  return html`<section>
    <p class="crumbs"><a href="#/accounts">Accounts</a></p>
    <${Loaded} st=${st} what="the account">${(a) => html`
      <div class="page-head"><h1 class="account-name">${a.name}</h1></div>
      <nav class="tabs" aria-label="Account">
        ${tabs.map(([key, label]) => html`<a key=${key} href=${`#/accounts/${encodeURIComponent(id)}/${key}`}
          aria-current=${tab === key ? 'page' : undefined}>${label}</a>`)}
      </nav>
      ${tab === 'users' ? html`<${Users} account=${a} />`
        : tab === 'streams' ? html`<${Streams} account=${a} />`
        : tab === 'usage' ? html`<${UsageCharts} account=${a} />`
        : tab === 'settings' ? html`<${Settings} account=${a} onSaved=${st.reload} />`
        : html`<${Overview} account=${a} />`}`}<//>
  </section>`;
}

function Bar({ label, used, max, fmt }) {
  const unlimited = max === -1;
  return html`<div class="bar">
    <div class="bar-label"><span>${label}</span><span>${fmt(used)} of ${limit(max, fmt)}</span></div>
    ${unlimited
      ? html`<meter min="0" max="1" value="0" aria-label=${label + ' (unlimited)'}></meter>`
      : html`<meter min="0" max=${Math.max(max, 1)} value=${used} high=${max * 0.8} optimum="0" aria-label=${label}></meter>`}
  </div>`;
}

function Overview({ account: a }) {
  const st = useLoad(() => api.usage(a.id), [a.id]);
  const js = a.limits.jetstream;
  return html`<div class="overview">
    <dl class="facts">
      <div><dt>NATS URL</dt><dd><code class="nats-url">${a.nats_url}</code> <${CopyButton} text=${a.nats_url} what="NATS URL" /></dd></div>
      <div><dt>Public key</dt><dd><code class="pubkey">${a.public_key}</code> <${CopyButton} text=${a.public_key} what="public key" /></dd></div>
    </dl>
    <h2>Usage</h2>
    <${Loaded} st=${st} what="usage">${(u) => html`<div class="bars">
      <${Bar} label="File storage" used=${u.storage_bytes} max=${js.max_storage} fmt=${bytes} />
      <${Bar} label="Memory storage" used=${u.memory_bytes} max=${js.max_memory} fmt=${bytes} />
      <${Bar} label="Streams" used=${u.streams} max=${js.max_streams} fmt=${count} />
      <${Bar} label="Connections" used=${u.connections} max=${a.limits.max_connections} fmt=${count} />
      <p class="muted">${count(u.messages)} messages in ${count(u.streams)} streams, ${count(u.consumers)} consumers.
        <button type="button" class="link" onClick=${st.reload}>Refresh</button></p>
    </div>`}<//>
    <h2>Connect</h2>
    <p>Create a user on the <a href=${`#/accounts/${encodeURIComponent(a.id)}/users`}>Users</a> tab and download its creds file
      (<code>${slug(a.name)}-<em>user</em>.creds</code>), then:</p>
    ${snippets(a).map(([id, title, text]) => html`<${Snippet} key=${id} id=${id} title=${title} text=${text} />`)}
  </div>`;
}

function Settings({ account: a, onSaved }) {
  const [saved, setSaved] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState('');
  const save = async (body) => {
    setSaved(false);
    await api.updateAccount(a.id, body);
    setSaved(true);
    onSaved();
  };
  const { busy, error, submit: del } = useSubmit(async () => {
    await api.deleteAccount(a.id);
    go('/accounts');
  });
  return html`<div>
    <h2>Name and limits</h2>
    ${saved ? html`<p class="ok" role="status">Saved. New limits reach the data plane within seconds.</p>` : null}
    <${AccountForm} account=${a} onSave=${save} action="Save changes" />
    <div class="danger-zone">
      <h2>Delete account</h2>
      <p>Deleting the account disconnects its users and removes its streams. This cannot be undone.</p>
      <button type="button" class="danger" onClick=${() => { setTyped(''); setConfirming(true); }}>Delete account…</button>
    </div>
    <${Confirm} title="Delete account" open=${confirming} onCancel=${() => setConfirming(false)} onConfirm=${del}
      busy=${busy} error=${error} action="Delete account" ready=${typed === a.name}>
      <p>Type the account's name, <strong class="confirm-name">${a.name}</strong>, to confirm.</p>
      <div class="field"><label for="confirm-name">Account name</label>
        <input id="confirm-name" name="confirm" value=${typed} onInput=${(e) => setTyped(e.currentTarget.value)} autocomplete="off" /></div>
    <//>
  </div>`;
}
