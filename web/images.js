// Snapshots and backups: list, restore into a new container, delete, download, upload.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api, apiBase } from '/ui/api.js';
import { age, bytes, ErrorLine, confirmAction } from '/ui/util.js';

export function Images({ me, versions }) {
  const [snaps, setSnaps] = useState(null);
  const [backups, setBackups] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [upload, setUpload] = useState({ name: '', file: null, busy: false });
  const refresh = () => Promise.all([api('/snapshots'), api('/backups')])
    .then(([s, b]) => { setSnaps(s.snapshots); setBackups(b.backups); setError(null); })
    .catch(setError);
  useEffect(() => { refresh(); }, [versions.images]);
  const run = async (path, body, done, ask) => {
    if (ask && !confirmAction(ask)) return;
    setError(null);
    setNotice('');
    try {
      await api(path, { method: 'POST', body });
      setNotice(done);
      refresh();
    } catch (err) { setError(err); }
  };
  const restoreSnap = (s) => {
    const name = window.prompt(`New container from snapshot ${s.snapshot_name}`, `${s.source_container || 'restored'}-r`);
    if (name) run('/restore-snapshot', { snapshot_name: s.snapshot_name, name }, `restored ${name}`);
  };
  const restoreBackup = (b) => {
    const name = window.prompt(`New container from backup ${b.backup_name}`, `${b.source_container || 'restored'}-r`);
    if (name) run('/restore', { backup_path: b.file, name }, `restored ${name}`);
  };
  const doUpload = async (e) => {
    e.preventDefault();
    if (!upload.file || !upload.name) return;
    setUpload({ ...upload, busy: true });
    setError(null);
    try {
      await api(`/backups/upload?backup_name=${encodeURIComponent(upload.name)}`, { method: 'PUT', raw: upload.file });
      setNotice(`uploaded ${upload.name}`);
      refresh();
    } catch (err) { setError(err); }
    setUpload({ name: '', file: null, busy: false });
  };
  return html`<h2>Snapshots & backups</h2>
    <${ErrorLine} error=${error} />
    ${notice ? html`<div class="notice">${notice}</div>` : ''}
    <h3>Snapshots</h3>
    <div class="table-wrap"><table id="snapshots">
      <thead><tr><th>name</th>${me.admin ? html`<th>owner</th>` : ''}<th>from</th><th>image</th><th>age</th><th>actions</th></tr></thead>
      <tbody>${snaps && snaps.map((s) => html`<tr data-name=${s.snapshot_name}>
        <td>${s.snapshot_name}</td>${me.admin ? html`<td>${s.owner}</td>` : ''}<td>${s.source_container}</td>
        <td class="wrap">${s.image}</td><td>${age(s.created_at)}</td>
        <td><div class="actions"><button onClick=${() => restoreSnap(s)}>Restore</button>
          <button class="danger" onClick=${() => run('/delete-snapshot', { snapshot_name: s.snapshot_name }, `deleted ${s.snapshot_name}`, `Delete snapshot ${s.snapshot_name}?`)}>Delete</button></div></td>
      </tr>`)}</tbody></table></div>
    ${snaps && !snaps.length ? html`<p class="muted">No snapshots.</p>` : ''}
    <h3>Backups</h3>
    <div class="table-wrap"><table id="backups">
      <thead><tr><th>name</th>${me.admin ? html`<th>owner</th>` : ''}<th>from</th><th>state</th><th>size</th><th>age</th><th>actions</th></tr></thead>
      <tbody>${backups && backups.map((b) => html`<tr data-name=${b.backup_name}>
        <td>${b.backup_name}</td>${me.admin ? html`<td>${b.owner}</td>` : ''}<td>${b.source_container}</td>
        <td>${b.state}${b.bytes_total && b.bytes_done < b.bytes_total ? html` <progress max=${b.bytes_total} value=${b.bytes_done}></progress>` : ''}
          ${b.message ? html`<div class="muted">${b.message}</div>` : ''}</td>
        <td>${bytes(b.bytes_total)}</td><td>${age(b.created_at)}</td>
        <td><div class="actions"><button onClick=${() => restoreBackup(b)}>Restore</button>
          <a href="${apiBase}/backups/download?backup_name=${encodeURIComponent(b.backup_name)}" download><button>Download</button></a>
          <button class="danger" onClick=${() => run('/backups/delete', { backup_name: b.backup_name }, `deleted ${b.backup_name}`, `Delete backup ${b.backup_name}?`)}>Delete</button></div></td>
      </tr>`)}</tbody></table></div>
    ${backups && !backups.length ? html`<p class="muted">No backups.</p>` : ''}
    <div class="card"><h3>Upload a backup</h3>
      <form class="grid" onSubmit=${doUpload}>
        <label>backup name<input id="u-name" value=${upload.name} onInput=${(e) => setUpload({ ...upload, name: e.target.value })} /></label>
        <label>file (.tar)<input id="u-file" type="file" accept=".tar" onChange=${(e) => setUpload({ ...upload, file: e.target.files[0] })} /></label>
        <button class="primary" type="submit" disabled=${upload.busy}>${upload.busy ? 'Uploading…' : 'Upload'}</button>
      </form></div>`;
}
