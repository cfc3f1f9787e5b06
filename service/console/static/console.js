// mmc console: fetches the caller's jobs from the API and draws them into the server-rendered
// pages. No framework and no CDN, so it runs offline. The API key lives in sessionStorage (this
// tab only, gone when it closes) and goes out as the X-API-Key header the API reads.
"use strict";

const KEY_NAME = "mmc-api-key";
const FINAL = new Set(["succeeded", "failed", "canceled"]);
const body = document.body;

function apiKey() {
  return sessionStorage.getItem(KEY_NAME) || "";
}

function notice(text, isError) {
  const box = document.getElementById("notice");
  box.textContent = text || "";
  box.hidden = !text;
  box.classList.toggle("error", Boolean(isError));
}

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// fetch() with the key; a problem+json answer becomes an ApiError carrying its detail.
async function api(path, options = {}) {
  const headers = new Headers(options.headers || {});
  if (apiKey()) headers.set("X-API-Key", apiKey());
  const response = await fetch(path, { ...options, headers });
  if (!response.ok) {
    let problem = {};
    try { problem = await response.json(); } catch (_) { /* not JSON */ }
    if (response.status === 401) showKeyState(false);
    throw new ApiError(response.status, problem);
  }
  return response;
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value; else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleTimeString() : "";
}

function seconds(value) {
  return value === null || value === undefined ? "" : `${Number(value).toFixed(2)} s`;
}

function progressText(job) {
  const progress = job.progress || {};
  if (FINAL.has(job.status) && job.status !== "failed") return progress.message || "";
  const objective = progress.objective === null || progress.objective === undefined
    ? "" : ` objective ${Number(progress.objective).toPrecision(6)}`;
  return `step ${progress.step || 0}${objective} ${progress.message || ""}`.trim();
}

function statusBadge(status) {
  return el("span", { class: `status status-${status}`, "data-status": status }, status);
}

function showKeyState(ok) {
  const state = document.getElementById("key-state");
  const needed = body.dataset.authRequired === "true";
  if (!needed) { state.textContent = "open mode: no API key needed"; return; }
  state.textContent = apiKey() ? (ok === false ? "key refused" : "key set for this tab")
    : "API key needed";
  state.classList.toggle("error", ok === false || !apiKey());
}

function setUpKeyForm(onChange) {
  const form = document.getElementById("key-form");
  showKeyState();
  if (!document.getElementById("key-input")) return;  // open mode: no key to enter
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("key-input");
    if (input.value.trim()) sessionStorage.setItem(KEY_NAME, input.value.trim());
    input.value = "";
    showKeyState(true);
    notice("");
    onChange();
  });
  document.getElementById("key-clear").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_NAME);
    showKeyState();
    onChange();
  });
}

// Save the body of an authenticated GET as a file: a plain link would not carry the key.
async function download(path, filename) {
  try {
    const blob = await (await api(path)).blob();
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: filename });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (error) {
    notice(`download failed: ${error.message}`, true);
  }
}

