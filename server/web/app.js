// Baton reference web client: plain JavaScript over the wire protocol (docs/PROTOCOL.md).
// It lists sessions grouped by task, resumes the selected session once when the server says it
// needs resuming, shows its live transcript and sends prompts. The connection (requests,
// reconnection, resubscription with since_seq so nothing is missed or shown twice) is the
// reusable client in baton-client.js.

import { BatonClient } from "/baton-client.js";

const TERMINAL = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
const $ = (id) => document.getElementById(id);

// The token, when the server wants one, kept for this tab only (sessionStorage). The address
// batond prints carries a one-time login code (?login=), exchanged here for the token on the
// first load (POST /login): what the browser keeps of the address (history, sessions) is a code
// that no longer opens anything. A token given as ?token= is taken the same way. Either is
// removed from the address bar at once; a token can also be typed in. A pairing link gives a
// device token of its own, kept in localStorage.
const token = await (async () => {
  const params = new URLSearchParams(location.search);
  const fromUrl = params.get("token");
  const login = params.get("login");
  if (fromUrl !== null || login !== null) {
    if (fromUrl !== null) sessionStorage.setItem("baton.token", fromUrl);
    params.delete("token");
    params.delete("login");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  if (login !== null) {
    try {
      const answer = await fetch("/login", { method: "POST", headers: { "Baton-Login": login }, cache: "no-store" });
      if (answer.ok) {
        const { token } = await answer.json();
        if (typeof token === "string") sessionStorage.setItem("baton.token", token);
        // A paired device's own token (a pairing link, `batond pair`) is kept across visits:
        // the device stays paired until it is revoked. The server's main token never is.
        if (typeof token === "string" && token.startsWith("device-")) localStorage.setItem("baton.device", token);
      }
    } catch (_) {
      // No answer: the connection that follows is refused and the page asks for the token.
    }
  }
  return sessionStorage.getItem("baton.token") || localStorage.getItem("baton.device") || "";
})();

// The session a push notification's click asks to show (`?session=ID`), taken once.
const openOnLoad = (() => {
  const params = new URLSearchParams(location.search);
  const id = params.get("session");
  if (id !== null) {
    params.delete("session");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  return id;
})();

const app = {
  sessions: [], // SessionInfo rows, in the server's order (newest first), page after page
  nextCursor: null, // where the next page of the list starts; null when all are loaded
  loadingMore: false,
  selected: null, // session id
  resumeAttempted: false, // at most one automatic resume per selection
  loaded: false, // the selected session's history is shown
  fold: null, // how live events fold into the transcript
  drafts: new Map(), // session id -> what was typed for it and not sent
  everConnected: false, // a failed handshake after that is a restart until the server answers otherwise
  attentionCount: 0, // sessions that need the user, server-wide (attention.changed)
  seen: loadSeen(), // session id -> the attention_since of its finished turn the user looked at
  seenTimer: null, // marks the session on screen seen once it has been there a moment
  usage: new Map(), // session id -> its usage in words, when its agent reported any
  jumpTo: null, // the seq of a search hit to scroll to once the transcript holds it
  entrySeq: null, // the seq of the entry being added to the transcript
  renderInto: null, // where entries go while older ones are put in front (else the transcript)
  pushRegistration: null, // the service worker's registration (Web Push), once registered
};

// --- Connection -----------------------------------------------------------------------------

const scheme = location.protocol === "https:" ? "wss:" : "ws:";
const client = new BatonClient(`${scheme}//${location.host}/ws`, { token });
const request = (action, payload) => client.request(action, payload);

function setConnection(kind, text) {
  const el = $("connection");
  el.dataset.state = kind;
  el.textContent = text;
  updatePrompt();
}

client.on("connecting", () => setConnection("connecting", "connecting…"));
client.on("close", ({ opened, code }) => {
  if (code === 1001) {
    setConnection("connecting", "reconnecting… (the server is restarting)");
    return;
  }
  if (opened) {
    setConnection("connecting", "reconnecting…");
    return;
  }
  // Browsers do not say why a handshake failed: a refused origin (403), a missing or wrong
  // token (401), or no server at all look the same here. The page itself tells them apart:
  // a server that serves it but refuses the WebSocket refused us; one that does not answer is
  // down or restarting, and the client keeps trying.
  fetch("/", { cache: "no-store" }).then(
    (answer) => {
      if (client.connected) return;
      if (answer.ok) {
        setConnection("failed", "the server refused this page (origin or token)");
        $("token-form").hidden = false;
      } else {
        setConnection("connecting", "reconnecting…");
      }
    },
    () => {
      if (client.connected) return;
      setConnection("connecting", app.everConnected ? "reconnecting… (the server is restarting)" : "reconnecting… (no server answers yet)");
    },
  );
});
client.on("open", onHello);
client.on("state_changed", onStateChanged);
client.on("task_updated", onTaskUpdated);
client.on("notification", (frame) => {
  if (frame.action === "task.deleted") onTaskDeleted(frame.payload);
  if (frame.action === "attention.changed") setAttentionCount(frame.payload.count);
  if (frame.action === "permission.queue_changed") onQueueChanged(frame.payload);
});
client.on("event", onEvent);
client.on("error", (e) => setStatus("server error: " + e.message));

async function onHello() {
  const firstHello = !app.everConnected;
  app.everConnected = true;
  setConnection("open", "connected");
  $("token-form").hidden = true;
  try {
    await refreshSessions();
    if (firstHello) {
      // A push notification opens the page on its session (?session=ID).
      if (openOnLoad && app.sessions.some((s) => s.session_id === openOnLoad)) select(openOnLoad);
      registerServiceWorker().then(subscribePush);
    }
    refreshUsage().catch(() => {});
    listApprovals();
    // After a reconnect the client has resubscribed the selection from its last applied seq;
    // the status (and a resume, once per selection) is read again.
    if (app.selected && app.loaded) await checkResume(app.selected);
    else if (app.selected) await openSelected();
  } catch (e) {
    setStatus(e.message);
  }
}

// --- Session list ---------------------------------------------------------------------------

const SESSION_PAGE = 100;

// Answers and notifications are not ordered with one another on the wire: a list or status read
// before a change can arrive after that change's notification. Of two views of a session the one
// with the greater change_seq is the newer (docs/PROTOCOL.md, "Answers, notifications and
// change_seq"); 0 or absent (an older server) counts as new.
function supersedes(incoming, held) {
  return !incoming || !held || incoming >= held;
}

// Rows of a list answer, each replaced by the view held of its session when that one is newer.
function newestOf(rows) {
  const held = new Map(app.sessions.map((s) => [s.session_id, s]));
  return rows.map((row) => {
    const mine = held.get(row.session_id);
    return mine && !supersedes(row.change_seq, mine.change_seq) ? mine : row;
  });
}

// Takes a task.session.status answer into the session's row, unless the row is newer.
function takeStatus(session, status) {
  if (session && supersedes(status.change_seq, session.change_seq)) Object.assign(session, status);
}

// The first page again; the rows of further pages already loaded (older) are kept.
async function refreshSessions() {
  const result = await request("task.session.list", { order: "recent", limit: SESSION_PAGE });
  result.sessions = newestOf(result.sessions);
  const paged = app.nextCursor !== null || app.sessions.length > SESSION_PAGE;
  const last = result.sessions[result.sessions.length - 1];
  if (paged && result.next_cursor && last) {
    const ids = new Set(result.sessions.map((s) => s.session_id));
    const older = app.sessions.filter(
      (s) => !ids.has(s.session_id) && (s.created_at < last.created_at || (s.created_at === last.created_at && s.session_id < last.session_id)),
    );
    app.sessions = result.sessions.concat(older);
  } else {
    app.sessions = result.sessions;
    app.nextCursor = result.next_cursor ?? null;
  }
  setAttentionCount(result.attention_count ?? 0);
  renderSessions();
  renderHeader();
  watchSeen();
  loadMoreIfNearEnd();
}

// The next page, when the list is scrolled near its end (or is too short to scroll).
async function loadMoreIfNearEnd() {
  const nav = $("sessions");
  if (app.loadingMore || app.nextCursor === null) return;
  if (nav.scrollTop + nav.clientHeight < nav.scrollHeight - 200) return;
  app.loadingMore = true;
  try {
    const cursor = app.nextCursor;
    const result = await request("task.session.list", { order: "recent", limit: SESSION_PAGE, cursor });
    result.sessions = newestOf(result.sessions);
    const ids = new Set(result.sessions.map((s) => s.session_id));
    app.sessions = app.sessions.filter((s) => !ids.has(s.session_id)).concat(result.sessions);
    app.nextCursor = result.next_cursor ?? null;
    renderSessions();
  } catch (e) {
    setStatus(e.message);
  } finally {
    app.loadingMore = false;
  }
  loadMoreIfNearEnd();
}

$("sessions").addEventListener("scroll", () => loadMoreIfNearEnd());

function sessionById(id) {
  return app.sessions.find((s) => s.session_id === id);
}

function renderSessions() {
  renderNeeds();
  const nav = $("sessions");
  nav.replaceChildren();
  if (app.sessions.length === 0) {
    const empty = document.createElement("p");
    empty.className = "empty";
    empty.textContent = "No sessions yet.";
    nav.append(empty);
    return;
  }
  const groups = new Map();
  for (const session of app.sessions) {
    if (!groups.has(session.task_id)) groups.set(session.task_id, []);
    groups.get(session.task_id).push(session);
  }
  for (const sessions of groups.values()) {
    const task = document.createElement("div");
    task.className = "task";
    task.textContent = sessions[0].task_title;
    nav.append(task);
    // A task's sessions are numbered when it has several (#1 the oldest), as in the TUI: they
    // are told apart by more than their age.
    const oldestFirst = [...sessions].sort((a, b) => a.created_at.localeCompare(b.created_at));
    const number = (session) => (sessions.length > 1 ? `#${oldestFirst.indexOf(session) + 1} · ` : "");
    for (const session of sessions) {
      const row = document.createElement("button");
      row.type = "button";
      row.className = "session";
      row.dataset.sessionId = session.session_id;
      row.setAttribute("aria-current", String(session.session_id === app.selected));
      const need = needOf(session);
      if (need) row.dataset.need = need;
      const label = document.createElement("span");
      label.textContent = `${number(session)}${session.agent} · ${session.created_at.slice(0, 16).replace("T", " ")}`;
      if (session.forked_from) label.textContent += ` · fork of ${shortId(session.forked_from.session_id)}`;
      row.append(label, badge(session));
      row.onclick = () => select(session.session_id);
      nav.append(row);
    }
  }
}

// A state in words with its own symbol: states differ by more than their colour.
const STATE_WORDS = {
  CREATED: ["○", "not started"],
  STARTING: ["◌", "starting"],
  RUNNING: ["▶", "working"],
  WAITING_FOR_INPUT: ["✎", "waiting for you"],
  COMPLETED: ["✓", "done"],
  FAILED: ["✗", "failed"],
  CANCELLED: ["■", "cancelled"],
};

function stateWords(session) {
  if (session.needs_resume) return ["⚠", "needs resume"];
  // Still RUNNING for the server, but the agent waits on the user: say so in the list.
  if (session.attention === "permission") return ["?", "asks permission"];
  if (session.state === "CREATED" && session.last_error) return ["✗", "failed to start"];
  return STATE_WORDS[session.state] || ["", session.state.toLowerCase()];
}

function badge(session) {
  const el = document.createElement("span");
  el.className = "badge" + (session.needs_resume ? " needs-resume" : "");
  el.dataset.state = session.state;
  if (session.attention) el.dataset.attention = session.attention;
  const [icon, words] = stateWords(session);
  el.dataset.icon = icon;
  el.textContent = words;
  return el;
}

function onStateChanged(change) {
  const session = sessionById(change.session_id);
  if (!session) {
    refreshSessions().catch((e) => setStatus(e.message));
    return;
  }
  // A list or status read after this change came first: it already tells it.
  if (!supersedes(change.change_seq, session.change_seq)) return;
  const attentionBefore = session.attention;
  if (change.change_seq) session.change_seq = change.change_seq;
  session.state = change.state;
  session.task_state = change.task_state;
  session.needs_resume = change.needs_resume;
  session.attention = change.attention;
  session.attention_since = change.attention_since;
  if (change.attention && change.attention !== attentionBefore && (document.hidden || change.session_id !== app.selected)) {
    notifyDesktop(session, change.attention);
  }
  renderSessions();
  if (change.session_id === app.selected) watchSeen();
  // A turn ended: its usage is recorded by now.
  if (change.previous_state === "RUNNING" && change.state !== "RUNNING") refreshUsage().catch(() => {});
  if (change.session_id !== app.selected) return;
  if (change.previous_state === "STARTING" && change.needs_resume) {
    // The restore failed; the server says why in the status (and an error event).
    request("task.session.status", { session_id: change.session_id })
      .then((status) => {
        takeStatus(session, status);
        renderHeader();
      })
      .catch((e) => setStatus(e.message));
  }
  renderHeader();
}

function onTaskDeleted(deleted) {
  // An archived task is told by its id only: its sessions go with it.
  const ofTask = app.sessions.filter((s) => s.task_id === deleted.task_id).map((s) => s.session_id);
  const gone = new Set([...deleted.session_ids, ...ofTask]);
  app.sessions = app.sessions.filter((s) => !gone.has(s.session_id) && s.task_id !== deleted.task_id);
  for (const id of gone) app.drafts.delete(id);
  if (gone.has(app.selected)) {
    client.unsubscribe(app.selected).catch(() => {});
    app.selected = null;
    $("transcript").replaceChildren();
    $("prompt").value = "";
  }
  renderSessions();
  renderHeader();
}

function onTaskUpdated(task) {
  if ($("archived").open) listArchived();
  if (task.archived) {
    // The list shows tasks that are not archived (the server's default).
    onTaskDeleted({ task_id: task.id, session_ids: [] });
    return;
  }
  if (!app.sessions.some((s) => s.task_id === task.id)) {
    // A task this page has not seen yet: list it with its sessions.
    refreshSessions().catch((e) => setStatus(e.message));
    return;
  }
  for (const session of app.sessions) {
    if (session.task_id === task.id) {
      session.task_title = task.title;
      session.task_state = task.state;
    }
  }
  renderSessions();
}

// --- Selected session -----------------------------------------------------------------------

function select(id) {
  if (app.selected === id) return;
  const previous = app.selected;
  // Each session keeps its own draft: text typed for one is never sent to another.
  const prompt = $("prompt");
  if (previous) {
    if (prompt.value) app.drafts.set(previous, prompt.value);
    else app.drafts.delete(previous);
  }
  prompt.value = app.drafts.get(id) || "";
  app.selected = id;
  app.resumeAttempted = false;
  app.loaded = false;
  app.fold = { open: null, tools: new Map(), permissions: new Map() };
  $("transcript").replaceChildren();
  renderSessions();
  renderHeader();
  if (previous) client.unsubscribe(previous).catch(() => {});
  app.jumpTo = null;
  watchSeen();
  refreshUsage().catch(() => {});
  openSelected().catch((e) => setStatus(e.message));
}

// The history (folded by the server), then the live events from its newest entry on, then the
// The auto-resume (docs/RESUME.md): status -> resume once when needs_resume && is_resumable -> state changes.
// "812 B", "12.4 KB", "3.1 MB", as the TUI says sizes.
function sizeWords(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

// Entries message.list cut (a very long answer: only its first 256 KiB come) say how much is
// not shown and where to read them whole.
function markCut(list) {
  for (const cut of list.cut ?? []) {
    const message = list.messages.find((m) => m.seq === cut.seq);
    if (!message) continue;
    const more = cut.total_bytes - new TextEncoder().encode(message.text).length;
    message.text += `\n\n[… ${sizeWords(more)} more not shown here (${sizeWords(cut.total_bytes)} in all): Export the transcript to read it whole]`;
  }
  return list;
}

async function openSelected() {
  const id = app.selected;
  if (!app.loaded) {
    renderQueue(id, null);
    listQueue(id);
    const list = markCut(await request("message.list", { session_id: id, limit: 200 }));
    if (app.selected !== id) return;
    const messages = list.messages;
    // The newest entry may still be growing: it is rebuilt from its events instead.
    const newest = messages.pop();
    for (const message of messages) showMessage(message);
    app.loaded = true;
    // The client keeps the cursor from here on, across reconnects; the replay may arrive
    // before this answer (PROTOCOL.md §6).
    await client.subscribe(id, newest ? newest.seq - 1 : 0);
    if (app.selected !== id) return;
    if (app.jumpTo) await jumpIntoOlder(id, list.has_more && messages.length ? messages[0].seq : 0);
  }
  await checkResume(id);
}

async function checkResume(id) {
  const status = await request("task.session.status", { session_id: id });
  if (app.selected !== id) return;
  const session = sessionById(id);
  takeStatus(session, status);
  renderSessions();
  renderHeader();
  // The row's needs_resume is the newest word (a notification may have come after this read).
  if (status.needs_resume && status.is_resumable && (!session || session.needs_resume) && !app.resumeAttempted) {
    app.resumeAttempted = true;
    setStatus("resuming…");
    try {
      const resumed = await request("task.session.resume", { session_id: id });
      if (app.selected !== id) return;
      setStatus(resumed.launched ? "starting the agent…" : "");
    } catch (e) {
      setStatus("could not resume: " + e.message);
    }
  }
}

// The way out of a restore that can never succeed: a new agent session given the conversation.
// A resume of the selected session the user confirms first: `flags` of task.session.resume
// (`fresh`, `retry_failed`), the question and its button, what the status says meanwhile.
async function resumeAsked({ flags, question, button, doing, failed }) {
  const id = app.selected;
  if (!id) return;
  if (!(await ask(question, [], button))) return;
  setStatus(doing);
  try {
    const resumed = await request("task.session.resume", { session_id: id, ...flags });
    if (app.selected === id) setStatus(resumed.launched ? "starting the agent…" : "");
  } catch (e) {
    setStatus(`${failed}: ${e.message}`);
  }
}

function startFresh() {
  return resumeAsked({
    flags: { fresh: true },
    question: "Start fresh? A new agent session gets the conversation so far with your next message.",
    button: "Start fresh",
    doing: "starting fresh…",
    failed: "could not start fresh",
  });
}

// A FAILED session (its agent could not be spawned) is launched again only when the user says
// so, once the cause is fixed (the agent installed, the runtime's settings mended).
function retryFailed() {
  return resumeAsked({
    flags: { retry_failed: true },
    question: "Retry? The agent is launched again with the conversation so far. Fix what made it fail first.",
    button: "Retry",
    doing: "retrying…",
    failed: "could not retry",
  });
}

function renderHeader() {
  const session = app.selected && sessionById(app.selected);
  $("start-fresh").hidden = !(session && session.needs_resume && session.is_resumable);
  $("retry-failed").hidden = !(session && session.state === "FAILED");
  $("session-title").textContent = session ? session.task_title : "Select a session";
  $("actions").hidden = !session;
  renderOriginAndUsage(session);
  if (session) {
    let text = describe(session);
    if ((session.needs_resume || session.state === "CREATED" || session.state === "FAILED") && session.last_error) {
      text += ": " + session.last_error;
    }
    setStatus(text);
    const running = session.state === "RUNNING" && session.is_agent_running !== false && !session.needs_resume;
    $("cancel-turn").disabled = !running;
    $("stop-session").disabled = TERMINAL.has(session.state);
  }
  updatePrompt();
}

function describe(session) {
  if (session.needs_resume) return "needs resume";
  if (session.state === "CREATED" && session.last_error) return "failed to start";
  switch (session.state) {
    case "WAITING_FOR_INPUT":
      return "ready";
    case "RUNNING":
      return "working…";
    case "STARTING":
      return "starting the agent…";
    case "CREATED":
      return "not started: send a message to start it";
    default:
      return stateWords(session)[1];
  }
}

function setStatus(text) {
  $("session-status").textContent = text;
}

function updatePrompt() {
  const session = app.selected && sessionById(app.selected);
  const usable = Boolean(client.connected && session && !TERMINAL.has(session.state));
  $("prompt").disabled = !usable;
  $("send").disabled = !usable;
  $("steer").disabled = !usable;
}

// `steer`: the running turn is cancelled and this message goes first. While a queued message
// is being edited (its Edit button), the prompt saves it instead (queue.edit).
async function sendPrompt(steer) {
  const prompt = $("prompt");
  const content = prompt.value;
  const id = app.selected;
  if (!content.trim() || !id) return;
  prompt.value = "";
  app.drafts.delete(id);
  const editing = app.editingQueued;
  app.editingQueued = null;
  try {
    if (editing && editing.sessionId === id) {
      renderQueue(id, await request("queue.edit", { session_id: id, id: editing.id, content }));
      setStatus("queued message saved");
      return;
    }
    const added = await request("message.add", steer ? { session_id: id, content, steer: true } : { session_id: id, content });
    if (added.queued) setStatus(steer ? "the turn is being cancelled for your message" : "queued: sent when the running turn ends");
  } catch (e) {
    if (!prompt.value) prompt.value = content; // nothing typed is lost
    setStatus("not sent: " + e.message);
  }
}

// --- Queued messages (queue.list, queue events) ----------------------------------------------

function renderQueue(sessionId, queue) {
  if (sessionId !== app.selected) return;
  const messages = (queue && queue.messages) || [];
  $("queue").hidden = messages.length === 0;
  $("queue-held").hidden = !queue || !queue.held;
  $("queue-held").textContent = queue && queue.held ? "Held: " + queue.held : "";
  $("queue-release").hidden = !queue || !queue.held;
  const rows = messages.map((message) => {
    const li = document.createElement("li");
    li.dataset.queuedId = message.id;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = (message.steer ? "steer · " : "") + message.text;
    const edit = document.createElement("button");
    edit.type = "button";
    edit.className = "edit";
    edit.textContent = "Edit";
    edit.addEventListener("click", () => {
      app.editingQueued = { sessionId, id: message.id };
      $("prompt").value = message.text;
      $("prompt").focus();
      setStatus("editing a queued message: Send saves it");
    });
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove";
    remove.textContent = "Remove";
    remove.addEventListener("click", () => {
      request("queue.remove", { session_id: sessionId, id: message.id })
        .then((result) => renderQueue(sessionId, result))
        .catch((e) => setStatus("could not remove: " + e.message));
    });
    li.append(text, edit, remove);
    return li;
  });
  $("queue-list").replaceChildren(...rows);
}

async function listQueue(sessionId) {
  try {
    renderQueue(sessionId, await request("queue.list", { session_id: sessionId }));
  } catch (e) {
    setStatus("could not read the queued messages: " + e.message);
  }
}

$("queue-release").addEventListener("click", () => {
  const id = app.selected;
  if (!id) return;
  request("queue.release", { session_id: id })
    .then((result) => renderQueue(id, result))
    .catch((e) => setStatus("could not send the next message: " + e.message));
});
$("steer").addEventListener("click", () => sendPrompt(true));

// --- Transcript -----------------------------------------------------------------------------

// Keeps the newest line in view while the reader is at the bottom (the list's own padding and
// the entries' margins are below the last entry: scrolling the entry "into view" left them out).
function followNewest(force) {
  if (force || atNewest() || app.following) {
    const transcript = $("transcript");
    transcript.scrollTop = transcript.scrollHeight;
    app.following = true;
  }
}

// Whether the transcript shows its newest line (within a little of its bottom).
function atNewest() {
  const transcript = $("transcript");
  return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
}

// Whether the reader is at the newest line, as they scroll.
$("transcript").addEventListener("scroll", () => {
  app.following = atNewest();
});

// The pane changes size when the header wraps (its chips come and go on a phone), a phone's
// keyboard opens or the window is resized: a reader who was at the newest line (a question
// brought into view) stays there.
new ResizeObserver(() => {
  if (app.following) followNewest(true);
}).observe($("transcript"));

function addEntry(kind, text) {
  const li = document.createElement("li");
  li.className = kind;
  li.textContent = text;
  // The folded entry's seq (its first event's): what a search hit names.
  if (app.entrySeq != null) li.dataset.seq = String(app.entrySeq);
  if (app.renderInto) {
    // Older entries being put in front (see prependMessages): the view does not move.
    app.renderInto.append(li);
    return li;
  }
  app.following = atNewest();
  $("transcript").append(li);
  followNewest(false);
  app.fold.open = null;
  return li;
}

function toolText(tool) {
  return `tool: ${tool.title}${tool.status ? ` (${tool.status})` : ""}`;
}

/** @param {import("./protocol").ToolCallStatus | undefined} status shown as its text, known or not */
function upsertTool(id, title, status) {
  let tool = app.fold.tools.get(id);
  if (!tool) {
    tool = { title: title || id, status: status || null, li: addEntry("tool_call", "") };
    app.fold.tools.set(id, tool);
  }
  if (title) tool.title = title;
  if (status) tool.status = status;
  tool.li.textContent = toolText(tool);
}

// A command the agent runs in a terminal: its command line, its output (the end of it) in a
// preformatted block under it, and how it exited.
// `total` counts the bytes of output folded so far: a piece replayed after message.list
// (its `offset` says where it starts) adds only what is new.
const TERMINAL_KEPT = 64 * 1024;
const utf8 = { encoder: new TextEncoder(), decoder: new TextDecoder() };
function showTerminal(key, title, output, exit, offset, total) {
  let tool = app.fold.tools.get(key);
  if (!tool) {
    tool = { title, status: "running", li: addEntry("tool_call", ""), output: "", total: 0 };
    tool.li.classList.add("terminal");
    app.fold.tools.set(key, tool);
  }
  if (title) tool.title = title;
  if (total !== undefined) {
    tool.output = output || "";
    tool.total = total;
  } else if (output) {
    const bytes = utf8.encoder.encode(output);
    const skip = Math.max(0, tool.total - offset);
    if (skip < bytes.length) tool.output += utf8.decoder.decode(bytes.slice(skip));
    tool.total = Math.max(tool.total, offset + bytes.length);
  }
  if (tool.output.length > TERMINAL_KEPT) tool.output = tool.output.slice(-TERMINAL_KEPT);
  if (exit) tool.status = exit.signal ? `killed, ${exit.signal}` : `exit ${exit.exit_code}`;
  tool.li.textContent = toolText(tool);
  if (tool.output) {
    const pre = document.createElement("pre");
    pre.className = "terminal-output";
    pre.textContent = tool.output;
    tool.li.append(pre);
  }
}

function planText(entries) {
  return "plan:\n" + entries.map((e) => `  [${e.status || " "}] ${e.content}`).join("\n");
}

function showPermission(requestId, title, options, status, toolCall) {
  const li = addEntry("permission", title);
  const permission = { li, title };
  app.fold.permissions.set(requestId, permission);
  if (status === "pending") {
    // What would be approved, where the question is asked: the input and the diff.
    li.append(...toolCallDetails(toolCall));
    const buttons = document.createElement("div");
    for (const option of options || []) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = option.name;
      button.onclick = () =>
        request("permission.respond", {
          session_id: app.selected,
          request_id: requestId,
          option_id: option.option_id,
        }).catch((e) => setStatus(e.message));
      buttons.append(button);
    }
    li.append(buttons);
    // A question waiting for an answer is always brought into view, whatever was being read.
    followNewest(true);
  } else {
    li.textContent = `${title} (${permissionOutcome(status && status.startsWith("selected:") ? status.slice(9) : null)})`;
  }
}

// "allowed", "rejected" or "not answered", rather than the wire's "selected:allow".
function permissionOutcome(optionId) {
  if (!optionId) return "not answered";
  if (optionId.startsWith("allow")) return "allowed";
  if (optionId.startsWith("reject") || optionId.startsWith("deny")) return "rejected";
  return "answered: " + optionId;
}

// One entry of message.list.
function showMessage(message) {
  app.entrySeq = message.seq;
  switch (message.kind) {
    case "tool_call":
      if (message.data && message.data.terminal) {
        const terminal = message.data.terminal;
        showTerminal(message.tool_call_id, message.text, terminal.output, terminal.exit, 0, terminal.total || 0);
      } else {
        upsertTool(message.tool_call_id, message.text, message.status);
      }
      break;
    case "plan":
      addEntry("plan", planText((message.data && message.data.entries) || []));
      break;
    case "permission":
      showPermission(
        message.message_id,
        message.text,
        message.data && message.data.options,
        message.status,
        message.data && message.data.tool_call,
      );
      break;
    default:
      addEntry(message.kind, message.text);
  }
}

// The line a turn that did not simply finish leaves (StopReason::turn_end_note); a reason this
// page does not know is shown as its text.
/** @param {import("./protocol").StopReason} reason */
function turnEndNote(reason) {
  switch (reason) {
    case "end_turn":
    case "interrupted":
    case "error":
      return null;
    case "cancelled":
      return "Turn cancelled.";
    case "refusal":
      return "Turn ended: the agent refused.";
    case "max_tokens":
      return "Turn ended: the agent reached its token limit.";
    case "max_turn_requests":
      return "Turn ended: the agent reached its request limit.";
    default:
      return `Turn ended: ${reason}.`;
  }
}

function onEvent(record) {
  changesFollow(record);
  // The client delivers each seq of a subscribed session once, in order.
  if (record.session_id !== app.selected) return;
  if (optionsOf === record.session_id && (record.event.kind === "mode" || record.event.kind === "options")) {
    listOptions(optionsOf);
  }
  app.entrySeq = record.seq;
  const event = record.event;
  const fold = app.fold;
  switch (event.kind) {
    case "user_message":
      addEntry("user", event.text);
      break;
    case "queue":
      renderQueue(record.session_id, event);
      break;
    case "message_chunk":
    case "thought_chunk": {
      const kind = event.kind === "message_chunk" ? "agent" : "thought";
      const messageId = event.message_id ?? null;
      const open = fold.open;
      if (open && open.kind === kind && open.messageId === messageId) {
        open.li.textContent += event.text;
        followNewest(false);
      } else {
        const li = addEntry(kind, event.text);
        fold.open = { li, kind, messageId };
      }
      break;
    }
    case "tool_call":
    case "tool_call_update":
      upsertTool(event.tool_call_id, event.title, event.status);
      break;
    case "terminal_output":
      showTerminal(
        "terminal:" + event.terminal_id,
        event.command ? "$ " + event.command : "",
        event.output,
        event.exit,
        event.offset || 0,
        undefined,
      );
      break;
    case "plan":
      if (fold.open && fold.open.kind === "plan") {
        fold.open.li.textContent = planText(event.entries);
      } else {
        const li = addEntry("plan", planText(event.entries));
        fold.open = { li, kind: "plan", messageId: null };
      }
      break;
    case "status":
      addEntry("status", event.message);
      break;
    case "error":
      addEntry("error", event.message);
      break;
    case "turn_completed": {
      fold.open = null;
      const note = turnEndNote(event.stop_reason);
      if (note) addEntry("status", note);
      break;
    }
    case "permission_request":
      showPermission(
        event.request_id,
        (event.tool_call && event.tool_call.title) || "Permission requested",
        event.options,
        "pending",
        event.tool_call,
      );
      break;
    case "permission_resolved": {
      const permission = fold.permissions.get(event.request_id);
      if (permission) {
        permission.li.textContent = `${permission.title} (${permissionOutcome(event.option_id)})`;
      }
      break;
    }
    default:
      break; // turn_started, available_commands, mode, agent_update: not shown
  }
  if (app.jumpTo) revealHit();
}

// --- Wiring ---------------------------------------------------------------------------------

$("start-fresh").addEventListener("click", () => startFresh());
$("retry-failed").addEventListener("click", () => retryFailed());
$("prompt-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sendPrompt();
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    sendPrompt();
  }
});
$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const typed = $("token").value;
  sessionStorage.setItem("baton.token", typed);
  $("token").value = "";
  client.reconnect({ token: typed });
});

