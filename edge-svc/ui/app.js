// The world explorer: the caller's session and budgets, the log as calls (newest first,
// refreshing while calls arrive), and each call's provenance chain with every object's bytes
// hashed here, in the browser, against its ref. The credential lives in sessionStorage only.
"use strict";

const KEY = "world.session";
const REFRESH_MS = 2000;
const FOLD_LINES = 14;
const $ = (id) => document.getElementById(id);

const state = {
  credential: sessionStorage.getItem(KEY) || "",
  // `before` cursors of the pages shown so far; the last is the current page (null: newest).
  pages: [null],
  next: null,
  filter: { episode: "", transition: "" },
  find: "",
  selected: null,
  timer: null,
};

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// One `/v1` read with the session, relative to the page so a path prefix on a proxy works. No
// credential sends no header, so the edge answers with the seed's absent-credential denial.
async function api(path) {
  const headers = state.credential ? { Authorization: "Bearer " + headerSafe(state.credential) } : {};
  const response = await fetch(new URL("../v1/" + path, window.location.href), {
    headers,
    cache: "no-store",
    credentials: "omit",
  });
  const text = await response.text();
  if (!response.ok) {
    let message = text.trim() || response.statusText;
    try {
      message = JSON.parse(text).error.message;
    } catch (_) {
      // Not the REST envelope (a proxy's page, say): show the text as it came.
    }
    throw new ApiError(response.status, message);
  }
  return response.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : text;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

const utc = (seconds) => (seconds ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) : "—");

function surface(writtenBy) {
  const known = { "coordinator:mcp": "MCP", "coordinator:a2a": "A2A" };
  return known[writtenBy] || writtenBy;
}

// ----- session ------------------------------------------------------------------------------

