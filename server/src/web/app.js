// The onesided web view: plain JavaScript, no framework, nothing fetched from elsewhere.
// The admin token is kept in this tab's sessionStorage (it survives a reload, not the tab) and
// travels in an Authorization header; the live updates are server-sent events read from a
// fetch stream (EventSource cannot send headers).
"use strict";

const MAX_EVENTS = 1000; // kept in memory; the table shows the newest that pass the filters
const SHOWN_EVENTS = 200;
const PAGE = 64; // elements of a window's contents per page
const TOKEN_KEY = "onesided-admin-token";
let token = null;
let events = []; // newest first
let contents = { rank: 0, from: 0 };
let server = null; // {info, at}: the server block of the last state and when it came
let lastWindow = null;
let selected = null; // {world, window}
let stream = null; // AbortController of the live stream
let timelineDue = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

async function api(path, signal, method) {
  const response = await fetch(path, {
    method: method || "GET",
    headers: { Authorization: "Bearer " + token },
    cache: "no-store",
    signal,
  });
  if (!response.ok) {
    const text = (await response.text()).trim();
    const error = new Error(`${response.status}: ${text}`);
    error.status = response.status;
    throw error;
  }
  return response;
}

function setStatus(text, kind) {
  const status = $("status");
  status.textContent = text;
  status.className = "status " + (kind || "");
}

async function connect(candidate) {
  token = candidate;
  $("login-error").hidden = true;
  try {
    renderState(await (await api("/api/state")).json());
  } catch (error) {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    $("login-error").textContent = error.message;
    $("login-error").hidden = false;
    $("login").hidden = false;
    $("view").hidden = true;
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, candidate);
  $("token").value = "";
  $("login").hidden = true;
  $("view").hidden = false;
  $("logout").hidden = false;
  follow();
  refreshCluster();
}

$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  connect($("token").value);
});

$("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  token = null;
  if (stream) stream.abort();
  stream = null;
  setStatus("not connected", "");
  $("server-info").textContent = "";
  $("view").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
});

// Reads the event stream until it ends or is replaced; reconnects after a failure.
async function follow() {
  if (stream) stream.abort();
  const controller = new AbortController();
  stream = controller;
  const query = selected
    ? `?world=${encodeURIComponent(selected.world)}&window=${encodeURIComponent(selected.window)}`
    : "";
  events = [];
  renderEvents();
  try {
    const response = await api("/api/stream" + query, controller.signal);
    setStatus("live", "live");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        handle(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
    setStatus("stream ended (server stopped?)", "down");
  } catch (error) {
    if (controller.signal.aborted) return;
    setStatus("disconnected: " + error.message, "down");
    if (error.status === 401) {
      // the token is no longer good (the server restarted with another): ask again
      sessionStorage.removeItem(TOKEN_KEY);
      $("login-error").textContent = error.message;
      $("login-error").hidden = false;
      $("login").hidden = false;
      return;
    }
  }
  if (stream === controller) setTimeout(follow, 2000);
}

function handle(block) {
  let name = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) name = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const value = JSON.parse(data);
  if (name === "state") {
    renderState(value);
    if (value.window) renderWindow(value.window);
  } else if (name === "audit") {
    addEvent(value);
  }
}