// --- Actions (what the TUI's keys do) -------------------------------------------------------

// Asks a question in the page's dialog; resolves to the fields' values on OK, null on Cancel.
// `fields`: [{name, label, value?, kind: "input" | "textarea" | "select", options?}].
function ask(text, fields = [], okLabel = "OK") {
  const dialog = $("ask");
  $("ask-text").textContent = text;
  $("ask-error").hidden = true;
  $("ask-ok").textContent = okLabel;
  const box = $("ask-fields");
  box.replaceChildren();
  const inputs = new Map();
  for (const field of fields) {
    const label = document.createElement("label");
    label.textContent = field.label;
    const input = document.createElement(field.kind || "input");
    input.name = field.name;
    for (const option of field.options || []) {
      const el = document.createElement("option");
      el.value = option.value;
      el.textContent = option.label;
      input.append(el);
    }
    if (field.value !== undefined) input.value = field.value;
    // An empty required field keeps the dialog open, with the browser's own message.
    if (field.required) input.required = true;
    label.append(input);
    box.append(label);
    inputs.set(field.name, input);
  }
  return new Promise((resolve) => {
    const finish = (answer) => {
      $("ask-form").onsubmit = null;
      $("ask-cancel").onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    $("ask-form").onsubmit = (e) => {
      e.preventDefault();
      finish(Object.fromEntries([...inputs].map(([name, input]) => [name, input.value])));
    };
    $("ask-cancel").onclick = () => finish(null);
    // A close event still on its way from the previous question (close() dispatches it later)
    // must not end this one: only a dialog that is really closed answers null.
    dialog.onclose = () => {
      if (!dialog.open) finish(null);
    };
    dialog.showModal();
  });
}

async function act(what, run) {
  try {
    await run();
  } catch (e) {
    setStatus(`could not ${what}: ${e.message}`);
  }
}

function selectedSession() {
  return app.selected && sessionById(app.selected);
}

$("cancel-turn").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  if (!(await ask(`Cancel the running turn of “${session.task_title}”? The agent stops what it is doing.`, [], "Cancel the turn"))) return;
  await act("cancel the turn", async () => {
    await request("task.session.cancel", { session_id: session.session_id });
    setStatus("cancelling the turn…");
  });
});

