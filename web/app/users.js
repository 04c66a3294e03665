// An account's NATS users: create one (its creds are shown once, to
// download or copy, and the dialog closes only once the person says they
// saved them), list them, revoke one.
import { html, useState } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Confirm, CopyButton, Dialog, Field, FormError, Loaded, Snippet, Submit, downloadFile, useLoad, useSubmit } from './ui.js';
import { snippets } from './snippets.js';
import { when, shortKey, slug } from './format.js';

const expiries = [['', 'Never'], ['3600', '1 hour'], ['86400', '1 day'], ['2592000', '30 days'], ['31536000', '1 year']];

/** subjects splits what was typed into subjects (spaces or commas between). */
function subjects(s) {
  return s.split(/[\s,]+/).filter(Boolean);
}

function CreateUser({ account, onCreated }) {
  const [name, setName] = useState('');
  const [pub, setPub] = useState('');
  const [sub, setSub] = useState('');
  const [expiry, setExpiry] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    const body = { name };
    const perms = {};
    if (subjects(pub).length) perms.publish = { allow: subjects(pub) };
    if (subjects(sub).length) perms.subscribe = { allow: subjects(sub) };
    if (perms.publish || perms.subscribe) body.permissions = perms;
    if (expiry) body.expires_in_seconds = Number(expiry);
    const u = await api.createUser(account.id, body);
    setName(''); setPub(''); setSub(''); setExpiry('');
    onCreated(u);
  });
  const fields = ['name', 'permissions.publish.allow', 'permissions.subscribe.allow', 'expires_in_seconds'];
  return html`<form class="user-form" onSubmit=${submit} novalidate>
    <h2>Create user</h2>
    <div class="grid">
      <${Field} label="User name" name="name" value=${name} onInput=${setName} error=${error} required maxlength="64" />
      <div class="field">
        <label for="user-expiry">Expires</label>
        <select id="user-expiry" name="expires_in_seconds" value=${expiry} onChange=${(e) => setExpiry(e.currentTarget.value)}>
          ${expiries.map(([v, l]) => html`<option key=${v} value=${v}>${l}</option>`)}
        </select>
      </div>
      <${Field} label="May publish to" name="permissions.publish.allow" value=${pub} onInput=${setPub} error=${error}
        hint="Subjects, separated by spaces; empty allows all." placeholder="orders.> events.*" />
      <${Field} label="May subscribe to" name="permissions.subscribe.allow" value=${sub} onInput=${setSub} error=${error}
        hint="Subjects, separated by spaces; empty allows all." placeholder="orders.>" />
    </div>
    <${FormError} error=${error} fields=${fields} />
    <div class="actions"><${Submit} busy=${busy}>Create user<//></div>
  </form>`;
}

/** CredsDialog shows a new user's creds once. */
function CredsDialog({ account, user, onClose }) {
  const [saved, setSaved] = useState(false);
  const file = `${slug(account.name)}-${slug(user.name)}.creds`;
  return html`<${Dialog} title=${`Creds for ${user.name}`} open=${true} canClose=${saved} onClose=${onClose} wide>
    <p class="warn">This is the only time these creds are shown: Contrail does not keep the user's secret key.
      Download or copy them now.</p>
    <textarea class="creds" readonly rows="8" aria-label="Creds file" value=${user.creds}></textarea>
    <div class="actions left">
      <button type="button" class="primary" onClick=${() => downloadFile(file, user.creds)}>Download ${file}</button>
      <${CopyButton} text=${user.creds} label="Copy creds" />
    </div>
    <h3>Then connect</h3>
    ${snippets(account, file).slice(0, 2).map(([id, title, text]) => html`<${Snippet} key=${id} id=${'dlg-' + id} title=${title} text=${text} />`)}
    <div class="check">
      <input type="checkbox" id="creds-saved" checked=${saved} onChange=${(e) => setSaved(e.currentTarget.checked)} />
      <label for="creds-saved">I have saved the creds file</label>
    </div>
    <div class="actions">
      <button type="button" onClick=${onClose} disabled=${!saved}>Close</button>
    </div>
  <//>`;
}

export function Users({ account }) {
  const st = useLoad(() => api.users(account.id), [account.id]);
  const [created, setCreated] = useState(null);
  const [revoking, setRevoking] = useState(null);
  const { busy, error, submit: revoke } = useSubmit(async () => {
    await api.deleteUser(account.id, revoking.id);
    setRevoking(null);
    st.reload();
  });
  return html`<div>
    <${CreateUser} account=${account} onCreated=${(u) => { setCreated(u); st.reload(); }} />
    ${created ? html`<${CredsDialog} account=${account} user=${created} onClose=${() => setCreated(null)} />` : null}
    <h2>Users</h2>
    <${Loaded} st=${st} what="users">${(data) => data.items.length === 0
      ? html`<p class="empty-line">No users yet. Create one above to get a creds file.</p>`
      : html`<div class="table-wrap"><table class="users">
          <thead><tr><th scope="col">Name</th><th scope="col">Public key</th><th scope="col">Permissions</th><th scope="col">Expires</th><th scope="col">Created</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
          <tbody>${data.items.map((u) => html`<tr key=${u.id}>
            <td class="user-name">${u.name}</td>
            <td><code title=${u.public_key}>${shortKey(u.public_key)}</code></td>
            <td>${perms(u.permissions)}</td>
            <td>${u.expires_at ? when(u.expires_at) : 'never'}</td>
            <td>${when(u.created_at)}</td>
            <td><button type="button" class="danger small" onClick=${() => setRevoking(u)}>Revoke</button></td>
          </tr>`)}</tbody>
        </table></div>`}<//>
    <${Confirm} title="Revoke user" open=${!!revoking} onCancel=${() => setRevoking(null)} onConfirm=${revoke}
      busy=${busy} error=${error} action="Revoke user">
      <p>Revoke <strong>${revoking ? revoking.name : ''}</strong>? Its connections are closed within seconds and its creds stop working.</p>
    <//>
  </div>`;
}

function perms(p) {
  if (!p || (!p.publish && !p.subscribe)) return 'all subjects';
  const part = (label, x) => (x && x.allow && x.allow.length ? `${label} ${x.allow.join(' ')}` : '');
  return [part('pub', p.publish), part('sub', p.subscribe)].filter(Boolean).join('; ') || 'custom';
}
