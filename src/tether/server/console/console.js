// tether console: a client of tether's HTTP API, and nothing else.
//
// It signs in with an API key (kept in this tab's sessionStorage) and sends it with every
// request, so it shows exactly what that key may see. All text from the store is put in
// the page as text (textContent), never as markup.

const KEY = "tether.key";
const GLOBAL = "GLOBAL";
const OUTCOMES = ["grounded", "ungrounded", "skipped", "blocked", "error"];
const state = { key: sessionStorage.getItem(KEY), me: null, notice: null, workspaces: [], sessions: {} };
const main = document.getElementById("main");

// -- small helpers --------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.setAttribute("class", value);
    else if (name === "text") el.textContent = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function announce(message) {
  document.getElementById("status").textContent = message;
}

function fmtTime(iso) {
  if (!iso) return "";
  const when = new Date(iso);
  return Number.isNaN(when.getTime()) ? iso : when.toLocaleString();
}

function fmtNum(value, digits = 3) {
  if (value === null || value === undefined) return "";
  if (typeof value !== "number") return String(value);
  if (value !== 0 && Math.abs(value) < 0.001) return value.toExponential(2);
  return value.toFixed(digits);
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

function head(columns) {
  return h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c))));
}

function badge(text, kind) {
  return h("span", { class: `badge ${kind || text}` }, text);
}

function errorBox(err) {
  return h("div", { class: "error", role: "alert" }, err.message || String(err));
}

function scopeName(scope) {
  if (!scope) return "";
  if (scope.kind === "global") return "global library";
  return `${scope.kind} ${scope.id}`;
}

function pageOf(item) {
  if (item.page === null || item.page === undefined) return "";
  const pages = item.pages || [];
  if (pages.length > 1) return `pp. ${pages[0]}–${pages[pages.length - 1]}`;
  return item.page_label && item.page_label !== String(item.page)
    ? `p. ${item.page_label} (${item.page})`
    : `p. ${item.page}`;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// -- the API -----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.error ? body.error : null;
    super(detail ? `${detail.message} (HTTP ${status})` : `HTTP ${status}`);
    this.status = status;
    this.type = detail ? detail.type : null;
  }
}

async function api(path, { method = "GET", json, form, key = state.key } = {}) {
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form) {
    body = form;
  }
  const response = await fetch(path, { method, headers, body });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: { message: text.slice(0, 300) } };
  }
  if (!response.ok) {
    if (response.status === 401 && key === state.key && state.me) signOut("The key was refused: sign in again.");
    throw new ApiError(response.status, data);
  }
  return data;
}

async function loadScopes() {
  const [{ workspaces }, { sessions }] = await Promise.all([api("/v1/workspaces"), api("/v1/sessions")]);
  state.workspaces = workspaces.filter((w) => w.id !== GLOBAL);
  state.sessions = {};
  for (const session of sessions) (state.sessions[session.workspace_id] ||= []).push(session);
}

// -- sign in ---------------------------------------------------------------------------------

function signOut(message) {
  sessionStorage.removeItem(KEY);
  state.key = null;
  state.me = null;
  state.notice = message || null;  // shown by the sign-in view until someone signs in
  renderWho();
  if (message) announce(message);
  if (location.hash === "#/signin") route();
  else location.hash = "#/signin";  // the hashchange routes
}

async function viewSignin() {
  const seq = routeSeq;  // a later route (a click while this one loads) wins
  const notice = state.notice;
  const input = h("input", { type: "password", id: "api-key", name: "key", autocomplete: "off", required: true });
  const problem = h("div");
  const form = h(
    "form",
    { class: "card", id: "signin" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "The console shows what an API key may see over the HTTP API. Keys are made with ",
      h("code", {}, "tether keys create --workspace W"), " (or ", h("code", {}, "--admin"), ")."),
    notice ? h("div", { class: "notice" }, notice) : null,
    h("label", { for: "api-key" }, "API key"),
    input,
    h("div", { class: "row" }, h("button", { class: "primary", type: "submit" }, "Sign in")),
    problem,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.replaceChildren();
    try {
      const me = await api("/v1/me", { key: input.value.trim() });
      sessionStorage.setItem(KEY, input.value.trim());
      state.key = input.value.trim();
      state.me = me;
      state.notice = null;
      renderWho();
      location.hash = "#/library";
    } catch (err) {
      problem.replaceChildren(errorBox(err.status === 401 ? new Error("That key is unknown or revoked.") : err));
    }
  });
  const wrap = h("div", { class: "signin" }, form);
  show(seq, wrap);
  input.focus();
  try {
    const me = await api("/v1/me", { key: null });  // a loopback server without keys
    wrap.append(h("div", { class: "card" },
      h("p", {}, "This server has no API keys: it serves loopback only, and every request acts as the local operator."),
      h("button", { type: "button", id: "as-operator", onclick: () => {
        state.me = me; renderWho(); location.hash = "#/library";
      } }, "Continue as the local operator")));
  } catch {
    // keys are required: the form is the way in
  }
}

function renderWho() {
  const who = document.getElementById("who");
  const nav = document.getElementById("nav");
  nav.hidden = !state.me;
  if (!state.me) {
    who.replaceChildren();
    return;
  }
  const me = state.me;
  const name = me.key_id ? (me.name || me.key_id) : "local operator";
  const reach = me.workspaces === null ? "every workspace" : ["global library", ...me.workspaces].join(", ");
  who.replaceChildren(
    h("span", { id: "signed-in" }, `Signed in: ${name}`, me.admin ? " (admin)" : "", me.read_only ? " (read-only)" : ""),
    h("span", { class: "small", title: "what this key may read" }, `reads ${reach}`),
    state.key ? h("button", { type: "button", onclick: () => signOut("Signed out.") }, "Sign out") : null,
  );
}