// A pasted credential without the whitespace and the one pair of quotes that copying from a
// shell, a JSON file or a chat tends to bring along. Whatever else it holds goes to the edge,
// which alone judges its shape.
function pasted(text) {
  let value = text.trim();
  const quoted = /^(["'`])(.*)\1$/s.exec(value);
  if (quoted) value = quoted[2].trim();
  return value;
}

// A header carries visible ASCII and spaces only: fetch refuses anything else before sending.
// Such a character cannot be part of a credential, so it is replaced by one that cannot either
// and the edge answers the value as malformed.
const headerSafe = (value) => value.replace(/[^\x20-\x7e]/g, "?");

function showDenied(message) {
  $("denied").textContent = message;
  $("denied").hidden = false;
}

async function openSession() {
  $("denied").hidden = true;
  let session;
  try {
    session = await api("session");
  } catch (error) {
    if (error.status === 400 || error.status === 401) forget();
    showDenied(error.message);
    return;
  }
  // Kept for the tab only once the edge has accepted it.
  sessionStorage.setItem(KEY, state.credential);
  $("login").hidden = true;
  $("signed-in").hidden = false;
  $("who").textContent = "episode " + session.episode;
  $("main").hidden = false;
  renderSession(session);
  await loadCalls();
  schedule();
}

function renderSession(session) {
  $("episode").textContent = session.episode;
  $("expires").textContent = utc(session.expiresAt);
  // The core decides what the log shows; this says which rule it applied.
  $("reads").textContent = session.readsEveryEpisode
    ? "every episode's calls (Log.Read at world)"
    : "episode " + session.episode + "'s calls and what belongs to no episode";
  const body = $("grants").tBodies[0];
  body.replaceChildren(
    ...session.grants.map((g) =>
      el(
        "tr",
        { "data-effect": g.effect },
        el("td", { text: g.effect }),
        el("td", { text: g.scope }),
        el("td", { class: "num", text: String(g.budget) }),
        el("td", { class: "num spent", text: String(g.spent) }),
        el("td", { class: "num left", text: String(g.left) }),
        el("td", { text: utc(g.expiresAt) }),
      ),
    ),
  );
  $("grants").hidden = session.grants.length === 0;
  $("no-grants").hidden = session.grants.length !== 0;
}

function forget() {
  sessionStorage.removeItem(KEY);
  state.credential = "";
  clearTimeout(state.timer);
  $("main").hidden = true;
  $("login").hidden = false;
  $("signed-in").hidden = true;
  $("credential").value = "";
}

// ----- the log ------------------------------------------------------------------------------

function callsQuery() {
  const query = new URLSearchParams({ limit: "25" });
  if (state.find) {
    query.set("find", state.find);
    return query;
  }
  const before = state.pages[state.pages.length - 1];
  if (before !== null) query.set("before", String(before));
  if (state.filter.episode) query.set("episode", state.filter.episode);
  if (state.filter.transition) query.set("transition", state.filter.transition);
  return query;
}

async function loadCalls() {
  let page;
  try {
    page = await api("calls?" + callsQuery());
  } catch (error) {
    $("log-error").textContent = error.message;
    $("log-error").hidden = false;
    if (error.status === 401 || error.status === 400) {
      forget();
      showDenied(error.message);
    }
    return;
  }
  $("log-error").hidden = true;
  state.next = page.next;
  renderCalls(page.items);
  // Budgets move with every effectful call; keep them in step with the log.
  if (isLive()) api("session").then(renderSession, () => {});
}

function renderCalls(items) {
  const rows = items.map((call) => {
    const effects = el("td", { class: "effects" });
    for (const effect of call.effects) {
      effects.append(el("span", { class: "chip " + effect.status, text: effect.effect + " " + effect.status }));
    }
    const row = el(
      "tr",
      { class: "call", tabindex: "0", "data-index": String(call.entryIndex), "data-outcome": call.outcome },
      el("td", { class: "num", text: String(call.entryIndex) }),
      el("td", { text: utc(call.time) }),
      el("td", { text: call.transition || "—" }),
      el("td", { text: surface(call.writtenBy) }),
      el("td", { text: call.episode || "—" }),
      el("td", {}, call.outcome ? el("span", { class: "badge " + call.outcome, text: call.outcome }) : "—"),
      effects,
    );
    if (call.entryIndex === state.selected) row.classList.add("selected");
    const open = () => showEntry(call);
    row.addEventListener("click", open);
    row.addEventListener("keydown", (event) => event.key === "Enter" && open());
    return row;
  });
  $("calls").tBodies[0].replaceChildren(...rows);
  $("no-calls").hidden = items.length !== 0;
  $("older").disabled = state.find !== "" || state.next === null;
  $("newest").disabled = state.find === "" && state.pages.length === 1;
}

// The first page of the unfiltered or filtered log follows new calls as they commit.
const isLive = () => state.find === "" && state.pages.length === 1;

function schedule() {
  clearTimeout(state.timer);
  $("live").textContent = isLive() ? "· live" : "";
  state.timer = setTimeout(async () => {
    if (state.credential && isLive()) await loadCalls();
    if (state.credential) schedule();
  }, REFRESH_MS);
}

function restart() {
  state.pages = [null];
  loadCalls().then(schedule);
}

// ----- an entry's provenance ----------------------------------------------------------------

function base64Bytes(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

// Fetches one object with its payload and checks the payload hashes to the ref.
async function verified(ref) {
  try {
    const object = await api("objects/" + encodeURIComponent(ref) + "?payload=true");
    const bytes = base64Bytes(object.payload || "");
    const hex = await window.worldSha256.sha256Hex(bytes);
    return { ref, object, bytes, ok: "sha256:" + hex === ref, actual: "sha256:" + hex };
  } catch (error) {
    return { ref, error: error.message };
  }
}

function decoded(bytes) {
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  try {
    return { json: JSON.parse(text), text: JSON.stringify(JSON.parse(text), null, 2) };
  } catch (_) {
    return { json: null, text };
  }
}

function contentBlock(text) {
  const pre = el("pre", { text });
  const lines = text.split("\n").length;
  if (lines <= FOLD_LINES) return pre;
  return el("details", {}, el("summary", { text: lines + " lines" }), pre);
}

function objectItem(role, result, extra) {
  const item = el("li", { class: "object", "data-role": role, "data-ref": result.ref });
  const head = el("div", { class: "object-head" }, el("span", { class: "role", text: role }));
  if (result.error) {
    head.append(el("span", { class: "mark absent", text: "absent: " + result.error }));
  } else if (result.ok) {
    head.append(el("span", { class: "mark ok", text: "✓ verified" }));
  } else {
    head.append(el("span", { class: "mark bad", text: "✗ does not match: its bytes hash to " + result.actual }));
  }
  item.append(head, el("code", { class: "ref", text: result.ref }));
  if (result.object) {
    item.append(el("div", { class: "quiet", text: result.object.semanticId + " · " + result.bytes.length + " bytes" }));
  }
  if (extra) item.append(extra);
  if (result.bytes) item.append(contentBlock(decoded(result.bytes).text));
  return item;
}

// An effect record's facts, with the handler's reason and the file's sha256 when its result
// carries them.
function effectFacts(record, result) {
  if (!record) return null;
  const status = record.allowed ? (record.failed ? "failed" : "ok") : "denied";
  const facts = [
    ["effect", record.effect + " (" + record.scope + ")"],
    ["status", status + (record.denial ? " · " + record.denial : "")],
    ["cost", String(record.cost)],
    ["budget", record.budgetBefore + " → " + record.budgetAfter],
  ];
  const text = (value) => (typeof value === "string" && value !== "" ? value : null);
  const reason = result && (text(result.reason) || text(result.refused) || text(result.error));
  if (reason) facts.push(["reason", reason]);
  if (result && text(result.sha256)) facts.push(["file sha256", result.sha256]);
  const dl = el("dl", { class: "facts effect" });
  for (const [name, value] of facts) dl.append(el("dt", { text: name }), el("dd", { text: value }));
  return dl;
}

async function showEntry(call) {
  state.selected = call.entryIndex;
  for (const row of document.querySelectorAll("tr.call")) {
    row.classList.toggle("selected", Number(row.dataset.index) === call.entryIndex);
  }
  const view = $("entry-view");
  view.hidden = false;
  $("entry-title").textContent = "Entry " + call.entryIndex + (call.transition ? " · " + call.transition : "");
  const chain = $("chain");
  chain.replaceChildren(el("li", { class: "quiet", text: "verifying…" }));
  let entry;
  try {
    entry = await api("log/" + call.entryIndex);
  } catch (error) {
    chain.replaceChildren(el("li", { class: "denied", text: error.message }));
    return;
  }
  const facts = [
    ["entry hash", entry.entryHash],
    ["previous", entry.header.prevEntryHash],
    ["written by", entry.header.writtenBy],
    ["invocation", call.invocationId || "—"],
    ["episode", call.episode || "—"],
    ["committed", utc(call.time)],
    ["interpreter", entry.header.interpreter],
  ];
  $("entry-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));

  const items = [];
  const record = await verified(entry.transitionRef);
  items.push(objectItem("invocation record", record));
  const fields = record.bytes ? decoded(record.bytes).json || {} : {};
  for (const [role, key] of [["input", "input"], ["output", "output"], ["effect plan", "plan"]]) {
    if (typeof fields[key] === "string") items.push(objectItem(role, await verified(fields[key])));
  }
  const effects = Array.isArray(fields.effects) ? fields.effects : [];
  for (const [i, ref] of effects.entries()) {
    const effect = await verified(ref);
    const json = effect.bytes ? decoded(effect.bytes).json : null;
    const linked = [];
    for (const [role, key] of [["request", "requestRef"], ["result", "resultRef"]]) {
      // A denial stores its record only: the request it names was never written.
      if (role === "request" && json && json.allowed === false) continue;
      if (json && json[key]) linked.push([role, await verified(json[key])]);
    }
    const result = linked.find(([role]) => role === "result");
    const resultJson = result && result[1].bytes ? decoded(result[1].bytes).json : null;
    const item = objectItem("effect " + i + " record", effect, effectFacts(json, resultJson));
    const nested = el("ol", { class: "nested" });
    for (const [role, seen] of linked) nested.append(objectItem(role, seen));
    if (nested.childElementCount) item.append(nested);
    items.push(item);
  }
  items.push(objectItem("transition source", await verified(entry.header.transitionFn)));
  if (state.selected !== call.entryIndex) return; // another entry was opened meanwhile
  chain.replaceChildren(...items);
  const marks = chain.querySelectorAll(".mark");
  const good = chain.querySelectorAll(".mark.ok").length;
  const summary = $("verify-summary");
  summary.textContent =
    good === marks.length
      ? "All " + marks.length + " objects verified: each one's bytes hash to its ref."
      : marks.length - good + " of " + marks.length + " objects do not verify.";
  summary.className = good === marks.length ? "ok" : "bad";
}

// ----- wiring -------------------------------------------------------------------------------

$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  state.credential = pasted($("credential").value);
  openSession();
});

$("forget").addEventListener("click", forget);

$("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  state.filter = { episode: $("filter-episode").value.trim(), transition: $("filter-transition").value.trim() };
  state.find = "";
  $("find").value = "";
  restart();
});

$("clear-filters").addEventListener("click", () => {
  $("filter-episode").value = "";
  $("filter-transition").value = "";
  state.filter = { episode: "", transition: "" };
  state.find = "";
  $("find").value = "";
  restart();
});

$("search").addEventListener("submit", async (event) => {
  event.preventDefault();
  state.find = $("find").value.trim();
  state.pages = [null];
  await loadCalls();
  schedule();
  const first = document.querySelector("tr.call");
  if (state.find && first) first.click();
});

$("older").addEventListener("click", () => {
  if (state.next === null) return;
  state.pages.push(state.next);
  loadCalls().then(schedule);
});

$("newest").addEventListener("click", () => {
  state.find = "";
  $("find").value = "";
  restart();
});

if (state.credential) openSession();