// -- the job list and the upload form (/) ---------------------------------------------------
function homePage() {
  const rows = document.getElementById("jobs-body");
  let timer = null;

  async function refresh() {
    clearTimeout(timer);
    let anyActive = false;
    try {
      const query = new URLSearchParams({ limit: "50" });
      for (const name of ["status", "algorithm"]) {
        const value = document.getElementById(`filter-${name}`).value;
        if (value) query.set(name, value);
      }
      const page = await (await api(`/v1/jobs?${query}`)).json();
      document.getElementById("jobs-total").textContent = `(${page.total})`;
      rows.replaceChildren(...page.items.map((job) => {
        anyActive ||= !FINAL.has(job.status);
        return el("tr", { "data-job-id": job.id },
          el("td", {}, el("a", { href: `/ui/jobs/${job.id}` }, job.id.slice(0, 12))),
          el("td", {}, job.algorithm.name),
          el("td", {}, statusBadge(job.status)),
          el("td", { class: "progress" }, progressText(job)),
          el("td", {}, job.n_features ? `${job.n_samples} × ${job.n_features}` : job.n_samples),
          el("td", {}, when(job.timing.queued_at)),
          el("td", {}, seconds(job.timing.fit_seconds)));
      }));
      if (!page.items.length) {
        const filtered = document.getElementById("jobs-filter").querySelector("select option:checked:not([value=''])");
        rows.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "empty" },
          filtered ? "no job matches these filters" : "no jobs yet")));
      }
    } catch (error) {
      rows.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "empty error" },
        error.status === 401 ? "enter your API key above to see your jobs" : error.message)));
    }
    // Live while something runs; a slow heartbeat otherwise, for jobs started elsewhere.
    timer = setTimeout(refresh, anyActive ? 700 : 5000);
  }

  for (const name of ["status", "algorithm"]) {
    document.getElementById(`filter-${name}`).addEventListener("change", refresh);
  }

  const algorithm = document.getElementById("upload-algorithm");
  algorithm.addEventListener("change", () => {
    const preset = algorithm.selectedOptions[0].dataset.nClusters;
    if (preset) document.getElementById("upload-n-clusters").value = preset;
  });

  document.getElementById("upload-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = document.getElementById("upload-submit");
    button.disabled = true;
    try {
      let params = {};
      const extra = document.getElementById("upload-params").value.trim();
      if (extra) {
        try { params = JSON.parse(extra); } catch (_) {
          throw new Error("more parameters: write a JSON object, e.g. {\"random_state\": 0}");
        }
      }
      const clusters = document.getElementById("upload-n-clusters").value;
      if (clusters && !("n_clusters" in params)) {
        params.n_clusters = clusters.trim() === "auto" ? "auto" : Number(clusters);
      }
      const form = new FormData();
      form.append("file", document.getElementById("upload-file").files[0]);
      notice("uploading…");
      const dataset = await (await api("/v1/datasets", { method: "POST", body: form })).json();
      const job = await (await api("/v1/jobs", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ algorithm: { name: algorithm.value, params },
                               data: { dataset_id: dataset.id } }),
      })).json();
      notice(`job ${job.id.slice(0, 12)} queued on ${dataset.n_samples} × ${dataset.n_features} points`);
      refresh();
    } catch (error) {
      notice(error.message, true);
    } finally {
      button.disabled = false;
    }
  });

  setUpKeyForm(refresh);
  refresh();
}

