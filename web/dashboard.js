// qwenserve dashboard (dashboard.html). Plain browser JavaScript, no build step.
//
// Element hooks (see the comment at the top of dashboard.html):
//   #window, #pause, #stats-status, #stat-{ttft,itl,e2e}-{p50,p95,p99}, #stat-gen-tps, #stat-rps,
//   #stat-running, #stat-waiting, #stat-kv, #ttft-chart, #itl-chart, #e2e-chart,
//   #throughput-chart, #queue-chart, #kv-chart (canvas[data-points]), #raw-stats-json
//
// Polls GET /stats once a second (the next poll starts a second after the previous one started, and
// never overlaps it) and keeps the last MAX_SAMPLES samples. Expected shape (every field optional;
// a missing one is drawn as a gap and shown as "—"):
//   {"window_requests": {"ttft_ms": {count, mean, p50, p90, p95, p99, max}, "itl_ms": {...},
//                        "e2e_ms": {...}},
//    "window_60s": {same}, "requests_per_second": x, "generation_tokens_per_second": x,
//    "running": n, "waiting": n, "kv_cache_usage": 0..1}
// A failed poll adds an empty sample (a gap in every chart) and shows the error in #stats-status.
//
// Charts: Chart.js (served from /vendor/chart.min.js, embedded from the Debian package).
'use strict';

