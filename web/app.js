// The dashboard's shell: sign-in, navigation (#/overview, #/containers[/NAME], #/images, #/admin),
// and the live event stream that tells every page when to refresh.
import { html, render, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api, setCsrf } from '/ui/api.js';
import { ErrorLine } from '/ui/util.js';
import { Overview } from '/ui/overview.js';
import { Containers } from '/ui/containers.js';
import { Images } from '/ui/images.js';
import { Admin } from '/ui/admin.js';

function route() {
  const parts = (location.hash.replace(/^#\/?/, '') || 'overview').split('/');
  return { page: parts[0], arg: parts.slice(1).map(decodeURIComponent).join('/') };
}

function SignIn({ onSignedIn, reason }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const me = await api('/session', { method: 'POST', body: { token: token.trim() } });
      setCsrf(me.csrf_token);
      onSignedIn({ ...me, via: 'session' });
    } catch (err) { setError(err); }
  };
  return html`<div class="signin card">
    <h2>gpulab — sign in</h2>
    <p class="muted">Paste your API token (from <code>gpulab serve --add-user NAME</code> or an admin).</p>
    ${reason ? html`<div class="notice">${reason}</div>` : ''}
    <form onSubmit=${submit}>
      <input id="token" type="password" autocomplete="off" placeholder="glt_…" value=${token}
             onInput=${(e) => setToken(e.target.value)} />
      <button id="signin" class="primary" type="submit">Sign in</button>
    </form>
    <${ErrorLine} error=${error} />
  </div>`;
}

// One EventSource per page: "gpus" carries samples; the others only say what changed.
function useLive(me, onSignedOut) {
  const [versions, setVersions] = useState({ containers: 0, images: 0, gpus: 0 });
  const [samples, setSamples] = useState(null);
  const [live, setLive] = useState(false);
  // A hidden tab lets go of its stream: a browser allows only six connections per server over
  // HTTP/1.1, and each open stream holds one. Coming back, "hello" refreshes everything.
  const [visible, setVisible] = useState(document.visibilityState !== 'hidden');
  useEffect(() => {
    const f = () => setVisible(document.visibilityState !== 'hidden');
    document.addEventListener('visibilitychange', f);
    return () => document.removeEventListener('visibilitychange', f);
  }, []);
  useEffect(() => {
    if (!me || !visible) { setLive(false); return undefined; }
    const es = new EventSource('/api/v1/gpu-docker/events');
    const bump = (...keys) => setVersions((v) => {
      const n = { ...v };
      for (const k of keys) n[k] = (n[k] || 0) + 1;
      return n;
    });
    es.onopen = () => setLive(true);
    es.onerror = () => setLive(false);
    es.addEventListener('hello', () => bump('containers', 'images', 'gpus'));
    es.addEventListener('containers', () => bump('containers'));
    es.addEventListener('images', () => bump('images'));
    es.addEventListener('gpus', (e) => { setSamples(JSON.parse(e.data)); bump('gpus'); });
    es.addEventListener('signed-out', () => { es.close(); onSignedOut('Your session ended.'); });
    return () => es.close();
  }, [me, visible]);
  return { versions, samples, live };
}

function App() {
  const [me, setMe] = useState(undefined);  // undefined: asking; null: signed out
  const [reason, setReason] = useState('');
  const [where, setWhere] = useState(route());
  useEffect(() => {
    const f = () => setWhere(route());
    window.addEventListener('hashchange', f);
    return () => window.removeEventListener('hashchange', f);
  }, []);
  useEffect(() => {
    api('/session').then((m) => { setCsrf(m.csrf_token); setMe(m); }).catch(() => setMe(null));
  }, []);
  const signedOut = (why) => { setCsrf(''); setMe(null); setReason(why || ''); };
  const live = useLive(me, signedOut);
  if (me === undefined) return html`<main class="muted">Loading…</main>`;
  if (me === null) return html`<${SignIn} reason=${reason} onSignedIn=${(m) => { setReason(''); setMe(m); }} />`;
  const signOut = async () => {
    try { await api('/session', { method: 'DELETE' }); } catch (e) { /* already ended */ }
    signedOut('Signed out.');
  };
  const nav = [['overview', 'Overview'], ['containers', 'Containers'], ['images', 'Snapshots & backups']];
  if (me.admin) nav.push(['admin', 'Admin']);
  const props = { me, arg: where.arg, ...live };
  let page;
  switch (where.page) {
    case 'containers': page = html`<${Containers} ...${props} />`; break;
    case 'images': page = html`<${Images} ...${props} />`; break;
    case 'admin': page = html`<${Admin} ...${props} />`; break;
    default: page = html`<${Overview} ...${props} />`;
  }
  return html`<header>
      <span class="brand">gpulab</span>
      <nav>${nav.map(([id, label]) => html`<a href="#/${id}" id="nav-${id}"
            class=${where.page === id || (id === 'overview' && !nav.some((n) => n[0] === where.page)) ? 'active' : ''}>${label}</a>`)}</nav>
      <span class="who">
        <span class=${live.live ? 'live' : 'live off'} id="live">${live.live ? '● live' : '○ offline'}</span>
        <span id="user">${me.user}${me.admin ? ' (admin)' : ''}</span>
        ${me.via === 'session' ? html`<button id="signout" onClick=${signOut}>Sign out</button>` : ''}
      </span>
    </header>
    <main>
      ${me.insecure_http ? html`<p class="error" id="insecure-http">This service speaks plain HTTP
        beyond this machine (--insecure_http): tokens and passwords cross the network unencrypted.
        Ask its admin to serve HTTPS (--tls_cert, --tls_key).</p>` : ''}
      ${page}</main>`;
}

render(html`<${App} />`, document.getElementById('app'));
