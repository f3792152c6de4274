// One GPU's last hour as a uPlot chart: utilization, memory use and "held" in percent on the left
// axis, temperature (°C) and power (W) on the right. Data come from the service's ring buffer.
import { html, useEffect, useRef } from '/ui/vendor/htm-preact-standalone.mjs';

export function columnsToData(h) {
  const memPct = h.memory_used_bytes.map((v, i) => {
    const total = h.memory_total_bytes[i];
    return v === null || !total ? null : (100 * v) / total;
  });
  return [h.t, h.utilization_percent, memPct, h.held.map((v) => v * 100), h.temperature_c, h.power_w];
}

export function GpuChart({ history }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const el = box.current;
    const width = () => Math.max(200, el.clientWidth);
    const opts = {
      width: width(), height: 160,
      legend: { show: true },
      scales: { x: { time: true }, pct: { range: [0, 100] }, abs: { auto: true } },
      axes: [{}, { scale: 'pct', size: 36 }, { scale: 'abs', side: 1, size: 36, grid: { show: false } }],
      series: [
        {},
        { label: 'util %', scale: 'pct', stroke: '#2f6fdf', width: 1.5 },
        { label: 'mem %', scale: 'pct', stroke: '#7a4fd6', width: 1.5 },
        { label: 'held', scale: 'pct', stroke: '#9aa3b2', fill: 'rgba(154,163,178,.15)', width: 1, paths: window.uPlot.paths.stepped({ align: 1 }) },
        { label: '°C', scale: 'abs', stroke: '#d9822b', width: 1.5 },
        { label: 'W', scale: 'abs', stroke: '#12845b', width: 1.5 },
      ],
    };
    plot.current = new window.uPlot(opts, columnsToData(history), el);
    const ro = new ResizeObserver(() => plot.current && plot.current.setSize({ width: width(), height: 160 }));
    ro.observe(el);
    return () => { ro.disconnect(); plot.current.destroy(); plot.current = null; };
  }, []);
  useEffect(() => { if (plot.current) plot.current.setData(columnsToData(history)); }, [history]);
  return html`<div class="chart" ref=${box} data-samples=${history.t.length}></div>`;
}
