// The dashboard's script: draws GET /dashboard/runs and GET /runs/{id}/view, follows
// GET /runs/{id}/events, and answers checkpoints and stops runs with POSTs. On TCP every request
// carries the token as `Authorization: Bearer`: the sign-in link brings it in the address's
// fragment (#token=...), never sent to a server, and it moves to this tab's sessionStorage (this
// origin only: scheme, host and port; no cookie, which a browser would send to every port of the
// host). Text goes in as text, never as HTML.
"use strict";

const TOKEN_KEY = "awf-serve-token";

const EVENT_TYPES = ["run-started", "run-stopping", "run-finished", "leftovers-killed", "agent-opened",
  "agent-stopped", "agent-closed", "agent-set", "agent-compacted", "context-compacted", "op-started",
  "op-nudged", "op-replayed", "op-rerun", "records-healed", "op-submission", "op-rejected",
  "cluster-refused", "op-waiting", "op-settled", "model-unpriced", "control-refused", "stage-started",
  "stage-finished", "parallel-started", "parallel-finished", "log", "budget-exhausted", "sandbox-opened",
  "sandbox-seated", "sandbox-closed", "sandbox-net-denied", "route-granted", "route-closed",
  "message-sent", "message-delivered", "message-undelivered", "message-replied", "message-ask-failed",
  "child-run-started", "child-run-ended", "checkpoint-asked", "checkpoint-answered",
  "checkpoint-timed-out", "checkpoint-replayed", "council-settled", "http-retry", "http-waiting"];
const IN_FLIGHT = ["queued", "running", "waiting"];

let selected = null;
let priced = true;
let drawn = null;
let following = null;
let refreshing = null;

// The sign-in link's token, moved from the address to this tab's sessionStorage; the address bar
// and the history entry are left without it. Whether there was one.
function takeTokenFromAddress() {
  const given = /^#token=([^&#]*)$/.exec(location.hash);
  if (!given) return false;
  history.replaceState(null, "", location.pathname + location.search);
  try {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(given[1]));
  } catch (_) {
    showError("the sign-in link is damaged: open the one awf serve printed");
    return false;
  }
  showError("");
  return true;
}

// The run the address names (#run=ID), shown unless it is already.
function showRunFromAddress() {
  const named = /^#run=(.+)$/.exec(location.hash);
  if (!named) return;
  let id = null;
  try { id = decodeURIComponent(named[1]); } catch (_) { return; }
  if (id !== selected) select(id);
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// The Authorization header when signed in (on the Unix socket, behind a proxy, none is needed).
function authorized(headers) {
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

function signedOut() {
  return !document.getElementById("signed-out").classList.contains("hidden");
}

function showSignedIn() {
  const inTab = token() !== null;
  document.getElementById("signed-in").classList.toggle("hidden", !inTab);
  document.getElementById("signed-out").classList.add("hidden");
}

// Signed out (by the button, or a token the server no longer takes): the token leaves the tab
// and nothing of a run stays on the page.
function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  selected = null;
  drawn = null;
  if (following) following.abort();
  following = null;
  fill("runs", []);
  document.getElementById("run").classList.add("hidden");
  for (const id of ["checkpoints", "stages", "agents", "turns", "messages", "spend-agent", "spend-model", "events"]) fill(id, []);
  document.getElementById("signed-in").classList.add("hidden");
  document.getElementById("signed-out").classList.remove("hidden");
  history.replaceState(null, "", location.pathname);
}

class SignedOut extends Error {}

// A 401 means the tab holds no token the server takes: signed out.
function refused(response) {
  if (response.status !== 401) return false;
  signOut();
  return true;
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const kid of kids) e.append(kid instanceof Node ? kid : document.createTextNode(kid ?? ""));
  return e;
}

function fill(id, rows) {
  const body = document.querySelector(`#${id} tbody`) || document.getElementById(id);
  body.replaceChildren(...rows);
}

// Tokens, and USD when some cost is a price (an unpriced $0 says nothing).
function spend(tokens, usd, isPriced = priced) {
  return isPriced ? `${tokens} tokens, $${(usd || 0).toFixed(4)}` : `${tokens} tokens`;
}