// -- library -----------------------------------------------------------------------------------

function scopeTree(selected) {
  const link = (label, params, current) => h("a", { href: `#/library${query(params)}`, "aria-current": current ? "true" : null }, label);
  const items = [h("li", {}, link("Global library", { workspace: GLOBAL }, selected.workspace === GLOBAL && !selected.session))];
  for (const workspace of state.workspaces) {
    const sessions = state.sessions[workspace.id] || [];
    items.push(h("li", {},
      link(`Workspace ${workspace.name && workspace.name !== workspace.id ? `${workspace.name} (${workspace.id})` : workspace.id}`,
        { workspace: workspace.id }, selected.workspace === workspace.id && !selected.session),
      sessions.length ? h("ul", {}, sessions.map((s) => h("li", {},
        link(`Session ${s.id}${s.closed_at ? " (closed)" : ""}`, { workspace: workspace.id, session: s.id }, selected.session === s.id)))) : null));
  }
  return h("nav", { class: "card", "aria-label": "Workspaces and sessions" }, h("h2", {}, "Scopes"), h("ul", { class: "tree" }, items));
}

function mayWrite(workspaceId) {
  const me = state.me;
  if (!me || me.read_only) return false;
  if (me.admin) return true;
  if (workspaceId === GLOBAL) return me.global_write;
  return (me.workspaces || []).includes(workspaceId);
}

async function viewLibrary(params) {
  const seq = routeSeq;  // a later route (a click while this one loads) wins
  await loadScopes();
  const selected = {
    workspace: params.get("workspace") || (state.workspaces[0] ? state.workspaces[0].id : GLOBAL),
    session: params.get("session"),
  };
  const content = h("div");
  show(seq, h("div", { class: "layout" }, scopeTree(selected), content));
  const title = selected.session
    ? `Session ${selected.session} (workspace ${selected.workspace})`
    : selected.workspace === GLOBAL ? "Global library" : `Workspace ${selected.workspace}`;
  const list = h("div");
  content.append(h("h1", {}, title));
  if (mayWrite(selected.workspace)) content.append(uploadCard(selected, () => fillDocuments(list, selected)));
  content.append(h("section", { class: "card", "aria-labelledby": "docs-h" }, h("h2", { id: "docs-h" }, "Documents"), list));
  await fillDocuments(list, selected);
  if (state.me.admin) content.append(await registryCard());
}

async function fillDocuments(list, selected) {
  list.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  let documents;
  try {
    ({ documents } = await api(`/v1/documents${query({ workspace_id: selected.workspace, session_id: selected.session })}`));
  } catch (err) {
    list.replaceChildren(errorBox(err));
    return;
  }
  if (!documents.length) {
    list.replaceChildren(h("p", { class: "muted" }, "No documents here yet."));
    return;
  }
  const writable = mayWrite(selected.workspace);
  const rows = documents.map((d) => {
    const tags = d.tags ? Object.entries(d.tags).filter(([, v]) => v) : [];
    const actions = [];
    if (writable && d.status !== "active") {
      actions.push(h("button", { type: "button", onclick: async (e) => {
        e.target.disabled = true;
        try { await api(`/v1/documents/${encodeURIComponent(d.id)}/approve`, { method: "POST" }); announce(`Approved ${d.title}`); }
        catch (err) { list.prepend(errorBox(err)); }
        await fillDocuments(list, selected);
      } }, "Approve"));
    }
    if (writable) {
      actions.push(h("button", { type: "button", class: "danger", onclick: async (e) => {
        if (!confirm(`Delete “${d.title}” with its chunks and vectors?`)) return;
        e.target.disabled = true;
        try { await api(`/v1/documents/${encodeURIComponent(d.id)}`, { method: "DELETE" }); announce(`Deleted ${d.title}`); }
        catch (err) { list.prepend(errorBox(err)); }
        await fillDocuments(list, selected);
      } }, "Delete"));
    }
    return h("tr", { "data-document": d.id },
      h("td", {}, h("a", { href: `#/document/${encodeURIComponent(d.id)}` }, d.title || d.id)),
      h("td", {}, badge(d.status)),
      h("td", {}, tags.length ? tags.map(([k, v]) => h("span", { class: "tag", title: k }, `${k}: ${v}`)) : h("span", { class: "muted" }, "—")),
      h("td", { class: "num" }, d.chunk_count),
      h("td", { class: "small" }, d.source_path || d.source_type || d.mime, d.file_size ? h("div", { class: "muted" }, fmtBytes(d.file_size)) : null),
      h("td", { class: "small" }, fmtTime(d.indexed_at) || h("span", { class: "muted" }, "not indexed")),
      h("td", {}, h("div", { class: "row" }, actions)));
  });
  list.replaceChildren(h("div", { class: "scroll" }, h("table", { id: "documents" },
    h("thead", {}, h("tr", {}, ["Title", "Status", "Tags", "Chunks", "Source", "Indexed", "Actions"].map((c) =>
      h("th", { scope: "col", class: c === "Chunks" ? "num" : null }, c)))),
    h("tbody", {}, rows))));
}

