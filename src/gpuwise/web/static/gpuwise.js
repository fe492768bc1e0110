// gpuwise pages: small vanilla JS over the JSON API; charts with the plotly bundled in the Python package.
"use strict";
const gpuwise = (() => {
  const $ = (sel) => document.querySelector(sel);
  const form = (el) => Object.fromEntries(new FormData(el).entries());
  const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

  async function post(url, body) {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const data = await r.json();
    if (!r.ok) throw new Error(typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail));
    return data;
  }

  function fitPage() {
    $("#fit-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = form(ev.target);
      const options = { batch: +f.batch, count: +f.count };
      if (f.task === "train") Object.assign(options, { method: f.method, seq: +f.seq, ckpt: f.ckpt });
      else Object.assign(options, { input_len: +f.seq });
      try {
        const data = await post("/api/fit", { model: f.model, gpu: f.gpu, task: f.task, options });
        const mem = data.estimate.memory;
        $("#fit-verdict").innerHTML = `<span class="${mem.fits ? "ok" : "error"}">${mem.fits ? "fits" : "does not fit"}</span>: `
          + `${mem.per_gpu_gib.toFixed(1)} of ${mem.capacity_gib.toFixed(1)} GiB per GPU, headroom ${mem.headroom_gib.toFixed(1)} GiB`
          + (data.plan && data.plan.length ? `; fits with <code>${esc(data.plan.join(" "))}</code>` : "");
        const parts = Object.entries(mem.breakdown_gib).filter(([, v]) => v > 0);
        const words = (k) => PART_NAMES[k] || k.replace(/_/g, " ");
        const traces = parts.map(([k, v]) => ({ type: "bar", name: words(k), x: ["per GPU"], y: [v],
          hovertemplate: `${words(k)}: %{y:.2f} GiB<extra></extra>` }));
        Plotly.newPlot("fit-chart", traces, {
          barmode: "stack", title: { text: `${data.estimate.workload.model} on ${data.estimate.hardware.gpu}` }, yaxis: { title: { text: "GiB per GPU" } },
          shapes: [{ type: "line", x0: -0.5, x1: 0.5, y0: mem.capacity_gib, y1: mem.capacity_gib, line: { color: "red", dash: "dash" } }],
          annotations: [{ x: 0.5, y: mem.capacity_gib, xanchor: "left", yanchor: "bottom", showarrow: false,
            text: `the card's memory: ${mem.capacity_gib.toFixed(1)} GiB` }],
        }, { displayModeBar: false });
        $("#fit-changes tbody").innerHTML = data.changes.slice(0, 10).map((c) =>
          `<tr><td><code>${esc(c.flags)}</code></td><td>${esc(c.description)}</td><td>${c.per_gpu_gib.toFixed(1)}</td>`
          + `<td>${c.saving_gib.toFixed(1)}</td><td>${c.fits ? "yes" : "no"}</td></tr>`).join("");
      } catch (err) { $("#fit-verdict").innerHTML = `<span class="error">${esc(err.message)}</span>`; }
    });
  }

  function recommendBody(f) {
    const workload = { model: f.model };
    const options = {};
    if (f.task === "train") {
      Object.assign(workload, { task: "train", tokens: +f.tokens });
      Object.assign(options, { method: f.method, seq: +f.seq });
      if (f.deadline) workload.deadline_hours = +f.deadline;
    } else {
      workload.task = "infer";
      if (f.task === "serve") {
        workload.qps = +f.qps;
        if (f.p99) workload.e2e_p99_ms = +f.p99;  // the SLOs, any of them at once (workload/jobs/slos.py)
        if (f.ttft) workload.ttft_p99_ms = +f.ttft;
        if (f.tpot) workload.tpot_p99_ms = +f.tpot;
      }
      else workload.min_tokens_per_s = +f.min_tps;
      if (f.quant) options.quant = f.quant;
    }
    workload.options = options;
    const body = { workloads: [workload], objective: f.objective, top: 15,
      acquisitions: ["buy-new", "buy-used", "rent"].filter((w) => f[w] === "on") };
    const usage = { years: +f.years, pattern: f.pattern };
    if (f.hours) usage.hours_per_day = +f.hours;
    if (f.hours || f.pattern !== "ongoing" || +f.years !== 3) body.usage = usage;
    const constraints = { own_host: f.own_host === "on" };
    if (f.chassis) constraints.chassis = f.chassis;
    if (f.psu) constraints.psu_watts = +f.psu;
    body.constraints = constraints;
    if (f.budget) body.budget_usd = +f.budget;
    return body;
  }

  function speedOf(o) {
    if (o.job_hours != null) return o.job_hours.expected.toFixed(1) + " (≤ " + o.job_hours.high.toFixed(1) + ")";
    if (o.qps_capacity != null) {
      const kind = o.p99_slo && o.p99_slo !== "e2e" ? " " + o.p99_slo.toUpperCase() : "";
      const ms = o.p99_ms && o.p99_slo === "tpot" ? o.p99_ms.toFixed(1) : Math.round(o.p99_ms);
      const binds = o.binding_slo && o.binding_slo !== o.p99_slo ? ", " + o.binding_slo.toUpperCase() + " binds" : "";
      return o.qps_capacity.toFixed(1) + " req/s" + (o.p99_ms ? ", P99" + kind + " " + ms + " ms" + binds : "");
    }
    if (o.tokens_per_s != null) return o.tokens_per_s.toFixed(1) + " tok/s";
    return "—";
  }

  function machinesOf(o) {
    if (o.instances == null) return "—";
    const net = o.network ? ` over ${o.network}` : "";
    const inside = o.gpus_per_node > 1 ? `${o.gpus_per_node} GPUs, ${o.interconnect}` : "1 GPU";
    return `${o.instances} x ${o.system} (${inside})${net}`;
  }

  function recommendChart(data, training) {
    const opts = data.options;
    const x = (o) => (training ? (o.job_hours == null ? null : o.job_hours.expected) : (o.usd_per_mtok ?? null));
    const y = (o) => (training ? o.tco_usd : (o.qps_capacity ?? o.tokens_per_s));
    const all = { type: "scatter", mode: "markers", name: "options", x: opts.map(x), y: opts.map(y),
      text: opts.map((o) => `${o.count} x ${o.gpu} (${o.acquisition})`), marker: { size: 9 } };
    const traces = [all];
    if (training) {
      const pareto = data.pareto.slice().sort((a, b) => a.time - b.time);
      traces.push({ type: "scatter", mode: "lines+markers", name: "★ Pareto front (none cheaper and faster)",
        x: pareto.map((p) => p.time), y: pareto.map((p) => p.tco_usd), text: pareto.map((p) => `${p.count} x ${p.gpu}`),
        line: { color: "red" } });
    }
    const layout = training
      ? { title: { text: "total cost vs time per job" }, xaxis: { title: { text: "hours per job (log scale)" }, type: "log" },
          yaxis: { title: { text: "total cost of ownership, USD (log scale)" }, type: "log" } }
      : { title: { text: "cost per token vs capacity" }, xaxis: { title: { text: "USD per million generated tokens (log scale)" }, type: "log" },
          yaxis: { title: { text: "requests/s within the SLO, or tokens/s for one user (log scale)" }, type: "log" } };
    Plotly.newPlot("rec-chart", traces, { ...layout, showlegend: true, legend: { orientation: "h" } }, { displayModeBar: false });
  }

  function recommendPage() {
    const show = () => {
      const task = $("#rec-form [name=task]").value;
      document.querySelectorAll("#rec-form .train, #rec-form .serve, #rec-form .one-user").forEach((el) => {
        el.hidden = !el.classList.contains(task);
      });
    };
    $("#rec-form [name=task]").addEventListener("change", show);
    show();
    $("#rec-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = form(ev.target);
      const training = f.task === "train";
      try {
        const data = await post("/api/recommend", recommendBody(f));
        const opts = data.options;
        const front = new Set(data.pareto.map((p) => `${p.gpu}|${p.count}|${p.acquisition}`));
        recommendChart(data, training);
        $("#rec-speed").textContent = training ? "hours/job" : "speed";
        $("#rec-unit").textContent = training ? "USD/job" : "USD/Mtok";
        const unit = (o) => (training ? o.cost_per_job_usd : o.usd_per_mtok);
        $("#rec-table tbody").innerHTML = opts.map((o, i) => `<tr><td>${i + 1}</td><td>${o.count} x ${esc(o.gpu)}`
          + `${front.has(`${o.gpu}|${o.count}|${o.acquisition}`) ? " ★" : ""}</td><td>${esc(o.acquisition)}</td>`
          + `<td>${esc(machinesOf(o))}</td><td>${o.per_gpu_gib.toFixed(1)}</td><td>${esc(speedOf(o))}</td>`
          + `<td>${unit(o) == null ? "—" : unit(o).toLocaleString(undefined, { maximumFractionDigits: training ? 0 : 3 })}</td>`
          + `<td>${Math.round(o.tco_usd).toLocaleString()}</td><td>${esc(o.why)}</td></tr>`).join("");
        $("#rec-findings").innerHTML = (data.findings || []).map((x) => `<li><b>finding:</b> ${esc(x)}</li>`).join("");
        const groups = {};
        for (const r of data.rejected) (groups[r.code] ||= []).push(r);
        $("#rec-rejected").innerHTML = Object.entries(groups).map(([code, rs]) =>
          `<li><b>${esc(code)}</b> (${rs.length}): ${esc(rs.slice(0, 3).map((r) => `${r.count} x ${r.gpu}: ${r.reason}`).join("; "))}</li>`).join("")
          + (opts.length ? "" : `<li class="error">nothing qualifies; nearest: ${esc(data.nearest.map((r) => `${r.gpu}: ${r.reason}`).join("; "))}</li>`);
      } catch (err) { $("#rec-rejected").innerHTML = `<li class="error">${esc(err.message)}</li>`; }
    });
  }

  function comparePage() {
    $("#cmp-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const ids = Object.values(form(ev.target)).filter((v) => v);
      const r = await fetch(`/api/compare?ids=${encodeURIComponent(ids.join(","))}`);
      const data = await r.json();
      if (!r.ok) { $("#cmp-chart").innerHTML = `<p class="error">${esc(data.detail)}</p>`; return; }
      const rows = data.rows.filter((row) => !row.derived || row.key.includes("per"));
      const figure = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 3 });
      const shown = (row, g) => (row.values && row.values[g] != null
        ? `${figure.format(row.values[g])}${row.unit ? " " + row.unit : ""}` : "");
      const traces = data.gpus.map((g) => ({ type: "bar", name: g, x: rows.map((row) => row.label), y: rows.map((row) => row.ratios[g]),
        customdata: rows.map((row) => shown(row, g)),
        hovertemplate: "%{x}: %{customdata} (%{y:.2f}x)<extra>" + g + "</extra>" }));
      Plotly.newPlot("cmp-chart", traces, { barmode: "group",
        title: { text: `each figure as a ratio to ${data.baseline}'s (the figures themselves in the table below)` },
        yaxis: { title: { text: `times ${data.baseline}'s figure` } } }, { displayModeBar: false });
      const ratio = (row, g) => (row.ratios[g] != null ? ` <span class="muted">(${row.ratios[g].toFixed(2)}x)</span>` : "");
      $("#cmp-table thead").innerHTML = `<tr><th>figure</th>${data.gpus.map((g) => `<th>${esc(g)}</th>`).join("")}</tr>`;
      $("#cmp-table tbody").innerHTML = rows.map((row) => `<tr><td>${esc(row.label)}</td>`
        + data.gpus.map((g) => `<td>${esc(shown(row, g)) || "—"}${ratio(row, g)}</td>`).join("") + "</tr>").join("");
    });
  }

  const PART_NAMES = { weights: "weights", master_weights: "fp32 master weights", gradients: "gradients",
    optimizer: "optimizer states", activations: "activations", kv_cache: "KV cache", logits: "logits",
    framework_overhead: "CUDA context and workspaces", allocator_reserve: "allocator's reserve" };

  function tcoPage() {
    $("#tco-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = form(ev.target);
      try {
        const data = await post("/api/tco", { gpu: f.gpu, count: +f.count, hours_per_day: +f.hours_per_day, years: +f.years, usd_per_kwh: +f.usd_per_kwh });
        const years = data.buy.by_year_usd.map((_, i) => i + 1);
        const traces = [{ type: "scatter", mode: "lines+markers", name: "buy", x: years, y: data.buy.by_year_usd, line: { width: 4 } }]
          .concat(data.rent.map((r) => ({ type: "scatter", mode: "lines", x: years, y: r.by_year_usd,
            name: `rent ${r.provider} ${r.instance} (${r.tier || "on-demand"}${r.region ? ", " + r.region : ""}, ${r.usd_per_hour.toFixed(2)} USD/h)` })));
        Plotly.newPlot("tco-chart", traces, { title: { text: `${data.count} x ${data.gpu}: cumulative cost` }, xaxis: { title: { text: "year" }, dtick: 1 },
          yaxis: { title: { text: "USD" } } }, { displayModeBar: false });
        $("#tco-detail").textContent = `buy: ${Math.round(data.buy.gpus_usd)} cards + ${Math.round(data.buy.host_usd)} host + `
          + `${Math.round(data.buy.energy_usd)} energy + ${Math.round(data.buy.repairs_usd)} repairs - ${Math.round(data.buy.residual_usd)} residual (${data.price_basis})`;
      } catch (err) { $("#tco-detail").innerHTML = `<span class="error">${esc(err.message)}</span>`; }
    });
  }

  function doctorPage() {
    $("#doc-file").addEventListener("change", async (ev) => {
      const file = ev.target.files[0];
      if (!file) return;
      try {
        const report = JSON.parse(await file.text());
        if (!Array.isArray(report.checks)) throw new Error("not a `gpuwise doctor --json` report (no checks)");
        const s = report.summary || {};
        $("#doc-summary").textContent = `${report.host || "machine"}: ${s.PASS || 0} pass, ${s.WARN || 0} warn, ${s.FAIL || 0} fail, ${s["N/A"] || 0} n/a`;
        const style = { PASS: "ok", FAIL: "error", WARN: "error" };
        $("#doc-table tbody").innerHTML = report.checks.map((c) => `<tr><td>${c.gpu ?? "—"}</td><td>${esc(c.id)}</td>`
          + `<td class="${style[c.status] || "muted"}">${esc(c.status)}</td><td>${esc(c.measured)}</td><td>${esc(c.expected)}</td><td>${esc(c.fix)}</td></tr>`).join("");
      } catch (err) { $("#doc-summary").innerHTML = `<span class="error">${esc(err.message)}</span>`; }
    });
  }

  function servingPage() {
    $("#srv-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = form(ev.target);
      const concurrencies = f.concurrencies.split(",").map((c) => +c.trim()).filter((c) => c > 0);
      try {
        const data = await post("/api/serving", { model: f.model, gpu: f.gpu, concurrencies,
          options: { engine: f.engine, input_len: +f.input_len, output_len: +f.output_len } });
        const xs = data.points.map((p) => p.concurrency);
        const traces = [
          { type: "scatter", mode: "lines+markers", name: "time to first token (mean, ms)", x: xs, y: data.points.map((p) => p.ttft_ms.mean) },
          { type: "scatter", mode: "lines+markers", name: "time per output token (mean, ms)", x: xs, y: data.points.map((p) => p.tpot_ms.mean), yaxis: "y2" },
        ];
        Plotly.newPlot("srv-chart", traces, { title: { text: `${data.model} on ${data.gpu} (${data.engine})` },
          xaxis: { title: { text: "clients in flight (concurrency)" }, type: "log" },
          yaxis: { title: { text: "time to first token, ms" } },
          yaxis2: { title: { text: "time per output token, ms" }, overlaying: "y", side: "right" },
          legend: { orientation: "h", y: 1.12 } }, { displayModeBar: false });
        $("#srv-detail").textContent = data.points.map((p) => `${p.concurrency} clients: ${p.requests_per_s.toFixed(2)} req/s, `
          + `${Math.round(p.output_tokens_per_s)} output tokens/s`).join("; ");
      } catch (err) { $("#srv-detail").innerHTML = `<span class="error">${esc(err.message)}</span>`; }
    });
  }

  function imagesPage() {
    $("#img-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = form(ev.target);
      try {
        const data = await post("/api/estimate", { model: f.model, gpu: f.gpu, task: "infer",
          options: { engine: f.engine, quant: f.quant, resolution: +f.resolution } });
        const mem = data.memory, perf = data.perf;
        $("#img-verdict").innerHTML = `<span class="${mem.fits ? "ok" : "error"}">${mem.fits ? "fits" : "does not fit"}</span>: `
          + `${mem.per_gpu_gib.toFixed(1)} of ${mem.capacity_gib.toFixed(1)} GiB`
          + (mem.working_set_gib ? ` (it runs in ${mem.working_set_gib.toFixed(1)}, one component at a time)` : "")
          + (perf ? `; ${perf.seconds_per_image.toFixed(1)} s per image` : "");
        const phases = Object.entries(perf ? perf.phases_s : {}).filter(([, v]) => v > 0.0005);
        const parts = Object.entries(mem.breakdown_gib).filter(([, v]) => v > 0);
        Plotly.newPlot("img-chart", [
          { type: "bar", name: "seconds per call, by phase", x: phases.map(([k]) => k), y: phases.map(([, v]) => v),
            text: phases.map(([, v]) => v.toFixed(2) + " s"), textposition: "outside" },
          { type: "bar", name: "GiB on the GPU at the peak, by part", x: parts.map(([k]) => k), y: parts.map(([, v]) => v),
            text: parts.map(([, v]) => v.toFixed(2) + " GiB"), textposition: "outside", xaxis: "x2", yaxis: "y2" },
        ], { grid: { rows: 1, columns: 2, pattern: "independent" }, title: { text: `${f.model} on ${f.gpu} (${f.engine})` },
          yaxis: { title: { text: "seconds" } }, yaxis2: { title: { text: "GiB" } }, legend: { orientation: "h", y: 1.12 } },
        { displayModeBar: false });
      } catch (err) { $("#img-verdict").innerHTML = `<span class="error">${esc(err.message)}</span>`; }
    });
  }

  function diagnosePage() {
    $("#dx-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const data = await post("/api/diagnose", { text: form(ev.target).text });
        const rows = data.matches.map((m) => `<tr><td><b>${esc(m.title)}</b><br><span class="muted">${esc(m.cause)}</span></td>`
          + `<td>${Math.round(m.score * 100)}%</td><td><code>${esc(m.evidence.join(" | "))}</code></td>`
          + `<td><ul>${m.fix.map((x) => `<li>${esc(x)}</li>`).join("")}</ul></td></tr>`);
        $("#dx-table tbody").innerHTML = rows.join("") || `<tr><td colspan="4">no known signature; checklist: ${esc(data.checklist.join("; "))}</td></tr>`;
      } catch (err) { $("#dx-table tbody").innerHTML = `<tr><td colspan="4" class="error">${esc(err.message)}</td></tr>`; }
    });
  }

  return { fitPage, recommendPage, comparePage, tcoPage, doctorPage, servingPage, diagnosePage, imagesPage };
})();

// each page names itself on <body data-page>: no inline script, so the Content-Security-Policy allows only files
// and each opens with its form's worked example already computed (the defaults the form holds)
window.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  const start = { fit: gpuwise.fitPage, recommend: gpuwise.recommendPage, compare: gpuwise.comparePage,
    tco: gpuwise.tcoPage, doctor: gpuwise.doctorPage, serving: gpuwise.servingPage, diagnose: gpuwise.diagnosePage,
    images: gpuwise.imagesPage }[page];
  if (start) start();
  const example = { fit: "#fit-form", recommend: "#rec-form", compare: "#cmp-form", tco: "#tco-form",
    serving: "#srv-form", diagnose: "#dx-form", images: "#img-form" }[page];
  if (example && document.querySelector(example)) document.querySelector(example).requestSubmit();
});
