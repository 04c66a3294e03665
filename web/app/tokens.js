// API tokens for scripts and Terraform: create (shown once), list, revoke.
import { html, useState } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Confirm, CopyButton, Dialog, Field, FormError, Loaded, Submit, useLoad, useSubmit } from './ui.js';
import { when } from './format.js';

const ttls = [['2592000', '30 days'], ['604800', '7 days'], ['86400', '1 day'], ['7776000', '90 days'], ['31536000', '1 year']];

export function Tokens() {
  const st = useLoad(() => api.tokens(), []);
  const [name, setName] = useState('');
  const [ttl, setTtl] = useState('2592000');
  const [created, setCreated] = useState(null);
  const [saved, setSaved] = useState(false);
  const [revoking, setRevoking] = useState(null);
  const { busy, error, submit } = useSubmit(async () => {
    const t = await api.createToken({ name, ttl_seconds: Number(ttl) });
    setName('');
    setSaved(false);
    setCreated(t);
    st.reload();
  });
  const { busy: rbusy, error: rerror, submit: revoke } = useSubmit(async () => {
    await api.deleteToken(revoking.id);
    setRevoking(null);
    st.reload();
  });
  return html`<section>
    <h1>API tokens</h1>
    <p>Tokens let scripts and Terraform call the API: <code>Authorization: Bearer contrail_api_…</code>.
      A token acts as you; revoke one you no longer use.</p>
    <form class="token-form" onSubmit=${submit} novalidate>
      <div class="grid">
        <${Field} label="Token name" name="name" value=${name} onInput=${setName} error=${error} required maxlength="64" placeholder="terraform" />
        <div class="field">
          <label for="token-ttl">Expires after</label>
          <select id="token-ttl" name="ttl_seconds" value=${ttl} onChange=${(e) => setTtl(e.currentTarget.value)}>
            ${ttls.map(([v, l]) => html`<option key=${v} value=${v}>${l}</option>`)}
          </select>
        </div>
      </div>
      <${FormError} error=${error} fields=${['name', 'ttl_seconds']} />
      <div class="actions"><${Submit} busy=${busy}>Create token<//></div>
    </form>
    ${created ? html`<${Dialog} title=${`Token ${created.name}`} open=${true} canClose=${saved} onClose=${() => setCreated(null)} wide>
      <p class="warn">This is the only time the token is shown. Copy it now.</p>
      <pre class="secret" tabindex="0"><code class="new-token">${created.token}</code></pre>
      <div class="actions left"><${CopyButton} text=${created.token} label="Copy token" /></div>
      <div class="check">
        <input type="checkbox" id="token-saved" checked=${saved} onChange=${(e) => setSaved(e.currentTarget.checked)} />
        <label for="token-saved">I have saved the token</label>
      </div>
      <div class="actions"><button type="button" disabled=${!saved} onClick=${() => setCreated(null)}>Close</button></div>
    <//>` : null}
    <h2>Your tokens</h2>
    <${Loaded} st=${st} what="tokens">${(data) => data.items.length === 0
      ? html`<p class="empty-line">No API tokens yet.</p>`
      : html`<div class="table-wrap"><table class="tokens">
          <thead><tr><th scope="col">Name</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
          <tbody>${data.items.map((t) => html`<tr key=${t.id}>
            <td class="token-name">${t.name}</td><td>${when(t.created_at)}</td><td>${when(t.expires_at)}</td><td>${when(t.last_used_at)}</td>
            <td><button type="button" class="danger small" onClick=${() => setRevoking(t)}>Revoke</button></td>
          </tr>`)}</tbody>
        </table></div>`}<//>
    <${Confirm} title="Revoke token" open=${!!revoking} onCancel=${() => setRevoking(null)} onConfirm=${revoke}
      busy=${rbusy} error=${rerror} action="Revoke token">
      <p>Revoke <strong>${revoking ? revoking.name : ''}</strong>? Anything using it stops working at once.</p>
    <//>
  </section>`;
}
