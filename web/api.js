// Talks to gpulab serve's REST API with the session cookie; sends the CSRF token on every
// request that changes something, and turns the service's error envelope into an Error.
const BASE = '/api/v1/gpu-docker';
let csrf = '';

export function setCsrf(token) { csrf = token || ''; }

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error_code;
    this.hint = body && body.hint;
  }
}

export async function api(path, { method = 'GET', body, raw } = {}) {
  const headers = {};
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  let payload;
  if (raw !== undefined) {
    payload = raw;
    headers['Content-Type'] = 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const r = await fetch(BASE + path, { method, headers, body: payload, credentials: 'same-origin' });
  let json = null;
  try { json = await r.json(); } catch (e) { /* not JSON */ }
  if (!r.ok || (json && json.success === false)) throw new ApiError(r.status, json);
  return json ? json.data : null;
}

export const apiBase = BASE;