function duration(seconds) {
  const d = Math.floor(seconds / 86400), h = Math.floor(seconds / 3600) % 24;
  const m = Math.floor(seconds / 60) % 60, sec = seconds % 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${sec} s`;
  return `${sec} s`;
}

// Version, node and uptime; the uptime counts on between states (they leave it out unless
// something else changed).
function renderServer() {
  if (!server) return;
  const { info, at } = server;
  const uptime = info.uptime_s + Math.floor((performance.now() - at) / 1000);
  const started = new Date(info.started_ms);
  const text = `v${info.version} · node ${info.node || "standalone"} · up ${duration(uptime)}`;
  const span = $("server-info");
  span.textContent = text;
  span.title = `started ${started.toISOString()}`;
  span.dataset.version = info.version;
  span.dataset.node = info.node || "";
}
setInterval(renderServer, 1000);

function renderState(state) {
  if (state.server) {
    server = { info: state.server, at: performance.now() };
    renderServer();
  }
  $("server").replaceChildren(
    el("span", { class: "hint" },
      `audit durability ${state.durability} · lease ${state.lease_ttl_ms} ms`));
  const worlds = state.worlds.map((world) => {
    const ranks = el("table", { class: "ranks" },
      el("thead", {}, el("tr", {}, el("th", {}, "rank"), el("th", {}, "session"),
        el("th", {}, "incarnation"), el("th", {}, "lease left"), el("th", {}, "admin"))),
      el("tbody", {}, ...world.ranks.map((rank) => el("tr", { "data-rank": rank.rank },
        el("td", {}, rank.rank),
        el("td", { class: rank.session === "never attached" ? "never" : rank.session },
          rank.session),
        el("td", {}, rank.incarnation || "–"),
        el("td", {}, rank.lease_ms === null ? "–" : `${(rank.lease_ms / 1000).toFixed(1)} s`),
        el("td", {}, rank.session === "attached"
          ? el("button", { type: "button", class: "end-session", "data-rank": rank.rank,
            onclick: () => endSession(world.name, rank.rank) }, "End session…")
          : "–")))));
    const windows = el("table", { class: "windows" },
      el("thead", {}, el("tr", {}, el("th", {}, "window"), el("th", {}, "id"),
        el("th", {}, "flavor"), el("th", {}, "model"), el("th", {}, "sizes (bytes)"),
        el("th", {}, "disp units"), el("th", {}, "element type"))),
      el("tbody", {}, ...world.windows.map((window) => el("tr", {},
        el("td", {}, el("a", {
          class: "window-link",
          "data-world": world.name,
          "data-window": window.name,
          onclick: () => select(world.name, window.name),
        }, window.name)),
        el("td", {}, window.id),
        el("td", {}, window.flavor),
        el("td", {}, window.model),
        el("td", {}, window.sizes.join(", ")),
        el("td", {}, window.disp_units.join(", ")),
        el("td", {}, window.element_type || "–")))));
    return el("div", { class: "world", "data-world": world.name },
      el("h3", {}, `world ${world.name} (${world.ranks.length} ranks) `,
        el("button", { type: "button", class: "delete-world danger",
          onclick: () => deleteWorld(world.name) }, "Delete world…")),
      ranks,
      world.windows.length ? windows : el("p", { class: "hint" }, "no windows"));
  });
  $("worlds").replaceChildren(...(worlds.length ? worlds : [el("p", { class: "hint" }, "no worlds")]));
}

function select(world, window) {
  selected = { world, window };
  lastWindow = null;
  contents = { rank: 0, from: 0 };
  $("window").hidden = false;
  $("window-title").textContent = `${window} of world ${world}`;
  $("timeline").replaceChildren(el("p", { class: "hint" }, "loading…"));
  $("contents").querySelector("tbody").replaceChildren();
  follow();
  refreshTimeline();
  refreshContents();
}

// A rank that closed its session left cleanly: that is no failure. Any other ending (a
// broken stream, a lapsed lease) is one.
const CLEAN_ENDING = "session ended";

function departure(rank, why, gone) {
  if (why === CLEAN_ENDING) {
    return el("div", { class: "left", "data-departed": rank, title: `rank ${rank}: ${why}` },
      `rank ${rank} left`);
  }
  return el("div", { class: "broken", "data-departed": rank },
    `rank ${rank} ${gone ? "gone" : "absent"}: ${why}`);
}

function renderWindow(window) {
  if (window.gone) {
    $("window-shape").textContent = window.gone;
    $("targets").querySelector("tbody").replaceChildren();
    return;
  }
  const ranksChanged = !lastWindow || lastWindow.targets.length !== window.targets.length;
  lastWindow = window;
  if (ranksChanged) {
    $("contents-rank").replaceChildren(...window.targets.map((target) =>
      el("option", { value: target.rank }, target.rank)));
    $("contents-rank").value = contents.rank;
  }
  $("window-shape").replaceChildren(el("span", { class: "hint" },
    `id ${window.id} · ${window.flavor} · ${window.model} · sizes ${window.sizes.join(", ")}` +
    ` · element type ${window.element_type || "none (shown as bytes)"}`));
  const rows = window.targets.map((target) => {
    if (target.error) {
      return el("tr", { "data-rank": target.rank }, el("td", {}, target.rank),
        el("td", { colspan: 5, class: "error" }, target.error));
    }
    const holders = target.holders.map((holder) => el("div", { class: "holder" },
      `rank ${holder.origin} ${holder.lock_type}${holder.nocheck ? " nocheck" : ""} (token ${holder.token}) `,
      el("button", { type: "button", class: "revoke", "data-origin": holder.origin,
        onclick: () => revokeLocks(selected.world, selected.window, holder.origin) },
        "Revoke…")));
    const waiters = target.waiters.map((waiter) => el("div", { class: "waiter" },
      `rank ${waiter.origin} ${waiter.lock_type}, ${waiter.waited_ms} ms`));
    const epochs = [];
    if (target.holders.length) epochs.push(`lock (${target.holders.length} holder${target.holders.length > 1 ? "s" : ""})`);
    if (target.fence) {
      epochs.push(`in fence ${target.fence.fence}, ${target.fence.every_rank_arrived ? "every rank arrived" : "waiting for ranks to arrive"}`);
    } else if (target.fence_entered) {
      epochs.push(`fence epoch ${target.fence_entered}`);
    }
    if (target.exposed_to) epochs.push(`exposed to [${target.exposed_to.join(", ")}]`);
    if (target.waiting_for_completes) epochs.push("waiting for completes");
    const departed = [
      ...target.gone.map((gone) => departure(gone.rank, gone.why, true)),
      ...target.absent.map((absent) => departure(absent.rank, absent.why, false)),
    ];
    const pending = target.queued.map((item) => el("div", {}, `from rank ${item.origin}: ${item.what}`));
    return el("tr", { "data-rank": target.rank },
      el("td", {}, target.rank),
      el("td", { class: "holders" }, ...(holders.length ? holders : ["–"])),
      el("td", { class: "waiters" }, ...(waiters.length ? waiters : ["–"])),
      el("td", { class: "epochs" }, epochs.length ? epochs.join("; ") : "–"),
      el("td", { class: "departed" }, ...(departed.length ? departed : ["–"])),
      el("td", { class: "pending" }, ...(pending.length ? pending : ["–"])));
  });
  $("targets").querySelector("tbody").replaceChildren(...rows);
}

// ---- admin actions: behind a confirmation, through the Admin API, audited ----

let pendingAction = null;

function confirmAction(question, label, run) {
  pendingAction = run;
  $("confirm-text").textContent = question;
  $("confirm-yes").textContent = label;
  $("confirm").showModal();
}

$("confirm-no").addEventListener("click", () => {
  pendingAction = null;
  $("confirm").close();
});

$("confirm-yes").addEventListener("click", () => {
  const run = pendingAction;
  pendingAction = null;
  $("confirm").close();
  if (run) run();
});

async function act(path, said) {
  const result = $("action-result");
  result.hidden = false;
  result.className = "action-result";
  result.textContent = "…";
  try {
    const answer = await (await api(path, undefined, "POST")).json();
    result.textContent = said(answer);
    result.classList.add("done");
  } catch (error) {
    result.textContent = `refused: ${error.message}`;
    result.classList.add("error");
  }
}

function endSession(world, rank) {
  confirmAction(
    `End the session of rank ${rank} of world ${world}? Its locks are revoked and its ` +
    "pending calls fail, as when its lease lapses; the other ranks see it ended by an " +
    "operator. The action is recorded in the audit log.",
    "End session",
    () => act(`/api/worlds/${encodeURIComponent(world)}/ranks/${rank}/end-session`,
      (answer) => `ended session ${answer.incarnation} of rank ${rank} of world ${world}`));
}

function deleteWorld(world) {
  confirmAction(
    `Delete world ${world}? Its rank tokens and windows are gone; its sessions' calls fail. ` +
    "Each window's audit log ends with the deletion, naming you; the logs stay readable.",
    "Delete world",
    () => act(`/api/worlds/${encodeURIComponent(world)}/delete`,
      () => `deleted world ${world}`));
}