$("stop-session").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  if (!(await ask(`Stop “${session.task_title}”? Its agent is stopped for good (New session starts another).`, [], "Stop"))) return;
  await act("stop the session", () => request("task.session.stop", { session_id: session.session_id }));
});

$("new-session").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  await act("start a session", async () => {
    // An empty prompt starts the agent idle (the description was the first session's prompt).
    const started = await request("task.session.start", { task_id: session.task_id, prompt: "" });
    await refreshSessions();
    select(started.session.session_id);
  });
});

$("rename-task").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  const answer = await ask("Rename the task", [{ name: "title", label: "Title", value: session.task_title }], "Rename");
  if (!answer) return;
  await act("rename the task", () => request("task.update", { task_id: session.task_id, title: answer.title }));
});

$("archive-task").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  const ofTask = app.sessions.filter((s) => s.task_id === session.task_id);
  const running = ofTask.filter((s) => s.is_agent_running || s.state === "STARTING").length;
  const agents = running ? ` Its running agent${running > 1 ? "s are" : " is"} stopped (the conversation is kept).` : "";
  const question =
    `Archive the task “${session.task_title}” with its ${ofTask.length} session(s)? It leaves the list; ` +
    `Archived lists it and brings it back.${agents}`;
  if (!(await ask(question, [], "Archive"))) return;
  await act("archive the task", async () => {
    const result = await request("task.archive", { task_id: session.task_id, stop_agents: true });
    const stopped = (result.stopped_sessions || []).length;
    setStatus(`archived “${result.task.title}”${stopped ? `, ${stopped} running agent(s) stopped` : ""}`);
  });
});