function uploadCard(selected, refresh) {
  const files = h("input", { type: "file", id: "upload-files", multiple: true, required: true });
  const label = h("label", { for: "upload-files" }, "Files");
  // What the server reads, from the table its loaders use (anything else is refused: 415).
  api("/v1/formats").then(({ formats }) => {
    label.textContent = `Files (${formats.map((f) => f.name).join(", ")})`;
    files.accept = formats.flatMap((f) => f.extensions).join(",");
  }).catch(() => {});
  const tags = h("input", { type: "text", id: "upload-tags", placeholder: '{"domain": "hr", "source_type": "guide"}' });
  const bar = h("progress", { max: 1, value: 0, hidden: true, "aria-label": "Indexing progress" });
  const line = h("div", { class: "small", id: "upload-status", "aria-live": "polite" });
  const button = h("button", { class: "primary", type: "submit" }, "Upload and index");
  const form = h("form", { class: "card", id: "upload" },
    h("h2", {}, "Upload"),
    h("div", { class: "row" },
      h("div", { class: "grow" }, label, files),
      h("div", { class: "grow" }, h("label", { for: "upload-tags" }, "Tags (JSON, optional)"), tags),
      button),
    bar, line);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!files.files.length) return;
    const body = new FormData();
    for (const file of files.files) body.append("files", file, file.name);
    body.append("workspace_id", selected.workspace);
    if (selected.session) body.append("session_id", selected.session);
    if (tags.value.trim()) body.append("tags", tags.value.trim());
    button.disabled = true;
    bar.hidden = false;
    bar.removeAttribute("value");
    line.replaceChildren(`Uploading ${files.files.length} file(s)…`);
    try {
      const { job } = await api("/v1/documents", { method: "POST", form: body });
      const done = await followJob(job.id, bar, line);
      const results = done.results || [];
      const failed = results.filter((r) => r.error);
      line.replaceChildren(
        `Job ${done.status}: `,
        results.map((r, i) => [i ? "; " : "", `${r.source}: ${r.status}`,
          r.chunk_count ? ` (${r.chunk_count} chunks)` : "", r.error ? ` — ${r.error}` : "",
          r.warnings && r.warnings.length ? ` (${r.warnings.join("; ")})` : ""]));
      announce(`Indexing ${done.status}${failed.length ? `, ${failed.length} failed` : ""}`);
      form.reset();
      await refresh();
    } catch (err) {
      line.replaceChildren(errorBox(err));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

async function followJob(id, bar, line) {
  for (;;) {
    const { job } = await api(`/v1/jobs/${encodeURIComponent(id)}`);
    const p = job.progress || {};
    if (p.total) {
      bar.max = p.total;
      bar.value = p.done;
    }
    line.replaceChildren(`Indexing: ${p.done || 0} of ${p.total ?? "?"} file(s)`, p.current ? ` — ${p.current}` : "",
      p.description ? ` (${p.description})` : "");
    if (!["queued", "running"].includes(job.status)) {
      bar.max = 1;
      bar.value = 1;
      return job;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

async function registryCard() {
  const card = h("section", { class: "card", "aria-labelledby": "registry-h" }, h("h2", { id: "registry-h" }, "Library folder"));
  try {
    const { files } = await api("/v1/library");
    if (!files.length) {
      card.append(h("p", { class: "muted" }, "No library folder is watched (", h("code", {}, "tether watch"), "), or it holds no files yet."));
      return card;
    }
    card.append(h("div", { class: "scroll" }, h("table", { id: "registry" },
      head(["File", "Status", "Retries", "Last indexed", "Next retry", "Last error"]),
      h("tbody", {}, files.map((f) => h("tr", {},
        h("td", { class: "small mono" }, f.source_path),
        h("td", {}, badge(f.status, f.status === "indexed" ? "ok" : f.status === "error" ? "bad" : "warn")),
        h("td", { class: "num" }, f.retry_count),
        h("td", { class: "small" }, fmtTime(f.last_indexed_at)),
        h("td", { class: "small" }, fmtTime(f.next_retry_at)),
        h("td", { class: "small" }, f.error || "")))))));
  } catch (err) {
    card.append(errorBox(err));
  }
  return card;
}

// -- one document and its chunks ----------------------------------------------------------------

async function viewDocument(id, params) {
  const seq = routeSeq;  // a later route (a click while this one loads) wins
  show(seq, h("p", { class: "muted" }, "Loading…"));
  let shown;
  try {
    shown = await api(`/v1/documents/${encodeURIComponent(id)}?chunks=true`);
  } catch (err) {
    show(seq, h("h1", {}, "Document"), errorBox(err));
    return;
  }
  const d = shown.document;
  const chunks = shown.chunks || [];
  const cited = params.get("chunk") ? Number(params.get("chunk")) : null;
  const citedChunk = chunks.find((c) => c.chunk_id === cited) || null;
  const back = d.session_ids && d.session_ids.length
    ? { workspace: d.workspace_id, session: d.session_ids[0] } : { workspace: d.workspace_id };
  const tags = d.tags ? Object.entries(d.tags).filter(([, v]) => v) : [];
  const parts = [
    h("p", {}, h("a", { href: `#/library${query(back)}` }, "← Library")),
    h("h1", {}, d.title || d.id),
    h("section", { class: "card" }, h("dl", { class: "meta" },
      [["Document id", h("code", {}, d.id)], ["Workspace", d.workspace_id === GLOBAL ? "global library" : d.workspace_id],
        ["Sessions", (d.session_ids || []).join(", ") || "—"], ["Status", badge(d.status)],
        ["Source", d.source_path || "—"], ["Type", `${d.source_type || ""} ${d.mime}`.trim()],
        ["Size", fmtBytes(d.file_size) || "—"], ["Created", fmtTime(d.created_at)], ["Indexed", fmtTime(d.indexed_at) || "—"],
        ["Chunks", String(d.chunk_count)], ["Tags", tags.length ? tags.map(([k, v]) => h("span", { class: "tag" }, `${k}: ${v}`)) : "—"]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))),
  ];
  if (citedChunk) {
    const samePage = citedChunk.page === null ? [] : chunks.filter((c) => c.page === citedChunk.page);
    parts.push(h("section", { class: "card", id: "cited", "aria-labelledby": "cited-h" },
      h("h2", { id: "cited-h" }, `Cited chunk ${citedChunk.chunk_id}`, citedChunk.page !== null ? ` · ${pageOf(citedChunk)}` : "",
        citedChunk.section_title ? ` · ${citedChunk.section_title}` : ""),
      h("div", { class: "chunktext hl", id: "cited-text" }, citedChunk.text)));
    if (samePage.length) {
      parts.push(h("section", { class: "card", id: "page", "aria-labelledby": "page-h" },
        h("h2", { id: "page-h" }, `Page ${citedChunk.page_label || citedChunk.page}: every chunk on it`),
        samePage.map((c) => h("div", { class: `chunktext${c.chunk_id === cited ? " hl" : ""}`, "data-chunk": c.chunk_id }, c.text))));
    }
  } else if (cited !== null) {
    parts.push(h("div", { class: "notice" }, `Chunk ${cited} is no longer in this document (it was re-indexed or replaced).`));
  }
  parts.push(h("section", { class: "card", "aria-labelledby": "chunks-h" }, h("h2", { id: "chunks-h" }, `Chunks (${chunks.length})`),
    h("div", { class: "scroll" }, h("table", { id: "chunks" },
      head(["#", "Chunk id", "Section", "Page", "Tokens", "Characters", "Text"]),
      h("tbody", {}, chunks.map((c) => h("tr", { class: c.chunk_id === cited ? "hl" : null, id: `chunk-${c.chunk_id}` },
        h("td", { class: "num" }, c.ordinal), h("td", { class: "num" }, c.chunk_id), h("td", {}, c.section_title || ""),
        h("td", {}, pageOf(c)), h("td", { class: "num" }, c.token_count ?? ""),
        h("td", { class: "num small" }, `${c.char_start}–${c.char_end}`),
        h("td", {}, h("details", {}, h("summary", {}, c.text.slice(0, 110) + (c.text.length > 110 ? "…" : "")), h("div", { class: "chunktext" }, c.text))))))))));
  show(seq, ...parts);
  if (citedChunk) document.getElementById("cited").scrollIntoView({ block: "start" });
}

// -- the retrieval debugger ------------------------------------------------------------------------

function scopeFieldset(prefix, legend, initial) {
  const kind = h("select", { id: `${prefix}-kind` },
    ["session", "workspace", "global"].map((k) => h("option", { value: k, selected: k === initial.kind }, k)));
  const workspace = h("select", { id: `${prefix}-workspace` },
    state.workspaces.map((w) => h("option", { value: w.id, selected: w.id === initial.workspace }, w.id)));
  const session = h("select", { id: `${prefix}-session` });
  const fillSessions = () => {
    const list = state.sessions[workspace.value] || [];
    session.replaceChildren(...list.map((s) => h("option", { value: s.id, selected: s.id === initial.session }, s.id)));
  };
  const sync = () => {
    workspace.disabled = kind.value === "global";
    session.disabled = kind.value !== "session";
  };
  workspace.addEventListener("change", fillSessions);
  kind.addEventListener("change", sync);
  fillSessions();
  sync();
  const fieldset = h("fieldset", { id: prefix },
    h("legend", {}, legend),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: `${prefix}-kind` }, "Scope"), kind),
      h("div", { class: "grow" }, h("label", { for: `${prefix}-workspace` }, "Workspace"), workspace),
      h("div", { class: "grow" }, h("label", { for: `${prefix}-session` }, "Session"), session)));
  fieldset.value = () => {
    const chosen = { scope: kind.value };
    if (kind.value === "session") chosen.session_id = session.value;
    if (kind.value === "workspace") chosen.workspace_id = workspace.value;
    return chosen;
  };
  fieldset.set = (scopeKind) => {
    kind.value = scopeKind;
    sync();
  };
  return fieldset;
}

