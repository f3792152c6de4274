// The user's quota: what they hold against each limit an admin set (the `quota` of GET /status
// and /list). Shown as a card on the Overview and as one line beside the create form.
import { html } from '/ui/vendor/htm-preact-standalone.mjs';
import { bytes, num } from '/ui/util.js';

const count = (v) => num(v);
const cpus = (v) => num(v, Number.isInteger(Number(v)) ? 0 : 2);
const hours = (v) => num(v, 2);

// [usage key, label, limit key, format]
const ROWS = [
  ['containers', 'containers', 'max_containers', count],
  ['gpus', 'GPUs', 'max_gpus', count],
  ['cpus', 'CPUs', 'max_cpus', cpus],
  ['memory_bytes', 'memory', 'max_memory_bytes', bytes],
  ['gpu_hours', 'GPU-hours', 'max_gpu_hours', hours],
];

export function quotaRows(quota) {
  if (!quota || !quota.limits || !quota.usage) return [];
  return ROWS.map(([key, label, max, fmt]) => {
    const used = quota.usage[key];
    const limit = quota.limits[max];
    const limited = limit !== null && limit !== undefined;
    return {
      key,
      label: key === 'gpu_hours' ? `GPU-hours (last ${num(quota.limits.period_hours)} h)` : label,
      used: fmt(used),
      limit: limited ? fmt(limit) : 'no limit',
      limited,
      full: limited && Number(used) >= Number(limit),
      ratio: limited && limit > 0 ? Math.min(1, Number(used) / limit) : (limited ? 1 : 0),
    };
  });
}

export function QuotaCard({ quota }) {
  const rows = quotaRows(quota);
  if (!rows.length) return null;
  const any = rows.some((r) => r.limited);
  return html`<div class="card quota" id="quota"><div class="muted">Your quota</div>
    ${any ? '' : html`<div class="muted" id="no-quota">No limits set.</div>`}
    <table><tbody>${rows.map((r) => html`<tr data-key=${r.key} class=${r.full ? 'full' : ''}>
      <td class="muted">${r.label}</td>
      <td class="used">${r.used} / ${r.limit}</td>
      <td>${r.limited ? html`<meter min="0" max="1" high="0.99" value=${r.ratio}></meter>` : ''}</td>
    </tr>`)}</tbody></table>
  </div>`;
}

// One line for the create form: only the limited rows, or nothing without limits.
export function QuotaLine({ quota }) {
  const rows = quotaRows(quota).filter((r) => r.limited);
  if (!rows.length) return null;
  return html`<div class="muted" id="quota-line">Your quota: ${rows.map((r, i) => html`${i ? ' · ' : ''}<span class=${r.full ? 'full' : ''}>${r.label} ${r.used} / ${r.limit}</span>`)}</div>`;
}