// The archived tasks' sessions (task.session.list, archived: only): Unarchive brings a task back;
// an agent another client left running is marked.
async function listArchived() {
  try {
    const { sessions } = await request("task.session.list", { archived: "only", order: "recent", limit: 1000 });
    const list = $("archived-list");
    if (!sessions.length) {
      const empty = document.createElement("li");
      empty.className = "empty";
      empty.textContent = "No archived tasks.";
      list.replaceChildren(empty);
      return;
    }
    list.replaceChildren(
      ...sessions.map((session) => {
        const li = document.createElement("li");
        li.dataset.sessionId = session.session_id;
        const where = document.createElement("span");
        where.className = "where";
        where.textContent = session.task_title;
        const about = document.createElement("span");
        about.className = "since";
        const running = session.is_agent_running || session.state === "STARTING";
        about.textContent = `${session.agent} · ${session.state.toLowerCase().replaceAll("_", " ")} · ${since(session.updated_at)}`;
        const agent = document.createElement("span");
        agent.className = "running";
        agent.textContent = running ? " · agent running" : "";
        const back = document.createElement("button");
        back.type = "button";
        back.className = "revoke unarchive";
        back.textContent = "Unarchive";
        back.onclick = async () => {
          try {
            await request("task.unarchive", { task_id: session.task_id });
            await refreshSessions();
            listArchived();
          } catch (e) {
            showNote("archived-note", e.message);
          }
        };
        li.append(where, about, agent, document.createElement("br"), back);
        return li;
      }),
    );
  } catch (e) {
    showNote("archived-note", "could not list the archived tasks: " + e.message);
  }
}

$("archived-open").addEventListener("click", () => {
  showNote("archived-note", "");
  $("archived-list").replaceChildren();
  $("archived").showModal();
  listArchived();
});
$("archived-close").addEventListener("click", () => $("archived").close());

$("delete-task").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  const count = app.sessions.filter((s) => s.task_id === session.task_id).length;
  const question =
    `Delete the task “${session.task_title}” with its ${count} session(s), their conversations and its worktree? ` +
    "This cannot be undone. A running agent of it is stopped first; a worktree with uncommitted changes is kept.";
  if (!(await ask(question, [], "Delete"))) return;
  // The user was told that its agents are stopped (the list may not know one started meanwhile).
  await act("delete the task", () => request("task.delete", { task_id: session.task_id, stop_agents: true }));
});

