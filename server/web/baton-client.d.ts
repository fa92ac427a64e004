// Declarations of baton-client.js. The protocol's own types (every params, result,
// notification and event) are generated from its JSON Schema into protocol.d.ts. The imports
// name the file with its `.js` extension, which every TypeScript module resolution accepts
// (`nodenext` and `node16` require it; `bundler` allows it).

import type {
  Action,
  Actions,
  ErrorCode,
  EventRecord,
  Hello,
  NotificationAction,
  NotificationFrame,
  SessionEvent,
  StateChanged,
  SubscribeResult,
  Task,
  UnknownEvent,
  UnknownNotificationFrame,
  UnsubscribeResult,
} from "./protocol.js";

export * from "./protocol.js";

/** The protocol version this client speaks. */
export declare const PROTOCOL_VERSION: 1;

/** The event kinds this client knows (`SessionEvent`'s kinds). */
export declare const SESSION_EVENT_KINDS: readonly SessionEvent["kind"][];
/** The notification names this client knows. */
export declare const NOTIFICATION_ACTIONS: readonly NotificationAction[];
/** The event is of a kind this client knows (a newer server may send others). */
/** A SHA-256 fingerprint as 64 upper-case hex digits (colons, spaces, case and a `sha256:`
 * prefix dropped); throws when the text is not one. */
export declare function normalizeFingerprint(text: string): string;

export declare function isKnownEvent(event: SessionEvent | UnknownEvent): event is SessionEvent;
/** The frame is a notification this client knows (a newer server may send others). */
export declare function isKnownNotification(
  frame: NotificationFrame | UnknownNotificationFrame,
): frame is NotificationFrame;

/** A server's error frame, as the rejection of a request. */
export declare class BatonError extends Error {
  /** One of the protocol's error codes (`NOT_FOUND`, `CONFLICT`...); a newer server may send
   * others: treat an unknown one by `retryable`. */
  code: ErrorCode;
  /** What went wrong, for people (as the server wrote it). */
  serverMessage: string;
  /** Whether the same request can succeed later (after `retryAfterMs` when given). */
  retryable: boolean;
  /** How long to wait before retrying, in ms, when the server knows. */
  retryAfterMs?: number;
  /** Extra detail (`UNKNOWN_ACTION` lists the actions). */
  details?: unknown;
}

export interface BatonClientOptions {
  /** Sent as `?token=` (browsers cannot set headers on a WebSocket). */
  token?: string;
  /** A WebSocket constructor; default `globalThis.WebSocket`. */
  WebSocket?: unknown;
  /** Node only, with `undici`: the SHA-256 fingerprint the wss:// server's certificate must
   * have (as batond prints it; colons, case and a `sha256:` prefix do not matter). The
   * certificate is checked before anything is sent; any other is refused (the close's reason
   * says which it was). Browsers check certificates themselves and refuse this option. */
  fingerprint?: string;
  /** The `undici` package (`import * as undici from "undici"`), needed with `fingerprint`. */
  undici?: { Agent: unknown; WebSocket: unknown };
  /** Bound for each request, in ms; default 120000. */
  requestTimeoutMs?: number;
  /** Bound on opening a connection (until server.hello), in ms; default 10000. */
  connectTimeoutMs?: number;
  /** After this long without a frame the client sends a `ping`; default 20000 ms. */
  pingIntervalMs?: number;
  /** A `ping` unanswered this long drops the connection (and reconnects); default 10000 ms. */
  pingTimeoutMs?: number;
  /** First reconnect delay, doubled after each failed attempt; default 500 ms. */
  reconnectFirstMs?: number;
  /** Longest reconnect delay; default 5000 ms. */
  reconnectMaxMs?: number;
  /** Reconnect after the connection closes; default true. */
  reconnect?: boolean;
}

/** Why a connection closed. */
export interface CloseInfo {
  /** The WebSocket close code: 1001 when the server is shutting down (a restart), 1006 when
   * there was no close frame (network, kill -9, or a connection given up on). */
  code: number;
  reason: string;
  /** false: the handshake failed (refused origin or token, or no server). */
  opened: boolean;
}

export interface BatonClientEvents {
  /** Connected: the server's hello, after each connect and reconnect. */
  open: Hello;
  close: CloseInfo;
  connecting: undefined;
  /** A session event, once per seq and in order for every subscribed session. */
  event: EventRecord;
  state_changed: StateChanged;
  task_updated: Task;
  /** Every notification frame, unknown ones included. */
  notification: NotificationFrame | UnknownNotificationFrame;
  /** An error frame no request waits for, or a failed resubscription. */
  error: Error;
}

export declare class BatonClient {
  constructor(url: string, options?: BatonClientOptions);
  readonly url: string;
  /** The current connection's hello; null while disconnected. */
  readonly hello: Hello | null;
  /** True while connected (the hello has arrived). */
  readonly connected: boolean;
  /** Registers a listener; returns a function that removes it. */
  on<K extends keyof BatonClientEvents>(name: K, fn: (value: BatonClientEvents[K]) => void): () => void;
  /** Resolves with the hello once connected. */
  opened(): Promise<Hello>;
  /** Sends a request and resolves with its result; rejects with BatonError or Error. */
  request<A extends Action>(
    action: A,
    payload?: Actions[A]["params"],
    options?: { timeoutMs?: number },
  ): Promise<Actions[A]["result"]>;
  /**
   * Subscribes from `sinceSeq` (0 = the whole journal; omitted = from now) and keeps the
   * cursor across reconnects; each seq is delivered once. Called before the connection is
   * open, it waits for it (at most `requestTimeoutMs`); it rejects without subscribing when
   * the client is closed or the connection does not open in time.
   */
  subscribe(sessionId: string, sinceSeq?: number | null): Promise<SubscribeResult>;
  /** Stops following a session and forgets its cursor. */
  unsubscribe(sessionId: string): Promise<UnsubscribeResult>;
  /** The last applied seq of a subscribed session, null when unknown. */
  lastSeq(sessionId: string): number | null;
  /** Reconnects now with changed options (e.g. a new token), keeping subscriptions. */
  reconnect(options?: BatonClientOptions): void;
  /** Closes for good: no reconnect. */
  close(): void;
}