(() => {
  const POLL_MS = 1000;
  const TIMEOUT_MS = 3000;
  const MAX_SAMPLES = 300;  // 5 minutes at one sample a second

  const $ = (selector) => document.querySelector(selector);
  const els = {
    window: $('#window'),
    pause: $('#pause'),
    status: $('#stats-status'),
    raw: $('#raw-stats-json'),
  };

  const samples = [];  // {label, stats} (stats null for a failed poll)
  let paused = false;

  // ---------------------------------------------------------------- values

  const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

  function latency(stats, metric, quantile) {
    const w = stats && stats[els.window.value];
    const m = w && w[metric];
    return m ? num(m[quantile]) : null;
  }

  function fmtMs(v) {
    if (v === null) return '—';
    if (v < 10) return v.toFixed(2);
    if (v < 100) return v.toFixed(1);
    return Math.round(v).toLocaleString();
  }

  function fmtRate(v) {
    if (v === null) return '—';
    return v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString();
  }

  const fmtInt = (v) => (v === null ? '—' : String(Math.round(v)));
  const kvPercent = (stats) => {
    const v = num(stats && stats.kv_cache_usage);
    return v === null ? null : v * 100;
  };

  // ---------------------------------------------------------------- charts

  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const palette = () => ({
    text: css('--muted') || '#666',
    grid: css('--border') || '#ddd',
    series: [css('--chart-1'), css('--chart-2'), css('--chart-3'), css('--chart-4')],
  });

  const LATENCY_SERIES = [['p50', 'P50'], ['p95', 'P95'], ['p99', 'P99']];
  // Each chart: its datasets, each with a value(stats) function.
  const CHARTS = {
    'ttft-chart': {series: LATENCY_SERIES.map(([q, label]) => ({label, value: (s) => latency(s, 'ttft_ms', q)})),
                   format: (v) => `${fmtMs(v)} ms`},
    'itl-chart': {series: LATENCY_SERIES.map(([q, label]) => ({label, value: (s) => latency(s, 'itl_ms', q)})),
                  format: (v) => `${fmtMs(v)} ms`},
    'e2e-chart': {series: LATENCY_SERIES.map(([q, label]) => ({label, value: (s) => latency(s, 'e2e_ms', q)})),
                  format: (v) => `${fmtMs(v)} ms`},
    'throughput-chart': {
      series: [
        {label: 'generation tokens/s', value: (s) => num(s && s.generation_tokens_per_second), axis: 'y'},
        {label: 'requests/s', value: (s) => num(s && s.requests_per_second), axis: 'y1'},
      ],
      rightAxis: true,
      format: fmtRate,
    },
    'queue-chart': {
      series: [
        {label: 'running', value: (s) => num(s && s.running), stepped: true},
        {label: 'waiting', value: (s) => num(s && s.waiting), stepped: true},
      ],
      integer: true,
      format: fmtInt,
    },
    'kv-chart': {series: [{label: 'KV cache used', value: kvPercent, fill: true}], max: 100,
                 format: (v) => `${v.toFixed(1)} %`},
  };

  const charts = {};

  function chartOptions(spec, colors) {
    const axis = (position, grid) => ({
      position,
      beginAtZero: true,
      suggestedMax: spec.max,
      max: spec.max,
      grid: {color: colors.grid, drawOnChartArea: grid},
      ticks: {color: colors.text, maxTicksLimit: 6, precision: spec.integer ? 0 : undefined},
    });
    const scales = {
      x: {grid: {display: false}, ticks: {color: colors.text, maxTicksLimit: 6, maxRotation: 0, autoSkip: true}},
      y: axis('left', true),
    };
    if (spec.rightAxis) {
      scales.y.title = {display: true, text: 'tokens/s', color: colors.text};
      scales.y1 = axis('right', false);
      scales.y1.title = {display: true, text: 'req/s', color: colors.text};
    }
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      normalized: true,
      interaction: {mode: 'index', intersect: false},
      elements: {point: {radius: 0, hitRadius: 6}, line: {borderWidth: 2, tension: 0.2}},
      plugins: {
        legend: {position: 'bottom', labels: {color: colors.text, boxWidth: 12, boxHeight: 2}},
        tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y === null ? '—' : spec.format(ctx.parsed.y)}`}},
      },
      scales,
    };
  }

  function createCharts() {
    if (!window.Chart) {
      setStatus('error', 'Chart.js did not load (/vendor/chart.min.js)');
      return;
    }
    Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
    const colors = palette();
    for (const [id, spec] of Object.entries(CHARTS)) {
      const canvas = document.getElementById(id);
      charts[id] = new Chart(canvas, {
        type: 'line',
        data: {
          labels: [],
          datasets: spec.series.map((s, i) => ({
            label: s.label,
            data: [],
            yAxisID: s.axis || 'y',
            stepped: s.stepped || false,
            fill: s.fill ? 'origin' : false,
            borderColor: colors.series[i],
            backgroundColor: s.fill ? colors.series[i] + '33' : colors.series[i],
            spanGaps: false,
          })),
        },
        options: chartOptions(spec, colors),
      });
    }
  }

  function recolor() {
    const colors = palette();
    for (const [id, chart] of Object.entries(charts)) {
      const spec = CHARTS[id];
      chart.options = chartOptions(spec, colors);
      chart.data.datasets.forEach((d, i) => {
        d.borderColor = colors.series[i];
        d.backgroundColor = spec.series[i].fill ? colors.series[i] + '33' : colors.series[i];
      });
      chart.update('none');
    }
  }

  function redraw() {
    const labels = samples.map((s) => s.label);
    for (const [id, chart] of Object.entries(charts)) {
      const spec = CHARTS[id];
      chart.data.labels = labels;
      spec.series.forEach((s, i) => {
        chart.data.datasets[i].data = samples.map((sample) => s.value(sample.stats));
      });
      chart.update('none');
      chart.canvas.dataset.points = String(samples.length);
    }
  }

  // ---------------------------------------------------------------- cards

  function setText(id, text) {
    const node = document.getElementById(id);
    if (node && node.textContent !== text) node.textContent = text;
  }

  function updateCards(stats) {
    for (const metric of ['ttft', 'itl', 'e2e']) {
      for (const q of ['p50', 'p95', 'p99']) {
        setText(`stat-${metric}-${q}`, fmtMs(latency(stats, `${metric}_ms`, q)));
      }
    }
    setText('stat-gen-tps', fmtRate(num(stats && stats.generation_tokens_per_second)));
    setText('stat-rps', fmtRate(num(stats && stats.requests_per_second)));
    setText('stat-running', fmtInt(num(stats && stats.running)));
    setText('stat-waiting', fmtInt(num(stats && stats.waiting)));
    const kv = kvPercent(stats);
    setText('stat-kv', kv === null ? '—' : `${kv.toFixed(0)} %`);
    updatePromises(stats);
  }

  // Issue 12: SLO attainment and burn rate (objective 99%: burn = missed share / 1%), the TTFT
  // prediction error, the response cache hit rate, the degraded share and the slowest requests.
  const share = (part, total) => (total > 0 ? part / total : null);
  const fmtPct = (v) => (v === null ? '—' : `${(100 * v).toFixed(1)} %`);

  function updatePromises(stats) {
    const slo = (stats && stats.slo) || {};
    const ttftTotal = (num(slo.ttft_met) || 0) + (num(slo.ttft_missed) || 0);
    const missed = share(num(slo.ttft_missed) || 0, ttftTotal);
    setText('stat-slo-ttft', num(slo.ttft_s) ? fmtPct(missed === null ? null : 1 - missed) : 'off');
    setText('stat-slo-burn', missed === null ? '—' : `${(missed / 0.01).toFixed(1)}×`);
    const itlTotal = (num(slo.itl_met) || 0) + (num(slo.itl_missed) || 0);
    setText('stat-slo-itl', num(slo.itl_s) ? fmtPct(share(num(slo.itl_met) || 0, itlTotal)) : 'off');
    const err = (stats && stats.prediction_error_ms) || {};
    for (const q of ['p10', 'p50', 'p90']) setText(`stat-pred-${q}`, fmtMs(num(err[q])));
    const cache = (stats && stats.response_cache) || {};
    const lookups = (num(cache.hit) || 0) + (num(cache.miss) || 0);
    setText('stat-cache-hit', fmtPct(share(num(cache.hit) || 0, lookups)));
    const degraded = (stats && stats.degraded) || {};
    setText('stat-degraded', degraded.now ? 'on' : 'off');
    setText('stat-degraded-requests', fmtPct(num(degraded.share)));
    renderSlowest((stats && stats.slowest) || []);
  }

  function renderSlowest(rows) {
    const body = document.getElementById('slowest-body');
    if (!body) return;
    const cells = (r) => [r.id, fmtMs(num(r.e2e_ms)), fmtMs(num(r.queue_ms)), fmtMs(num(r.prefill_ms)),
      fmtMs(num(r.decode_ms)), fmtMs(num(r.predicted_ttft_ms)), fmtInt(num(r.cached_tokens)),
      fmtInt(num(r.preemptions)), r.cache || '', r.degraded ? 'yes' : ''];
    body.replaceChildren(...rows.map((r) => {
      const tr = document.createElement('tr');
      for (const c of cells(r)) {
        const td = document.createElement('td');
        td.textContent = c;
        tr.appendChild(td);
      }
      return tr;
    }));
    body.dataset.rows = String(rows.length);
  }

  function lastStats() {
    for (let i = samples.length - 1; i >= 0; i--) if (samples[i].stats) return samples[i].stats;
    return null;
  }

  function setStatus(kind, text) {
    els.status.dataset.state = kind;
    els.status.textContent = text;
  }

  // ---------------------------------------------------------------- polling

  const timeLabel = () => new Date().toLocaleTimeString([], {hour12: false});

  function addSample(stats) {
    samples.push({label: timeLabel(), stats});
    if (samples.length > MAX_SAMPLES) samples.splice(0, samples.length - MAX_SAMPLES);
    redraw();
  }

  async function poll() {
    const started = performance.now();
    if (!paused) {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
      try {
        const res = await fetch('/stats', {cache: 'no-store', signal: controller.signal,
                                           headers: {'Accept': 'application/json'}});
        if (!res.ok) {
          let message = `HTTP ${res.status}`;
          try {
            const body = await res.json();
            if (body && body.error) message += `: ${body.error.message || body.error}`;
          } catch (e) {
            /* not JSON */
          }
          throw new Error(message);
        }
        const stats = await res.json();
        if (!stats || typeof stats !== 'object') throw new Error('unexpected /stats response');
        if (!paused) {
          addSample(stats);
          updateCards(stats);
          els.raw.textContent = JSON.stringify(stats, null, 2);
          setStatus('ok', `updated ${samples[samples.length - 1].label}`);
        }
      } catch (err) {
        if (!paused) {
          addSample(null);
          const reason = err.name === 'AbortError' ? 'timed out' : (err.message || String(err));
          setStatus('error', `/stats: ${reason}`);
        }
      } finally {
        clearTimeout(timer);
      }
    }
    setTimeout(poll, Math.max(0, POLL_MS - (performance.now() - started)));
  }

  // ---------------------------------------------------------------- wiring

  els.window.addEventListener('change', () => {
    redraw();
    updateCards(lastStats());
  });
  els.pause.addEventListener('click', () => {
    paused = !paused;
    els.pause.setAttribute('aria-pressed', String(paused));
    els.pause.textContent = paused ? 'Resume' : 'Pause';
    if (paused) setStatus('paused', 'paused');
  });
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', recolor);

  createCharts();
  window.qsDashboard = {charts, samples};  // for debugging in the console
  poll();
})();
