// Snapshots and backups: list, restore into a new container, delete, download, upload.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api, apiBase, upload } from '/ui/api.js';
import { age, bytes, ErrorLine, confirmAction, createdNotice } from '/ui/util.js';

function UploadForm({ onDone, onError }) {
  const [name, setName] = useState('');
  const [file, setFile] = useState(null);
  const [sent, setSent] = useState(null);  // [bytes sent, total] while uploading
  const submit = async (e) => {
    e.preventDefault();
    const form = e.target;
    if (!file || !name.trim()) {
      onError({ message: 'Give the backup a name and choose its .tar file' });
      return;
    }
    setSent([0, file.size]);
    onError(null);
    try {
      const out = await upload(`/backups/upload?backup_name=${encodeURIComponent(name.trim())}`, file,
        (done, total) => setSent([done, total]));
      form.reset();  // the file input is not controlled: clear what it shows
      setName('');
      setFile(null);
      onDone(out);
    } catch (err) { onError(err); }
    setSent(null);
  };
  return html`<div class="card"><h3>Upload a backup</h3>
    <form class="grid" id="upload-form" onSubmit=${submit}>
      <label>backup name<input id="u-name" value=${name} onInput=${(e) => setName(e.target.value)} placeholder="moved-from-lab-2" /></label>
      <label>file (.tar)<input id="u-file" type="file" accept=".tar" onChange=${(e) => setFile(e.target.files[0] || null)} /></label>
      <button id="u-upload" class="primary" type="submit" disabled=${!!sent}>${sent ? 'Uploading…' : 'Upload'}</button>
    </form>
    ${sent ? html`<div id="u-progress"><progress max=${sent[1] || 1} value=${sent[0]}></progress> ${bytes(sent[0])} / ${bytes(sent[1])}</div>` : ''}
  </div>`;
}

export function Images({ me, versions }) {
  const [snaps, setSnaps] = useState(null);
  const [backups, setBackups] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const refresh = () => Promise.all([api('/snapshots'), api('/backups')])
    .then(([s, b]) => { setSnaps(s.snapshots); setBackups(b.backups); setError(null); })
    .catch(setError);
  useEffect(() => { refresh(); }, [versions.images]);
  const run = async (path, body, done, ask) => {
    if (ask && !confirmAction(ask)) return;
    setError(null);
    setNotice('');
    try {
      const out = await api(path, { method: 'POST', body });
      setNotice(done(out));
      refresh();
    } catch (err) { setError(err); }
  };
  const restored = (out) => html`${createdNotice('restored', out)} — <a href="#/containers/${encodeURIComponent(out.name)}">open it</a>`;
  const restoreSnap = (s) => {
    const name = window.prompt(`New container from snapshot ${s.snapshot_name}`, `${s.source_container || 'restored'}-r`);
    if (name) run('/restore-snapshot', { snapshot_name: s.snapshot_name, name }, restored);
  };
  const restoreBackup = (b) => {
    const name = window.prompt(`New container from backup ${b.backup_name}`, `${b.backup_name}-r`);
    if (name) run('/restore', { backup_path: b.file, name }, restored);
  };
  const complete = (b) => b.state === 'complete';
  return html`<h2>Snapshots & backups</h2>
    <${ErrorLine} error=${error} />
    ${notice ? html`<div class="notice" id="notice">${notice}</div>` : ''}
    <h3>Snapshots</h3>
    <div class="table-wrap"><table id="snapshots">
      <thead><tr><th>name</th>${me.admin ? html`<th>owner</th>` : ''}<th>from</th><th>image</th><th>age</th><th>actions</th></tr></thead>
      <tbody>${snaps && snaps.map((s) => html`<tr data-name=${s.snapshot_name}>
        <td>${s.snapshot_name}</td>${me.admin ? html`<td>${s.owner}</td>` : ''}<td>${s.source_container}</td>
        <td class="wrap">${s.image}</td><td>${age(s.created_at)}</td>
        <td><div class="actions"><button class="act-restore" onClick=${() => restoreSnap(s)}>Restore</button>
          <button class="danger act-delete" onClick=${() => run('/delete-snapshot', { snapshot_name: s.snapshot_name }, () => `deleted ${s.snapshot_name}`, `Delete snapshot ${s.snapshot_name}?`)}>Delete</button></div></td>
      </tr>`)}</tbody></table></div>
    ${snaps && !snaps.length ? html`<p class="muted" id="no-snapshots">No snapshots.</p>` : ''}
    <h3>Backups</h3>
    <div class="table-wrap"><table id="backups">
      <thead><tr><th>name</th>${me.admin ? html`<th>owner</th>` : ''}<th>from</th><th>state</th><th>size</th><th>age</th><th>actions</th></tr></thead>
      <tbody>${backups && backups.map((b) => html`<tr data-name=${b.backup_name} data-state=${b.state}>
        <td>${b.backup_name}</td>${me.admin ? html`<td>${b.owner}</td>` : ''}<td>${b.source_container}</td>
        <td><span class="state ${b.state}">${b.state}</span>${b.state === 'running' ? html` <progress max=${b.bytes_total || 1} value=${b.bytes_done}></progress> ${bytes(b.bytes_done)}` : ''}
          ${b.message ? html`<div class="muted wrap">${b.message}</div>` : ''}</td>
        <td>${bytes(b.bytes_total)}</td><td>${age(b.created_at)}</td>
        <td><div class="actions">
          ${complete(b) ? html`<button class="act-restore" onClick=${() => restoreBackup(b)}>Restore</button>
            <a class="button act-download" href="${apiBase}/backups/download?backup_name=${encodeURIComponent(b.backup_name)}" download>Download</a>` : ''}
          <button class="danger act-delete" disabled=${b.state === 'running'} onClick=${() => run('/backups/delete', { backup_name: b.backup_name }, () => `deleted ${b.backup_name}`, `Delete backup ${b.backup_name}?`)}>Delete</button></div></td>
      </tr>`)}</tbody></table></div>
    ${backups && !backups.length ? html`<p class="muted" id="no-backups">No backups.</p>` : ''}
    <${UploadForm} onError=${setError} onDone=${(out) => { setNotice(`uploaded ${out.backup_name} (${bytes(out.size_bytes)}, from ${out.source_container || 'another machine'})`); refresh(); }} />`;
}
