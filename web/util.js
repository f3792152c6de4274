// Small formatting helpers and the shared bits of page chrome (error line, confirm, busy button).
import { html, useEffect, useRef } from '/ui/vendor/htm-preact-standalone.mjs';

export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 && i ? 1 : 0)} ${u[i]}`;
}

export function age(iso) {
  if (!iso) return '–';
  const t = Date.parse(iso.endsWith('Z') || iso.includes('+') ? iso : iso + 'Z');
  if (Number.isNaN(t)) return iso;
  const s = Math.max(0, (Date.now() - t) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function num(v, digits = 0, unit = '') {
  return v === null || v === undefined ? '–' : `${Number(v).toFixed(digits)}${unit}`;
}

// An API error as the service worded it: status, error code (as docs/service.md lists them), message
// and hint. Scrolled into view, since on a phone the action's button may be a screen away.
export function ErrorLine({ error }) {
  const box = useRef(null);
  useEffect(() => {
    if (error && box.current && box.current.scrollIntoView) box.current.scrollIntoView({ block: 'nearest' });
  }, [error]);
  if (!error) return null;
  return html`<div class="error" role="alert" ref=${box}>
    ${error.status ? html`<b>${error.status}</b> ` : ''}${error.code ? html`<code class="code">${error.code}</code> ` : ''}${error.message}
    ${error.hint ? html`<div class="hint">${error.hint}</div>` : ''}
  </div>`;
}

// The notice for a new container (create, restore): its SSH password is shown once, here.
export function createdNotice(verb, out) {
  return `${verb} ${out.name}${out.ssh_password ? ` — SSH password (shown once): ${out.ssh_password}` : ''}`;
}

export function confirmAction(text) {
  return window.confirm(text);
}