$("new-task").addEventListener("click", async () => {
  let agents = [];
  try {
    agents = (await request("agent.list", {})).agents;
  } catch (e) {
    setStatus("could not list the agents: " + e.message);
    return;
  }
  const installed = agents.filter((a) => a.installed);
  // Where the agent works is asked, never left to the server's own directory (wherever it
  // was started): prefilled with the selected session's task's directory, else the newest
  // task's.
  let workdir = "";
  try {
    const { tasks } = await request("task.list", {});
    const selected = selectedSession();
    const task =
      (selected && tasks.find((t) => t.id === selected.task_id)) ||
      [...tasks].sort((a, b) => (a.updated_at < b.updated_at ? 1 : -1))[0];
    if (task) workdir = task.workdir;
  } catch (e) {
    setStatus("could not list the tasks: " + e.message);
  }
  const fields = [
    { name: "title", label: "Title" },
    { name: "description", label: "First prompt", kind: "textarea" },
    {
      name: "agent",
      label: "Agent",
      kind: "select",
      options: installed.map((a) => ({ value: a.name, label: `${a.display_name} (${a.name})` })),
      value: (installed.find((a) => a.name === "mock") || installed[0] || {}).name,
    },
    { name: "workdir", label: "Working directory (on the server's machine)", value: workdir, required: true },
    {
      name: "worktree",
      label: "Work",
      kind: "select",
      options: [
        { value: "in-place", label: "in the directory itself" },
        { value: "worktree", label: "on a branch and worktree of its own (the directory is a git repository)" },
      ],
      value: "in-place",
    },
  ];
  const answer = await ask("New task", fields, "Create");
  if (!answer) return;
  await act("create the task", async () => {
    const payload = { title: answer.title, description: answer.description, agent: answer.agent };
    // A worktree is made from the repository the directory names.
    if (answer.worktree === "worktree") Object.assign(payload, { repository: answer.workdir.trim(), worktree: true });
    else payload.workdir = answer.workdir.trim();
    const created = await request("task.create", payload);
    await refreshSessions();
    select(created.session.session_id);
  });
});

// --- What needs you -------------------------------------------------------------------------

const ATTENTION_WORDS = {
  permission: "asks for a permission",
  input: "waits for your next prompt",
  resume: "needs resuming",
  failed: "failed",
};

// How long a finished turn must be on screen (the page visible) to count as seen.
const SEEN_AFTER_MS = 1500;

// "Seen" is kept by this browser only (the server's `attention` is the same for every client,
// PROTOCOL.md §3): a finished turn the user looked at no longer counts as "your turn" here, until
// the session's next turn ends (a new attention_since).
function loadSeen() {
  try {
    return new Map(Object.entries(JSON.parse(localStorage.getItem("baton.seen") || "{}")));
  } catch {
    return new Map();
  }
}

// At most this many sessions' marks are kept (the oldest marked first go).
const SEEN_KEPT = 2000;

function saveSeen() {
  // Sessions beyond the pages loaded keep their marks; the record is bounded by its size.
  const kept = Object.fromEntries([...app.seen].slice(-SEEN_KEPT));
  try {
    localStorage.setItem("baton.seen", JSON.stringify(kept));
  } catch {
    // Storage full or refused (a private window): seen is then kept for this page only.
  }
}

// What the session needs from the user, as far as this page knows: "asks" (a permission, a
// failure, a resume: counts until answered), "turn" (a finished turn not looked at yet), or null.
function needOf(session) {
  if (!session.attention) return null;
  if (session.attention !== "input") return "asks";
  return app.seen.get(session.session_id) === (session.attention_since ?? "") ? null : "turn";
}

function setAttentionCount(count) {
  app.attentionCount = count;
  renderNeeds();
}

// The header's chip: what asks the user something, apart from the finished turns not yet seen.
// Sessions beyond the pages loaded are known only by the server's count: "N more need you".
function renderNeeds() {
  let asks = 0;
  let turns = 0;
  let flagged = 0;
  for (const session of app.sessions) {
    if (session.attention) flagged += 1;
    const need = needOf(session);
    if (need === "asks") asks += 1;
    if (need === "turn") turns += 1;
  }
  const more = Math.max(0, app.attentionCount - flagged);
  const parts = [];
  if (asks) parts.push(`${asks} ask${asks === 1 ? "s" : ""} you`);
  if (turns) parts.push(`${turns} your turn`);
  if (more) parts.push(`${more} more need${more === 1 ? "s" : ""} you`);
  const el = $("needs-you");
  el.textContent = parts.join(" · ");
  el.dataset.asks = String(asks);
  el.hidden = parts.length === 0;
}

// Marks the session on screen seen once it has been shown for SEEN_AFTER_MS with the page visible.
function watchSeen() {
  clearTimeout(app.seenTimer);
  const session = sessionById(app.selected);
  if (!session || needOf(session) !== "turn" || document.hidden) return;
  const { session_id: id, attention_since: since } = session;
  app.seenTimer = setTimeout(() => {
    const now = sessionById(id);
    if (app.selected !== id || document.hidden || !now || now.attention_since !== since) return;
    app.seen.delete(id); // the newest mark goes last, kept longest
    app.seen.set(id, since ?? "");
    saveSeen();
    renderSessions();
  }, SEEN_AFTER_MS);
}

document.addEventListener("visibilitychange", watchSeen);

// A desktop notification through the browser's Notification API, when the user allowed it
// (the "Notify me" button asks); one per change of a session's reason, never for the session
// on screen while the page is visible.
function notifyDesktop(session, reason) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const body = `${session.task_title}: ${ATTENTION_WORDS[reason] ?? reason}`;
  const note = new Notification("Baton", { body, tag: `${session.session_id}:${reason}` });
  note.onclick = () => {
    window.focus();
    select(session.session_id);
    note.close();
  };
}

(function offerNotifications() {
  const button = $("notify-me");
  if (!("Notification" in window) || Notification.permission !== "default") return;
  button.hidden = false;
  button.addEventListener("click", async () => {
    const answer = await Notification.requestPermission();
    button.hidden = answer !== "default";
    if (answer === "granted") subscribePush();
  });
})();

// Web Push: the service worker (/sw.js) is registered on every load, so that a notification's
// actions work; once notifications are allowed, the browser subscribes with the server's VAPID
// key and the server keeps the subscription for this device (push.subscribe), so pushes arrive
// with no page open. #notify-me's data-push says how far it got (registered, subscribed, or
// why not: a browser with no push service, as a test's offline Chromium, says so).
async function registerServiceWorker() {
  const button = $("notify-me");
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    button.dataset.push = "unavailable: this browser has no Web Push (it needs https, or localhost)";
    return;
  }
  try {
    app.pushRegistration = await navigator.serviceWorker.register("/sw.js");
    await navigator.serviceWorker.ready;
    button.dataset.push = "registered";
  } catch (e) {
    button.dataset.push = "unavailable: " + e.message;
  }
}

function base64UrlBytes(text) {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

// How long a push subscription may take before the page says it is waiting for the push service.
const PUSH_SLOW_MS = 10000;

async function subscribePush() {
  if (!app.pushRegistration || !("Notification" in window) || Notification.permission !== "granted") return;
  const button = $("notify-me");
  try {
    const { public_key } = await request("push.key", {});
    let subscription = await app.pushRegistration.pushManager.getSubscription();
    if (!subscription) {
      const pending = app.pushRegistration.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: base64UrlBytes(public_key),
      });
      // The browser's push service is on the internet (Chrome's goes through Google): without
      // it the subscription never settles. Say so after a while; it completes if it comes back.
      const slow = setTimeout(() => {
        button.dataset.push = `not subscribed: the browser's push service has not answered for ${PUSH_SLOW_MS / 1000} s (it needs the internet); still trying`;
      }, PUSH_SLOW_MS);
      try {
        subscription = await pending;
      } finally {
        clearTimeout(slow);
      }
    }
    const { endpoint, keys } = subscription.toJSON();
    await request("push.subscribe", { endpoint, p256dh: keys.p256dh, auth: keys.auth });
    button.dataset.push = "subscribed";
  } catch (e) {
    button.dataset.push = "not subscribed: " + e.message;
  }
}

if ("serviceWorker" in navigator) {
  // A notification clicked while this page is open: show its session.
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data && typeof event.data.select === "string") select(event.data.select);
  });
}

// --- Export, search, fork, usage ------------------------------------------------------------

// "sess-8b1e4d2c9a7f…" -> "8b1e4d2c", as the TUI shows ids.
function shortId(id) {
  return id.replace(/^sess-/, "").slice(0, 8);
}

// Export: every page of session.export joined, then downloaded under the server's file name.
$("export-session").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  const fields = [
    {
      name: "format",
      label: "Format",
      kind: "select",
      options: [
        { value: "markdown", label: "Markdown (.md)" },
        { value: "jsonl", label: "JSON Lines (.jsonl), one journal event a line" },
      ],
      value: "markdown",
    },
    {
      name: "thoughts",
      label: "Thoughts",
      kind: "select",
      options: [
        { value: "no", label: "left out" },
        { value: "yes", label: "included" },
      ],
      value: "no",
    },
  ];
  const answer = await ask(`Export the transcript of “${session.task_title}”`, fields, "Download");
  if (!answer) return;
  await act("export the transcript", async () => {
    setStatus("exporting…");
    const parts = [];
    let cursor;
    let fileName = "";
    do {
      const payload = { session_id: session.session_id, format: answer.format, thoughts: answer.thoughts === "yes" };
      if (cursor) payload.cursor = cursor;
      const page = await request("session.export", payload);
      parts.push(page.content);
      fileName = page.file_name;
      cursor = page.next_cursor;
    } while (cursor);
    const type = answer.format === "jsonl" ? "application/x-ndjson" : "text/markdown";
    const url = URL.createObjectURL(new Blob(parts, { type }));
    const link = document.createElement("a");
    link.href = url;
    link.download = fileName;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    const bytes = parts.reduce((n, part) => n + part.length, 0);
    setStatus(`downloaded ${fileName} (${bytes} characters)`);
  });
});

