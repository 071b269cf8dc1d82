// "Queue on paradit": sends the open workflow to a paradit server's POST /v1/workflows and
// follows the job there (GET /v1/jobs/{id}) until its video or image is ready.
//
// The workflow goes as ComfyUI's own Queue button sends it to ComfyUI (app.graphToPrompt():
// the API format, subgraphs flattened, with the UI form in extra_data). The server named in
// the setting "paradit server URL" must allow this page's origin (`paradit serve
// --cors-origin <origin>`). Jobs sent from this page are listed in the "paradit" sidebar tab
// with their progress and results; the latest one also shows in a small panel on the canvas.
import { app } from "../../scripts/app.js";

const URL_SETTING = "paradit.ServerURL";
const TOKEN_SETTING = "paradit.Token";
const COMMAND = "paradit.QueueOnParadit";
const LABEL = "Queue on paradit";
const DEFAULT_URL = "http://127.0.0.1:7870";
const POLL_MS = 500;
const FINAL = new Set(["succeeded", "failed", "cancelled"]);

function setting(id) {
  const store = app.extensionManager?.setting;
  return store ? store.get(id) : app.ui.settings.getSettingValue(id);
}

function toast(severity, summary, detail, life = 8000) {
  const toasts = app.extensionManager?.toast;
  if (toasts) toasts.add({ severity, summary, detail, life });
}

/** The server's base URL and the headers every call sends. */
function server() {
  const base = String(setting(URL_SETTING) || DEFAULT_URL).trim().replace(/\/+$/, "");
  const token = String(setting(TOKEN_SETTING) || "").trim();
  return { base, headers: token ? { Authorization: `Bearer ${token}` } : {} };
}

/** A call to the server: the Response when 2xx, else an Error carrying its reason. */
async function call(srv, path, init = {}) {
  let reply;
  try {
    reply = await fetch(srv.base + path, { ...init, headers: { ...srv.headers, ...init.headers } });
  } catch {
    throw new Error(
      `cannot reach ${srv.base}: is \`paradit serve\` running there, started with ` +
        `--cors-origin ${window.location.origin}?`,
    );
  }
  if (reply.ok) return reply;
  let reason = reply.statusText;
  try {
    reason = (await reply.json()).error ?? reason;
  } catch {
    // not JSON: keep the status text
  }
  throw new Error(`${srv.base} answered ${reply.status}: ${reason}`);
}

/** The jobs sent from this page, newest first, and who shows them. */
class Jobs {
  constructor() {
    this.items = [];
    this.views = new Set();
  }
  add(job) {
    this.items.unshift(job);
    this.changed();
  }
  changed() {
    for (const view of this.views) view();
  }
}

const jobs = new Jobs();

function describe(job) {
  if (job.error) return `failed: ${job.error}`;
  const { step, total } = job.progress ?? {};
  if (job.status === "running" && total) return `running: step ${step} of ${total}`;
  if (job.status === "queued" && job.queue_position) return `queued (position ${job.queue_position})`;
  if (job.status === "succeeded" && job.result === undefined) return "done, fetching the output";
  if (job.status === "succeeded") return `done: ${job.result ? job.result.name : "no output"}`;
  return job.status;
}

/** One job as a card: status line, progress bar, result (video or image) and its link. */
function card(job) {
  const el = document.createElement("div");
  el.className = "paradit-job";
  el.dataset.job = job.id ?? "";
  el.dataset.status = job.status;
  el.style.cssText = "padding:6px 8px;border-bottom:1px solid #4446;font:12px sans-serif";
  const title = document.createElement("div");
  title.className = "paradit-job-status";
  title.textContent = `paradit${job.id ? ` job ${job.id}` : ""}: ${describe(job)}`;
  el.append(title);
  const { step, total } = job.progress ?? {};
  if (!FINAL.has(job.status) && job.id) {
    const bar = document.createElement("progress");
    bar.className = "paradit-job-progress";
    bar.max = total || 1;
    bar.value = step || 0;
    bar.style.width = "100%";
    el.append(bar);
  }
  if (job.result) {
    const media = document.createElement(job.result.kind);
    media.className = "paradit-job-result";
    media.src = job.result.url;
    media.style.cssText = "max-width:100%;max-height:240px;display:block;margin-top:4px";
    if (job.result.kind === "video") Object.assign(media, { controls: true, loop: true });
    const link = document.createElement("a");
    link.href = job.result.url;
    link.download = job.result.name;
    link.textContent = `${job.result.name} (${job.result.source})`;
    el.append(media, link);
  }
  return el;
}

