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

function parse(text) {
  try { return JSON.parse(text); } catch (e) { return null; }  // not JSON
}

// Answers the reply's data; with `whole`, the reply itself (its message too).
export async function api(path, { method = 'GET', body, whole = false } = {}) {
  const headers = {};
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  let payload;
  if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const r = await fetch(BASE + path, { method, headers, body: payload, credentials: 'same-origin' });
  const json = parse(await r.text());
  if (!r.ok || (json && json.success === false)) throw new ApiError(r.status, json);
  if (whole) return json;
  return json ? json.data : null;
}

// Sends a file as the request body (a backup of many GB: streamed, never read into memory).
// XMLHttpRequest, not fetch, because only it reports upload progress: onProgress(sent, total).
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('PUT', BASE + path);
    x.setRequestHeader('X-CSRF-Token', csrf);
    x.setRequestHeader('Content-Type', 'application/octet-stream');
    x.upload.onprogress = (e) => onProgress && onProgress(e.loaded, e.total);
    x.onload = () => {
      const json = parse(x.responseText);
      if (x.status < 200 || x.status >= 300 || (json && json.success === false)) {
        reject(new ApiError(x.status, json));
      } else {
        resolve(json ? json.data : null);
      }
    };
    x.onerror = () => reject(new ApiError(0, { message: 'The upload did not reach the service' }));
    x.send(file);
  });
}

export const apiBase = BASE;