// -- one job (/ui/jobs/{id}) -----------------------------------------------------------------
function facts(target, entries) {
  target.replaceChildren(...entries.filter(([, value]) => value !== "" && value !== undefined)
    .flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
}

function jobPage() {
  const jobId = body.dataset.jobId;
  let outputsShown = false;

  function showJob(job) {
    const status = document.getElementById("job-status");
    status.replaceWith(Object.assign(statusBadge(job.status), { id: "job-status" }));
    document.getElementById("job-progress").textContent = progressText(job);
    const error = document.getElementById("job-error");
    error.hidden = !job.error;
    error.textContent = job.error ? `${job.error.type}: ${job.error.message}` : "";
    facts(document.getElementById("job-params"), [
      ["algorithm", job.algorithm.name],
      ...Object.entries(job.algorithm.params).map(([name, value]) => [name, JSON.stringify(value)]),
      ["data", job.n_features ? `${job.n_samples} points × ${job.n_features} features`
        : `${job.n_samples} sequences`],
      ["queue", job.queue],
    ]);
    const timing = job.timing;
    facts(document.getElementById("job-timing"), [
      ["queued", when(timing.queued_at)], ["started", when(timing.started_at)],
      ["finished", when(timing.finished_at)], ["fit", seconds(timing.fit_seconds)],
      ["load", seconds(timing.load_seconds)], ["store", seconds(timing.store_seconds)],
    ]);
    document.getElementById("cancel-job").hidden = FINAL.has(job.status);
  }

  async function showOutputs(job) {
    outputsShown = true;
    document.getElementById("outputs").hidden = false;
    const result = await (await api(`/v1/jobs/${jobId}/result`)).json();
    const extras = result.extras || {};
    const counts = {};
    for (const label of result.labels.flat()) counts[label] = (counts[label] || 0) + 1;
    facts(document.getElementById("job-summary"), [
      ["clusters", Object.entries(counts).map(([k, n]) => `${k}: ${n}`).join(", ")],
      ["objective", extras.objective ?? ""], ["iterations", extras.n_iter ?? ""],
      ["partition kept", extras.candidate ?? "the method's own"],
      ["candidate scores (lower is better)", Object.entries(extras.candidate_scores || {})
        .map(([name, value]) => `${name}: ${Number(value).toPrecision(4)}`).join(", ")],
      ["model", result.model_id],
    ]);
    const warnings = result.warnings || [];
    document.getElementById("job-warnings").replaceChildren(
      ...(warnings.length ? warnings : ["none"]).map((text) => el("li", {}, text)));
    // The estimator's own history, else the objectives its fit reported as progress.
    const history = extras.objective_history || extras.reported_objectives || [];
    document.getElementById("job-history").replaceChildren(...(history.length
      ? history.map((value, i) => el("tr", {}, el("td", {}, i + 1), el("td", {}, value)))
      : [el("tr", {}, el("td", { colspan: 2 }, "not recorded by this algorithm"))]));
    document.getElementById("download-model").setAttribute("download", `${result.model_id}.json`);
    document.getElementById("download-model").dataset.modelId = result.model_id;
    const plot = document.getElementById("job-plot");
    const caption = document.getElementById("plot-caption");
    try {
      const image = await (await api(`/v1/jobs/${jobId}/plot`)).blob();
      plot.onload = () => { caption.textContent = "the clustering (SVG; PNG with Accept: image/png)"; };
      plot.src = URL.createObjectURL(image);
      plot.hidden = false;
    } catch (error) {
      caption.textContent = `no plot: ${error.message}`;
    }
  }

  let following = false;
  async function follow() {
    if (following) return;  // one loop at a time, however often the key changes
    following = true;
    let job = null;
    try {
      job = await (await api(`/v1/jobs/${jobId}`)).json();
      showJob(job);
      // Long poll: each request returns on a status change, or after a second to refresh the
      // progress line while the job runs.
      while (!FINAL.has(job.status)) {
        job = await (await api(`/v1/jobs/${jobId}?wait=${job.status === "running" ? 1 : 10}`)).json();
        showJob(job);
      }
      if (job.status === "succeeded" && !outputsShown) await showOutputs(job);
    } catch (error) {
      notice(error.status === 401 ? "enter your API key above" : error.message, true);
      if (error.status === 404) document.getElementById("job-status").textContent = "not found";
      if (error.status !== 404 && (!job || !FINAL.has(job.status))) setTimeout(follow, 3000);
    } finally {
      following = false;
    }
  }

  document.getElementById("download-labels").addEventListener("click", (event) => {
    event.preventDefault();
    download(`/v1/jobs/${jobId}/labels.csv`, `${jobId}.labels.csv`);
  });
  document.getElementById("download-result").addEventListener("click", (event) => {
    event.preventDefault();
    download(`/v1/jobs/${jobId}/result`, `${jobId}.result.json`);
  });
  document.getElementById("download-model").addEventListener("click", (event) => {
    event.preventDefault();
    const modelId = event.currentTarget.dataset.modelId;
    if (modelId) download(`/v1/models/${modelId}/export`, `${modelId}.json`);
  });
  document.getElementById("cancel-job").addEventListener("click", async () => {
    try { showJob(await (await api(`/v1/jobs/${jobId}`, { method: "DELETE" })).json()); }
    catch (error) { notice(error.message, true); }
  });

  setUpKeyForm(follow);
  follow();
}

if (body.dataset.page === "home") homePage();
if (body.dataset.page === "job") jobPage();