// `origin` is a rank in the window; the Admin API names the rank in the world.
function revokeLocks(world, window, origin) {
  const group = lastWindow && lastWindow.group;
  const rank = group && group.length > origin ? group[origin] : origin;
  confirmAction(
    `Revoke the locks rank ${rank} holds on window ${window}? Its session goes on; the ` +
    "waiters are granted, and its next call in that lock epoch fails with " +
    "MPI_ERR_RMA_SYNC. The action is recorded in the audit log.",
    "Revoke locks",
    () => act(`/api/worlds/${encodeURIComponent(world)}/windows/${encodeURIComponent(window)}` +
      `/ranks/${rank}/revoke-locks`,
    (answer) => `revoked the locks of rank ${rank} (session ${answer.incarnation}) on ` +
      `window ${window} at rank${answer.targets.length > 1 ? "s" : ""} ${answer.targets.join(", ")}`));
}

// ---- window contents ----

$("contents-rank").addEventListener("change", () => {
  contents = { rank: Number($("contents-rank").value), from: 0 };
  refreshContents();
});
$("contents-prev").addEventListener("click", () => {
  contents.from = Math.max(0, contents.from - PAGE);
  refreshContents();
});
$("contents-next").addEventListener("click", () => {
  contents.from += PAGE;
  refreshContents();
});

