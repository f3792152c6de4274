// Admin: users and tokens (create, revoke), quotas (each user's limits and usage; set them), the
// lab's hosts (hosts.js), GPU leases (gpulab ddp runs), the audit log.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api } from '/ui/api.js';
import { age, ErrorLine, confirmAction } from '/ui/util.js';
import { quotaRows } from '/ui/quota.js';
import { Hosts } from '/ui/hosts.js';

const QUOTA_FIELDS = [
  // [form key, request field, label, placeholder]
  ['containers', 'max_containers', 'max containers', '4'],
  ['gpus', 'max_gpus', 'max GPUs', '2'],
  ['cpus', 'max_cpus', 'max CPUs', '16'],
  ['memory', 'max_memory', 'max memory', '64g'],
  ['gpu_hours', 'max_gpu_hours', 'max GPU-hours', '100'],
];

// Sets one user's quota (or the default, "*"). An empty field leaves that limit as it is;
// "unlimited" lifts it. The service validates and answers with its own message.
function QuotaForm({ onSaved, onError }) {
  const blank = { user: '', containers: '', gpus: '', cpus: '', memory: '', gpu_hours: '' };
  const [f, setF] = useState(blank);
  const submit = async (e) => {
    e.preventDefault();
    const body = { user: f.user.trim() };
    for (const [key, field] of QUOTA_FIELDS) {
      const v = f[key].trim();
      if (!v) continue;
      // max_gpus and max_containers are whole numbers in the API (-1: unlimited); anything else
      // goes as typed, for the service's own message.
      if (key === 'containers' || key === 'gpus') {
        body[field] = v === 'unlimited' ? -1 : (/^-?\d+$/.test(v) ? Number(v) : v);
      } else {
        body[field] = v;
      }
    }
    onError(null);
    try {
      const out = await api('/quotas', { method: 'POST', body });
      setF(blank);
      onSaved(out);
    } catch (err) { onError(err); }
  };
  return html`<form class="grid" id="quota-form" onSubmit=${submit}>
    <label>user (* for everyone)<input id="q-user" value=${f.user} onInput=${(e) => setF({ ...f, user: e.target.value })} /></label>
    ${QUOTA_FIELDS.map(([key, , label, ph]) => html`<label>${label}<input id="q-${key}" value=${f[key]} placeholder=${ph}
      onInput=${(e) => setF({ ...f, [key]: e.target.value })} /></label>`)}
    <button class="primary" id="q-set" type="submit">Set quota</button>
  </form>`;
}

export function Admin({ me, versions }) {
  const [users, setUsers] = useState(null);
  const [leases, setLeases] = useState(null);
  const [quotas, setQuotas] = useState(null);
  const [audit, setAudit] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [form, setForm] = useState({ name: '', admin: false });
  const [revokeToken, setRevokeToken] = useState('');
  const refresh = () => Promise.all([api('/users'), api('/quotas'), api('/leases'), api('/audit?limit=100')])
    .then(([u, q, l, a]) => {
      setUsers(u.users); setQuotas(q.users); setLeases(l.leases); setAudit(a.entries); setError(null);
    })
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
    <h3>Quotas</h3>
    <div class="card"><${QuotaForm} onError=${setError} onSaved=${(out) => { setNotice(`quota of ${out.user} set`); refresh(); }} /></div>
    <div class="table-wrap"><table id="quotas"><thead><tr><th>user</th>${quotaRows(quotas && quotas[0]).map((r) => html`<th>${r.label}</th>`)}</tr></thead>
      <tbody>${quotas && quotas.map((q) => html`<tr data-user=${q.user}><td>${q.user}</td>
        ${quotaRows(q).map((r) => html`<td class=${r.full ? 'full' : ''}>${r.used} / ${r.limit}</td>`)}</tr>`)}</tbody></table></div>
    <${Hosts} versions=${versions} />
    <h3>GPU leases (gpulab ddp runs)</h3>
    <div class="table-wrap"><table id="leases"><thead><tr><th>name</th><th>owner</th><th>GPUs</th><th>SSH port</th><th>state</th></tr></thead>
      <tbody>${leases && leases.map((l) => html`<tr><td>${l.name}</td><td>${l.owner}</td><td>${(l.gpu_devices || []).join(', ')}</td><td>${l.ssh_port || '–'}</td><td>${l.state || l.status || ''}</td></tr>`)}</tbody></table></div>
    ${leases && !leases.length ? html`<p class="muted">No leases.</p>` : ''}
    <h3>Audit log</h3>
    <div class="table-wrap"><table id="audit"><thead><tr><th>when</th><th>user</th><th>action</th><th>target</th><th>outcome</th><th>detail</th></tr></thead>
      <tbody>${audit && audit.map((a) => html`<tr><td title=${a.at || a.time || a.created_at}>${age(a.at || a.time || a.created_at)}</td><td>${a.user}</td><td>${a.action}</td>
        <td>${a.target}</td><td>${a.outcome}</td><td class="wrap">${a.detail}</td></tr>`)}</tbody></table></div>`;
}