async function viewDebug(params) {
  const seq = routeSeq;  // a later route (a click while this one loads) wins
  await loadScopes();
  const firstWs = state.workspaces[0] ? state.workspaces[0].id : null;
  const firstSession = firstWs && state.sessions[firstWs] ? state.sessions[firstWs][0].id : null;
  const question = h("textarea", { id: "question", required: true, placeholder: "Ask what the documents should answer" });
  question.value = params.get("q") || "";
  const a = scopeFieldset("scope-a", "Scope", { kind: firstSession ? "session" : firstWs ? "workspace" : "global", workspace: firstWs, session: firstSession });
  const b = scopeFieldset("scope-b", "Second scope", { kind: firstWs ? "workspace" : "global", workspace: firstWs, session: firstSession });
  const compare = h("input", { type: "checkbox", id: "compare" });
  b.hidden = true;
  compare.addEventListener("change", () => { b.hidden = !compare.checked; });
  const domains = h("input", { type: "text", id: "f-domains", placeholder: "hr, it" });
  const sourceTypes = h("input", { type: "text", id: "f-source-types", placeholder: "policy, guide" });
  const documentIds = h("input", { type: "text", id: "f-documents", placeholder: "document ids" });
  const projects = h("input", { type: "text", id: "f-projects", placeholder: "project ids" });
  const maxChunks = h("input", { type: "number", id: "max-chunks", min: 1, max: 100, placeholder: "settings" });
  const minRelevance = h("input", { type: "number", id: "min-relevance", min: 0, max: 1, step: 0.05, placeholder: "settings" });
  const results = h("div", { id: "results", class: "cols" });
  const run = h("button", { class: "primary", type: "submit", id: "run" }, "Retrieve");
  const form = h("form", { class: "card", id: "debug-form" },
    h("h1", {}, "Retrieval debugger"),
    h("label", { for: "question" }, "Question"), question,
    h("div", { class: "cols" }, a, b),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "compare" }, compare, " Compare with a second scope"))),
    h("details", {}, h("summary", {}, "Filters and limits"),
      h("div", { class: "row" },
        h("div", { class: "grow" }, h("label", { for: "f-domains" }, "Domains"), domains),
        h("div", { class: "grow" }, h("label", { for: "f-source-types" }, "Source types"), sourceTypes),
        h("div", { class: "grow" }, h("label", { for: "f-projects" }, "Projects"), projects),
        h("div", { class: "grow" }, h("label", { for: "f-documents" }, "Documents"), documentIds),
        h("div", {}, h("label", { for: "max-chunks" }, "Max chunks"), maxChunks),
        h("div", {}, h("label", { for: "min-relevance" }, "Min relevance"), minRelevance))),
    h("div", { class: "row" }, run));
  const list = (input) => input.value.split(",").map((s) => s.trim()).filter(Boolean);
  const body = (scope) => {
    const filters = {};
    if (list(domains).length) filters.domains = list(domains);
    if (list(sourceTypes).length) filters.source_types = list(sourceTypes);
    if (list(documentIds).length) filters.document_ids = list(documentIds);
    if (list(projects).length) filters.project_ids = list(projects);
    return {
      query: question.value, explain: true, ...scope,
      filters: Object.keys(filters).length ? filters : null,
      max_chunks: maxChunks.value ? Number(maxChunks.value) : null,
      min_relevance: minRelevance.value ? Number(minRelevance.value) : null,
    };
  };
  const submit = async () => {
    if (!question.value.trim()) return;
    run.disabled = true;
    results.replaceChildren(h("p", { class: "muted" }, "Retrieving…"));
    const scopes = [a.value(), ...(compare.checked ? [b.value()] : [])];
    const answers = await Promise.allSettled(scopes.map((scope) => api("/v1/retrieve", { method: "POST", json: body(scope) })));
    results.replaceChildren(...answers.map((answer, i) => answer.status === "fulfilled"
      ? retrievalPanel(answer.value, (kind) => { (i ? b : a).set(kind); submit(); })
      : h("section", { class: "card" }, h("h2", {}, scopeName({ kind: scopes[i].scope, id: scopes[i].session_id || scopes[i].workspace_id })), errorBox(answer.reason))));
    announce(answers.map((x) => x.status === "fulfilled" ? (x.value.grounded ? "grounded" : "not grounded") : "failed").join(", "));
    run.disabled = false;
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  show(seq, form, results);
  question.focus();
}

