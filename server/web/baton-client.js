// Baton protocol client: a small ES module for browsers and Node (docs/PROTOCOL.md §9).
//
//   import { BatonClient } from "./baton-client.js";
//   const client = new BatonClient("ws://127.0.0.1:7777/ws", { token });
//   client.on("event", (record) => console.log(record.seq, record.event.kind));
//   await client.opened();
//   await client.subscribe(sessionId, 0);
//   await client.request("message.add", { session_id: sessionId, content: "hello" });
//
// What it does for you: requests matched to their answers by id (with a timeout), reconnection
// with a growing delay, the last applied seq of every subscribed session, and resubscription
// with since_seq after a reconnect, so each session's events arrive once, in order, with no gap.
// It needs a WebSocket implementation: browsers and Node 22+ have one (Node 20 and 21 with
// --experimental-websocket); otherwise pass one as `options.WebSocket` (e.g. the `ws` package).
//
// Over wss:// a browser checks the server's certificate itself. In Node, `options.fingerprint`
// (what batond prints: `TLS certificate SHA-256 fingerprint: AB:CD:…`) pins it instead, for a
// self-signed certificate: pass the `undici` package too (`import * as undici from "undici"`,
// the library behind Node's own WebSocket), whose connector lets the client check the
// certificate before anything, the token included, is sent.
//
// Types: baton-client.d.ts, with the protocol's types in protocol.d.ts (generated from the
// JSON Schema by `batond schema --typescript`).

/** The protocol version this client speaks (PROTOCOL_VERSION in the Rust crate). */
export const PROTOCOL_VERSION = 1;

const DEFAULTS = {
  requestTimeoutMs: 120000,
  connectTimeoutMs: 10000,
  reconnectFirstMs: 500,
  reconnectMaxMs: 5000,
  reconnect: true,
  // A connection that brought no frame for this long is asked for a `ping`; one that does not
  // answer within pingTimeoutMs is taken for dead and replaced. Browsers cannot see the
  // server's WebSocket pings, so this is how a page tells a dead connection from a quiet one.
  pingIntervalMs: 20000,
  pingTimeoutMs: 10000,
};

/**
 * The event kinds this client knows (the protocol's `SessionEvent` kinds). A newer server may
 * send others: `isKnownEvent` tells them apart. The suite checks this list against the schema.
 */
export const SESSION_EVENT_KINDS = Object.freeze([
  "user_message",
  "message_chunk",
  "thought_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
  "status",
  "error",
  "turn_started",
  "turn_completed",
  "permission_request",
  "permission_resolved",
  "available_commands",
  "mode",
  "options",
  "queue",
  "terminal_output",
  "agent_update",
]);

/** The notification names this client knows (the schema's `x-notifications`). */
export const NOTIFICATION_ACTIONS = Object.freeze([
  "server.hello",
  "session.state_changed",
  "session.event",
  "task.updated",
  "task.deleted",
  "server.shutdown",
  "attention.changed",
  "permission.queue_changed",
  "storage.changed",
]);

/** The event (a record's `event`) is of a kind this client knows. */
export function isKnownEvent(event) {
  return SESSION_EVENT_KINDS.includes(event.kind);
}

/** The notification frame is one this client knows. */
export function isKnownNotification(frame) {
  return NOTIFICATION_ACTIONS.includes(frame.action);
}

/**
 * An error frame's payload, as a rejected request's error: `code` (a newer server may send
 * codes this client does not know), `serverMessage`, `retryable`, `retryAfterMs` and `details`.
 */
export class BatonError extends Error {
  constructor(payload) {
    super(`${payload.code}: ${payload.message}`);
    this.name = "BatonError";
    this.code = payload.code;
    this.serverMessage = payload.message;
    this.retryable = payload.retryable === true;
    if (typeof payload.retry_after_ms === "number") this.retryAfterMs = payload.retry_after_ms;
    this.details = payload.details;
  }
}

/** A SHA-256 fingerprint as 64 upper-case hex digits: with or without colons or spaces, any
 * case, optionally after `sha256:` (as the Rust client takes it). Throws when it is not one. */
export function normalizeFingerprint(text) {
  const hex = String(text).trim().replace(/^sha256:/i, "").replace(/[:\s]/g, "").toUpperCase();
  if (!/^[0-9A-F]{64}$/.test(hex)) {
    throw new Error(`${JSON.stringify(text)} is not a SHA-256 fingerprint: expected 64 hex digits, e.g. AB:CD:… as batond prints it`);
  }
  return hex;
}