function usd(value) {
  return priced ? `$${value.toFixed(4)}` : "unpriced";
}

function duration(ms) {
  if (ms === null || ms === undefined) return "-";
  const s = Math.floor(ms / 1000);
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor(s / 60) % 60}m`;
}

function showError(text) {
  document.getElementById("error").textContent = text || "";
}

// An error for the page, unless it was a sign-out (the page says so already).
function failed(e) {
  if (!(e instanceof SignedOut)) showError(e.message);
}

async function call(method, path, body) {
  const sent = token();
  const init = { method, headers: authorized({}), credentials: "omit" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  // Signed out meanwhile: what the token read is not drawn.
  if (refused(response) || token() !== sent) throw new SignedOut("signed out");
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (_) { value = null; }
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${value && value.error ? value.error : text}`);
  return value;
}

// The runs table follows the selected run's events too, at most every half second.
let listed = 0;
function listing() {
  if (Date.now() - listed > 500) loadRuns();
}

async function loadRuns() {
  listed = Date.now();
  try {
    const { runs } = await call("GET", "/dashboard/runs");
    fill("runs", runs.map((r) => el("tr", { "data-run": r.run_id, "data-status": r.status },
      el("td", {}, el("a", { href: `#run=${encodeURIComponent(r.run_id)}`, onclick: () => select(r.run_id) }, r.run_id)),
      el("td", { class: `status-${r.status}` }, r.status),
      el("td", {}, r.script),
      el("td", {}, r.started_at || "-"),
      el("td", {}, duration(r.duration_ms)),
      el("td", {}, spend(r.tokens, r.cost_usd, r.priced)))));
    const mine = runs.find((r) => r.run_id === selected);
    // A change the event stream did not show (a type this page does not know): drawn again.
    if (mine && mine.status !== drawn) refresh();
  } catch (e) {
    failed(e);
  }
}

function turnRows(agent) {
  return agent.turns.map((t) => el("tr", { "data-op": t.op_id },
    el("td", {}, t.op_id, el("br"), t.kind, t.label ? ` (${t.label})` : ""),
    el("td", {}, el("pre", {}, t.prompt || "")),
    el("td", {}, el("pre", {}, t.answer === null || t.answer === undefined ? "" : JSON.stringify(t.answer, null, 1))),
    el("td", {}, t.outcome || "running", t.reason ? `: ${t.reason}` : ""),
    el("td", {}, ...t.rejections.map((r) => el("pre", {}, r.errors.join("; ")))),
    el("td", {}, String(t.nudges)),
    el("td", {}, spend(t.tokens, t.cost_usd))));
}

function stateText(a) {
  const detail = a.reason || a.to || a.checkpoint || a.outcome || (a.nudges ? `${a.nudges} nudges` : "");
  return detail ? `${a.state} (${detail})` : a.state;
}

function drawCheckpoints(run) {
  fill("checkpoints", run.checkpoints.map((c) => {
    const input = el("textarea", { rows: 3, cols: 60, "data-key": c.key, "aria-label": `answer to ${c.key}` });
    const answer = async () => {
      try {
        await call("POST", `/runs/${encodeURIComponent(run.run_id)}/answer`, { key: c.key, value: JSON.parse(input.value) });
        showError("");
        refresh();
      } catch (e) {
        failed(e);
      }
    };
    return el("div", { class: "checkpoint", "data-key": c.key },
      el("p", {}, el("b", {}, c.key), `: ${c.question}`),
      el("pre", {}, JSON.stringify(c.schema)),
      input, el("br"),
      el("button", { type: "button", class: "answer", onclick: answer }, "Answer"));
  }));
  if (!run.checkpoints.length) fill("checkpoints", [el("p", {}, "none open")]);
}

