// The onesided web view: plain JavaScript, no framework, nothing fetched from elsewhere.
// The admin token lives in a variable of this page only and travels in an Authorization
// header; the live updates are server-sent events read from a fetch stream (EventSource
// cannot send headers).
"use strict";

const MAX_EVENTS = 50;
let token = null;
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

async function api(path, signal) {
  const response = await fetch(path, {
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

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  token = $("token").value;
  $("login-error").hidden = true;
  try {
    renderState(await (await api("/api/state")).json());
  } catch (error) {
    token = null;
    $("login-error").textContent = error.message;
    $("login-error").hidden = false;
    return;
  }
  $("token").value = "";
  $("login").hidden = true;
  $("view").hidden = false;
  follow();
});

// Reads the event stream until it ends or is replaced; reconnects after a failure.
async function follow() {
  if (stream) stream.abort();
  const controller = new AbortController();
  stream = controller;
  const query = selected
    ? `?world=${encodeURIComponent(selected.world)}&window=${encodeURIComponent(selected.window)}`
    : "";
  $("events").querySelector("tbody").replaceChildren();
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
    if (error.status === 401) return;
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

function renderState(state) {
  $("server").replaceChildren(
    el("span", { class: "hint" },
      `audit durability ${state.durability} · lease ${state.lease_ttl_ms} ms`));
  const worlds = state.worlds.map((world) => {
    const ranks = el("table", { class: "ranks" },
      el("thead", {}, el("tr", {}, el("th", {}, "rank"), el("th", {}, "session"),
        el("th", {}, "incarnation"), el("th", {}, "lease left"))),
      el("tbody", {}, ...world.ranks.map((rank) => el("tr", { "data-rank": rank.rank },
        el("td", {}, rank.rank),
        el("td", { class: rank.session === "never attached" ? "never" : rank.session },
          rank.session),
        el("td", {}, rank.incarnation || "–"),
        el("td", {}, rank.lease_ms === null ? "–" : `${(rank.lease_ms / 1000).toFixed(1)} s`)))));
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
      el("h3", {}, `world ${world.name} (${world.ranks.length} ranks)`),
      ranks,
      world.windows.length ? windows : el("p", { class: "hint" }, "no windows"));
  });
  $("worlds").replaceChildren(...(worlds.length ? worlds : [el("p", { class: "hint" }, "no worlds")]));
}

function select(world, window) {
  selected = { world, window };
  $("window").hidden = false;
  $("window-title").textContent = `${window} of world ${world}`;
  $("timeline").replaceChildren(el("p", { class: "hint" }, "loading…"));
  follow();
  refreshTimeline();
}

function renderWindow(window) {
  if (window.gone) {
    $("window-shape").textContent = window.gone;
    $("targets").querySelector("tbody").replaceChildren();
    return;
  }
  $("window-shape").replaceChildren(el("span", { class: "hint" },
    `id ${window.id} · ${window.flavor} · ${window.model} · sizes ${window.sizes.join(", ")}`));
  const rows = window.targets.map((target) => {
    if (target.error) {
      return el("tr", { "data-rank": target.rank }, el("td", {}, target.rank),
        el("td", { colspan: 4, class: "error" }, target.error));
    }
    const holders = target.holders.map((holder) => el("div", { class: "holder" },
      `rank ${holder.origin} ${holder.lock_type}${holder.nocheck ? " nocheck" : ""} (token ${holder.token})`));
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
    for (const gone of target.gone) epochs.push(`rank ${gone.rank} gone: ${gone.why}`);
    for (const absent of target.absent) epochs.push(`rank ${absent.rank} absent: ${absent.why}`);
    const pending = target.queued.map((item) => el("div", {}, `from rank ${item.origin}: ${item.what}`));
    return el("tr", { "data-rank": target.rank },
      el("td", {}, target.rank),
      el("td", { class: "holders" }, ...(holders.length ? holders : ["–"])),
      el("td", { class: "waiters" }, ...(waiters.length ? waiters : ["–"])),
      el("td", { class: "epochs" }, epochs.length ? epochs.join("; ") : "–"),
      el("td", { class: "pending" }, ...(pending.length ? pending : ["–"])));
  });
  $("targets").querySelector("tbody").replaceChildren(...rows);
}

function addEvent(event) {
  const details = event.body && typeof event.body === "object"
    ? JSON.stringify(event.body).slice(0, 160) : "";
  const origin = event.body && event.body.origin !== undefined ? event.body.origin : "";
  const row = el("tr", {
    "data-kind": event.kind, "data-rank": event.rank, "data-window": event.window,
    "data-origin": origin,
  },
    el("td", {}, event.window), el("td", {}, event.seq), el("td", {}, event.rank),
    el("td", { class: "kind" }, event.kind), el("td", {}, el("code", {}, details)));
  const body = $("events").querySelector("tbody");
  body.prepend(row);
  while (body.children.length > MAX_EVENTS) body.lastChild.remove();
  if (selected && timelineDue === null) {
    // one redraw for a burst of events
    timelineDue = setTimeout(() => { timelineDue = null; refreshTimeline(); }, 300);
  }
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

// Draws the Perfetto trace: one lane per rank, slices as bars, instants as ticks, flows as
// lines from an operation's issue to its application.
function drawTimeline(trace) {
  const events = trace.traceEvents || [];
  const names = new Map();
  for (const event of events) {
    if (event.ph === "M" && event.name === "thread_name") names.set(event.tid, event.args.name);
  }
  const timed = events.filter((event) => event.ph !== "M");
  if (!timed.length) {
    $("timeline").replaceChildren(el("p", { class: "hint" }, "no events yet"));
    return;
  }
  const lanes = [...new Set([...names.keys(), ...timed.map((event) => event.tid)])].sort((a, b) => a - b);
  const start = Math.min(...timed.map((event) => event.ts));
  const end = Math.max(...timed.map((event) => event.ts + (event.dur || 0)));
  const span = Math.max(end - start, 1);
  const left = 70, width = 1000, lane = 34, top = 20;
  // idle stretches (no event starts or ends in them) are shortened to a twentieth of the span,
  // so a burst after a long quiet spell stays readable; the axis is linear within each burst
  const times = [...new Set(timed.flatMap((event) => [event.ts, event.ts + (event.dur || 0)]))]
    .sort((a, b) => a - b);
  const cap = span / 20;
  const at = [0];
  for (let i = 1; i < times.length; i++) at.push(at[i - 1] + Math.min(times[i] - times[i - 1], cap));
  const total = Math.max(at[at.length - 1], 1);
  const x = (ts) => {
    let i = 0;
    while (i + 1 < times.length && times[i + 1] <= ts) i++;
    const within = i + 1 < times.length
      ? ((ts - times[i]) / Math.max(times[i + 1] - times[i], 1e-9)) * (at[i + 1] - at[i]) : 0;
    return left + ((at[i] + within) / total) * width;
  };
  const y = (tid) => top + lanes.indexOf(tid) * lane;
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("width", left + width + 20);
  svg.setAttribute("height", top + lanes.length * lane + 10);
  svg.setAttribute("data-events", timed.length);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(svgNs, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  add("text", { x: left, y: 12 }, `${(span / 1000).toFixed(1)} ms (idle stretches shortened)`);
  for (const tid of lanes) {
    add("text", { x: 4, y: y(tid) + 18 }, names.get(tid) || `rank ${tid}`);
    add("line", { x1: left, x2: left + width, y1: y(tid) + 14, y2: y(tid) + 14, stroke: "#d7dbe2" });
  }
  const flows = new Map();
  for (const event of timed) {
    if (event.ph === "X") {
      const bar = add("rect", {
        x: x(event.ts), y: y(event.tid) + 4, height: 20,
        width: Math.max(2, x(event.ts + event.dur) - x(event.ts)),
        fill: event.args && event.args.unclosed ? "#ffcc80" : "#90caf9",
        class: "slice", "data-name": event.name, "data-tid": event.tid,
        "data-unclosed": Boolean(event.args && event.args.unclosed),
      });
      add("title", {}, event.name);
      bar.append(svg.lastChild);
      add("text", { x: x(event.ts) + 3, y: y(event.tid) + 18 }, event.name);
    } else if (event.ph === "i" || event.ph === "I") {
      const tick = add("rect", {
        x: x(event.ts) - 1, y: y(event.tid) + 2, width: 2, height: 24, fill: "#5f6673",
        class: "instant", "data-name": event.name,
      });
      add("title", {}, event.name);
      tick.append(svg.lastChild);
    } else if (event.ph === "s") {
      flows.set(event.id, event);
    } else if (event.ph === "f" && flows.has(event.id)) {
      const from = flows.get(event.id);
      add("line", {
        x1: x(from.ts), y1: y(from.tid) + 14, x2: x(event.ts), y2: y(event.tid) + 14,
        stroke: "#ad1457", "stroke-width": 1, class: "flow",
      });
    }
  }
  $("timeline").replaceChildren(svg);
}