async function refreshContents() {
  if (!selected) return;
  const { world, window } = selected;
  const { rank, from } = contents;
  try {
    const response = await api(`/api/worlds/${encodeURIComponent(world)}/windows/` +
      `${encodeURIComponent(window)}/contents?rank=${rank}&from=${from}&count=${PAGE}`);
    const page = await response.json();
    if (!selected || selected.world !== world || selected.window !== window) return;
    if (contents.rank !== rank || contents.from !== from) return;
    contents.from = page.from;
    drawContents(page);
  } catch (error) {
    $("contents").querySelector("tbody").replaceChildren(
      el("tr", {}, el("td", { class: "error" }, error.message)));
  }
}

function drawContents(page) {
  const columns = 8;
  const rows = [];
  for (let i = 0; i < page.values.length; i += columns) {
    const index = page.from + i;
    rows.push(el("tr", {}, el("td", { class: "index" }, index),
      ...page.values.slice(i, i + columns).map((value, j) => el("td", {
        "data-index": index + j,
        class: /^(0|0\.0|-0|false|\(0,0\)|\(0\.0,0\))$/.test(value) ? "" : "nonzero",
      }, value))));
  }
  const last = page.from + page.values.length;
  $("contents-where").textContent = page.elements
    ? `rank ${page.rank}'s public copy: elements ${page.from}–${last - 1} of ${page.elements}` +
      ` (${page.element_type}, ${page.bytes} bytes)`
    : `rank ${page.rank} exposes no memory`;
  $("contents-prev").disabled = page.from === 0;
  $("contents-next").disabled = last >= page.elements;
  $("contents").dataset.rank = page.rank;
  $("contents").dataset.from = page.from;
  $("contents").querySelector("tbody").replaceChildren(...rows);
}

// ---- audit events ----

const CLASSES = {
  lock: ["lock_request", "lock_grant", "lock_release"],
  operation: ["op", "op_issued", "flush", "flush_local"],
  epoch: ["fence_enter", "fence_exit", "post", "start", "complete", "wait_enter", "wait_exit",
    "test_false", "barrier_enter", "barrier_exit", "sync"],
  session: ["attach", "detach", "window_created", "window_freed", "info_set", "region_attached",
    "region_detached", "client_events"],
  local: ["store", "load", "published", "pulled"],
  message: ["sent", "received"],
  failure: ["peer_failed", "lock_revoke", "departed"],
  admin: ["admin"],
};
const LOCK_CALLS = ["lock", "unlock", "lock_all", "unlock_all"];

function opName(op) {
  if (typeof op === "string") return op;
  if (op && typeof op === "object") {
    const [name, arg] = Object.entries(op)[0] || ["?", ""];
    return `${name}(${arg})`;
  }
  return "?";
}

// The class an event belongs to (one of CLASSES), and the call it names.
function classify(event) {
  const body = event.body || {};
  let call = event.kind;
  if (body.call) call = body.call;
  else if (body.op !== undefined) call = opName(body.op);
  let kind = Object.keys(CLASSES).find((name) => CLASSES[name].includes(event.kind)) || "other";
  if (event.kind === "issued" || event.kind === "returned") {
    kind = LOCK_CALLS.includes(body.call) ? "lock"
      : body.call && body.call.startsWith("flush") ? "operation" : "epoch";
  }
  return { kind, call };
}

function values(list) {
  return list ? `[${list.join(", ")}]` : null;
}