// Fork: after a question, the new session is opened; its header says where it came from.
$("fork-session").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  // The agent can be another one: the conversation is then handed over to it (injected into
  // its first message).
  let agents = [];
  try {
    agents = (await request("agent.list", {})).agents.filter((a) => a.installed || a.name === session.agent);
  } catch (e) {
    setStatus("could not list the agents: " + e.message);
    return;
  }
  const question =
    `Fork “${session.task_title}”? A new session of its task starts from the conversation so far; this one stays as it is. ` +
    "Pick another agent to hand the conversation over to it.";
  const fields = [
    {
      name: "agent",
      label: "Agent",
      kind: "select",
      options: agents.map((a) => ({ value: a.name, label: `${a.display_name} (${a.name})` })),
      value: session.agent,
    },
  ];
  const answer = await ask(question, fields, "Fork");
  if (!answer) return;
  const params = { session_id: session.session_id };
  if (answer.agent && answer.agent !== session.agent) params.agent = answer.agent;
  await act(params.agent ? "hand the session over" : "fork the session", async () => {
    const forked = await request("task.session.fork", params);
    await refreshSessions();
    select(forked.session.session_id);
  });
});

$("session-origin").addEventListener("click", () => {
  const session = selectedSession();
  const source = session && session.forked_from && session.forked_from.session_id;
  if (source && sessionById(source)) select(source);
});

function renderOriginAndUsage(session) {
  const origin = $("session-origin");
  const from = session && session.forked_from;
  origin.hidden = !from;
  if (from) {
    const source = sessionById(from.session_id);
    origin.textContent = `fork of ${shortId(from.session_id)}${source ? ` (${source.task_title})` : ""}`;
  }
  const usage = $("session-usage");
  const text = session && app.usage.get(session.session_id);
  usage.hidden = !text;
  usage.textContent = text || "";
}

// Usage as agents reported it: the selected session's and the total. A figure no agent
// reported is not shown (never as 0).
async function refreshUsage() {
  const id = app.selected;
  const got = await request("usage.get", id ? { session_id: id } : {});
  if (got.session) app.usage.set(got.session.session_id, usageText(got.session.summary));
  const total = usageText(got.total);
  const el = $("usage-total");
  el.hidden = !total;
  el.textContent = total ? `Σ ${total}` : "";
  renderOriginAndUsage(selectedSession());
}

/** @param {import("./protocol").UsageSummary} summary */
function usageText(summary) {
  const parts = [];
  if (summary.input_tokens != null) parts.push(`${tokens(summary.input_tokens)} in`);
  if (summary.output_tokens != null) parts.push(`${tokens(summary.output_tokens)} out`);
  if (summary.input_tokens == null && summary.output_tokens == null && summary.total_tokens != null) {
    parts.push(`${tokens(summary.total_tokens)} tokens`);
  }
  for (const cost of summary.cost || []) {
    parts.push(cost.currency === "USD" ? `$${cost.amount.toFixed(2)}` : `${cost.amount} ${cost.currency}`);
  }
  return parts.join(" · ");
}

function tokens(n) {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

// Search: message.search as the user types (the last word a prefix until a space ends it),
// once typing pauses; a click on a hit opens its session scrolled to the message.
const SEARCH_DEBOUNCE_MS = 250;
let searchTimer = null;
let searchAsked = "";

function searchQuery(typed) {
  const trimmed = typed.trim();
  if (!trimmed || /\s$/.test(typed) || trimmed.endsWith("*")) return trimmed;
  return trimmed + "*";
}

$("search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => runSearch().catch((e) => showSearchNote("could not search: " + e.message)), SEARCH_DEBOUNCE_MS);
});
// A click anywhere else closes the results (the query stays for another look).
document.addEventListener("click", (e) => {
  if (!$("search-box").contains(e.target)) $("search-results").hidden = true;
});
$("search").addEventListener("focus", () => {
  if ($("search-results").children.length > 0 && $("search").value.trim()) $("search-results").hidden = false;
});
$("search").addEventListener("keydown", (e) => {
  if (e.key === "Escape") {
    $("search").value = "";
    $("search-results").hidden = true;
  }
});

async function runSearch(cursor) {
  const query = searchQuery($("search").value);
  if (!query) {
    $("search-results").hidden = true;
    return;
  }
  if (!cursor) searchAsked = query;
  const page = await request("message.search", cursor ? { query, cursor } : { query });
  // A page for what is no longer typed is dropped.
  if (query !== searchQuery($("search").value) || query !== searchAsked) return;
  const list = $("search-results");
  if (!cursor) list.replaceChildren();
  list.querySelector(".more")?.remove();
  for (const hit of page.hits) list.append(hitItem(hit));
  if (list.children.length === 0) showSearchNote(`nothing matches “${query}”`);
  if (page.next_cursor) {
    const more = document.createElement("li");
    more.className = "more";
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "more…";
    button.onclick = () => runSearch(page.next_cursor).catch((e) => showSearchNote("could not search: " + e.message));
    more.append(button);
    list.append(more);
  }
  list.hidden = false;
}

function showSearchNote(text) {
  const list = $("search-results");
  const note = document.createElement("li");
  note.className = "note";
  note.textContent = text;
  list.replaceChildren(note);
  list.hidden = false;
}

/** @param {import("./protocol").SearchHit} hit */
function hitItem(hit) {
  const li = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "hit";
  button.dataset.sessionId = hit.session_id;
  button.dataset.seq = String(hit.seq);
  const where = document.createElement("span");
  where.className = "where";
  where.textContent = `${hit.task_title} · ${hit.kind} · ${shortId(hit.session_id)}`;
  const snippet = document.createElement("span");
  snippet.className = "snippet";
  for (const part of hit.snippet) {
    const piece = document.createElement(part.matched ? "mark" : "span");
    piece.textContent = part.text;
    snippet.append(piece);
  }
  button.append(where, snippet);
  button.onclick = () => openHit(hit);
  li.append(button);
  return li;
}

function openHit(hit) {
  $("search-results").hidden = true;
  if (app.selected === hit.session_id) {
    app.jumpTo = hit.seq;
    revealHit();
    return;
  }
  select(hit.session_id);
  app.jumpTo = hit.seq;
}

// Pages of entries older than the transcript shows, at most this many, are loaded to reach a
// search hit; a hit further back is said to be out of reach.
const JUMP_PAGES = 10;
const JUMP_PAGE = 500;

// A hit older than the newest page loaded: the pages before it are put in front until one
// holds it. `oldestShown`: the oldest entry loaded when older ones exist (0: all are shown).
async function jumpIntoOlder(id, oldestShown) {
  let oldest = oldestShown;
  for (let page = 0; oldest && app.jumpTo && app.jumpTo < oldest && page < JUMP_PAGES; page++) {
    const list = markCut(await request("message.list", { session_id: id, before_seq: oldest, limit: JUMP_PAGE }));
    if (app.selected !== id || !app.jumpTo) return;
    prependMessages(list.messages);
    oldest = list.has_more && list.messages.length ? list.messages[0].seq : 0;
  }
  revealHit(oldest);
}

// Older entries (oldest first) put in front of the transcript, the view left where it is.
function prependMessages(messages) {
  const holder = document.createElement("ol");
  app.renderInto = holder;
  try {
    for (const message of messages) showMessage(message);
  } finally {
    app.renderInto = null;
    app.entrySeq = null;
  }
  $("transcript").prepend(...holder.children);
}

// Scrolls the hit's entry into view and marks it, once the transcript holds it. `oldestShown`:
// the oldest entry the page loaded when older ones were left out (0: all are shown).
function revealHit(oldestShown = 0) {
  const seq = app.jumpTo;
  const li = $("transcript").querySelector(`li[data-seq="${seq}"]`);
  if (li) {
    app.jumpTo = null;
    for (const old of $("transcript").querySelectorAll("li.hit")) old.classList.remove("hit");
    li.classList.add("hit");
    app.following = false;
    li.scrollIntoView({ block: "center" });
    return;
  }
  if (oldestShown && seq < oldestShown) {
    app.jumpTo = null;
    setStatus("the message found is older than the part of the transcript this page shows");
  }
}

// --- Approval queue and standing answers ----------------------------------------------------
// Every session's pending permission requests in one panel, answered there (the first answer
// wins: a later one is told "already answered"), listed again on each permission.queue_changed;
// and the selected session's standing answers, which an agent's "always" options make.

const approvals = { listing: false, again: false, requests: [], total: 0, rulesOf: null };

async function listApprovals() {
  if (approvals.listing) {
    approvals.again = true;
    return;
  }
  approvals.listing = true;
  try {
    const page = await request("permission.list", { limit: 200 });
    approvals.requests = page.requests;
    approvals.total = page.total;
    renderApprovals();
  } catch (e) {
    showNote("approvals-note", "could not list the approval queue: " + e.message);
  } finally {
    approvals.listing = false;
    if (approvals.again) {
      approvals.again = false;
      listApprovals();
    }
  }
}

function onQueueChanged(changed) {
  listApprovals();
  if (approvals.rulesOf === changed.session_id && changed.rule_id) listRules(changed.session_id);
}

function showNote(id, text) {
  const note = $(id);
  note.textContent = text || "";
  note.hidden = !text;
}

// The tool's kind and title, as standing answers match them.
function toolWords(toolCall) {
  const kind = (toolCall && toolCall.kind) || "";
  const title = (toolCall && toolCall.title) || "a tool call";
  return kind ? `${kind} “${title}”` : `“${title}”`;
}

function since(timestamp) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(timestamp)) / 1000));
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  return `${Math.floor(seconds / 3600)}h ago`;
}

// An ACP diff as lines: the lines both texts share at the start and the end as context, what
// lies between as removed and added (a full line diff is more than a reference page needs).
function diffBlock(diff) {
  const pre = document.createElement("pre");
  const oldLines = (diff.oldText || "").split("\n");
  const newLines = (diff.newText || "").split("\n");
  let head = 0;
  while (head < oldLines.length && head < newLines.length && oldLines[head] === newLines[head]) head++;
  let tail = 0;
  while (
    tail < oldLines.length - head &&
    tail < newLines.length - head &&
    oldLines[oldLines.length - 1 - tail] === newLines[newLines.length - 1 - tail]
  )
    tail++;
  const line = (text, cls) => {
    const span = document.createElement("span");
    if (cls) span.className = cls;
    span.textContent = text + "\n";
    pre.append(span);
  };
  line(diff.path, null);
  for (const text of oldLines.slice(0, head)) line("  " + text, null);
  for (const text of oldLines.slice(head, oldLines.length - tail)) line("- " + text, "del");
  for (const text of newLines.slice(head, newLines.length - tail)) line("+ " + text, "add");
  for (const text of newLines.slice(newLines.length - tail)) line("  " + text, null);
  return pre;
}

