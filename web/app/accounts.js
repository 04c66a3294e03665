// The accounts list, the empty state, and the account form (create and
// edit share it).
import { html, useState } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Field, FormError, Loaded, Submit, go, useLoad, useSubmit } from './ui.js';
import { when, shortKey } from './format.js';

export function AccountList() {
  const st = useLoad(() => api.accounts(), []);
  return html`<section>
    <div class="page-head">
      <h1>Accounts</h1>
      <a class="button primary" href="#/accounts/new">Create account</a>
    </div>
    <${Loaded} st=${st} what="accounts">${(data) => data.items.length === 0
      ? html`<div class="empty">
          <h2>Create your first account</h2>
          <p>An account is an isolated NATS namespace with its own streams, users and JetStream limits.
             Create one, add a user, download its creds, and connect any NATS client.</p>
          <a class="button primary" href="#/accounts/new">Create your first account</a>
        </div>`
      : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Name</th><th scope="col">Public key</th><th scope="col">NATS URL</th><th scope="col">Created</th></tr></thead>
          <tbody>${data.items.map((a) => html`<tr key=${a.id}>
            <td><a href=${'#/accounts/' + encodeURIComponent(a.id)} data-account=${a.id}>${a.name}</a></td>
            <td><code title=${a.public_key}>${shortKey(a.public_key)}</code></td>
            <td><code>${a.nats_url}</code></td>
            <td>${when(a.created_at)}</td>
          </tr>`)}</tbody>
        </table></div>`}<//>
  </section>`;
}

// The limits the form edits, as [field path, label, hint, unit].
const limitFields = [
  ['limits.max_connections', 'Max connections', 'Clients connected at once.', ''],
  ['limits.max_payload', 'Max payload (bytes)', 'The largest message a client may publish.', 'bytes'],
  ['limits.jetstream.max_storage', 'File storage (bytes)', 'Bytes all file streams may hold.', 'bytes'],
  ['limits.jetstream.max_memory', 'Memory storage (bytes)', 'Bytes all memory streams may hold.', 'bytes'],
  ['limits.jetstream.max_streams', 'Max streams', '', ''],
  ['limits.jetstream.max_consumers', 'Max consumers per stream', '', ''],
  ['limits.jetstream.max_ack_pending', 'Max ack pending', 'Unacknowledged messages per consumer.', ''],
];

const defaults = {
  'limits.max_connections': '-1', 'limits.max_payload': '-1',
  'limits.jetstream.max_storage': String(1 << 30), 'limits.jetstream.max_memory': String(256 << 20),
  'limits.jetstream.max_streams': '-1', 'limits.jetstream.max_consumers': '-1', 'limits.jetstream.max_ack_pending': '-1',
};

/** limitOf reads a limit from an account by its field path ("limits.jetstream.max_streams"). */
function limitOf(account, path) {
  return path.split('.').slice(1).reduce((o, k) => (o == null ? o : o[k]), account.limits);
}

/** limitsBody turns the form's strings into the API's limits object. A
 * value that is not a whole number is sent as it is typed (a string),
 * so the API's error names the field. */
function limitsBody(values) {
  const out = { jetstream: {} };
  for (const [path] of limitFields) {
    const raw = values[path].trim();
    const v = /^-?\d+$/.test(raw) ? Number(raw) : raw;
    const keys = path.split('.').slice(1);
    if (keys.length === 1) out[keys[0]] = v;
    else out.jetstream[keys[1]] = v;
  }
  return out;
}

/** AccountForm edits a name and limits; onSave gets the request body. */
export function AccountForm({ account, onSave, action }) {
  const [name, setName] = useState(account ? account.name : '');
  const [values, setValues] = useState(() => {
    if (!account) return { ...defaults };
    const v = {};
    for (const [path] of limitFields) v[path] = String(limitOf(account, path));
    return v;
  });
  const { busy, error, submit } = useSubmit(() => onSave({ name, limits: limitsBody(values) }));
  return html`<form class="account-form" onSubmit=${submit} novalidate>
    <${Field} label="Name" name="name" value=${name} onInput=${setName} error=${error} required maxlength="64"
      hint="Shown in the console; 1 to 64 characters." />
    <fieldset>
      <legend>Limits <small>(-1 means unlimited)</small></legend>
      <div class="grid">
        ${limitFields.map(([path, label, hint]) => html`<${Field} key=${path} label=${label} name=${path} inputmode="numeric"
          value=${values[path]} onInput=${(v) => setValues((o) => ({ ...o, [path]: v }))} error=${error} hint=${hint} />`)}
      </div>
    </fieldset>
    <${FormError} error=${error} fields=${['name', ...limitFields.map((f) => f[0])]} />
    <div class="actions"><${Submit} busy=${busy}>${action}<//></div>
  </form>`;
}

export function AccountCreate() {
  const save = async (body) => {
    const a = await api.createAccount(body);
    go('/accounts/' + encodeURIComponent(a.id));
  };
  return html`<section>
    <p class="crumbs"><a href="#/accounts">Accounts</a></p>
    <h1>Create account</h1>
    <${AccountForm} onSave=${save} action="Create account" />
  </section>`;
}