function retrievalPanel(result, widen) {
  const debug = result.debug || {};
  const explain = debug.explain || null;
  const selected = new Set(result.selected_chunk_ids || []);
  const belowMin = new Set(((debug.relevance || {}).below_min) || []);
  const panel = h("section", { class: "card retrieval", "data-scope": scopeName(result.scope), "aria-label": `Retrieval in ${scopeName(result.scope)}` });
  panel.append(h("h2", {}, `In the ${scopeName(result.scope)}`));

  const verdict = result.grounded
    ? h("div", { class: "verdict ok", id: "verdict" }, h("strong", {}, "Grounded"), ` — ${result.citations.length} citation(s)`)
    : h("div", { class: "verdict no", id: "verdict" }, h("strong", {}, result.retrieved ? "Not grounded" : "No retrieval"),
      result.guidance ? h("p", { class: "guidance" }, result.guidance) : null,
      result.suggested_scope ? h("button", { type: "button", class: "widen", onclick: () => widen(result.suggested_scope) },
        `Ask again in the ${result.suggested_scope === "global" ? "global library" : result.suggested_scope}`) : null);
  panel.append(verdict);
  panel.append(h("p", { class: "small muted" }, "Retrieval ", h("code", {}, result.retrieval_id),
    " · ", h("a", { href: `#/audit${query({ retrieval: result.retrieval_id })}` }, "audit row")));

  const decision = debug.decision;
  if (decision) {
    panel.append(h("h3", {}, "Decision"), h("p", {}, decision.needed ? "Retrieve" : "No retrieval needed",
      ` (${decision.category}, by ${decision.by}): ${decision.reason}`));
  }
  if (debug.degradations && debug.degradations.length) {
    panel.append(h("h3", {}, "Degradations"), h("ul", {}, debug.degradations.map((d) => h("li", {}, d))));
  }
  if (debug.queries && debug.queries.length) {
    panel.append(h("h3", {}, `Queries (${debug.queries.length}: the question${debug.queries.length > 1 ? " and its rewrites" : ""})`),
      h("ol", {}, debug.queries.map((q) => h("li", {}, q.query, h("span", { class: "small muted" },
        ` — ${q.lexical} lexical, ${q.vector} vector candidates${q.fusion ? `, fused by ${q.fusion.method} (k=${q.fusion.rrf_k})` : ""}${q.ms !== undefined && q.ms !== null ? `, ${fmtNum(q.ms, 1)} ms` : ""}`)))));
  }
  if (explain) {
    explain.queries.forEach((q, i) => panel.append(candidateSection(q, i, explain, selected, belowMin)));
    if (explain.queries.length > 1) {
      const across = debug.across_queries || {};
      panel.append(h("section", { class: "fused-across" },
        h("h3", {}, `Fused across the ${explain.queries.length} queries (${across.method || "rrf"}, k=${across.rrf_k ?? ""})`),
        h("div", { class: "scroll" }, h("table", { id: "fused-across" },
          h("thead", {}, h("tr", {}, ["#", "Chunk", "score"].map((c, i) => h("th", { scope: "col", class: i !== 1 ? "num" : null }, c)))),
          h("tbody", {}, explain.fused.map(([cid, score], i) => h("tr", { class: selected.has(cid) ? "hl" : null, "data-chunk": cid },
            h("td", { class: "num" }, i + 1), h("td", {}, chunkLabel(explain, cid)), h("td", { class: "num small" }, fmtNum(score)))))))));
    }
  }
  if (debug.ranked && debug.ranked.length) panel.append(rankedSection(debug, explain, selected, belowMin));
  if (debug.grounding) {
    const g = debug.grounding;
    panel.append(h("h3", {}, "Grounding"), h("p", { id: "grounding-why" }, g.why || ""),
      h("p", { class: "small muted" }, `verdict: ${g.grounded ? "grounded" : "not grounded"}`,
        debug.relevance ? ` · best evidence ${fmtNum(debug.relevance.best)} against min_relevance ${fmtNum(debug.relevance.min_relevance, 2)}` : "",
        g.absent_terms && g.absent_terms.length ? ` · terms found nowhere: ${g.absent_terms.join(", ")}` : ""));
  }
  panel.append(h("h3", {}, "Context"));
  if (result.context) {
    panel.append(h("pre", { class: "context" }, result.context));
    panel.append(h("ol", { class: "citations" }, result.citations.map((c) => h("li", { value: c.number },
      h("a", { href: `#/document/${encodeURIComponent(c.document_id)}${query({ chunk: c.chunk_ids[0] })}`, class: "citation" },
        c.title, c.page !== null && c.page !== undefined ? ` · ${pageOf(c)}` : "", c.section_title ? ` · ${c.section_title}` : ""),
      h("span", { class: "small muted" }, ` relevance ${fmtNum(c.relevance)} · chunks ${c.chunk_ids.join(", ")}`)))));
  } else {
    panel.append(h("p", { class: "muted" }, "No context: nothing in this scope is relevant enough to cite."));
  }
  return panel;
}

