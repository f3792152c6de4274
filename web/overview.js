// Overview: every GPU (holder, live utilization, memory, temperature, power, the last hour as a
// chart), how many containers and free GPUs, and the user's quota when the service has quotas.
import { html, useState, useEffect } from '/ui/vendor/htm-preact-standalone.mjs';
import { api } from '/ui/api.js';
import { bytes, num, ErrorLine } from '/ui/util.js';
import { GpuChart } from '/ui/gpuchart.js';
import { QuotaCard } from '/ui/quota.js';

// Appends the samples of a "gpus" event to the history, keeping at most `capacity` per GPU.
function appendSamples(hist, ev) {
  if (!hist || !ev) return hist;
  const gpus = hist.gpus.map((g) => {
    const s = ev.gpus.find((x) => x.uuid === g.uuid);
    if (!s || !s.t.length || (g.t.length && s.t[0] <= g.t[g.t.length - 1])) return g;
    const n = { ...g };
    for (const k of ['t', 'held', 'utilization_percent', 'memory_used_bytes', 'memory_total_bytes', 'temperature_c', 'power_w']) {
      n[k] = g[k].concat(s[k]).slice(-hist.capacity);
    }
    return n;
  });
  return { ...hist, gpus };
}

export function Overview({ versions, samples }) {
  const [gpus, setGpus] = useState(null);
  const [status, setStatus] = useState(null);
  const [list, setList] = useState(null);
  const [hist, setHist] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    Promise.all([api('/gpus'), api('/status'), api('/list')])
      .then(([g, s, l]) => { setGpus(g); setStatus(s); setList(l); setError(null); })
      .catch(setError);
  }, [versions.containers]);
  useEffect(() => { api('/gpus/history').then(setHist).catch(setError); }, []);
  useEffect(() => { setHist((h) => appendSamples(h, samples)); }, [samples]);
  const latest = (uuid, key) => {
    const h = hist && hist.gpus.find((x) => x.uuid === uuid);
    if (!h || !h.t.length) return null;
    return h[key][h[key].length - 1];
  };
  const running = list ? list.containers.filter((c) => c.state === 'running').length : 0;
  return html`<h2>Overview</h2>
    <${ErrorLine} error=${error} />
    <div class="summary">
      <div class="card"><div class="muted">GPUs free</div><div class="big" id="free-gpus">${status ? status.available_gpu_indices.length : '–'} / ${gpus ? gpus.gpus.length : '–'}</div></div>
      <div class="card"><div class="muted">Containers (running)</div><div class="big" id="container-count">${list ? list.total : '–'} (${running})</div></div>
      <div class="card"><div class="muted">GPU source</div><div class="big">${gpus ? gpus.source : '–'}</div></div>
      <${QuotaCard} quota=${status && status.quota} />
    </div>
    <div class="cards" id="gpus">
      ${gpus && gpus.gpus.map((g) => {
        const h = hist && hist.gpus.find((x) => x.uuid === g.uuid);
        const util = g.utilization_percent ?? latest(g.uuid, 'utilization_percent');
        const mem = g.memory_used_bytes ?? latest(g.uuid, 'memory_used_bytes');
        const memTotal = g.memory_total_bytes ?? latest(g.uuid, 'memory_total_bytes');
        const temp = g.temperature_c ?? latest(g.uuid, 'temperature_c');
        const power = g.power_mw != null ? g.power_mw / 1000 : latest(g.uuid, 'power_w');
        // Another user's container is not named (allocated_to is null): only that it is held.
        return html`<div class="card gpu" data-uuid=${g.uuid}>
          <div class="title"><span>GPU ${g.index} ${g.name || g.vendor}</span>
            <span class="state ${g.allocated ? 'running' : ''}">${g.allocated ? 'held' : 'free'}</span></div>
          <div class="stat">
            <span>holder</span><span class="holder">${g.allocated_to || (g.allocated ? 'another user' : '–')}</span>
            <span>utilization</span><span>${num(util, 0, ' %')}</span>
            <span>memory</span><span>${bytes(mem)} / ${bytes(memTotal)}</span>
            <span>temperature</span><span>${num(temp, 0, ' °C')}</span>
            <span>power</span><span>${num(power, 0, ' W')}</span>
          </div>
          ${h ? html`<${GpuChart} history=${h} />` : html`<div class="muted">no samples yet</div>`}
        </div>`;
      })}
    </div>
    ${gpus && !gpus.gpus.length ? html`<p class="muted">This service has no GPUs.</p>` : ''}`;
}