// Node only: an undici dispatcher whose connections are TLS to the server, accepted only when
// the certificate has the pinned fingerprint (checked before the HTTP upgrade is written). A
// refusal is kept in `refusal.message` for the close that follows (each attempt clears it).
async function pinnedDispatcher(undici, fingerprint, refusal) {
  const tls = await import("node:tls");
  const net = await import("node:net");
  const connect = (opts, callback) => {
    const host = opts.hostname;
    const socket = tls.connect({
      host,
      port: Number(opts.port) || 443,
      servername: net.isIP(host) ? undefined : opts.servername || host,
      ALPNProtocols: ["http/1.1"],
      // The pin decides, not the issuer: a self-signed certificate has no authority above it.
      rejectUnauthorized: false,
    });
    let settled = false;
    const settle = (error) => {
      if (settled) return;
      settled = true;
      if (error) {
        socket.destroy();
        callback(error, null);
      } else {
        callback(null, socket);
      }
    };
    socket.once("secureConnect", () => {
      const seen = socket.getPeerX509Certificate()?.fingerprint256 ?? "";
      if (seen && normalizeFingerprint(seen) === fingerprint) {
        settle(null);
      } else {
        refusal.message = `the server's certificate has the fingerprint ${seen || "(none)"}, not the pinned one`;
        settle(new Error(refusal.message));
      }
    });
    socket.once("error", settle);
  };
  return new undici.Agent({ connect });
}

export class BatonClient {
  constructor(url, options = {}) {
    this.url = url;
    this.options = { ...DEFAULTS, ...options };
    this.pin = null; // {fingerprint, undici, dispatcher, refusal}, with options.fingerprint
    if (options.fingerprint !== undefined && options.fingerprint !== null) {
      if (!url.startsWith("wss://")) throw new Error("a fingerprint pins a wss:// server's certificate; this URL is not wss://");
      if (typeof process === "undefined" || !process.versions || !process.versions.node) {
        throw new Error(
          "a browser checks the server's certificate itself and cannot pin it: open the page once and accept the certificate, or trust the CA that issued it",
        );
      }
      if (!options.undici || typeof options.undici.Agent !== "function") {
        throw new Error('pinning a fingerprint in Node needs the undici package: import * as undici from "undici" and pass { undici }');
      }
      this.pin = { fingerprint: normalizeFingerprint(options.fingerprint), undici: options.undici, dispatcher: null, refusal: { message: null } };
    }
    this.WebSocket = this.pin ? this.pin.undici.WebSocket : options.WebSocket || globalThis.WebSocket;
    if (typeof this.WebSocket !== "function") {
      throw new Error(
        "no WebSocket implementation: use Node 22+ (or node --experimental-websocket) or pass options.WebSocket",
      );
    }
    this.ws = null;
    this.hello = null; // the current connection's server.hello payload, null when not connected
    this.nextId = 1;
    this.pending = new Map(); // request id -> {resolve, reject, timer}
    this.cursors = new Map(); // session id -> last applied seq (null until known)
    this.handlers = new Map(); // name -> Set of functions
    this.retryMs = this.options.reconnectFirstMs;
    this.retryTimer = null;
    this.connectTimer = null;
    this.pingTimer = null;
    this.lastFrameAt = 0;
    this.closed = false;
    this.openWaiters = new Set(); // subscribe() calls waiting for the connection
    this.connect();
  }

  // --- Listeners ------------------------------------------------------------------------------

  /**
   * Registers `fn` for `name`; returns a function that removes it. Names: "open" (server.hello,
   * after each connect and reconnect), "close" ({code, reason, opened}), "connecting", "event"
   * (a session.event record, once per seq), "state_changed", "task_updated", "notification"
   * (every notification frame, unknown ones included), "error" (an error frame no request
   * waits for, or a failed resubscription).
   */
  on(name, fn) {
    if (!this.handlers.has(name)) this.handlers.set(name, new Set());
    this.handlers.get(name).add(fn);
    return () => this.handlers.get(name).delete(fn);
  }

  emit(name, value) {
    for (const fn of this.handlers.get(name) || []) {
      try {
        fn(value);
      } catch (e) {
        // A listener's bug must not break the connection.
        console.error(`baton-client: a "${name}" listener threw`, e);
      }
    }
  }

  /** True while a connection is open and its server.hello has arrived. */
  get connected() {
    return this.hello !== null;
  }

  /** Resolves with the server.hello payload once connected (now, if already). */
  opened() {
    if (this.hello) return Promise.resolve(this.hello);
    return new Promise((resolve) => {
      const off = this.on("open", (hello) => {
        off();
        resolve(hello);
      });
    });
  }

