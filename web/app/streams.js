// An account's streams, a page at a time from the server.
import { html, useState } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Loaded, Pager, useLoad } from './ui.js';
import { bytes, count } from './format.js';

const pageSize = 20;

export function Streams({ account }) {
  const [offset, setOffset] = useState(0);
  const st = useLoad(() => api.streams(account.id, offset, pageSize), [account.id, offset]);
  return html`<div>
    <div class="page-head">
      <h2>Streams</h2>
      <button type="button" onClick=${st.reload} disabled=${st.loading}>${st.loading ? 'Refreshing…' : 'Refresh'}</button>
    </div>
    <${Loaded} st=${st} what="streams">${(data) => data.total === 0
      ? html`<p class="empty-line">No streams yet. Create one with <code>nats stream add</code> or any JetStream client.</p>`
      : html`<div class="table-wrap"><table class="streams">
          <thead><tr><th scope="col">Name</th><th scope="col">Subjects</th><th scope="col">Storage</th><th scope="col">Replicas</th>
            <th scope="col" class="num">Messages</th><th scope="col" class="num">Bytes</th><th scope="col" class="num">Consumers</th></tr></thead>
          <tbody>${data.items.map((s) => html`<tr key=${s.name}>
            <td class="stream-name">${s.name}</td>
            <td class="subjects">${s.subjects.map((x) => html`<code key=${x}>${x}</code> `)}</td>
            <td>${s.storage || '—'}</td>
            <td>${s.replicas || '—'}</td>
            <td class="num stream-messages">${count(s.messages)}</td>
            <td class="num">${bytes(s.bytes)}</td>
            <td class="num">${count(s.consumers)}</td>
          </tr>`)}</tbody>
        </table></div>
        <${Pager} offset=${data.offset} limit=${data.limit} total=${data.total} onPage=${setOffset} busy=${st.loading} />`}<//>
  </div>`;
}
