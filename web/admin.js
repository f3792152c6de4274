// Admin: users and tokens (create, revoke), GPU leases (gpulab ddp runs), the audit log.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api } from '/ui/api.js';
import { age, ErrorLine, confirmAction } from '/ui/util.js';

export function Admin({ me, versions }) {
  const [users, setUsers] = useState(null);
  const [leases, setLeases] = useState(null);
  const [audit, setAudit] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [form, setForm] = useState({ name: '', admin: false });
  const [revokeToken, setRevokeToken] = useState('');
  const refresh = () => Promise.all([api('/users'), api('/leases'), api('/audit?limit=100')])
    .then(([u, l, a]) => { setUsers(u.users); setLeases(l.leases); setAudit(a.entries); setError(null); })
    .catch(setError);
  useEffect(() => { refresh(); }, [versions.containers]);
  if (!me.admin) return html`<${ErrorLine} error=${{ status: 403, message: 'Admins only' }} />`;
  const create = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const out = await api('/users', { method: 'POST', body: { name: form.name.trim(), admin: form.admin } });
      setNotice(html`Token for <b>${out.name}</b> (shown once): <code class="copy" id="new-token">${out.token}</code>`);
      setForm({ name: '', admin: false });
      refresh();
    } catch (err) { setError(err); }
  };
  const revoke = async (body, what) => {
    if (!confirmAction(`Revoke ${what}?`)) return;
    setError(null);
    try {
      const out = await api('/users/revoke', { method: 'POST', body });
      setNotice(`revoked ${out.revoked} token(s)`);
      setRevokeToken('');
      refresh();
    } catch (err) { setError(err); }
  };
  return html`<h2>Admin</h2>
    <${ErrorLine} error=${error} />
    ${notice ? html`<div class="notice">${notice}</div>` : ''}
    <h3>Users and tokens</h3>
    <div class="card"><form class="grid" onSubmit=${create}>
      <label>user name<input id="new-user" value=${form.name} onInput=${(e) => setForm({ ...form, name: e.target.value })} /></label>
      <label><span><input type="checkbox" checked=${form.admin} onChange=${(e) => setForm({ ...form, admin: e.target.checked })} /> admin</span></label>
      <button class="primary" id="create-token" type="submit">Create user / new token</button>
    </form>
    <form class="grid" onSubmit=${(e) => { e.preventDefault(); revoke({ token: revokeToken.trim() }, 'this token'); }}>
      <label>revoke one token<input type="password" value=${revokeToken} onInput=${(e) => setRevokeToken(e.target.value)} /></label>
      <button type="submit">Revoke token</button>
    </form></div>
    <div class="table-wrap"><table id="users"><thead><tr><th>user</th><th>role</th><th></th></tr></thead>
      <tbody>${users && users.map((u) => html`<tr><td>${u.name}</td><td>${u.admin ? 'admin' : 'user'}</td>
        <td><button class="danger" onClick=${() => revoke({ name: u.name }, `every token of ${u.name}`)}>Revoke all tokens</button></td></tr>`)}</tbody></table></div>
    <h3>GPU leases (gpulab ddp runs)</h3>
    <div class="table-wrap"><table id="leases"><thead><tr><th>name</th><th>owner</th><th>GPUs</th><th>SSH port</th><th>state</th></tr></thead>
      <tbody>${leases && leases.map((l) => html`<tr><td>${l.name}</td><td>${l.owner}</td><td>${(l.gpu_devices || []).join(', ')}</td><td>${l.ssh_port || '–'}</td><td>${l.state || l.status || ''}</td></tr>`)}</tbody></table></div>
    ${leases && !leases.length ? html`<p class="muted">No leases.</p>` : ''}
    <h3>Audit log</h3>
    <div class="table-wrap"><table id="audit"><thead><tr><th>when</th><th>user</th><th>action</th><th>target</th><th>outcome</th><th>detail</th></tr></thead>
      <tbody>${audit && audit.map((a) => html`<tr><td title=${a.at || a.time || a.created_at}>${age(a.at || a.time || a.created_at)}</td><td>${a.user}</td><td>${a.action}</td>
        <td>${a.target}</td><td>${a.outcome}</td><td class="wrap">${a.detail}</td></tr>`)}</tbody></table></div>`;
}
