// Small components every page uses. Everything tenant-supplied is passed
// to htm as a value, never as markup, so Preact sets it as text.
import { html, useState, useEffect, useRef, useCallback } from '/vendor/htm-preact-standalone.module.js';

export { html };

/** go navigates to a console path ("/accounts/acc_1"). */
export function go(path) {
  location.hash = '#' + path;
}

/** useLoad runs load() now and whenever deps change, and tracks its state. */
export function useLoad(load, deps) {
  const [st, setSt] = useState({ loading: true, error: null, data: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setSt((s) => ({ ...s, loading: true, error: null }));
    load().then(
      (data) => live && setSt({ loading: false, error: null, data }),
      (error) => live && setSt({ loading: false, error, data: null }),
    );
    return () => { live = false; };
  }, [...deps, tick]);
  return { ...st, reload: useCallback(() => setTick((t) => t + 1), []) };
}

export function Loading({ what }) {
  return html`<p class="loading" role="status"><span class="spinner" aria-hidden="true"></span>Loading ${what || ''}…</p>`;
}

export function ErrorMsg({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message || String(error)}</p>`;
}

/** Loaded shows a loading line, an error, or children(data). */
export function Loaded({ st, what, children }) {
  if (st.loading && !st.data) return html`<${Loading} what=${what} />`;
  if (st.error) return html`<div><${ErrorMsg} error=${st.error} /><button type="button" onClick=${st.reload}>Try again</button></div>`;
  return children(st.data);
}

/** names reports whether an API error's field is the form field name
 * (or one item of it: "permissions.publish.allow[2]"). */
export function names(error, name) {
  return !!(error && error.field && (error.field === name || error.field.startsWith(name + '[')));
}

let fieldSeq = 0;
/** Field is a labelled input; error is shown under it when the API
 * named this field. */
export function Field({ label, name, error, hint, type = 'text', value, onInput, ...rest }) {
  const id = useRef(`f${++fieldSeq}`).current;
  const msg = names(error, name) ? error.message : '';
  return html`<div class=${'field' + (msg ? ' has-error' : '')}>
    <label for=${id}>${label}</label>
    <input id=${id} name=${name} type=${type} value=${value} onInput=${(e) => onInput(e.currentTarget.value)}
      aria-invalid=${msg ? 'true' : 'false'} aria-describedby=${msg ? id + '-err' : hint ? id + '-hint' : undefined} ...${rest} />
    ${hint && !msg ? html`<small id=${id + '-hint'} class="hint">${hint}</small>` : null}
    ${msg ? html`<small id=${id + '-err'} class="field-error" role="alert">${msg}</small>` : null}
  </div>`;
}

/** formError is the error to show above a form: one that names no field
 * of the form (fields show their own). */
export function FormError({ error, fields }) {
  if (!error || fields.some((f) => names(error, f))) return null;
  return html`<${ErrorMsg} error=${error} />`;
}

/** useSubmit runs action for a form's submit (or a button), with its
 * busy state and the error it failed with, if it did. */
export function useSubmit(action) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (e) => {
    if (e && e.preventDefault) e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(err);
    }
    setBusy(false);
  };
  return { busy, error, submit };
}

/** Submit is a form's submit button with a busy state. */
export function Submit({ busy, children, ...rest }) {
  return html`<button type="submit" class="primary" disabled=${busy} aria-busy=${busy ? 'true' : 'false'} ...${rest}>
    ${busy ? html`<span class="spinner" aria-hidden="true"></span>` : null}${children}</button>`;
}

/** copyText puts text on the clipboard; false if the browser refused. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

export function CopyButton({ text, label = 'Copy', what }) {
  const [state, setState] = useState('');
  const click = async () => {
    setState((await copyText(text)) ? 'Copied' : 'Copy failed: select the text and copy it');
    setTimeout(() => setState(''), 2500);
  };
  return html`<button type="button" class="copy" onClick=${click} aria-label=${what ? `${label} ${what}` : label}>${state || label}</button>`;
}

/** Snippet is a block of text to copy. */
export function Snippet({ title, text, id }) {
  return html`<figure class="snippet" data-snippet=${id}>
    <figcaption><span>${title}</span><${CopyButton} text=${text} what=${title} /></figcaption>
    <pre tabindex="0"><code>${text}</code></pre>
  </figure>`;
}

/** Dialog is a modal <dialog>: focus stays inside, Escape closes it
 * unless canClose is false. */
export function Dialog({ title, open, onClose, canClose = true, children, wide }) {
  const ref = useRef(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  const cancel = (e) => {
    e.preventDefault();
    if (canClose) onClose();
  };
  return html`<dialog ref=${ref} class=${wide ? 'wide' : ''} onCancel=${cancel} aria-labelledby="dlg-title">
    ${open ? html`<h2 id="dlg-title">${title}</h2>${children}` : null}
  </dialog>`;
}

/** Confirm asks before a destructive action. */
export function Confirm({ title, open, onCancel, onConfirm, busy, error, action = 'Confirm', children, ready = true }) {
  return html`<${Dialog} title=${title} open=${open} onClose=${onCancel}>
    ${children}
    <${ErrorMsg} error=${error} />
    <div class="actions">
      <button type="button" onClick=${onCancel}>Cancel</button>
      <button type="button" class="danger" disabled=${busy || !ready} onClick=${onConfirm}>${busy ? 'Working…' : action}</button>
    </div>
  <//>`;
}

/** downloadFile saves text as a file through a Blob URL: the creds exist
 * only in this page's memory, never in browser storage. */
export function downloadFile(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Pager moves through a list paged on the server. */
export function Pager({ offset, limit, total, onPage, busy }) {
  if (total <= limit && offset === 0) return null;
  const last = Math.min(offset + limit, total);
  return html`<nav class="pager" aria-label="Pages">
    <button type="button" disabled=${busy || offset === 0} onClick=${() => onPage(Math.max(0, offset - limit))}>Previous</button>
    <span>${total === 0 ? 0 : offset + 1}–${last} of ${total}</span>
    <button type="button" disabled=${busy || last >= total} onClick=${() => onPage(offset + limit)}>Next</button>
  </nav>`;
}
