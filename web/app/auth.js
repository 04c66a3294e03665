// Sign-up and log-in. The session comes back as an HttpOnly cookie, so
// these forms never hold a token.
import { html, useState } from '/vendor/htm-preact-standalone.module.js';
import { api } from './api.js';
import { Field, FormError, Submit, useSubmit } from './ui.js';

function AuthFrame({ title, children }) {
  return html`<main class="auth">
    <div class="card">
      <p class="brand">Contrail</p>
      <h1>${title}</h1>
      ${children}
    </div>
  </main>`;
}

export function Login({ onDone, note }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit(async () => onDone(await api.login(email, password)));
  return html`<${AuthFrame} title="Log in">
    ${note ? html`<p class="note" role="status">${note}</p>` : null}
    <form onSubmit=${submit} novalidate>
      <${Field} label="Email" name="email" type="email" autocomplete="username" value=${email} onInput=${setEmail} error=${error} required />
      <${Field} label="Password" name="password" type="password" autocomplete="current-password" value=${password} onInput=${setPassword} error=${error} required />
      <${FormError} error=${error} fields=${['email', 'password']} />
      <${Submit} busy=${busy}>Log in<//>
    </form>
    <p class="switch">New to Contrail? <a href="#/signup">Create an account</a></p>
  <//>`;
}

export function Signup({ onDone }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [organization, setOrganization] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    await api.signup(email, password, organization);
    onDone(await api.login(email, password));
  });
  return html`<${AuthFrame} title="Sign up">
    <form onSubmit=${submit} novalidate>
      <${Field} label="Email" name="email" type="email" autocomplete="username" value=${email} onInput=${setEmail} error=${error} required />
      <${Field} label="Password" name="password" type="password" autocomplete="new-password" value=${password} onInput=${setPassword}
        error=${error} hint="At least 12 characters." required />
      <${Field} label="Organization" name="organization" autocomplete="organization" value=${organization} onInput=${setOrganization}
        error=${error} hint="Your team or company; you can have many accounts in it." required />
      <${FormError} error=${error} fields=${['email', 'password', 'organization']} />
      <${Submit} busy=${busy}>Sign up<//>
    </form>
    <p class="switch">Already signed up? <a href="#/login">Log in</a></p>
  <//>`;
}