/** A small panel on the page showing the latest job. */
function panel() {
  const el = document.createElement("div");
  el.className = "paradit-queue";
  el.style.cssText =
    "position:fixed;right:12px;bottom:12px;width:300px;z-index:1000;display:none;" +
    "background:var(--comfy-menu-bg,#222);color:var(--fg-color,#ddd);border-radius:6px";
  document.body.append(el);
  jobs.views.add(() => {
    const [latest] = jobs.items;
    el.style.display = latest ? "block" : "none";
    el.replaceChildren(...(latest ? [card(latest)] : []));
  });
}

/** The finished job's output, fetched with the token, as a URL this page can show. */
async function fetchResult(srv, job) {
  const files = job.files ?? [];
  const [kind, name, route] = files.includes("video.mp4")
    ? ["video", "video.mp4", "video"]
    : ["img", "image.png", "image"];
  if (!files.includes(name)) return null;
  const path = `/v1/jobs/${job.id}/${route}`;
  const blob = await (await call(srv, path)).blob();
  return { kind, name, url: URL.createObjectURL(blob), source: srv.base + path };
}

async function follow(srv, job) {
  while (!FINAL.has(job.status)) {
    await new Promise((done) => setTimeout(done, POLL_MS));
    Object.assign(job, await (await call(srv, `/v1/jobs/${job.id}`)).json());
    jobs.changed();
  }
  if (job.status === "succeeded") {
    job.result = await fetchResult(srv, job);
    jobs.changed();
    toast("success", LABEL, `job ${job.id} done: ${job.result?.source ?? "no output"}`);
  } else {
    toast("error", LABEL, `job ${job.id} ${job.status}${job.error ? `: ${job.error}` : ""}`);
  }
}

/** The command: send the open workflow, then follow its job. */
async function queueOnParadit() {
  const srv = server();
  const job = { id: null, status: "sending", progress: {} };
  jobs.add(job);
  try {
    const { output, workflow } = await app.graphToPrompt();
    const body = JSON.stringify({ prompt: output, extra_data: { extra_pnginfo: { workflow } } });
    const created = await call(srv, "/v1/workflows", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
    });
    Object.assign(job, await created.json());
    jobs.changed();
    toast("info", LABEL, `job ${job.id} queued on ${srv.base}`, 3000);
    await follow(srv, job);
  } catch (error) {
    Object.assign(job, { status: "failed", error: error.message });
    jobs.changed();
    toast("error", LABEL, error.message, 15000);
  }
}

function sidebar() {
  return {
    id: "paradit-jobs",
    icon: "pi pi-server",
    title: "paradit",
    tooltip: "Jobs queued on paradit",
    type: "custom",
    render(el) {
      const list = document.createElement("div");
      list.className = "paradit-jobs";
      const view = () => list.replaceChildren(...jobs.items.map(card));
      jobs.views.add(view);
      view();
      el.replaceChildren(list);
    },
  };
}

app.registerExtension({
  name: "paradit.QueueOnParadit",
  settings: [
    {
      id: URL_SETTING,
      category: ["paradit", "Server", "URL"],
      name: "paradit server URL",
      tooltip: "Where `paradit serve` listens; start it with --cors-origin set to this page's origin",
      type: "text",
      defaultValue: DEFAULT_URL,
    },
    {
      id: TOKEN_SETTING,
      category: ["paradit", "Server", "Token"],
      name: "paradit server token (optional)",
      tooltip: "The server's --token, if it has one (kept in ComfyUI's user settings)",
      type: "text",
      defaultValue: "",
    },
  ],
  commands: [{ id: COMMAND, label: LABEL, icon: "pi pi-send", function: queueOnParadit }],
  menuCommands: [{ path: ["paradit"], commands: [COMMAND] }],
  actionBarButtons: [
    { icon: "pi pi-send", label: LABEL, tooltip: LABEL, onClick: queueOnParadit },
  ],
  setup() {
    panel();
    app.extensionManager?.registerSidebarTab?.(sidebar());
  },
});