  // Resolves once connected; rejects when the client is closed or `ms` pass first.
  openedWithin(ms) {
    if (this.closed) return Promise.reject(new Error("the client is closed"));
    return new Promise((resolve, reject) => {
      const waiter = {
        settle: (error, hello) => {
          clearTimeout(waiter.timer);
          offOpen();
          this.openWaiters.delete(waiter);
          if (error) reject(error);
          else resolve(hello);
        },
      };
      waiter.timer = setTimeout(() => waiter.settle(new Error(`not connected within ${ms} ms`)), ms);
      const offOpen = this.on("open", (hello) => waiter.settle(null, hello));
      this.openWaiters.add(waiter);
    });
  }

  // --- Connection -----------------------------------------------------------------------------

  socketUrl() {
    // The protocol this client speaks, for the server's log (server.hello says the server's).
    let url = `${this.url}${this.url.includes("?") ? "&" : "?"}protocol_version=${PROTOCOL_VERSION}&client=baton-client.js`;
    const token = this.options.token;
    // Browsers cannot set headers on a WebSocket: the token goes in the query.
    if (token) url += `&token=${encodeURIComponent(token)}`;
    return url;
  }

  connect() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.closed) return;
    if (this.pin && !this.pin.dispatcher) {
      pinnedDispatcher(this.pin.undici, this.pin.fingerprint, this.pin.refusal).then(
        (dispatcher) => {
          this.pin.dispatcher = dispatcher;
          this.connect();
        },
        (e) => {
          this.emit("close", { code: 1006, reason: `cannot pin the certificate: ${e.message}`, opened: false });
          this.scheduleReconnect();
        },
      );
      return;
    }
    this.emit("connecting");
    // What a refused certificate said belongs to that attempt only.
    if (this.pin) this.pin.refusal.message = null;
    let ws;
    try {
      ws = this.pin
        ? new this.WebSocket(this.socketUrl(), { dispatcher: this.pin.dispatcher })
        : new this.WebSocket(this.socketUrl());
    } catch (e) {
      this.emit("close", { code: 1006, reason: e.message, opened: false });
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    let opened = false;
    // Also what keeps a Node process running while it connects.
    this.connectTimer = setTimeout(() => {
      if (this.ws === ws && !this.hello) this.drop(ws, { code: 1006, reason: "no server.hello in time", opened });
    }, this.options.connectTimeoutMs);
    ws.onopen = () => {
      opened = true;
    };
    ws.onmessage = (message) => {
      if (this.ws !== ws) return;
      this.lastFrameAt = Date.now();
      this.onFrame(message.data);
    };
    ws.onerror = () => {}; // a close follows; errors carry no reason in browsers
    ws.onclose = (event) => {
      // A certificate refused by the pin closes the socket with no reason of its own: say why.
      const refused = this.pin && !opened ? this.pin.refusal.message : null;
      this.drop(ws, { code: event.code, reason: refused || event.reason, opened });
    };
  }

  // The end of connection `ws` (closed, or given up on): requests fail, a reconnect follows.
  drop(ws, info) {
    if (this.ws !== ws) return;
    this.ws = null;
    this.hello = null;
    clearTimeout(this.connectTimer);
    clearInterval(this.pingTimer);
    if (ws.readyState !== 3 /* CLOSED */) {
      try {
        ws.close();
      } catch {
        // already closing
      }
    }
    for (const pending of this.pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error("the connection closed"));
    }
    this.pending.clear();
    this.emit("close", info);
    this.scheduleReconnect();
  }

  // Every pingIntervalMs: a quiet connection is asked for a ping; no answer, no connection.
  heartbeat() {
    const ws = this.ws;
    if (!ws || !this.hello || Date.now() - this.lastFrameAt < this.options.pingIntervalMs) return;
    this.request("ping", {}, { timeoutMs: this.options.pingTimeoutMs }).catch((e) => {
      // An error frame (a server without `ping`) is still an answer.
      if (!(e instanceof BatonError)) this.drop(ws, { code: 1006, reason: "no answer to ping", opened: true });
    });
  }

  scheduleReconnect() {
    if (this.closed || !this.options.reconnect) return;
    this.retryTimer = setTimeout(() => this.connect(), this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, this.options.reconnectMaxMs);
  }

  /** Reconnects now (e.g. after the token changed), keeping the subscriptions. */
  reconnect(options = {}) {
    Object.assign(this.options, options);
    this.retryMs = this.options.reconnectFirstMs;
    if (this.ws) this.ws.close();
    else this.connect();
  }

  /** Closes the connection for good: no reconnect; waiting requests are rejected. */
  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.connectTimer);
    clearInterval(this.pingTimer);
    for (const waiter of [...this.openWaiters]) waiter.settle(new Error("the client is closed"));
    if (this.ws) this.ws.close(1000);
  }

  onFrame(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === "response" || frame.type === "error") {
      const pending = frame.id !== undefined && this.pending.get(frame.id);
      if (pending) {
        this.pending.delete(frame.id);
        clearTimeout(pending.timer);
        if (frame.type === "response") pending.resolve(frame.payload);
        else pending.reject(new BatonError(frame.payload));
      } else if (frame.type === "error") {
        this.emit("error", new BatonError(frame.payload));
      }
      return;
    }
    if (frame.type !== "notification") return;
    switch (frame.action) {
      case "server.hello":
        this.onHello(frame.payload);
        break;
      case "session.event":
        this.onEvent(frame.payload);
        break;
      case "session.state_changed":
        this.emit("state_changed", frame.payload);
        break;
      case "task.updated":
        this.emit("task_updated", frame.payload);
        break;
      default:
        break; // newer servers may add notifications: "notification" listeners see them
    }
    this.emit("notification", frame);
  }

  onHello(hello) {
    this.hello = hello;
    this.retryMs = this.options.reconnectFirstMs;
    clearTimeout(this.connectTimer);
    clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => this.heartbeat(), this.options.pingIntervalMs);
    // Every subscription of the previous connection resumes from its last applied seq. The
    // server handles subscribes in order, before any later request of this connection.
    for (const [sessionId, cursor] of this.cursors) {
      const payload = cursor === null ? { session_id: sessionId } : { session_id: sessionId, since_seq: cursor };
      this.request("session.subscribe", payload).catch((e) => this.emit("error", e));
    }
    this.emit("open", hello);
  }

  onEvent(record) {
    const cursor = this.cursors.get(record.session_id);
    if (cursor !== undefined) {
      // A resubscription can repeat events already applied: each seq is delivered once.
      if (cursor !== null && record.seq <= cursor) return;
      this.cursors.set(record.session_id, record.seq);
    }
    this.emit("event", record);
  }

  // --- Requests -------------------------------------------------------------------------------

  /**
   * Sends `action` with `payload`; resolves with the result, rejects with a BatonError (the
   * server's error), or an Error when not connected, on timeout or when the connection closes.
   */
  request(action, payload = {}, { timeoutMs = this.options.requestTimeoutMs } = {}) {
    return new Promise((resolve, reject) => {
      const ws = this.ws;
      if (!ws || ws.readyState !== 1 /* OPEN */ || !this.hello) {
        reject(new Error("not connected"));
        return;
      }
      const id = "js" + this.nextId++;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${action} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      ws.send(JSON.stringify({ id, type: "request", action, payload }));
    });
  }

  /**
   * Subscribes to a session's events from `sinceSeq` on (0 = the whole journal; omitted = from
   * now) and keeps the cursor: events with seq <= the last applied one are never delivered
   * twice, and a reconnect resubscribes from it. The cursor is set before the request is sent,
   * so replayed events that arrive before this promise settles are already counted.
   */
  async subscribe(sessionId, sinceSeq) {
    // Before the connection is open: wait for it, so that the subscription either happens (and
    // this resolves) or does not (and this rejects), never a rejection followed by a
    // subscription made behind the caller's back.
    if (!this.connected) await this.openedWithin(this.options.requestTimeoutMs);
    const known = sinceSeq !== undefined && sinceSeq !== null;
    this.cursors.set(sessionId, known ? sinceSeq : null);
    const payload = known ? { session_id: sessionId, since_seq: sinceSeq } : { session_id: sessionId };
    let result;
    try {
      result = await this.request("session.subscribe", payload);
    } catch (e) {
      // Refused (unknown session, bad since_seq...): not resubscribed after a reconnect either.
      if (e instanceof BatonError) this.cursors.delete(sessionId);
      throw e;
    }
    if (this.cursors.get(sessionId) === null) this.cursors.set(sessionId, result.current_seq);
    return result;
  }

  /** Stops following a session (and forgets its cursor). */
  async unsubscribe(sessionId) {
    this.cursors.delete(sessionId);
    if (!this.connected) return { session_id: sessionId };
    return this.request("session.unsubscribe", { session_id: sessionId });
  }

  /** The last applied seq of a subscribed session (null before the first is known). */
  lastSeq(sessionId) {
    const cursor = this.cursors.get(sessionId);
    return cursor === undefined ? null : cursor;
  }
}
