// Usage over time, drawn with uPlot from the sampled history.
import { html, useState, useEffect, useRef } from '/vendor/htm-preact-standalone.module.js';
import uPlot from '/vendor/uPlot.esm.js';
import { api } from './api.js';
import { Loaded, useLoad } from './ui.js';
import { bytes, count } from './format.js';

const charts = [
  ['storage_bytes', 'Storage', bytes],
  ['messages', 'Messages', count],
  ['connections', 'Connections', count],
];

function Chart({ title, points, fmt, from, to }) {
  const ref = useRef(null);
  useEffect(() => {
    const el = ref.current;
    const width = Math.max(240, el.clientWidth);
    const xs = points.map((p) => p.x);
    const ys = points.map((p) => p.y);
    const plot = new uPlot({
      width, height: 180,
      scales: { x: { time: true, range: () => [from, to] }, y: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] } },
      axes: [{}, { values: (u, ticks) => ticks.map(fmt), size: 70 }],
      series: [{}, { label: title, stroke: '#1d6fd8', fill: 'rgba(29,111,216,0.12)', width: 2, points: { show: true, size: 4 },
        value: (u, v) => (v == null ? '—' : fmt(v)) }],
      legend: { show: false },
    }, [xs, ys], el);
    const resize = () => plot.setSize({ width: Math.max(240, el.clientWidth), height: 180 });
    addEventListener('resize', resize);
    return () => { removeEventListener('resize', resize); plot.destroy(); };
  }, [points, from, to]);
  const last = points.length ? fmt(points[points.length - 1].y) : 'no samples yet';
  return html`<figure class="chart" data-chart=${title}>
    <figcaption><span>${title}</span><span class="muted">${last}</span></figcaption>
    <div ref=${ref} class="plot" role="img" aria-label=${`${title} over time; latest ${last}`}></div>
  </figure>`;
}

export function UsageCharts({ account }) {
  const [win, setWin] = useState('1h');
  const st = useLoad(() => api.history(account.id, win), [account.id, win]);
  // New samples arrive every interval: fetch them as they do.
  const every = st.data ? Math.max(1, st.data.interval_seconds) * 1000 : 0;
  useEffect(() => {
    if (!every) return undefined;
    const id = setInterval(st.reload, every);
    return () => clearInterval(id);
  }, [every]);
  return html`<div>
    <div class="page-head">
      <h2>Usage over time</h2>
      <div class="segmented" role="group" aria-label="Time window">
        ${[['1h', 'Last hour'], ['24h', 'Last day']].map(([v, l]) => html`<button key=${v} type="button"
          aria-pressed=${win === v ? 'true' : 'false'} onClick=${() => setWin(v)}>${l}</button>`)}
        <button type="button" onClick=${st.reload}>Refresh</button>
      </div>
    </div>
    <${Loaded} st=${st} what="usage history">${(h) => html`
      <p class="muted">Sampled every ${h.interval_seconds} s; ${h.series.messages.length} samples in this window.</p>
      <div class="charts">
        ${charts.map(([key, title, fmt]) => html`<${Chart} key=${key + h.window} title=${title} points=${h.series[key]} fmt=${fmt}
          from=${Date.parse(h.from) / 1000} to=${Date.parse(h.to) / 1000} />`)}
      </div>`}<//>
  </div>`;
}
