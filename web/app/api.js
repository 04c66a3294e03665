// The REST API as the console calls it: same-origin requests that carry
// the session cookie (the browser sends it; no script can read it), JSON
// in and out, problem+json errors turned into ApiError.

/** ApiError is a failed request: status, a sentence for people, and the
 * request field at fault when the API named one. */
export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field || '';
  }
}

// What to say when the API gave no detail, by status.
const plain = {
  0: 'Could not reach the Contrail control plane. Check that it is running and try again.',
  401: 'Your session has ended. Please log in again.',
  403: 'That request was refused.',
  404: 'That no longer exists. It may have been deleted.',
  409: 'That conflicts with something that already exists.',
  429: 'Too many attempts. Wait a moment and try again.',
  500: 'Something went wrong on the server. Try again; if it keeps happening, check the control plane log.',
  503: 'The data plane did not answer. Try again in a few seconds.',
};

// Listeners told when a request finds the session gone (401).
const expired = new Set();
export function onSessionExpired(fn) { expired.add(fn); return () => expired.delete(fn); }

/** request sends one API call and returns the decoded body (null for 204). */
export async function request(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch {
    throw new ApiError(0, plain[0]);
  }
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    if (resp.status === 401 && path !== '/v1/session') expired.forEach((fn) => fn());
    const p = data || {};
    let msg = p.detail || plain[resp.status] || `The request failed (${resp.status}).`;
    // Field problems read "field: what is wrong"; the form shows the
    // field's label, so only the second half is needed.
    if (p.field && msg.startsWith(p.field + ': ')) msg = msg.slice(p.field.length + 2);
    if (resp.status === 429 && p.detail) msg = p.detail.charAt(0).toUpperCase() + p.detail.slice(1) + '.';
    throw new ApiError(resp.status, msg, p.field);
  }
  return data;
}

export const api = {
  session: () => request('GET', '/v1/session'),
  login: (email, password) => request('POST', '/v1/session', { email, password }),
  logout: () => request('DELETE', '/v1/session'),
  signup: (email, password, organization) => request('POST', '/v1/signup', { email, password, organization }),
  accounts: () => request('GET', '/v1/accounts'),
  account: (id) => request('GET', `/v1/accounts/${encodeURIComponent(id)}`),
  createAccount: (body) => request('POST', '/v1/accounts', body),
  updateAccount: (id, body) => request('PATCH', `/v1/accounts/${encodeURIComponent(id)}`, body),
  deleteAccount: (id) => request('DELETE', `/v1/accounts/${encodeURIComponent(id)}`),
  usage: (id) => request('GET', `/v1/accounts/${encodeURIComponent(id)}/usage`),
  history: (id, window) => request('GET', `/v1/accounts/${encodeURIComponent(id)}/usage/history?window=${encodeURIComponent(window)}`),
  streams: (id, offset, limit) => request('GET', `/v1/accounts/${encodeURIComponent(id)}/streams?offset=${offset}&limit=${limit}`),
  users: (id) => request('GET', `/v1/accounts/${encodeURIComponent(id)}/users`),
  createUser: (id, body) => request('POST', `/v1/accounts/${encodeURIComponent(id)}/users`, body),
  deleteUser: (id, uid) => request('DELETE', `/v1/accounts/${encodeURIComponent(id)}/users/${encodeURIComponent(uid)}`),
  tokens: () => request('GET', '/v1/tokens'),
  createToken: (body) => request('POST', '/v1/tokens', body),
  deleteToken: (id) => request('DELETE', `/v1/tokens/${encodeURIComponent(id)}`),
  members: () => request('GET', '/v1/members'),
};