// What the details column says of an event: its fields in words, payloads decoded.
function describeEvent(event) {
  const body = event.body || {};
  const decoded = event.decoded || {};
  const to = (target) => (target === null || target === undefined ? "" : ` → rank ${target}`);
  switch (event.kind) {
    case "op": {
      const parts = [`${opName(body.op)} from rank ${body.origin} at disp ${body.disp} (${body.datatype})`];
      if (decoded.data) parts.push(`data ${values(decoded.data)}`);
      else if (body.data) parts.push(`data 0x${body.data}`);
      if (decoded.compare) parts.push(`compare ${values(decoded.compare)}`);
      if (decoded.result) parts.push(`result ${values(decoded.result)}`);
      else if (body.result) parts.push(`result 0x${body.result}`);
      return parts.join(", ");
    }
    case "op_issued":
      return `${opName(body.op)}${to(body.target)} (${body.datatype}), runs ${JSON.stringify(body.runs)}`;
    case "issued": case "returned": case "flush_local":
      return `${body.call || "flush_local"}${to(body.target)}`;
    case "lock_request":
      return `rank ${body.origin} asks for ${body.lock_type}${body.nocheck ? " (nocheck)" : ""}`;
    case "lock_grant":
      return `granted rank ${body.origin} ${body.lock_type} (token ${body.token})`;
    case "lock_release":
      return `rank ${body.origin} released (token ${body.token})`;
    case "lock_revoke":
      return `rank ${body.origin}'s lock revoked: ${body.reason}`;
    case "departed":
      return `incarnation ${body.incarnation} ended: ${body.reason}`;
    case "admin": {
      const what = { end_session: "ended its session", revoke_locks: "revoked its locks",
        delete_world: "deleted the world" };
      return `${body.by} ${what[body.action] || body.action} (incarnation ${event.incarnation})`;
    }
    case "flush":
      return `rank ${body.origin}'s operations flushed`;
    case "peer_failed":
      return `${body.call} failed: rank ${body.peer} is gone`;
    case "fence_enter": case "fence_exit":
      return `fence ${body.fence}`;
    case "published":
      return `at byte ${body.offset}: ${decoded.data ? values(decoded.data) : "0x" + body.data}`;
    case "window_created":
      return `sizes ${values(body.sizes)}, disp units ${values(body.disp_units)}`;
    default: {
      const rest = Object.fromEntries(Object.entries(body).filter(([key]) => key !== "event"));
      const text = JSON.stringify(rest);
      return text === "{}" ? "" : text.slice(0, 200);
    }
  }
}