function chunkLabel(explain, chunkId) {
  const c = explain && explain.chunks[String(chunkId)];
  if (!c) return h("span", {}, `chunk ${chunkId}`);
  return h("a", { href: `#/document/${encodeURIComponent(c.document_id)}${query({ chunk: chunkId })}` },
    c.title, c.page !== null && c.page !== undefined ? ` · ${pageOf(c)}` : "", c.section_title ? ` · ${c.section_title}` : "");
}

function candidateSection(q, index, explain, selected, belowMin) {
  const rank = (list) => new Map(list.map(([cid, score], i) => [cid, { rank: i + 1, score }]));
  const lexical = rank(q.lexical);
  const vector = rank(q.vector);
  const fused = rank(q.fused);
  const ids = [...new Set([...q.fused.map(([cid]) => cid), ...q.lexical.map(([cid]) => cid), ...q.vector.map(([cid]) => cid)])];
  const cell = (entry) => entry ? [h("td", { class: "num" }, entry.rank), h("td", { class: "num small" }, fmtNum(entry.score))] : [h("td", { class: "num muted" }, "—"), h("td", {})];
  const section = h("section", { class: "candidates", "aria-label": `Candidates of query ${index + 1}` },
    h("h3", {}, `Candidates of query ${index + 1} (${q.method}; top ${explain.depth} of each list)`));
  section.append(rankChart(ids, lexical, vector, explain, selected, belowMin, q.lexical.length, q.vector.length));
  section.append(h("div", { class: "scroll" }, h("table", { class: "candidate-table" },
    h("thead", {}, h("tr", {}, ["Chunk", "Fused", "score", "Lexical", "bm25", "Vector", "cosine"].map((c, i) => h("th", { scope: "col", class: i ? "num" : null }, c)))),
    h("tbody", {}, ids.map((cid) => h("tr", { class: selected.has(cid) ? "hl" : belowMin.has(cid) ? "dim" : null, "data-chunk": cid },
      h("td", {}, chunkLabel(explain, cid), selected.has(cid) ? h("span", { class: "small" }, " (in context)") : null),
      cell(fused.get(cid)), cell(lexical.get(cid)), cell(vector.get(cid))))))));
  return section;
}

