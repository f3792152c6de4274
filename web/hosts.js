// Admin: the lab's hosts (up or down and why, GPUs and where they come from, the GPU probe) and
// the hosts taken out of the config that still have rows in the book, each forgotten after a dry run.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api } from '/ui/api.js';
import { ErrorLine, confirmAction } from '/ui/util.js';

// The confirm prompt: what forgetting would let go of, as the service's dry run answered it.
function forgetPrompt(d) {
  const rows = Object.entries(d.by_user || {}).map(([user, names]) => `  ${user}: ${names.join(', ')}`);
  const gpus = (d.gpus_released || []).map((g) => g.uuid);
  const ports = (d.ports_released || []).map((p) => p.port);
  const moves = (d.moves_dropped || []).map((m) => `${m.name} (${m.from} -> ${m.to})`);
  return [
    `Forget host ${d.host}? The book lets go of:`,
    'containers and leases, by owner:', ...rows,
    `GPUs (${gpus.length}): ${gpus.join(', ') || 'none'}`,
    `ports (${ports.length}): ${ports.join(', ') || 'none'}`,
    ...(moves.length ? [`moves dropped: ${moves.join(', ')}`] : []),
    'Its engine is not contacted: whatever still runs on that machine is left as it is.',
  ].join('\n');
}

// "ok", "failed: why", with the probe image, or "–" for a host whose GPUs are not probed.
function probeText(p) {
  if (!p) return '–';
  return `${p.state}${p.error ? `: ${p.error}` : ''} (${p.image})`;
}

function ConfiguredHosts({ hosts }) {
  return html`<div class="table-wrap"><table id="hosts"><thead><tr><th>host</th><th>state</th><th>GPUs</th><th>GPU source</th><th>GPU probe</th></tr></thead>
    <tbody>${hosts.map((h) => html`<tr data-name=${h.name} data-state=${h.state}><td>${h.name}</td>
      <td class="wrap"><span class="state ${h.state}">${h.state}</span>${h.down_reason ? html`<div class="muted">${h.down_reason}</div>` : ''}</td>
      <td>${h.gpus}</td><td class="wrap">${h.gpu_source}${h.gpu_note ? html`<div class="muted">${h.gpu_note}</div>` : ''}</td>
      <td class="wrap">${probeText(h.gpu_probe)}</td></tr>`)}</tbody></table></div>`;
}

function RetiredHosts({ retired, busy, onForget }) {
  if (!retired.length) return html`<p class="muted" id="no-retired">No host outside the config has rows in the book.</p>`;
  return html`<div class="table-wrap"><table id="retired"><thead><tr><th>host</th><th>containers</th><th>leases</th><th>GPUs</th><th>ports</th><th>owners</th><th></th></tr></thead>
    <tbody>${retired.map((r) => html`<tr data-name=${r.name}><td>${r.name}</td><td>${r.containers}</td><td>${r.leases}</td>
      <td>${r.gpus}</td><td>${r.ports}</td><td>${r.owners.join(', ')}</td>
      <td><button class="danger act-forget" disabled=${busy === r.name} onClick=${() => onForget(r.name)}>Forget…</button></td></tr>`)}</tbody></table></div>`;
}

export function Hosts({ versions }) {
  const [view, setView] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState('');
  const refresh = () => api('/hosts').then(setView).catch(setError);
  // A host's state changes without an event of its own: the GPU samples' tick refreshes it too.
  useEffect(() => { refresh(); }, [versions.containers, versions.gpus]);
  const forget = async (name) => {
    setError(null);
    setNotice('');
    setBusy(name);
    try {
      const dry = await api('/hosts/forget', { method: 'POST', body: { name, dry_run: true } });
      if (!confirmAction(forgetPrompt(dry))) return;
      const out = await api('/hosts/forget', { method: 'POST', body: { name }, whole: true });
      setNotice(out.message);
      refresh();
    } catch (err) { setError(err); } finally { setBusy(''); }
  };
  return html`<h3>Hosts</h3>
    <${ErrorLine} error=${error} />
    ${notice ? html`<div class="notice" id="host-notice">${notice}</div>` : ''}
    ${view && html`<${ConfiguredHosts} hosts=${view.hosts} />
      <h4>Retired hosts with rows</h4>
      <${RetiredHosts} retired=${view.retired} busy=${busy} onForget=${forget} />`}`;
}
