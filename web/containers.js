// Containers: the user's (an admin's: everyone's) containers with state, GPUs, ports, CPU/memory
// and age; create with the service's own validation messages; start/stop/restart/delete with
// confirmation; snapshot; backup with its progress; logs (tail, follow); the SSH command.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api } from '/ui/api.js';
import { age, bytes, num, ErrorLine, confirmAction, createdNotice } from '/ui/util.js';
import { QuotaLine } from '/ui/quota.js';

function CreateForm({ onCreated, quota }) {
  const [f, setF] = useState({ name: '', image: '', gpu_count: '0', port: '', cpus: '', memory: '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const body = { name: f.name.trim(), image: f.image.trim() };
    if (f.gpu_count !== '') body.gpu_count = Number(f.gpu_count);
    const ports = f.port.split(/[\s,]+/).filter(Boolean);
    if (ports.length) body.port = ports;
    if (f.cpus.trim()) body.cpus = f.cpus.trim();
    if (f.memory.trim()) body.memory = f.memory.trim();
    try {
      const out = await api('/create', { method: 'POST', body });
      onCreated(out);
      setF({ ...f, name: '' });
    } catch (err) { setError(err); }
    setBusy(false);
  };
  return html`<div class="card"><h3>New container</h3>
    <form class="grid" id="create-form" onSubmit=${submit}>
      <label>name<input id="c-name" value=${f.name} onInput=${set('name')} placeholder="experiment-01" /></label>
      <label>image<input id="c-image" value=${f.image} onInput=${set('image')} placeholder="from the allowlist" /></label>
      <label>GPUs<input id="c-gpus" type="number" min="0" value=${f.gpu_count} onInput=${set('gpu_count')} /></label>
      <label>ports (host:container)<input id="c-ports" value=${f.port} onInput=${set('port')} placeholder="8888:8888" /></label>
      <label>CPUs<input id="c-cpus" value=${f.cpus} onInput=${set('cpus')} placeholder="2" /></label>
      <label>memory<input id="c-memory" value=${f.memory} onInput=${set('memory')} placeholder="8g" /></label>
      <button id="c-create" class="primary" type="submit" disabled=${busy}>${busy ? 'Creating…' : 'Create'}</button>
    </form>
    <${QuotaLine} quota=${quota} />
    <${ErrorLine} error=${error} />
  </div>`;
}

// A running backup's progress (bytes written of the image's estimated size).
function BackupProgress({ b }) {
  return html`<div class="backup-progress" data-backup=${b.backup_name}>backup ${b.backup_name}: ${b.state}
    <progress max=${b.bytes_total || 1} value=${b.bytes_done}></progress> ${bytes(b.bytes_done)}</div>`;
}

function Logs({ name }) {
  const [tail, setTail] = useState('100');
  const [follow, setFollow] = useState(false);
  const [text, setText] = useState('');
  const [error, setError] = useState(null);
  const load = () => api(`/logs?name=${encodeURIComponent(name)}&tail=${encodeURIComponent(tail)}`)
    .then((d) => { setText((d.stdout || '') + (d.stderr || '')); setError(null); })
    .catch(setError);
  useEffect(() => { load(); }, [name, tail]);
  useEffect(() => {
    if (!follow) return undefined;
    const t = setInterval(load, 2000);
    return () => clearInterval(t);
  }, [follow, name, tail]);
  return html`<div><h3>Logs</h3>
    <div class="actions">
      <label>tail<select value=${tail} onChange=${(e) => setTail(e.target.value)}>
        ${['50', '100', '500', '2000'].map((n) => html`<option value=${n}>${n}</option>`)}</select></label>
      <label><span><input type="checkbox" id="follow" checked=${follow} onChange=${(e) => setFollow(e.target.checked)} /> follow</span></label>
      <button onClick=${load}>Refresh</button>
    </div>
    <${ErrorLine} error=${error} />
    <pre class="logs" id="logs">${text}</pre></div>`;
}

// One container's page (#/containers/NAME): stats, SSH command, logs. A container of another
// user answers 403 from the API, shown as such.
function Detail({ name, me, backups }) {
  const [stats, setStats] = useState(null);
  const [error, setError] = useState(null);
  const [row, setRow] = useState(null);
  useEffect(() => {
    setError(null);
    api(`/stats?name=${encodeURIComponent(name)}`).then(setStats).catch(setError);
    api('/list').then((l) => setRow(l.containers.find((c) => c.name === name) || null)).catch(() => {});
  }, [name]);
  if (error && (error.status === 403 || error.status === 404)) {
    return html`<div class="card" id="detail"><h3>${name}</h3><${ErrorLine} error=${error} /></div>`;
  }
  const host = location.hostname;
  const ssh = row && row.ssh_port ? `ssh -p ${row.ssh_port} ${me.ssh_user || 'root'}@${host}` : '';
  const bk = backups.filter((b) => b.source_container === name && b.state === 'running');
  return html`<div class="card" id="detail"><h3>${name}</h3>
    <${ErrorLine} error=${error} />
    ${stats ? html`<div class="stat">
      <span>CPU</span><span>${num(stats.cpu_percent, 1, ' %')} of ${stats.online_cpus} CPU(s)</span>
      <span>memory</span><span>${bytes(stats.memory_usage_bytes)} / ${bytes(stats.memory_limit_bytes)}</span>
      <span>network</span><span>rx ${bytes(stats.net_rx_bytes)}, tx ${bytes(stats.net_tx_bytes)}</span>
    </div>` : ''}
    ${ssh ? html`<div>SSH: <code class="copy" id="ssh">${ssh}</code>
      <button onClick=${() => navigator.clipboard && navigator.clipboard.writeText(ssh)}>Copy</button></div>` : ''}
    ${bk.map((b) => html`<${BackupProgress} b=${b} />`)}
    <${Logs} name=${name} />
  </div>`;
}

export function Containers({ me, arg, versions }) {
  const [list, setList] = useState(null);
  const [backups, setBackups] = useState([]);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  // Per container, the action under way: only that container's buttons wait (a backup of a large
  // image takes minutes).
  const [busy, setBusy] = useState({});
  const mark = (name, verb) => setBusy((b) => {
    const n = { ...b };
    if (verb) n[name] = verb; else delete n[name];
    return n;
  });
  const refresh = () => api('/list').then((l) => { setList(l); setError(null); }).catch(setError);
  useEffect(() => { refresh(); }, [versions.containers]);
  useEffect(() => { api('/backups').then((b) => setBackups(b.backups)).catch(() => {}); }, [versions.images]);
  // One action on one container: asks first when `ask`, then says what happened (`done`).
  const act = async (verb, name, { body, ask, done } = {}) => {
    if (ask && !confirmAction(ask)) return;
    mark(name, verb);
    setError(null);
    setNotice('');
    try {
      const out = await api(`/${verb}`, { method: 'POST', body: body || { name } });
      setNotice(done ? done(out) : `${verb}: ${name} done`);
      refresh();
    } catch (err) { setError(err); }
    mark(name, null);
  };
  // A start whose SSH port was taken on its host meanwhile runs on a new one: the user must know.
  const started = (verb, name) => (out) => (out && out.ssh_port_was
    ? `${verb}: ${name} done, on a new SSH port ${out.ssh_port} (${out.ssh_port_was} was taken on its host)`
    : `${verb}: ${name} done`);
  const snapshot = (name) => {
    const s = window.prompt(`Snapshot name for ${name}`, `${name}-snap`);
    if (s) act('snapshot', name, { body: { name, snapshot_name: s }, done: () => html`snapshot ${s} of ${name} made — <a href="#/images">Snapshots & backups</a>` });
  };
  const backup = (name) => {
    const b = window.prompt(`Backup name for ${name}`, `${name}-backup`);
    if (b) act('backup', name, { body: { name, backup_name: b }, done: (out) => html`backup ${b} of ${name} written (${bytes(out.size_bytes)}) — <a href="#/images">Snapshots & backups</a>` });
  };
  const running = (name) => backups.filter((b) => b.source_container === name && b.state === 'running');
  return html`<h2>Containers</h2>
    <${CreateForm} quota=${list && list.quota} onCreated=${(out) => { setNotice(createdNotice('created', out)); refresh(); }} />
    <${ErrorLine} error=${error} />
    ${notice ? html`<div class="notice" id="notice">${notice}</div>` : ''}
    <h3>${me.admin ? 'All containers' : 'Your containers'}</h3>
    <div class="table-wrap"><table id="containers">
      <thead><tr><th>name</th>${me.admin ? html`<th>owner</th>` : ''}<th>state</th><th>GPUs</th><th>ports</th><th>CPU / mem</th><th>age</th><th>actions</th></tr></thead>
      <tbody>${list && list.containers.map((c) => html`<tr data-name=${c.name} data-state=${c.state}>
        <td><a href="#/containers/${encodeURIComponent(c.name)}">${c.name}</a><div class="muted">${c.image}</div></td>
        ${me.admin ? html`<td>${c.owner}</td>` : ''}
        <td><span class="state ${c.state}">${c.state}</span></td>
        <td>${c.gpu_devices.length ? c.gpu_devices.join(', ') : '–'}</td>
        <td class="wrap">${c.ssh_port ? html`<div>ssh ${c.ssh_port}</div>` : ''}${c.port_mappings.join(' ')}</td>
        <td>${c.cpus || '–'} / ${c.memory || '–'}</td>
        <td>${age(c.created_at)}</td>
        <td><div class="actions">
          ${c.state === 'running'
            ? html`<button class="act-stop" disabled=${!!busy[c.name]} onClick=${() => act('stop', c.name, { ask: `Stop ${c.name}?` })}>Stop</button>
                   <button class="act-restart" disabled=${!!busy[c.name]} onClick=${() => act('restart', c.name, { ask: `Restart ${c.name}?`, done: started('restart', c.name) })}>Restart</button>`
            : html`<button class="act-start" disabled=${!!busy[c.name]} onClick=${() => act('start', c.name, { done: started('start', c.name) })}>Start</button>`}
          <button class="act-snapshot" disabled=${!!busy[c.name]} onClick=${() => snapshot(c.name)}>Snapshot</button>
          <button class="act-backup" disabled=${!!busy[c.name]} onClick=${() => backup(c.name)}>Backup</button>
          <button class="danger act-delete" disabled=${!!busy[c.name]} onClick=${() => act('delete', c.name, { ask: `Delete ${c.name}? This cannot be undone.` })}>Delete</button>
        </div>${busy[c.name] ? html`<div class="muted">${busy[c.name]}…</div>` : ''}
          ${running(c.name).map((b) => html`<${BackupProgress} b=${b} />`)}</td>
      </tr>`)}</tbody></table></div>
    ${list && !list.containers.length ? html`<p class="muted" id="no-containers">No containers yet.</p>` : ''}
    ${arg ? html`<${Detail} name=${arg} me=${me} backups=${backups} />` : ''}`;
}