function rankChart(ids, lexical, vector, explain, selected, belowMin, nLex, nVec) {
  // Each candidate's lexical rank (x) against its vector rank (y); a chunk missing from a
  // list sits on that axis' far edge ("absent"). Best ranks are at the bottom left.
  const size = 300, pad = 44, depth = Math.max(nLex, nVec, 1) + 1;
  const scale = (r) => pad + ((r - 1) / depth) * (size - 2 * pad);
  const pos = (entry) => (entry ? entry.rank : depth + 1);
  const parts = [
    svg("line", { class: "axis", x1: pad, y1: size - pad, x2: size - pad + 8, y2: size - pad }),
    svg("line", { class: "axis", x1: pad, y1: size - pad, x2: pad, y2: pad - 8 }),
    svg("text", { x: size / 2, y: size - 6, "text-anchor": "middle" }, "lexical rank →"),
    svg("text", { x: 10, y: size / 2, transform: `rotate(-90 10 ${size / 2})`, "text-anchor": "middle" }, "vector rank →"),
    svg("text", { x: pad, y: size - pad + 12, "text-anchor": "middle" }, "1"),
    svg("text", { x: scale(depth + 1), y: size - pad + 12, "text-anchor": "middle" }, "absent"),
    svg("text", { x: pad - 4, y: size - pad + 3, "text-anchor": "end" }, "1"),
  ];
  const flip = (r) => size - scale(r);  // vector rank 1 at the bottom
  parts.push(svg("text", { x: pad - 4, y: flip(depth + 1) + 3, "text-anchor": "end" }, "absent"));
  for (const cid of [...ids].reverse()) {
    const cls = selected.has(cid) ? "dot-context" : belowMin.has(cid) ? "dot-other" : "dot-kept";
    const c = explain.chunks[String(cid)];
    const l = lexical.get(cid), v = vector.get(cid);
    parts.push(svg("circle", { cx: scale(pos(l)), cy: flip(pos(v)), r: selected.has(cid) ? 5 : 3.5, class: cls, "data-chunk": cid },
      svg("title", {}, `${c ? c.title : `chunk ${cid}`}: lexical ${l ? `#${l.rank}` : "absent"}, vector ${v ? `#${v.rank}` : "absent"}`)));
  }
  return h("figure", {},
    svg("svg", { class: "chart rank-chart", viewBox: `0 0 ${size} ${size}`, role: "img",
      "aria-label": `Lexical rank against vector rank for ${ids.length} candidates` }, parts),
    h("div", { class: "legend" }, h("span", {}, h("i", { class: "c1" }), "in the context"),
      h("span", {}, h("i", { class: "c2" }), "reranked"), h("span", {}, h("i", { class: "c3" }), "below min relevance or not reranked")),
    h("figcaption", {}, "Agreement sits on the diagonal; a chunk only one side found sits on an edge."));
}

function rankedSection(debug, explain, selected, belowMin) {
  const factors = (debug.rerank && debug.rerank.factors) || {};
  const evidence = (debug.grounding && debug.grounding.evidence) || {};
  const min = debug.relevance ? debug.relevance.min_relevance : null;
  const names = Object.keys(Object.values(factors)[0] || {});
  const rows = debug.ranked.map(([cid, , score], i) => {
    const e = evidence[String(cid)] || {};
    const f = factors[String(cid)] || {};
    const value = e.evidence ?? score;
    return h("tr", { class: selected.has(cid) ? "hl" : belowMin.has(cid) ? "dim" : null, "data-chunk": cid },
      h("td", { class: "num" }, i + 1),
      h("td", {}, chunkLabel(explain, cid)),
      names.map((n) => h("td", { class: "num small" }, fmtNum(f[n], 2))),
      h("td", {}, h("div", { class: "barcell" }, h("div", { class: "track" }, evidenceBar(value, belowMin.has(cid))), fmtNum(value))),
      h("td", { class: "num small" }, fmtNum(e.cosine)), h("td", { class: "num small" }, fmtNum(e.coverage, 2)),
      h("td", {}, selected.has(cid) ? "context" : belowMin.has(cid) ? "below min" : ""));
  });
  return h("section", { class: "ranked" },
    h("h3", {}, `Reranked (${debug.rerank ? debug.rerank.method : ""}) with grounding evidence${min !== null ? `; min relevance ${fmtNum(min, 2)}` : ""}`),
    names.length ? h("p", { class: "small muted" }, `Rerank factors: ${names.join(", ")}. Evidence decides what may be cited.`) : null,
    h("div", { class: "scroll" }, h("table", { id: "ranked" },
      h("thead", {}, h("tr", {}, ["#", "Chunk", ...names, "evidence", "cosine", "coverage", ""].map((c, i) => h("th", { scope: "col", class: i && i !== 1 ? "num" : null }, c)))),
      h("tbody", {}, rows))));
}

function evidenceBar(value, below) {
  const bar = h("span", { class: `bar${below ? " below" : ""}` });
  bar.style.width = `${Math.max(0, Math.min(1, Number(value) || 0)) * 100}%`;
  return bar;
}

// -- the audit log -----------------------------------------------------------------------------------

function isoFromLocal(value) {
  return value ? new Date(value).toISOString() : "";
}

async function viewAudit(params) {
  const seq = routeSeq;  // a later route (a click while this one loads) wins
  const outcome = h("select", { id: "a-outcome" }, h("option", { value: "" }, "any"),
    OUTCOMES.map((o) => h("option", { value: o, selected: params.get("outcome") === o }, o)));
  const since = h("input", { type: "datetime-local", id: "a-since", value: params.get("since") || "" });
  const until = h("input", { type: "datetime-local", id: "a-until", value: params.get("until") || "" });
  const limit = h("input", { type: "number", id: "a-limit", min: 1, max: 1000, value: params.get("limit") || 100 });
  const retrieval = params.get("retrieval");
  const form = h("form", { class: "card", id: "audit-form" },
    h("h1", {}, "Audit log"),
    h("p", { class: "small muted" }, "Every retrieval, newest first: ids, the sanitized query, scope and outcome. It never holds chunk text, vectors or scores."),
    retrieval ? h("div", { class: "notice" }, `One retrieval: ${retrieval} `, h("a", { href: "#/audit" }, "(show all)")) : null,
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "a-outcome" }, "Outcome"), outcome),
      h("div", {}, h("label", { for: "a-since" }, "From"), since),
      h("div", {}, h("label", { for: "a-until" }, "Until"), until),
      h("div", {}, h("label", { for: "a-limit" }, "Rows"), limit),
      h("button", { class: "primary", type: "submit" }, "Show")));
  const table = h("div");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/audit${query({ outcome: outcome.value, since: since.value, until: until.value, limit: limit.value })}`;
  });
  show(seq, form, h("section", { class: "card" }, table));
  let entries;
  try {
    entries = await api(`/v1/audit${query({ outcome: outcome.value, limit: limit.value, retrieval_id: retrieval,
      since: isoFromLocal(since.value), until: isoFromLocal(until.value) })}`);
  } catch (err) {
    table.replaceChildren(errorBox(err));
    return;
  }
  if (!entries.length) {
    table.replaceChildren(h("p", { class: "muted" }, "No retrievals match."));
    return;
  }
  const counts = Object.fromEntries(OUTCOMES.map((o) => [o, entries.filter((e) => e.outcome === o).length]));
  const strip = h("div", { class: "outcomes", role: "img", "aria-label": OUTCOMES.map((o) => `${counts[o]} ${o}`).join(", ") },
    OUTCOMES.filter((o) => counts[o]).map((o) => {
      const part = h("span", { class: o, title: `${counts[o]} ${o}` });
      part.style.width = `${(100 * counts[o]) / entries.length}%`;
      return part;
    }));
  table.replaceChildren(
    h("h2", { id: "audit-count" }, `${entries.length} retrieval(s)`), strip,
    h("p", { class: "small muted" }, OUTCOMES.filter((o) => counts[o]).map((o) => `${counts[o]} ${o}`).join(" · ")),
    h("div", { class: "scroll" }, h("table", { id: "audit" },
      head(["Time", "Outcome", "Scope", "Query", "Chunks", "Documents", "Reason", "Retrieval id"]),
      h("tbody", {}, entries.map((e) => h("tr", { "data-outcome": e.outcome },
        h("td", { class: "small" }, fmtTime(e.created_at)),
        h("td", {}, badge(e.outcome)),
        h("td", { class: "small" }, scopeName(e.scope), e.filters && Object.keys(e.filters).length ? h("div", { class: "muted" }, JSON.stringify(e.filters)) : null),
        h("td", {}, e.query),
        h("td", { class: "small mono" }, e.chunk_ids.join(", ")),
        h("td", { class: "small" }, e.document_ids.map((d, i) => [i ? ", " : "", h("a", { href: `#/document/${encodeURIComponent(d)}` }, d)])),
        h("td", { class: "small" }, e.reason || ""),
        h("td", { class: "small mono" }, e.retrieval_id)))))));
}