// A tool call's input (the command, the path…) and its diffs, as blocks.
function toolCallDetails(toolCall) {
  const blocks = [];
  toolCall = toolCall || {};
  if (toolCall.rawInput !== undefined && toolCall.rawInput !== null) {
    const input = document.createElement("pre");
    input.className = "input";
    input.textContent = JSON.stringify(toolCall.rawInput, null, 2);
    blocks.push(input);
  }
  for (const item of Array.isArray(toolCall.content) ? toolCall.content : []) {
    if (item && item.type === "diff" && typeof item.path === "string") blocks.push(diffBlock(item));
  }
  return blocks;
}

function approvalItem(pending) {
  const li = document.createElement("li");
  li.dataset.requestId = pending.request_id;
  li.dataset.sessionId = pending.session_id;
  const where = document.createElement("button");
  where.type = "button";
  where.className = "where origin";
  where.textContent = pending.task_title;
  where.title = "Open this session";
  where.onclick = () => {
    $("approvals").close();
    select(pending.session_id);
  };
  const when = document.createElement("span");
  when.className = "since";
  when.textContent = since(pending.requested_at);
  const tool = document.createElement("div");
  tool.className = "tool";
  tool.textContent = toolWords(pending.tool_call);
  li.append(where, when, tool, ...toolCallDetails(pending.tool_call));
  const options = document.createElement("div");
  options.className = "options";
  for (const option of pending.options) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.optionId = option.option_id;
    button.dataset.kind = option.kind;
    button.textContent = option.name;
    button.onclick = () => answerFromQueue(pending, option);
    options.append(button);
  }
  li.append(options);
  return li;
}

async function answerFromQueue(pending, option) {
  showNote("approvals-note", "");
  try {
    await request("permission.respond", {
      session_id: pending.session_id,
      request_id: pending.request_id,
      option_id: option.option_id,
    });
  } catch (e) {
    // Another client (or a standing answer) was first: the server says what was chosen.
    showNote("approvals-note", e.message);
    listApprovals();
  }
}

function renderApprovals() {
  const button = $("approvals-open");
  button.dataset.count = String(approvals.total);
  button.textContent = approvals.total ? `Approvals (${approvals.total})` : "Approvals";
  $("approvals-count").textContent = `· ${approvals.total} waiting`;
  const list = $("approvals-list");
  if (!approvals.requests.length) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = "Nothing waits for your answer.";
    list.replaceChildren(empty);
    return;
  }
  list.replaceChildren(...approvals.requests.map(approvalItem));
}

$("approvals-open").addEventListener("click", () => {
  showNote("approvals-note", "");
  renderApprovals();
  $("approvals").showModal();
  listApprovals();
});
$("approvals-close").addEventListener("click", () => $("approvals").close());

// --- Paired devices ---------------------------------------------------------------------------
// device.list and device.revoke, for the server's own token (a device's is refused them, so a
// paired phone does not show the button).

async function listDevices() {
  try {
    const { devices } = await request("device.list", {});
    const list = $("devices-list");
    if (!devices.length) {
      const empty = document.createElement("li");
      empty.className = "empty";
      empty.textContent = "No paired device.";
      list.replaceChildren(empty);
      return;
    }
    list.replaceChildren(
      ...devices.map((device) => {
        const li = document.createElement("li");
        li.dataset.deviceId = device.device_id;
        const name = document.createElement("span");
        name.className = "tool";
        name.textContent = `${device.name} · ${device.limited ? "watch and answer" : "full rights"}`;
        const seen = document.createElement("span");
        seen.className = "since";
        const online = device.connections ? `connected (${device.connections})` : "offline";
        const last = device.last_seen_at
          ? ` · seen ${since(device.last_seen_at)}${device.last_address ? " from " + device.last_address : ""}`
          : " · never connected";
        seen.textContent = online + last;
        const revoke = document.createElement("button");
        revoke.type = "button";
        revoke.className = "revoke";
        revoke.textContent = "Revoke";
        revoke.onclick = async () => {
          const question = `Revoke “${device.name}”? Its connections are closed at once and its token opens nothing any more.`;
          if (!(await ask(question, [], "Revoke"))) return;
          try {
            await request("device.revoke", { device_id: device.device_id });
          } catch (e) {
            showNote("devices-note", e.message);
          }
          listDevices();
        };
        li.append(name, seen, document.createElement("br"), revoke);
        return li;
      }),
    );
  } catch (e) {
    showNote("devices-note", "could not list the devices: " + e.message);
  }
}

$("devices-open").hidden = token.startsWith("device-");
$("devices-open").addEventListener("click", () => {
  showNote("devices-note", "");
  $("devices-list").replaceChildren();
  $("devices").showModal();
  listDevices();
});
$("devices-close").addEventListener("click", () => $("devices").close());

async function listRules(sessionId) {
  try {
    const { rules } = await request("permission.rule.list", { session_id: sessionId });
    if (approvals.rulesOf !== sessionId) return;
    const list = $("rules-list");
    if (!rules.length) {
      const empty = document.createElement("li");
      empty.className = "empty";
      empty.textContent = "No standing answers. Choosing an agent's “always” option makes one for that tool.";
      list.replaceChildren(empty);
      return;
    }
    list.replaceChildren(
      ...rules.map((rule) => {
        const li = document.createElement("li");
        li.dataset.ruleId = rule.rule_id;
        const words = rule.decision === "allow" ? "always allow" : "always reject";
        const text = document.createElement("span");
        text.className = "tool";
        text.textContent = `${words} ${toolWords({ kind: rule.tool_kind, title: rule.tool_title })}`;
        const count = document.createElement("span");
        count.className = "since";
        count.textContent = `answered ${rule.applied}× · set ${since(rule.created_at)}`;
        // What the rule matches exactly: another input under the same title is asked again.
        const input = document.createElement("code");
        input.className = "rule-input";
        input.textContent = rule.tool_input ? `only: ${rule.tool_input}` : "";
        const revoke = document.createElement("button");
        revoke.type = "button";
        revoke.className = "revoke";
        revoke.textContent = "Revoke";
        revoke.onclick = async () => {
          try {
            await request("permission.rule.revoke", { session_id: sessionId, rule_id: rule.rule_id });
            listRules(sessionId);
          } catch (e) {
            showNote("rules-note", e.message);
          }
        };
        li.append(text, count, document.createElement("br"), input, revoke);
        return li;
      }),
    );
  } catch (e) {
    showNote("rules-note", "could not list the standing answers: " + e.message);
  }
}

$("rules-open").addEventListener("click", () => {
  const session = selectedSession();
  if (!session) return;
  approvals.rulesOf = session.session_id;
  $("rules-title").textContent = `Standing answers · ${session.task_title}`;
  showNote("rules-note", "");
  $("rules-list").replaceChildren();
  $("rules").showModal();
  listRules(approvals.rulesOf);
});
$("rules-close").addEventListener("click", () => $("rules").close());
$("rules").addEventListener("close", () => (approvals.rulesOf = null));

// The agent's modes and options (session.options): one select per group, a checkbox for a
// boolean option; a change switches the running agent, or is kept for its next start.
let optionsOf = null;

function renderOptions(sessionId, result) {
  if (optionsOf !== sessionId) return;
  const { options, applied } = result;
  $("options-state").textContent = applied
    ? "The agent runs: a change switches it now, and is set again after every resume."
    : "No agent runs: a change is kept and set when the agent starts.";
  const rows = [];
  const row = (label, control) => {
    const wrap = document.createElement("label");
    wrap.className = "option-row";
    const name = document.createElement("span");
    name.textContent = label;
    wrap.append(name, control);
    rows.push(wrap);
  };
  const choose = async (action, payload) => {
    try {
      renderOptions(sessionId, await request(action, { session_id: sessionId, ...payload }));
      showNote("options-note", "");
    } catch (e) {
      showNote("options-note", e.message);
      listOptions(sessionId);
    }
  };
  if (options.modes.length) {
    const select = document.createElement("select");
    select.dataset.option = "mode";
    for (const mode of options.modes) {
      const el = document.createElement("option");
      el.value = mode.id;
      el.textContent = mode.name;
      el.selected = mode.id === options.current_mode;
      select.append(el);
    }
    select.onchange = () => choose("session.set_mode", { mode_id: select.value });
    row("Mode", select);
  }
  for (const option of options.config_options) {
    if (typeof option.current === "boolean") {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.dataset.option = option.id;
      box.checked = option.current;
      box.onchange = () => choose("session.set_option", { option_id: option.id, value: box.checked });
      row(option.name, box);
      continue;
    }
    const select = document.createElement("select");
    select.dataset.option = option.id;
    for (const choice of option.choices || []) {
      const el = document.createElement("option");
      el.value = choice.value;
      el.textContent = choice.group ? `${choice.name} (${choice.group})` : choice.name;
      el.selected = choice.value === option.current;
      select.append(el);
    }
    select.onchange = () => choose("session.set_option", { option_id: option.id, value: select.value });
    row(option.name, select);
  }
  if (!rows.length) {
    const empty = document.createElement("p");
    empty.className = "empty";
    empty.textContent = "The agent offers no modes or options (or has not started yet: they are known once it has).";
    rows.push(empty);
  }
  $("options-list").replaceChildren(...rows);
}

