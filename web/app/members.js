// The organization's members.
import { html } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Loaded, useLoad } from './ui.js';
import { when } from './format.js';

export function Members() {
  const st = useLoad(() => api.members(), []);
  return html`<section>
    <h1>Members</h1>
    <p>The people who can sign in to this organization.</p>
    <${Loaded} st=${st} what="members">${(data) => html`<div class="table-wrap"><table class="members">
      <thead><tr><th scope="col">Email</th><th scope="col">Joined</th></tr></thead>
      <tbody>${data.items.map((m) => html`<tr key=${m.id}><td>${m.email}</td><td>${when(m.created_at)}</td></tr>`)}</tbody>
    </table></div>`}<//>
  </section>`;
}