function clock(ms) {
  const at = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.` +
    String(at.getMilliseconds()).padStart(3, "0");
}

const CHANGES_CONTENTS = ["op", "published", "region_attached", "region_detached"];
let contentsDue = false;

function addEvent(event) {
  const { kind, call } = classify(event);
  event.class = kind;
  event.call = call;
  event.details = describeEvent(event);
  events.unshift(event);
  if (events.length > MAX_EVENTS) events.length = MAX_EVENTS;
  scheduleRender();
  // what changes a public copy: reread the page shown, once for a burst
  if (selected && CHANGES_CONTENTS.includes(event.kind)) contentsDue = true;
  if (selected && timelineDue === null) {
    // one redraw for a burst of events
    timelineDue = setTimeout(() => {
      timelineDue = null;
      refreshTimeline();
      if (contentsDue) refreshContents();
      contentsDue = false;
    }, 300);
  }
}

let renderDue = null;
function scheduleRender() {
  if (renderDue === null) renderDue = requestAnimationFrame(() => { renderDue = null; renderEvents(); });
}

function filters() {
  const rank = $("filter-rank").value.trim();
  return {
    rank: rank === "" ? null : Number(rank),
    call: $("filter-call").value.trim().toLowerCase(),
    kind: $("filter-class").value,
    text: $("filter-text").value.trim().toLowerCase(),
  };
}

function passes(event, filter) {
  const origin = event.body && event.body.origin;
  if (filter.rank !== null && event.rank !== filter.rank && origin !== filter.rank) return false;
  if (filter.call && !event.call.toLowerCase().includes(filter.call) &&
    !event.kind.includes(filter.call)) return false;
  if (filter.kind && event.class !== filter.kind) return false;
  if (filter.text && !`${event.kind} ${event.details}`.toLowerCase().includes(filter.text)) return false;
  return true;
}

function renderEvents() {
  const filter = filters();
  const shown = events.filter((event) => passes(event, filter));
  const rows = shown.slice(0, SHOWN_EVENTS).map((event) => {
    const origin = event.body && event.body.origin !== undefined ? event.body.origin : "";
    return el("tr", {
      "data-kind": event.kind, "data-rank": event.rank, "data-window": event.window,
      "data-origin": origin, "data-class": event.class, "data-call": event.call,
    },
      el("td", { class: "time", title: new Date(event.wall_ms).toISOString() }, clock(event.wall_ms)),
      el("td", {}, event.window), el("td", {}, event.seq), el("td", {}, event.rank),
      el("td", { class: "kind" }, event.kind), el("td", { class: "details" }, event.details));
  });
  $("events").querySelector("tbody").replaceChildren(...rows);
  $("filter-count").textContent = shown.length === events.length
    ? `${events.length} events` : `${shown.length} of ${events.length} events`;
}

for (const id of ["filter-rank", "filter-call", "filter-class", "filter-text"]) {
  $(id).addEventListener("input", renderEvents);
}

async function refreshTimeline() {
  if (!selected) return;
  const { world, window } = selected;
  try {
    const response = await api(
      `/api/worlds/${encodeURIComponent(world)}/windows/${encodeURIComponent(window)}/timeline`);
    const trace = await response.json();
    if (selected && selected.world === world && selected.window === window) drawTimeline(trace);
  } catch (error) {
    $("timeline").replaceChildren(el("p", { class: "error" }, error.message));
  }
}

// ---- timeline ----

// A round step near `raw` (1, 2 or 5 times a power of ten).
function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  for (const factor of [1, 2, 5, 10]) if (power * factor >= raw) return power * factor;
  return power * 10;
}

// A span of microseconds as text.
function micros(us) {
  if (Math.abs(us) >= 1e6) return `${+(us / 1e6).toFixed(3)} s`;
  if (Math.abs(us) >= 1e3) return `${+(us / 1e3).toFixed(3)} ms`;
  return `${+us.toFixed(1)} µs`;
}

const CHAR_WIDTH = 6.2; // of the 11px labels, for placing them

// Splits each lock slice into waiting (issued, not yet granted: the target's lock_grant for
// this origin) and holding (granted until unlock returned).
function lockSlices(timed) {
  const grants = timed.filter((event) => event.name === "lock_grant" && event.args &&
    event.args.event);
  const out = [];
  for (const event of timed) {
    if (event.ph !== "X") continue;
    const unclosed = Boolean(event.args && event.args.unclosed);
    const end = event.ts + event.dur;
    const lock = /^lock (\d+)$/.exec(event.name);
    if (!lock) {
      out.push({ ...event, state: "epoch", unclosed });
      continue;
    }
    const target = Number(lock[1]);
    const grant = grants.find((g) => g.tid === target && g.args.event.origin === event.tid &&
      g.ts >= event.ts && g.ts <= end);
    if (grant) {
      if (grant.ts > event.ts) {
        out.push({ ...event, dur: grant.ts - event.ts, state: "waiting", unclosed: false, label: `wait ${event.name}` });
      }
      out.push({ ...event, ts: grant.ts, dur: end - grant.ts, state: "holding", unclosed });
    } else {
      // no grant recorded yet: still waiting when open; a closed one held it
      out.push({ ...event, state: unclosed ? "waiting" : "holding", unclosed,
        label: unclosed ? `wait ${event.name}` : event.name });
    }
  }
  return out;
}

// Draws the Perfetto trace into the element `into` (`shorten`: idle stretches shortened, as a
// live window's quiet spells are; a simulated schedule has none): one lane per rank, slices as bars (waiting for a lock hatched,
// holding it solid), instants as ticks, flows as lines from an operation's issue to its
// application, and a time axis (idle stretches shortened, marked with a break).
function drawTimeline(trace, into = "timeline", shorten = true) {
  const all = trace.traceEvents || [];
  const names = new Map();
  for (const event of all) {
    if (event.ph === "M" && event.name === "thread_name") names.set(event.tid, event.args.name);
  }
  const timed = all.filter((event) => event.ph !== "M");
  if (!timed.length) {
    $(into).replaceChildren(el("p", { class: "hint" }, "no events yet"));
    return;
  }
  const lanes = [...new Set([...names.keys(), ...timed.map((event) => event.tid)])].sort((a, b) => a - b);
  const start = Math.min(...timed.map((event) => event.ts));
  const end = Math.max(...timed.map((event) => event.ts + (event.dur || 0)));
  const span = Math.max(end - start, 1);
  const left = 64, width = 1100, row = 22, axis = 30;
  // idle stretches (longer than a twentieth of the span with no event starting or ending in
  // them) are shortened to a break of 6% of the busy time, so a burst after a long quiet spell
  // stays readable; the axis is linear within the busy stretches
  const times = [...new Set(timed.flatMap((event) => [event.ts, event.ts + (event.dur || 0)]))]
    .sort((a, b) => a - b);
  const cap = shorten ? span / 20 : Infinity;
  let busy = 0;
  for (let i = 1; i < times.length; i++) {
    if (times[i] - times[i - 1] <= cap) busy += times[i] - times[i - 1];
  }
  const shortened = busy > 0 ? busy * 0.06 : 1;
  const at = [0];
  for (let i = 1; i < times.length; i++) {
    const gap = times[i] - times[i - 1];
    at.push(at[i - 1] + (gap > cap ? shortened : gap));
  }
  const total = Math.max(at[at.length - 1], 1);
  const x = (ts) => {
    let i = 0;
    while (i + 1 < times.length && times[i + 1] <= ts) i++;
    const within = i + 1 < times.length
      ? ((ts - times[i]) / Math.max(times[i + 1] - times[i], 1e-9)) * (at[i + 1] - at[i]) : 0;
    return left + ((at[i] + within) / total) * width;
  };

  // slices packed into rows per lane so that no bar or label covers another
  const slices = lockSlices(timed);
  const rowsOf = new Map(lanes.map((tid) => [tid, []])); // tid → [row end x]
  for (const slice of slices.sort((a, b) => a.ts - b.ts || b.dur - a.dur)) {
    slice.x0 = x(slice.ts);
    slice.x1 = Math.max(slice.x0 + 2, x(slice.ts + slice.dur));
    slice.text = slice.label || slice.name;
    const reach = Math.max(slice.x1, slice.x0 + 3 + slice.text.length * CHAR_WIDTH) + 4;
    const ends = rowsOf.get(slice.tid) || [];
    let r = ends.findIndex((e) => e <= slice.x0);
    if (r < 0) { r = ends.length; ends.push(0); }
    ends[r] = reach;
    rowsOf.set(slice.tid, ends);
    slice.row = r;
  }
  // every lane has a row of instants and at least one of slices
  const laneTop = new Map();
  let y = axis;
  for (const tid of lanes) {
    laneTop.set(tid, y);
    y += (Math.max(1, (rowsOf.get(tid) || []).length) + 1) * row + 6;
  }
  const height = y + 4;
  const mid = (tid) => laneTop.get(tid) + row / 2; // the instants' row

  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  const reach = Math.max(...slices.map((slice) => slice.x0 + 3 + slice.text.length * CHAR_WIDTH));
  svg.setAttribute("width", Math.max(left + width + 30, reach + 10));
  svg.setAttribute("height", height);
  svg.setAttribute("data-events", timed.length);
  const add = (tag, attrs, text, parent) => {
    const node = document.createElementNS(svgNs, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    (parent || svg).append(node);
    return node;
  };
  const defs = add("defs", {});
  const hatch = add("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" }, undefined, defs);
  add("rect", { width: 6, height: 6, fill: "#fff" }, undefined, hatch);
  add("rect", { width: 3, height: 6, fill: "#f48fb1" }, undefined, hatch);

  // the axis: time since the first event, ticks at round steps within each burst, a break
  // where an idle stretch was shortened
  const axisGroup = add("g", { class: "axis" });
  add("line", { x1: left, x2: left + width, y1: axis - 8, y2: axis - 8, stroke: "#5f6673" }, undefined, axisGroup);
  const step = niceStep((total / width) * 110);
  const tick = (t) => {
    const tx = x(t);
    add("line", { class: "tick", x1: tx, x2: tx, y1: axis - 11, y2: axis - 5, stroke: "#5f6673" },
      undefined, axisGroup);
    add("text", { x: tx, y: axis - 14, "text-anchor": "middle", class: "tick-label" },
      micros(t - start), axisGroup);
    add("line", { x1: tx, x2: tx, y1: axis - 5, y2: height, stroke: "#eceff4" }, undefined, axisGroup);
  };
  if (times.length === 1) tick(start);
  for (let i = 0; i + 1 < times.length; i++) {
    const from = times[i], to = times[i + 1];
    if (to - from > cap) {
      const bx = (x(from) + x(to)) / 2;
      const mark = add("g", { class: "break", "data-skipped": to - from }, undefined, axisGroup);
      add("path", { d: `M${bx - 5},${axis - 3} L${bx - 1},${axis - 13} M${bx + 1},${axis - 3} L${bx + 5},${axis - 13}`,
        stroke: "#5f6673", fill: "none" }, undefined, mark);
      add("title", {}, `${micros(to - from)} idle, shortened`, mark);
      continue;
    }
    for (let t = Math.ceil((from - start) / step) * step + start; t < to; t += step) tick(t);
  }
  add("text", { x: 4, y: axis - 14, class: "axis-title" }, "time");

  for (const tid of lanes) {
    const top = laneTop.get(tid);
    add("text", { x: 4, y: top + 15, class: "lane" }, names.get(tid) || `rank ${tid}`);
    add("line", { x1: left, x2: left + width, y1: mid(tid), y2: mid(tid), stroke: "#d7dbe2" });
  }
  const fills = { holding: "#1e88e5", waiting: "url(#hatch)", epoch: "#90caf9" };
  for (const slice of slices) {
    const top = laneTop.get(slice.tid) + row * (slice.row + 1) + 2;
    const group = add("g", { class: "bar" });
    const bar = add("rect", {
      x: slice.x0, y: top, height: row - 6, width: slice.x1 - slice.x0,
      fill: fills[slice.state], stroke: slice.state === "waiting" ? "#ad1457" : "#5f6673",
      "stroke-width": 0.5,
      class: `slice ${slice.state}`, "data-name": slice.name, "data-tid": slice.tid,
      "data-state": slice.state, "data-unclosed": slice.unclosed,
    }, undefined, group);
    add("title", {}, `${slice.text}: ${micros(slice.dur)}${slice.unclosed ? " (still open)" : ""}`, bar);
    if (slice.unclosed) {
      add("line", { x1: slice.x1, x2: slice.x1, y1: top - 2, y2: top + row - 4, stroke: "#e65100",
        "stroke-width": 2, "stroke-dasharray": "3 2" }, undefined, group);
    }
    const inside = slice.x1 - slice.x0 >= slice.text.length * CHAR_WIDTH + 6;
    add("text", {
      x: slice.x0 + 3, y: top + 12, class: "slice-label",
      fill: inside && slice.state === "holding" ? "#fff" : "#1d2330",
    }, slice.text, group);
  }
  const flows = new Map();
  for (const event of timed) {
    if (event.ph === "i" || event.ph === "I") {
      const tick = add("rect", {
        x: x(event.ts) - 1, y: mid(event.tid) - 7, width: 2, height: 14, fill: "#5f6673",
        class: "instant", "data-name": event.name,
      });
      add("title", {}, event.name, tick);
    } else if (event.ph === "s") {
      flows.set(event.id, event);
    } else if (event.ph === "f" && flows.has(event.id)) {
      const from = flows.get(event.id);
      add("line", {
        x1: x(from.ts), y1: mid(from.tid), x2: x(event.ts), y2: mid(event.tid),
        stroke: "#ad1457", "stroke-width": 1, class: "flow",
      });
    }
  }
  $(into).replaceChildren(svg);
}

// ---- cluster ----

const CLUSTER_EVERY = 5000;

async function refreshCluster() {
  if (!token) return;
  try {
    drawCluster(await (await api("/api/cluster")).json());
  } catch (error) {
    $("cluster").replaceChildren(el("p", { class: "error" }, error.message));
  }
}
setInterval(refreshCluster, CLUSTER_EVERY);

function drawCluster(cluster) {
  if (!cluster.clustered) {
    $("cluster").replaceChildren(el("p", { class: "hint", "data-clustered": "false" },
      "standalone server: not part of a cluster, it serves every world itself"));
    return;
  }
  const rows = cluster.nodes.map((node) => el("tr", {
    "data-node": node.node, class: node.node === cluster.node ? "this-node" : "",
  },
    el("td", {}, node.node + (node.node === cluster.node ? " (this node)" : "")),
    el("td", {}, node.advertise),
    el("td", { class: node.lease.alive ? "attached" : "broken" },
      node.lease.alive ? "alive" : "lease expired"),
    el("td", {}, `${(node.lease.heartbeat_age_ms / 1000).toFixed(1)} s ago`),
    el("td", { class: "worlds" }, node.worlds.length ? node.worlds.map((world) =>
      world.name + (world.moving ? " (moving)" : "")).join(", ") : "–"),
    el("td", {}, node.ranks)));
  $("cluster").replaceChildren(
    el("p", { class: "hint" }, `this node: ${cluster.node} at ${cluster.advertise} · ` +
      `node lease ${(cluster.lease_ttl_ms / 1000).toFixed(1)} s`),
    el("table", { class: "nodes", "data-clustered": "true" },
      el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "address"),
        el("th", {}, "lease"), el("th", {}, "last heartbeat"), el("th", {}, "serves worlds"),
        el("th", {}, "ranks"))),
      el("tbody", {}, ...rows)));
}

// A token kept from earlier in this tab connects at once.
const kept = sessionStorage.getItem(TOKEN_KEY);
if (kept) connect(kept);

// ---- an explored trace ----

// `onesided explore FILE --replay S:K --trace T.json` writes one simulated schedule's log as
// a Perfetto trace; the page draws it as it draws a live window's (read here, sent nowhere).
$("trace-file").addEventListener("change", async () => {
  const file = $("trace-file").files[0];
  if (!file) return;
  $("explored-name").textContent = file.name;
  try {
    const trace = JSON.parse(await file.text());
    if (!trace || !Array.isArray(trace.traceEvents)) {
      throw new Error("not a Perfetto trace (no traceEvents list)");
    }
    drawTimeline(trace, "explored", false);
  } catch (error) {
    $("explored").replaceChildren(el("p", { class: "error" }, `${file.name}: ${error.message}`));
  }
});