async function listOptions(sessionId) {
  try {
    renderOptions(sessionId, await request("session.options", { session_id: sessionId }));
  } catch (e) {
    showNote("options-note", "could not read the modes and options: " + e.message);
  }
}

$("options-open").addEventListener("click", () => {
  const session = selectedSession();
  if (!session) return;
  optionsOf = session.session_id;
  $("options-title").textContent = `Modes and options · ${session.task_title}`;
  showNote("options-note", "");
  $("options-list").replaceChildren();
  $("options").showModal();
  listOptions(optionsOf);
});
$("options-close").addEventListener("click", () => $("options").close());
$("options").addEventListener("close", () => (optionsOf = null));


// A task's changes (task.changes, task.diff): the files, committed then uncommitted, and the
// diff of the one chosen, unified or side by side; the uncommitted files checked go into the
// next commit. Read again when a tool call or turn of the task ends.
const changes = { taskId: null, result: null, chosen: null, leftOut: new Set(), diff: null };

function changeKey(file) {
  return `${file.part}:${file.path}`;
}

function renderChanges() {
  const result = changes.result;
  if (!result) return;
  const commits = result.commits === 1 ? "1 commit" : `${result.commits} commits`;
  const base = result.base.branch ? ` from ${result.base.branch}` : "";
  $("changes-summary").textContent =
    `${result.total} files +${result.added} -${result.removed} · ${commits} · ${result.branch || "detached HEAD"}${base}`;
  // A task working in its repository itself has no branch of its own to merge or push.
  $("changes-merge").hidden = $("changes-pr").hidden = !result.base.branch;
  const rows = [];
  let part = null;
  for (const file of result.files) {
    if (file.part !== part) {
      part = file.part;
      const head = document.createElement("li");
      head.className = "part";
      head.textContent = part;
      rows.push(head);
    }
    const li = document.createElement("li");
    li.dataset.path = file.path;
    li.dataset.part = file.part;
    if (changes.chosen === changeKey(file)) li.className = "selected";
    if (file.part === "uncommitted") {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = !changes.leftOut.has(file.path);
      box.title = "In the next commit";
      box.onchange = () => (box.checked ? changes.leftOut.delete(file.path) : changes.leftOut.add(file.path));
      li.append(box);
    }
    const status = document.createElement("span");
    status.className = "status";
    status.textContent = { added: "A", modified: "M", deleted: "D", renamed: "R", type_changed: "T", untracked: "?", conflicted: "U" }[file.status] || "M";
    const name = document.createElement("button");
    name.type = "button";
    name.className = "file";
    name.textContent = file.old_path ? `${file.old_path} → ${file.path}` : file.path;
    name.onclick = () => chooseChange(file);
    const counts = document.createElement("span");
    counts.className = "counts";
    counts.textContent = file.binary ? "binary" : `+${file.added} -${file.removed}`;
    li.append(status, name, counts);
    rows.push(li);
  }
  if (!result.files.length) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = "No changes: the agent changed nothing yet.";
    rows.push(empty);
  }
  $("changes-files").replaceChildren(...rows);
  renderDiff();
}

// One row of a diff, coloured by its first character.
function diffLine(text) {
  const span = document.createElement("span");
  span.textContent = text || " ";
  if (text.startsWith("@@")) span.className = "hunk";
  else if (text.startsWith("+") && !text.startsWith("+++")) span.className = "add";
  else if (text.startsWith("-") && !text.startsWith("---")) span.className = "del";
  return span;
}

// Side by side: each hunk's removed rows beside its added ones, context on both sides.
function splitRows(lines) {
  const left = [], right = [];
  let dels = [], adds = [];
  const flush = () => {
    const n = Math.max(dels.length, adds.length);
    for (let i = 0; i < n; i++) {
      left.push(dels[i] ?? "");
      right.push(adds[i] ?? "");
    }
    dels = [];
    adds = [];
  };
  for (const line of lines) {
    if (line.startsWith("---") || line.startsWith("+++")) continue;
    if (line.startsWith("-")) dels.push(line);
    else if (line.startsWith("+")) adds.push(line);
    else {
      flush();
      left.push(line);
      right.push(line);
    }
  }
  flush();
  return [left, right];
}

function renderDiff() {
  const pre = $("changes-diff");
  const diff = changes.diff;
  if (!diff) {
    pre.replaceChildren();
    $("changes-path").textContent = changes.chosen ? "Reading the diff…" : "";
    return;
  }
  $("changes-path").textContent = `${diff.path} (${diff.part})`;
  if (diff.binary) {
    pre.textContent = "A binary file: its diff is not shown.";
    return;
  }
  const lines = diff.diff.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  if ($("changes-split").checked) {
    const [left, right] = splitRows(lines);
    const grid = document.createElement("div");
    grid.className = "split";
    for (let i = 0; i < left.length; i++) grid.append(diffLine(left[i]), diffLine(right[i]));
    pre.replaceChildren(grid);
  } else {
    pre.replaceChildren(...lines.map(diffLine));
  }
  if (diff.truncated) pre.append(diffLine("… the diff is longer than 2 MiB and is cut here"));
}

async function chooseChange(file) {
  changes.chosen = changeKey(file);
  changes.diff = null;
  renderChanges();
  try {
    const diff = await request("task.diff", { task_id: changes.taskId, path: file.path, part: file.part });
    if (changes.chosen === changeKey(file)) {
      changes.diff = diff;
      renderDiff();
    }
  } catch (e) {
    showNote("changes-note", "could not read the diff: " + e.message);
  }
}

async function listChanges() {
  const taskId = changes.taskId;
  try {
    const result = await request("task.changes", { task_id: taskId, limit: 2000 });
    if (changes.taskId !== taskId) return;
    changes.result = result;
    showNote("changes-note", "");
    const still = result.files.find((f) => changeKey(f) === changes.chosen) || result.files[0];
    renderChanges();
    if (still) chooseChange(still);
  } catch (e) {
    showNote("changes-note", "could not read the changes: " + e.message);
  }
}

// Runs a commit, merge or pull request; a refusal because the agent is in a turn asks whether to
// go ahead anyway.
async function changeAction(action, payload, done) {
  try {
    const result = await request(action, { task_id: changes.taskId, ...payload });
    showNote("changes-note", done(result));
    $("changes-note").classList.remove("error");
    listChanges();
  } catch (e) {
    $("changes-note").classList.add("error");
    if (e.details && e.details.working_sessions && !payload.force) {
      if (await ask(e.serverMessage || e.message, [], "Go ahead anyway")) return changeAction(action, { ...payload, force: true }, done);
      return;
    }
    showNote("changes-note", e.message);
  }
}

$("changes-open").addEventListener("click", async () => {
  const session = selectedSession();
  if (!session) return;
  Object.assign(changes, { taskId: session.task_id, result: null, chosen: null, leftOut: new Set(), diff: null });
  $("changes-title").textContent = `Changes · ${session.task_title}`;
  $("changes-summary").textContent = "Reading the changes…";
  $("changes-files").replaceChildren();
  renderDiff();
  showNote("changes-note", "");
  $("changes-shell").textContent = "";
  $("changes").showModal();
  listChanges();
  try {
    $("changes-shell").textContent = (await request("task.shell", { task_id: session.task_id })).command;
  } catch (e) {
    $("changes-shell").textContent = e.message;
  }
});
$("changes-split").addEventListener("change", renderDiff);
$("changes-refresh").addEventListener("click", listChanges);
$("changes-shell-copy").addEventListener("click", () => navigator.clipboard?.writeText($("changes-shell").textContent));
$("changes-commit").addEventListener("click", async () => {
  const session = selectedSession();
  const files = (changes.result?.files || []).filter((f) => f.part === "uncommitted");
  const kept = files.filter((f) => !changes.leftOut.has(f.path)).map((f) => f.path);
  if (!kept.length) return showNote("changes-note", files.length ? "no file is checked" : "nothing to commit");
  const answer = await ask(`Commit ${kept.length} file(s)`, [{ name: "message", label: "Message", kind: "textarea", value: session ? session.task_title : "", required: true }], "Commit");
  if (!answer) return;
  const paths = kept.length === files.length ? undefined : kept;
  changeAction("task.commit", { message: answer.message, paths }, (r) => `Committed ${r.commit.slice(0, 12)} (${r.files} files).`);
});
$("changes-merge").addEventListener("click", async () => {
  const answer = await ask(
    `Merge the task's branch into ${changes.result?.base.branch || "its base branch"}?`,
    [{ name: "remove", label: "Afterwards", kind: "select", options: [{ value: "keep", label: "keep the worktree" }, { value: "remove", label: "remove the worktree and branch, archive the task" }] }],
    "Merge",
  );
  if (!answer) return;
  changeAction("task.merge", { remove_worktree: answer.remove === "remove" }, (r) =>
    `Merged into ${r.into} (${r.fast_forward ? "fast-forward" : "merge commit"}, ${r.commits} commit${r.commits === 1 ? "" : "s"})${r.worktree_removed ? "; worktree removed" : ""}.`);
});
$("changes-pr").addEventListener("click", async () => {
  if (!(await ask("Push the branch to origin and open a pull request (gh)?", [], "Open"))) return;
  changeAction("task.pull_request", {}, (r) => `Pull request opened: ${r.url}`);
});
$("changes-close").addEventListener("click", () => $("changes").close());
$("changes").addEventListener("close", () => (changes.taskId = null));

// The changes follow the agent: read again when one of its tool calls or turns ends.
function changesFollow(record) {
  if (!changes.taskId || !$("changes").open) return;
  const session = sessionById(record.session_id);
  if (!session || session.task_id !== changes.taskId) return;
  const event = record.event;
  const ended = event.kind === "turn_completed" || (event.kind === "tool_call_update" && (event.status === "completed" || event.status === "failed"));
  if (ended) listChanges();
}