// -- routing -----------------------------------------------------------------------------------

// Each route() is one view being built: awaiting the API, an earlier one may finish after
// a later one began (a link clicked while the library loads); only the latest renders.
let routeSeq = 0;

function show(seq, ...nodes) {
  if (seq === routeSeq) main.replaceChildren(...nodes);
}

async function route() {
  const seq = ++routeSeq;
  const hash = location.hash.slice(1) || "/library";
  const [path, search] = hash.split("?");
  const params = new URLSearchParams(search || "");
  const parts = path.split("/").filter(Boolean);
  const view = parts[0] || "library";
  if (!state.me && view !== "signin") {
    try {
      state.me = await api("/v1/me");
      renderWho();
    } catch {
      if (location.hash !== "#/signin") {
        location.hash = "#/signin";  // the hashchange routes
        return;
      }
    }
  }
  if (seq !== routeSeq) return;  // a later route began while this one signed in
  for (const link of document.querySelectorAll("nav a")) {
    link.setAttribute("aria-current", link.dataset.view === (view === "document" ? "library" : view) ? "page" : "false");
  }
  try {
    if (view === "signin") await viewSignin();
    else if (view === "document") await viewDocument(decodeURIComponent(parts[1] || ""), params);
    else if (view === "debug") await viewDebug(params);
    else if (view === "audit") await viewAudit(params);
    else await viewLibrary(params);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;  // signOut showed the sign-in
    show(seq, errorBox(err));
  }
  if (seq !== routeSeq) return;
  document.title = `${{ library: "Library", document: "Document", debug: "Retrieval debugger", audit: "Audit log", signin: "Sign in" }[view] || "Library"} · tether console`;
}

window.addEventListener("hashchange", () => route());
route();