function draw(run) {
  priced = run.priced;
  drawn = run.status;
  document.getElementById("run").classList.remove("hidden");
  document.getElementById("run-id").textContent = run.run_id;
  const status = document.getElementById("run-status");
  status.textContent = run.status;
  status.className = `status-${run.status}`;
  document.getElementById("run-script").textContent = run.script;
  document.getElementById("run-duration").textContent = duration(run.duration_ms);
  document.getElementById("run-spend").textContent = spend(run.tokens, run.cost_usd);
  document.getElementById("run-error").textContent = run.error || "";
  document.getElementById("stop").disabled = !IN_FLIGHT.includes(run.status);
  drawCheckpoints(run);
  fill("stages", run.stages.map((s) => el("tr", {}, el("td", {}, s.name), el("td", {}, s.status || "running"))));
  fill("agents", run.agents.map((a) => el("tr", { "data-agent": a.key, "data-state": a.state },
    el("td", {}, a.key), el("td", {}, `${a.harness} / ${a.model}`),
    el("td", { class: `state-${a.state}` }, stateText(a)), el("td", {}, a.current || "-"),
    el("td", {}, String(a.operations)), el("td", {}, spend(a.tokens, a.cost_usd)))));
  fill("turns", run.agents.filter((a) => a.turns.length).map((a) => el("details", { "data-agent": a.key },
    el("summary", {}, `${a.key}: ${a.turns.length} turns`),
    el("table", {}, el("thead", {}, el("tr", {}, ...["op", "prompt", "answer", "outcome", "rejections", "nudges", "spend"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...turnRows(a))))));
  fill("messages", run.messages.map((m) => el("tr", {}, el("td", {}, String(m.n)), el("td", {}, m.event),
    el("td", {}, m.from || "-"), el("td", {}, m.to || "-"))));
  const spendRows = (by) => Object.entries(by).map(([name, s]) => el("tr", {}, el("td", {}, name),
    el("td", {}, String(s.operations)), el("td", {}, String(s.tokens)), el("td", {}, usd(s.cost_usd))));
  fill("spend-agent", spendRows(run.spend_by_agent));
  fill("spend-model", spendRows(run.spend_by_model));
}

async function refreshNow() {
  refreshing = null;
  if (!selected) return;
  try {
    const run = await call("GET", `/runs/${encodeURIComponent(selected)}/view`);
    if (run.run_id !== selected) return;
    draw(run);
    listing();
  } catch (e) {
    failed(e);
  }
}

function refresh() {
  if (!refreshing) refreshing = setTimeout(refreshNow, 100);
}

// One server-sent event (the lines before a blank line) as { type, data }.
function parseEvent(block) {
  let type = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") type = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { type, data: data.join("\n") } : null;
}

// The run's events, read with fetch and a stream reader (EventSource cannot send the token).
// The stream ends with the run: no reconnecting to replay it.
async function follow(id) {
  if (following) following.abort();
  const controller = new AbortController();
  following = controller;
  const log = document.getElementById("events");
  log.replaceChildren();
  const onEvent = (e) => {
    const line = el("div", { class: "event" }, `${e.type} ${e.data}`);
    log.append(line);
    while (log.childNodes.length > 200) log.firstChild.remove();
    log.scrollTop = log.scrollHeight;
    refresh();
  };
  try {
    const response = await fetch(`/runs/${encodeURIComponent(id)}/events`, {
      headers: authorized({ Accept: "text/event-stream" }), credentials: "omit", signal: controller.signal });
    if (refused(response)) return;
    if (!response.ok) throw new Error(`GET /runs/${id}/events: ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = (buffer + value).replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (event && EVENT_TYPES.concat("message").includes(event.type)) onEvent(event);
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") showError(e.message);
  }
  if (following === controller) {
    following = null;
    refresh();
  }
}

function select(id) {
  selected = id;
  follow(id);
  refreshNow();
}

document.getElementById("stop").addEventListener("click", async () => {
  try {
    await call("POST", `/runs/${selected}/stop`);
    showError("");
    refresh();
    loadRuns();
  } catch (e) {
    failed(e);
  }
});

document.getElementById("sign-out").addEventListener("click", signOut);

// A link opened in this tab while the page is up changes only the part after `#`, which reloads
// nothing: a sign-in link (after a sign-out, or a serve restarted with a new token) or a run's.
window.addEventListener("hashchange", () => {
  if (takeTokenFromAddress()) {
    showSignedIn();
    loadRuns();
  }
  showRunFromAddress();
});

takeTokenFromAddress();
showSignedIn();
showRunFromAddress();
loadRuns();
setInterval(() => { if (!signedOut()) loadRuns(); }, 2000);
