// Baton wire protocol: TypeScript declarations generated from its JSON Schema.
// Do not edit: regenerate with `cargo run -p baton-server -- schema --typescript > server/web/protocol.d.ts`.

/** The protocol version these declarations describe. */
export type ProtocolVersion = 1;

/** An agent the server can run, as `agent.list` shows it. */
export interface AgentInfo {
  /** A human-readable name. */
  display_name: string;
  /**
   * On a resume without native reload, the server replays the journal's history to the
   * agent as context.
   */
  history_context_injection: boolean;
  /** The agent's command was found (on PATH, or as an absolute path). */
  installed: boolean;
  /** The MCP servers agents.toml gives it, without their secrets. */
  mcp_servers?: McpServerInfo[];
  /** The name tasks use to pick the agent (`task.create`'s `agent`). */
  name: string;
  /** The agent can reload its own session on resume (ACP `session/load`). */
  native_session_resume: boolean;
}

/** `agent.list`: no parameters. */
export type AgentListParams = Record<string, unknown>;

/** The answer to `agent.list`. */
export interface AgentListResult {
  /** The configured agents, sorted by name. */
  agents: AgentInfo[];
}

/** Which tasks a list shows, by their `archived` flag. */
export type ArchivedFilter = "exclude" | "include" | "only";

/**
 * Why a session needs the user now (the `attention` of a session row and of
 * `session.state_changed`); absent when it needs nothing.
 */
export type Attention = "permission" | "input" | "resume" | "failed";

/**
 * `attention.changed`: sent to every client when the number of sessions that need the user
 * changed.
 */
export interface AttentionChanged {
  /** Sessions of tasks that are not archived whose `attention` is set. */
  count: number;
}

/** The commit a task's work is compared with. */
export interface ChangeBase {
  /**
   * The branch it was on when the task was created (what `task.merge` merges into); absent
   * when the repository's HEAD was detached or the task has no worktree.
   */
  branch?: string;
  /** The commit (full hash). */
  commit: string;
}

/** Which part of a task's work a change belongs to. */
export type ChangePart = "committed" | "uncommitted";

/** One changed file of one part. */
export interface ChangedFile {
  /** Lines added (0 for a binary file). */
  added: number;
  /** True for a binary file: its diff is summarised, not sent. */
  binary?: boolean;
  /** Where it was before a rename. */
  old_path?: string;
  /** Which part it is in (a file changed in both appears once in each). */
  part: ChangePart;
  /** Its path, relative to the repository's top. */
  path: string;
  /** Lines removed (0 for a binary file). */
  removed: number;
  /** How it changed. */
  status: FileStatus;
}

/**
 * What the user chose for a session. Set again on the agent whenever the session's agent
 * starts (a resume, a restart), so the choice outlives the agent process.
 */
export interface ChosenOptions {
  /** Values chosen with `session.set_option`, by option id. */
  config?: Record<string, OptionValue>;
  /** The mode chosen with `session.set_mode`. */
  mode?: string;
}

/** One configuration option an agent offers (ACP `configOptions`). */
export interface ConfigOption {
  /**
   * A hint of what it is about, as the agent sends it: `mode`, `model`, `model_config`,
   * `thought_level` or another word. Only for display.
   */
  category?: string;
  /** The values a select option can take; empty for a boolean option. */
  choices?: OptionChoice[];
  /** Its current value: a value id of `choices` for a select option, a boolean otherwise. */
  current: OptionValue;
  /** What it sets. */
  description?: string;
  /** The agent's id of the option (what `session.set_option` takes). */
  id: string;
  /**
   * True when the agent offered it through the older `models` answer (no `configOptions`):
   * Baton then switches it with the agent's `session/set_model`.
   */
  legacy_model?: boolean;
  /** Its name, for display. */
  name: string;
}

/** An amount of money (or of another unit an agent bills in). */
export interface Cost {
  /** The amount. */
  amount: number;
  /** ISO 4217 currency code (`USD`) or another unit (`credits`), as the agent sent it. */
  currency: string;
}

/** An entry of a `message.list` page whose text is only its start. */
export interface CutText {
  /** The entry's `seq`. */
  seq: number;
  /** The size of its whole text, in bytes (UTF-8). */
  total_bytes: number;
}

/** A paired device. */
export interface DeviceInfo {
  /** Its connections open now. */
  connections: number;
  /** `dev-<12 hex>`. */
  device_id: string;
  /** The address it last connected from. */
  last_address?: string;
  /** When it last connected, if it did. */
  last_seen_at?: string;
  /** May only watch and answer (no new tasks or sessions, no configuration). */
  limited: boolean;
  /** Its name. */
  name: string;
  /** When it was paired (RFC 3339). */
  paired_at: string;
}

/** `device.list`: the paired devices that are not revoked. */
export type DeviceListParams = Record<string, unknown>;

/** The answer to `device.list`. */
export interface DeviceListResult {
  /** Oldest first. */
  devices: DeviceInfo[];
}

/** `device.pair`: a one-time pairing code for a new device. */
export interface DevicePairParams {
  /** Seconds the code stays valid (1 to 3600, default 300). */
  expires_in_secs?: number | null;
  /** Give the device the main token's rights; by default it may only watch and answer. */
  full?: boolean;
  /** The device's name, as `device.list` shows it (default `device`). */
  name?: string | null;
}

/** The answer to `device.pair`. */
export interface DevicePairResult {
  /** The one-time code: the page's address with `?login=CODE` pairs the browser that opens it. */
  code: string;
  /** When the code stops working (RFC 3339). */
  expires_at: string;
  /** Whether the device may only watch and answer. */
  limited: boolean;
  /** The name the device gets. */
  name: string;
}

/** `device.revoke`: the device's token stops working and its open connections are closed. */
export interface DeviceRevokeParams {
  /** The device. */
  device_id: string;
}

/** The answer to `device.revoke`. */
export interface DeviceRevokeResult {
  /** How many of its connections were closed. */
  closed_connections: number;
  /** The device revoked. */
  device_id: string;
}

/**
 * The one frame shape of the protocol.
 *
 * Requests carry a client-chosen `id`; the response or error echoes `id` and `action`.
 */
export interface Envelope {
  /** The action (`task.create`...) or notification (`session.event`...) name; `""` when absent. */
  action?: string;
  /**
   * The request id chosen by the client, echoed by its response or error; absent on
   * notifications (and on errors for frames whose id could not be read).
   */
  id?: string | null;
  /**
   * The action's params, its result, an error payload or a notification's payload; null
   * when absent.
   */
  payload?: unknown;
  /**
   * When the frame was written (RFC 3339 UTC with milliseconds); set by the server on every
   * frame it sends, optional and ignored in requests.
   */
  timestamp?: string | null;
  /** What the frame is (`type` on the wire). */
  type: MessageType;
}

/**
 * Error codes of the protocol (the `code` of an error payload). A newer server may send a
 * code this version does not know: it is kept as sent (`Other`), with the payload's
 * message; treat it by the payload's `retryable`.
 */
export type ErrorCode = "BAD_REQUEST" | "VALIDATION_ERROR" | "NOT_FOUND" | "CONFLICT" | "UNAUTHORIZED" | "FORBIDDEN" | "UNKNOWN_ACTION" | "UNAVAILABLE" | "INTERNAL_ERROR" | (string & {});

/** Payload of an `error` envelope. */
export interface ErrorPayload {
  /** What kind of error it is. */
  code: ErrorCode;
  /**
   * Machine-readable detail for some errors (e.g. `actions` for `UNKNOWN_ACTION`); absent
   * otherwise.
   */
  details?: unknown;
  /** What went wrong, for people. */
  message: string;
  /**
   * How long to wait before retrying, in milliseconds, when the server knows; absent
   * otherwise.
   */
  retry_after_ms?: number;
  /**
   * Whether the same request can succeed later without the client changing it: true when
   * what stands in the way passes (a turn that is running ends, an agent that is starting
   * gets ready, a server that shuts down comes back); false when the request or the
   * session's state must change first (a finished session, a bad value, a limit reached).
   * Absent (false) from servers older than this field.
   */
  retryable: boolean;
}

/** A journaled event with its sequence number: the payload of `session.event`. */
export interface EventRecord {
  /** When the event was journaled (RFC 3339, UTC). */
  created_at: string;
  /** The event itself. */
  event: SessionEvent | UnknownEvent;
  /** The event's sequence number: per session, from 1, without gaps. */
  seq: number;
  /** The session whose journal holds the event. */
  session_id: string;
}

/** What `session.export` writes. */
export type ExportFormat = "markdown" | "jsonl";

/** How a file changed. */
export type FileStatus = "added" | "modified" | "deleted" | "renamed" | "type_changed" | "untracked" | "conflicted";

/** Where a forked session came from. */
export interface ForkOrigin {
  /**
   * The source's last journal event the fork copied: the fork starts from the conversation
   * up to and including it.
   */
  seq: number;
  /** The source session. */
  session_id: string;
}

/** `server.hello`: the first frame on every connection. */
export interface Hello {
  /**
   * Features the server offers (`resume`, `since_seq`, `permissions`, `worktrees`); empty
   * when absent.
   */
  capabilities: string[];
  /** The server's protocol version (`PROTOCOL_VERSION`). */
  protocol_version: number;
  /** The server's own version. */
  server_version: string;
}

/** One MCP server, as given to the agent (ACP `McpServer`). */
export type McpServerConfig = {
  /** Its arguments. */
  args?: string[];
  /** The command (a path, or a name on the agent's PATH). */
  command: string;
  /** Environment variables set for it (values never shown by the protocol). */
  env?: Record<string, string>;
  /** Its name (what the agent calls its tools by). */
  name: string;
  type: "stdio";
} | {
  /** Headers sent with each request (values never shown by the protocol). */
  headers?: Record<string, string>;
  /** Its name. */
  name: string;
  type: "http";
  /** Its URL (`http://` or `https://`). */
  url: string;
} | {
  /** Headers sent with each request (values never shown by the protocol). */
  headers?: Record<string, string>;
  /** Its name. */
  name: string;
  type: "sse";
  /** Its URL (`http://` or `https://`). */
  url: string;
};

/** What the protocol shows of an MCP server: no secret values. */
export interface McpServerInfo {
  /** The command of a stdio server. */
  command?: string;
  /** Its name. */
  name: string;
  /** The names of the environment variables (stdio) or headers (http, sse) it is given. */
  secret_names?: string[];
  /** `stdio`, `http` or `sse`. */
  transport: string;
  /** The URL of an http or sse server, without credentials or query. */
  url?: string;
}

/**
 * One entry of the folded message view (`message.list`): a whole agent message, one tool call
 * with its latest status, a status line...
 */
export interface Message {
  /** Time of the first event folded into the entry (RFC 3339, UTC). */
  created_at: string;
  /** Kind-specific detail: tool call fields, plan entries, permission options. */
  data?: unknown;
  /** What the entry shows. */
  kind: MessageKind;
  /**
   * The chunks' message id for `agent`/`thought` entries that had one; for `permission`, the
   * request id.
   */
  message_id?: string;
  /** Sequence number of the first event folded into this entry; entries are ordered by it. */
  seq: number;
  /**
   * Latest status of a tool call (`pending`, `in_progress`, `completed`, `failed`) or of a
   * permission request (`pending`, `selected:<option_id>`, `cancelled`); absent for other
   * kinds.
   */
  status?: string;
  /** The entry's text: message text, tool call title, status or error line. */
  text: string;
  /** The tool call's id, for `tool_call` entries only. */
  tool_call_id?: string;
  /** Time of the last event folded into the entry (RFC 3339, UTC). */
  updated_at: string;
}

/**
 * `message.add`: sends a prompt to the session's agent, resuming the session first when no
 * agent runs.
 */
export interface MessageAddParams {
  /** The prompt; must not be empty or whitespace only. */
  content: string;
  /** The session whose agent gets the message. */
  session_id: string;
  /**
   * While a turn runs: cancel it (ACP `session/cancel`) and send this message as soon as the
   * agent has stopped, ahead of the other queued messages. Without it, a message sent while a
   * turn runs waits in the session's queue for the turn to end.
   */
  steer?: boolean;
}

/**
 * The answer to `message.add`: once the turn has started, the stored message and its turn; when
 * a turn was running, the message as queued.
 */
export interface MessageAddResult {
  /**
   * The stored user message: a folded entry of kind `user` with the `seq` of its
   * `user_message` event. Absent when the message was queued (see `queued`).
   */
  message?: Message;
  /**
   * The message as it waits in the session's queue, when a turn was running: it is sent
   * as a turn of its own once the running turn (and the messages queued before it) ended.
   * Its `user_message` event then says so in the journal.
   */
  queued?: QueuedMessage;
  /**
   * The id of the turn the message opened, carried by that turn's `user_message`,
   * `turn_started` and `turn_completed` events (live and replayed). Absent from older servers.
   */
  turn_id?: string;
}

/** What a folded message row shows. */
export type MessageKind = "user" | "agent" | "thought" | "tool_call" | "plan" | "status" | "error" | "permission";

/** `message.list`: a page of the folded message view. */
export interface MessageListParams {
  /** Only entries with `seq > after_seq`; no bound when absent. */
  after_seq?: number | null;
  /** Only entries with `seq < before_seq` (paging back); no bound when absent. */
  before_seq?: number | null;
  /** At most this many messages (1..=1000, default 200). */
  limit?: number | null;
  /** The session whose messages to list. */
  session_id: string;
}

/** The answer to `message.list`. */
export interface MessageListResult {
  /**
   * The entries whose `text` is only its start: a finished entry's text longer than
   * [`MESSAGE_TEXT_CUT`] bytes is cut there (at a character boundary), so that a page stays
   * small whatever one answer's size; `message.text` reads the rest. Absent when none is.
   */
  cut?: CutText[];
  /** More entries match than `limit` allowed. */
  has_more: boolean;
  /** The entries, oldest first. */
  messages: Message[];
}

/**
 * `message.search`: full-text search over the folded message view of every session (or of
 * one), newest entry first, one page per request.
 */
export interface MessageSearchParams {
  /** Where the page starts: the `next_cursor` of the previous page (same query). */
  cursor?: string | null;
  /** Hits per page, 1 to 200; default 50. */
  limit?: number | null;
  /**
   * Words to find, separated by spaces; an entry matches when it has every word (case and
   * accents ignored). A word ending in `*` matches as a prefix. Nothing else is an operator.
   */
  query: string;
  /** Only the entries of this session; every session when absent. */
  session_id?: string | null;
}

/** The answer to `message.search`: one page of hits, newest entry first. */
export interface MessageSearchResult {
  /** The page's hits. */
  hits: SearchHit[];
  /** The cursor of the next page; absent on the last page. */
  next_cursor?: string;
}

/**
 * `message.text`: a part of one entry's text, by byte offsets (for an entry `message.list`
 * cut).
 */
export interface MessageTextParams {
  /**
   * At most this many bytes (1..=1048576, default 262144); the part ends at the last
   * character boundary within it.
   */
  limit?: number | null;
  /**
   * Where the part starts, in bytes of the UTF-8 text; a character boundary (default 0:
   * the start).
   */
  offset?: number | null;
  /** The entry's `seq`. */
  seq: number;
  /** The session of the entry. */
  session_id: string;
}

/** The answer to `message.text`. */
export interface MessageTextResult {
  /** Where the next part starts; absent when this part reaches the end. */
  next_offset?: number;
  /** Where the part starts, in bytes. */
  offset: number;
  /** The entry's `seq`. */
  seq: number;
  /** The part of its text. */
  text: string;
  /** The size of the whole text, in bytes. */
  total_bytes: number;
}

/** What an envelope is: a client request, its response or error, or a server notification. */
export type MessageType = "request" | "response" | "notification" | "error";

/** One mode an agent can work in (ACP `availableModes`). */
export interface ModeInfo {
  /** What it does. */
  description?: string;
  /** The agent's id of the mode (what `session.set_mode` takes). */
  id: string;
  /** Its name, for display. */
  name: string;
}

/** One value a select option can take. */
export interface OptionChoice {
  /** What it means. */
  description?: string;
  /** The name of the group the agent put it in, if it groups its values. */
  group?: string;
  /** Its name, for display. */
  name: string;
  /** The value's id (what `session.set_option` takes). */
  value: string;
}

/** A value of an option: a select option's value id, or a boolean option's value. */
export type OptionValue = boolean | string;

/** One permission request that waits for an answer. */
export interface PendingPermission {
  /** The choices offered. */
  options: PermissionOption[];
  /** The id to answer with (`permission.respond`). */
  request_id: string;
  /** When the agent asked (RFC 3339 UTC). */
  requested_at: string;
  /** The `seq` of the request's `permission_request` event in the session's journal. */
  seq: number;
  /** The session whose agent asked. */
  session_id: string;
  /** Its task. */
  task_id: string;
  /** The task's title. */
  task_title: string;
  /**
   * The agent's ACP `toolCall` as sent (camelCase: `title`, `kind`, `rawInput`, `content`
   * with its diffs...; may be null).
   */
  tool_call: unknown;
}

/** What happened to a request in the queue. */
export type PermissionChange = "requested" | "answered" | "cancelled";

/**
 * `permission.list`: the permission requests that wait for an answer, across every session,
 * oldest first, one page per request.
 */
export interface PermissionListParams {
  /** Where the page starts: the `next_cursor` of the previous page. */
  cursor?: string | null;
  /** Requests per page, 1 to 200; default 50. */
  limit?: number | null;
}

/** The answer to `permission.list`. */
export interface PermissionListResult {
  /** The cursor of the next page; absent on the last page. */
  next_cursor?: string;
  /** The page's requests, oldest first. */
  requests: PendingPermission[];
  /** Requests waiting in all (every page). */
  total: number;
}

/** One choice of a permission request. */
export interface PermissionOption {
  /** `allow_once`, `allow_always`, `reject_once` or `reject_always`. */
  kind: string;
  /** The label to show. */
  name: string;
  /** The id to send in `permission.respond`. */
  option_id: string;
}

/**
 * `permission.queue_changed`: sent to every client when a permission request joins or
 * leaves the queue, whatever session it belongs to.
 */
export interface PermissionQueueChanged {
  /** What happened to it. */
  change: PermissionChange;
  /** The option chosen (with `answered`). */
  option_id?: string;
  /** The request. */
  request_id: string;
  /** The standing rule that answered it, when no person did. */
  rule_id?: string;
  /** The session whose agent asked. */
  session_id: string;
}

/** `permission.respond`: answers a `permission_request` event. */
export interface PermissionRespondParams {
  /** The chosen option: one of the request's `options`. */
  option_id: string;
  /** The `request_id` of the `permission_request` event. */
  request_id: string;
  /** The session whose agent asked. */
  session_id: string;
}

/** The answer to `permission.respond`; a `permission_resolved` event follows. */
export interface PermissionRespondResult {
  /** The answered request. */
  request_id: string;
}

/**
 * A standing answer of one session: its later permission requests for the same tool (kind
 * and title) are answered with the agent's option of `option_kind`, if the agent offers one.
 */
export interface PermissionRule {
  /** Requests it answered since. */
  applied: number;
  /** When the user chose the option that made it (RFC 3339 UTC). */
  created_at: string;
  /** Allow or reject. */
  decision: RuleDecision;
  /** The option kind it picks (`allow_always` or `reject_always`). */
  option_kind: string;
  /** The rule's id (for `permission.rule.revoke`). */
  rule_id: string;
  /** The session it applies to. */
  session_id: string;
  /**
   * What the tool was to run, as the rule matches it exactly: the tool call's `rawInput` and
   * `locations` paths, as canonical JSON (keys sorted); `""` when the request carried
   * neither. A request whose input differs is asked again. See [`tool_input_of`].
   */
  tool_input: string;
  /** The tool call's `kind` it matches (`edit`, `execute`...; empty when the agent sent none). */
  tool_kind: string;
  /** The tool call's `title` it matches, exactly. */
  tool_title: string;
}

/** `permission.rule.list`: the standing answers of a session. */
export interface PermissionRuleListParams {
  /** The session. */
  session_id: string;
}

/** The answer to `permission.rule.list`. */
export interface PermissionRuleListResult {
  /** The session's rules, oldest first. */
  rules: PermissionRule[];
}

/**
 * `permission.rule.revoke`: removes a standing answer; the next matching request waits for
 * the user again.
 */
export interface PermissionRuleRevokeParams {
  /** The rule. */
  rule_id: string;
  /** The session the rule belongs to. */
  session_id: string;
}

/** The answer to `permission.rule.revoke`. */
export interface PermissionRuleRevokeResult {
  /** The removed rule, as it was. */
  rule: PermissionRule;
}

/**
 * `ping`: asks the server for an answer, to tell a live connection from a dead one (browsers
 * cannot see WebSocket pings).
 */
export type PingParams = Record<string, unknown>;

/** The answer to `ping`. */
export interface PingResult {
  /** The server's clock when it answered (RFC 3339 UTC). */
  time: string;
}

/** One step of an agent's plan. */
export interface PlanEntry {
  /** What the step is. */
  content: string;
  /** The agent's priority (`high`, `medium`, `low`); `""` when absent. */
  priority: PlanEntryPriority;
  /** `pending`, `in_progress` or `completed`; `""` when absent. */
  status: PlanEntryStatus;
}

/**
 * How much a step of an agent's plan matters (ACP `PlanEntryPriority`); `""` when the agent
 * said nothing.
 */
export type PlanEntryPriority = "" | "high" | "medium" | "low" | (string & {});

/**
 * Where a step of an agent's plan stands (ACP `PlanEntryStatus`); `""` when the agent
 * said nothing.
 */
export type PlanEntryStatus = "" | "pending" | "in_progress" | "completed" | (string & {});

/**
 * `push.key`: the server's VAPID public key (RFC 8292), the `applicationServerKey` a page
 * subscribes with.
 */
export type PushKeyParams = Record<string, unknown>;

/** The answer to `push.key`. */
export interface PushKeyResult {
  /** The uncompressed P-256 public key, base64url without padding. */
  public_key: string;
}

/**
 * `push.subscribe`: a Web Push subscription (RFC 8030) of this connection's device (or of the
 * server's own token), sent a push when a session starts needing the user. The same endpoint
 * again replaces the keys.
 */
export interface PushSubscribeParams {
  /** Its authentication secret (`keys.auth`), base64url, 16 bytes. */
  auth: string;
  /**
   * The push service's URL for this subscription (`PushSubscription.endpoint`), https (or
   * http on loopback).
   */
  endpoint: string;
  /** The subscription's P-256 public key (`keys.p256dh`), base64url. */
  p256dh: string;
}

/** The answer to `push.subscribe`. */
export interface PushSubscribeResult {
  /** `push-<12 hex>`. */
  subscription_id: string;
}

/** `push.unsubscribe`: forget a subscription. */
export interface PushUnsubscribeParams {
  /** The endpoint given to `push.subscribe`. */
  endpoint: string;
}

/** The answer to `push.unsubscribe`. */
export interface PushUnsubscribeResult {
  /** Whether a subscription was forgotten. */
  removed: boolean;
}

/** `queue.edit`: replaces the text of a message that is still queued. */
export interface QueueEditParams {
  /** Its new text; must not be empty or whitespace only. */
  content: string;
  /** The queued message's id. */
  id: string;
  /** The session. */
  session_id: string;
}

/** `queue.list`: the session's queue. */
export interface QueueListParams {
  /** The session. */
  session_id: string;
}

/**
 * `queue.release`: a held queue goes on: its next message is sent now when the session waits
 * for input (resuming its agent if needed), and the rest follow one turn at a time.
 */
export interface QueueReleaseParams {
  /** The session. */
  session_id: string;
}

/** `queue.remove`: takes a message out of the queue; it is never sent. */
export interface QueueRemoveParams {
  /** The queued message's id. */
  id: string;
  /** The session. */
  session_id: string;
}

/** The answer to every `queue.*` action: the session's queue after it. */
export interface QueueResult {
  /**
   * Why the queue waits instead of sending its next message when no turn runs: the last
   * turn failed, was cancelled, or was cut short by a crash or a restart, so the agent may
   * not be where the messages expect it. `queue.release` sends the next message anyway; a
   * message sent with `message.add` meanwhile goes straight to the agent.
   */
  held?: string;
  /** The messages, the next one to send first. */
  messages: QueuedMessage[];
  /** The session. */
  session_id: string;
}

/** One message waiting for its turn. */
export interface QueuedMessage {
  /** When it was queued (RFC 3339). */
  created_at: string;
  /**
   * Its id in the queue (what `queue.edit` and `queue.remove` take). Gone once it is sent:
   * the message then appears in the journal as a `user_message` like any other.
   */
  id: string;
  /** Queued with `steer: true`: the running turn was cancelled for it, and it goes first. */
  steer?: boolean;
  /** The prompt. */
  text: string;
  /** When its text last changed (RFC 3339). */
  updated_at: string;
}

/** Why `needs_resume` is what it is (the status cases of docs/RESUME.md, plus the non-active ones). */
export type ResumeReason = "agent_running" | "agent_starting" | "agent_not_running" | "agent_not_running_fresh_start" | "terminal_state" | "not_started" | "agent_reconnecting";

/** What a standing rule answers. */
export type RuleDecision = "allow" | "reject";

/** One entry of the folded view that matches a `message.search` query. */
export interface SearchHit {
  /** When the entry was created (RFC 3339, UTC). */
  created_at: string;
  /** What the entry is. */
  kind: MessageKind;
  /**
   * The entry's `seq`, as `message.list` gives it: list with `before_seq: seq + 1` to show
   * the entry in context.
   */
  seq: number;
  /** The session whose entry matched. */
  session_id: string;
  /**
   * The part of the entry's text around the match (`…` where cut), in pieces whose
   * `matched` says which are matches; joined, the pieces are the snippet's text.
   */
  snippet: SnippetPart[];
  /** Its task. */
  task_id: string;
  /** The task's title. */
  task_title: string;
}

/**
 * `task.session.cancel`: cancels the running turn; the session goes back to
 * `WAITING_FOR_INPUT`.
 */
export interface SessionCancelParams {
  /** The session whose turn to cancel. */
  session_id: string;
}

/** The answer to `task.session.cancel`. */
export interface SessionCancelResult {
  /** The session. */
  session_id: string;
}

/**
 * One entry of a session's journal. Every event gets a per-session sequence number and is
 * durable before it is broadcast (`session.event`). A newer server may add kinds: they decode
 * as `Unknown`, whose seq counts like any other.
 */
export type SessionEvent = {
  kind: "user_message";
  /** The prompt text. */
  text: string;
  /**
   * The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
   * the `turn_id` it answered. Absent on events journaled before turns had ids, and on
   * the close of a turn the server found open after a restart.
   */
  turn_id?: string;
} | {
  kind: "message_chunk";
  /** The agent's message id; absent when the agent gives none. */
  message_id?: string;
  /** The text of this piece (a delta). */
  text: string;
} | {
  kind: "thought_chunk";
  /** The agent's message id; absent when the agent gives none. */
  message_id?: string;
  /** The text of this piece (a delta). */
  text: string;
} | {
  /** The ACP tool-call content array (Baton always sends it, possibly `[]`). */
  content?: unknown;
  kind: "tool_call";
  /** The tool's input as the agent sent it. */
  raw_input?: unknown;
  /**
   * `pending`, `in_progress`, `completed` or `failed` (another value an agent sends is
   * passed on as is).
   */
  status?: ToolCallStatus;
  /** What the tool call does, for display. */
  title: string;
  /** The tool call's id, scoped to the agent process (`<agent's id>@<execution>`). */
  tool_call_id: string;
  /** The ACP tool kind (`read`, `edit`, `execute`, `search`...). */
  tool_kind?: string;
} | {
  /** New ACP tool-call content. */
  content?: unknown;
  kind: "tool_call_update";
  /** The tool's output as the agent sent it. */
  raw_output?: unknown;
  /**
   * A new status (`pending`, `in_progress`, `completed`, `failed`; another value an
   * agent sends is passed on as is).
   */
  status?: ToolCallStatus;
  /** A new title. */
  title?: string;
  /** The id of the tool call this updates. */
  tool_call_id: string;
} | {
  /** The plan's steps, in order. */
  entries: PlanEntry[];
  kind: "plan";
} | {
  kind: "status";
  /** The status line. */
  message: string;
} | {
  kind: "error";
  /** The error message, saying what to do when something can be done. */
  message: string;
} | {
  kind: "turn_started";
  /**
   * The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
   * the `turn_id` it answered. Absent on events journaled before turns had ids, and on
   * the close of a turn the server found open after a restart.
   */
  turn_id?: string;
} | {
  kind: "turn_completed";
  /**
   * Why the turn ended (`end_turn`, `max_tokens`, `max_turn_requests`, `refusal`,
   * `cancelled`, `interrupted`, `error`; unknown ACP reasons are passed on).
   */
  stop_reason: StopReason;
  /**
   * The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
   * the `turn_id` it answered. Absent on events journaled before turns had ids, and on
   * the close of a turn the server found open after a restart.
   */
  turn_id?: string;
} | {
  kind: "permission_request";
  /** The choices offered. */
  options: PermissionOption[];
  /** The id to answer with. */
  request_id: string;
  /** The agent's ACP `toolCall` as sent (camelCase; may be null). */
  tool_call: unknown;
} | {
  kind: "permission_resolved";
  /** The chosen option; absent when the request was abandoned (cancel, stop, agent exit). */
  option_id?: string;
  /** The id of the answered request. */
  request_id: string;
} | {
  /** ACP available commands (`name`, `description`, `input`?), as sent. */
  commands: unknown[];
  kind: "available_commands";
} | {
  kind: "mode";
  /** The ACP id of the new mode. */
  mode_id: string;
} | {
  /** The configuration options offered now, each with its current value. */
  config_options?: ConfigOption[];
  /** The mode the agent works in now. */
  current_mode?: string;
  kind: "options";
  /** The modes offered now. */
  modes?: ModeInfo[];
} | {
  /**
   * Why the queue waits instead of sending its next message when no turn runs: the last
   * turn failed, was cancelled, or was cut short by a crash or a restart, so the agent may
   * not be where the messages expect it. `queue.release` sends the next message anyway; a
   * message sent with `message.add` meanwhile goes straight to the agent.
   */
  held?: string;
  kind: "queue";
  /** The messages, the next one to send first. */
  messages: QueuedMessage[];
} | {
  /** The command line, on the terminal's first event only. */
  command?: string;
  /** How it exited, on its last event. */
  exit?: TerminalExit;
  kind: "terminal_output";
  /**
   * How many bytes (UTF-8) of its output came before this piece: a client that folds
   * the same piece twice (a replay after `message.list`) can tell.
   */
  offset: number;
  /** A piece of its output (may be empty on the first and last events). */
  output?: string;
  /**
   * The terminal's id, as the agent knows it (in its tool calls' `{type:"terminal"}`
   * content).
   */
  terminal_id: string;
} | {
  kind: "agent_update";
  /** The update as the agent sent it. */
  raw: unknown;
  /** The ACP `sessionUpdate` tag. */
  update_kind: string;
};

/**
 * `session.export`: one page of a session's transcript as Markdown or JSON Lines. Ask again
 * with `next_cursor` until it is absent and join the pages' `content` in order.
 */
export interface SessionExportParams {
  /**
   * Where the page starts: the `next_cursor` of the previous page (same format and
   * `thoughts`); absent for the first page.
   */
  cursor?: string | null;
  /** `markdown` (default) or `jsonl`. */
  format?: ExportFormat;
  /** The session to export. */
  session_id: string;
  /** Include the agent's thoughts (`thought` entries, `thought_chunk` events). Default false. */
  thoughts?: boolean;
}

/** The answer to `session.export`: one page. */
export interface SessionExportResult {
  /**
   * This page's part of the export (at most [`MAX_EXPORT_PAGE_BYTES`] bytes); pages end
   * between entries or lines unless one alone is larger than a page.
   */
  content: string;
  /**
   * A file name for the export: the task's title made safe, the session id and the
   * format's extension.
   */
  file_name: string;
  /** The format of `content`. */
  format: ExportFormat;
  /** The cursor of the next page; absent on the last page. */
  next_cursor?: string;
  /** The session. */
  session_id: string;
}

/**
 * `task.session.fork`: a new session of the same task that starts from the source session's
 * conversation so far. The agent copies its own session (ACP `session/fork`) when it
 * advertises that; otherwise a fresh agent session gets the conversation with the first
 * message. A session in the middle of a turn cannot be forked (`CONFLICT`): wait for the turn
 * to end, or cancel it. With `agent`, the conversation is handed to another agent: the new
 * session runs that agent, which gets the conversation with the first message.
 */
export interface SessionForkParams {
  /**
   * Another agent (a name of `agent.list`) for the new session: it gets the conversation
   * so far by history injection, in the same task and working directory. Defaults to the
   * source's agent.
   */
  agent?: string | null;
  /** The session to fork. */
  session_id: string;
}

/** The answer to `task.session.fork`. */
export interface SessionForkResult {
  /**
   * The new session (`STARTING`); its `forked_from` names the source. Readiness arrives as
   * `session.state_changed`.
   */
  session: SessionInfo;
}

/** One row of `task.session.list`: the status fields plus what a list needs to show. */
export interface SessionInfo {
  /** Name of the agent that runs the session. */
  agent: string;
  /** Process id of the attached agent, when one runs. */
  agent_pid?: number;
  /** Why the session needs the user now; absent when it needs nothing. */
  attention?: Attention;
  /**
   * Since when it has needed the user for that reason (RFC 3339 UTC); absent with
   * `attention`.
   */
  attention_since?: string;
  /**
   * The session's place in the server's change sequence when this was read (the
   * `change_seq` that `task.session.list` orders and filters by): a later view of the
   * session has a greater one. Answers and notifications are not ordered with one another on
   * the wire, so a client keeps, of two views of a session, the one with the greater value
   * ([`supersedes`]). 0 from servers before it was added.
   */
  change_seq: number;
  /** When the session was created (RFC 3339, UTC). */
  created_at: string;
  /** The session this one was forked from (`task.session.fork`); absent when it is not a fork. */
  forked_from?: ForkOrigin;
  /** The server holds the agent's native session id, so resume can reload it. */
  has_resume_token: boolean;
  /** An agent process is attached to the session now. */
  is_agent_running: boolean;
  /**
   * `task.session.resume` applies: no agent is attached or starting and the session is not
   * terminal (docs/PROTOCOL.md §3).
   */
  is_resumable: boolean;
  /** The last error the session hit (launch or restore failure...); null when none. */
  last_error: string | null;
  /** Sequence number of the newest event in the session's journal (0 when empty). */
  last_seq: number;
  /** The session is active but has no agent: call `task.session.resume` before prompting. */
  needs_resume: boolean;
  /** Why `needs_resume` is what it is. */
  resume_reason: ResumeReason;
  /** The session's id. */
  session_id: string;
  /** The session's lifecycle state. */
  state: SessionState;
  /** The session's task is archived. */
  task_archived: boolean;
  /** The id of the session's task. */
  task_id: string;
  /** The lifecycle state of the session's task. */
  task_state: TaskState;
  /** The title of the session's task. */
  task_title: string;
  /** When the session last changed (RFC 3339, UTC). */
  updated_at: string;
  /** The directory the session's agent works in; null when unknown. */
  worktree_path: string | null;
}

/** `task.session.list`: one page of sessions, filtered and ordered. */
export interface SessionListParams {
  /**
   * Which sessions by their task's `archived` flag; default `exclude`, or `include` when
   * `task_id` is given.
   */
  archived?: ArchivedFilter | null;
  /**
   * Only sessions changed (created, state, error, task title or flag, agent record) after
   * this value of the server's change sequence: the `change_seq` of an earlier answer.
   */
  changed_since?: number | null;
  /** Where the page starts: the `next_cursor` of the previous page (same filters and order). */
  cursor?: string | null;
  /** Rows per page, 1 to 1000; default 100. */
  limit?: number | null;
  /** Default `created`, or `changed` with `changed_since`. */
  order?: SessionOrder | null;
  /** Only sessions in one of these states. */
  state?: SessionState[] | null;
  /** Only the sessions of this task; all tasks when absent. */
  task_id?: string | null;
}

/** The answer to `task.session.list`: one page. */
export interface SessionListResult {
  /**
   * Sessions of tasks that are not archived that need the user (their `attention` is set),
   * server-wide, whatever the filters; `attention.changed` tells when it changes.
   */
  attention_count: number;
  /**
   * The server's change sequence when the page was read: pass it as `changed_since` to get
   * only the rows changed since.
   */
  change_seq: number;
  /** The cursor of the next page; absent on the last page. */
  next_cursor?: string;
  /** The page's rows, in the requested order. */
  sessions: SessionInfo[];
}

/** What an agent offers to switch, as it last said (kept when the agent is not running). */
export interface SessionOptions {
  /** Its configuration options; empty when it offers none. */
  config_options: ConfigOption[];
  /** The mode it works in now. */
  current_mode?: string;
  /** The modes it can work in; empty when it offers none. */
  modes: ModeInfo[];
}

/** `session.options`: what the session's agent offers to switch and what the user chose. */
export interface SessionOptionsParams {
  /** The session. */
  session_id: string;
}

/** The answer to `session.options`, `session.set_mode` and `session.set_option`. */
export interface SessionOptionsResult {
  /**
   * Whether the agent is running and now works with the choice (false: it is set when the
   * agent next starts).
   */
  applied: boolean;
  /** What the user chose. */
  chosen: ChosenOptions;
  /** What the agent offers, as it last said; empty before its first start. */
  options: SessionOptions;
  /** The session. */
  session_id: string;
}

/** The order of `task.session.list`. */
export type SessionOrder = "created" | "recent" | "attention" | "changed";

/**
 * `task.session.resume`: attaches an agent to a session that has none, restoring its
 * conversation when it can.
 */
export interface SessionResumeParams {
  /** Start over without the resume token (the conversation is not restored). */
  fresh?: boolean;
  /**
   * Launch a `FAILED` session again, once what failed it is fixed (an agent command
   * installed, agents.toml corrected). Without it a `FAILED` session is refused with
   * `CONFLICT`; for a session in any other state it changes nothing.
   */
  retry_failed?: boolean;
  /** The session to resume. */
  session_id: string;
}

/** The answer to `task.session.resume`. */
export interface SessionResumeResult {
  /** False when the session already had an agent (running or starting): nothing was launched. */
  launched: boolean;
  /** The session. */
  session_id: string;
  /**
   * `STARTING` when this request launched the agent; the current state when an agent was
   * already attached or starting. Readiness arrives as `session.state_changed`.
   */
  state: SessionState;
}

/**
 * `session.set_mode`: switches the agent's mode. With the agent running, the agent switches
 * before the answer; otherwise the choice is kept and set when the agent next starts. Either
 * way the choice is set again after every resume.
 */
export interface SessionSetModeParams {
  /** One of the ids of the session's `modes`. */
  mode_id: string;
  /** The session. */
  session_id: string;
}

/**
 * `session.set_option`: sets one of the agent's configuration options (its model, reasoning
 * effort...). Like `session.set_mode`, kept and set again after every resume.
 */
export interface SessionSetOptionParams {
  /** The id of one of the session's `config_options`. */
  option_id: string;
  /** The session. */
  session_id: string;
  /** A value id of that option's `choices`, or a boolean for a boolean option. */
  value: OptionValue;
}

/** `task.session.start`: a new session of an existing task. */
export interface SessionStartParams {
  /** Defaults to the task's agent. */
  agent?: string | null;
  /** First prompt; defaults to the task description. */
  prompt?: string | null;
  /** The task the session belongs to. */
  task_id: string;
}

/** The answer to `task.session.start`. */
export interface SessionStartResult {
  /** The new session (`STARTING`). */
  session: SessionInfo;
}

/** Lifecycle of one agent session: the states and their transitions are in docs/PROTOCOL.md §3. */
export type SessionState = "CREATED" | "STARTING" | "RUNNING" | "WAITING_FOR_INPUT" | "COMPLETED" | "FAILED" | "CANCELLED";

/**
 * The resume-relevant status of a session: the payload of `task.session.status` and part of
 * every row of `task.session.list`. Clients never infer `needs_resume`; the server says it.
 */
export interface SessionStatus {
  /** Name of the agent that runs the session. */
  agent: string;
  /** Process id of the attached agent, when one runs. */
  agent_pid?: number;
  /** Why the session needs the user now; absent when it needs nothing. */
  attention?: Attention;
  /**
   * Since when it has needed the user for that reason (RFC 3339 UTC); absent with
   * `attention`.
   */
  attention_since?: string;
  /**
   * The session's place in the server's change sequence when this was read (the
   * `change_seq` that `task.session.list` orders and filters by): a later view of the
   * session has a greater one. Answers and notifications are not ordered with one another on
   * the wire, so a client keeps, of two views of a session, the one with the greater value
   * ([`supersedes`]). 0 from servers before it was added.
   */
  change_seq: number;
  /** The server holds the agent's native session id, so resume can reload it. */
  has_resume_token: boolean;
  /** An agent process is attached to the session now. */
  is_agent_running: boolean;
  /**
   * `task.session.resume` applies: no agent is attached or starting and the session is not
   * terminal (docs/PROTOCOL.md §3).
   */
  is_resumable: boolean;
  /** The last error the session hit (launch or restore failure...); null when none. */
  last_error: string | null;
  /** The session is active but has no agent: call `task.session.resume` before prompting. */
  needs_resume: boolean;
  /** Why `needs_resume` is what it is. */
  resume_reason: ResumeReason;
  /** The session's id. */
  session_id: string;
  /** The session's lifecycle state. */
  state: SessionState;
  /** The id of the session's task. */
  task_id: string;
  /** The lifecycle state of the session's task. */
  task_state: TaskState;
  /** The directory the session's agent works in; null when unknown. */
  worktree_path: string | null;
}

/** `task.session.status`: the resume-relevant status of one session. */
export interface SessionStatusParams {
  /** The session to report on. */
  session_id: string;
}

/** `task.session.stop`: stops the agent and completes the session (and its task). */
export interface SessionStopParams {
  /** The session to stop. */
  session_id: string;
}

/** The answer to `task.session.stop`. */
export interface SessionStopResult {
  /** The session. */
  session_id: string;
  /** Its state now (`COMPLETED`). */
  state: SessionState;
}

/** One session's usage. */
export interface SessionUsage {
  /** The session. */
  session_id: string;
  /** Its turns summed. */
  summary: UsageSummary;
  /** Its finished turns, oldest first (the newest 500 at most). */
  turns: TurnUsage[];
}

/**
 * `server.shutdown`: the server is stopping (SIGTERM, Ctrl-C). The connection's close frame
 * follows, with code 1001 "going away": reconnect, a restarted server will be back.
 */
export interface Shutdown {
  /** Why, for people ("the server is shutting down"). */
  reason: string;
}

/** A piece of a hit's snippet. */
export interface SnippetPart {
  /** The piece is a match of the query (show it marked). */
  matched: boolean;
  /** The text of the piece. */
  text: string;
}

/** `session.state_changed`: sent to every client on each session state change. */
export interface StateChanged {
  /**
   * Why the session needs the user after the change; absent when it needs nothing. A
   * change of only this (a permission asked or answered) is sent with `state` equal to
   * `previous_state`.
   */
  attention?: Attention;
  /**
   * Since when it has needed the user for that reason (RFC 3339 UTC); absent with
   * `attention`.
   */
  attention_since?: string;
  /**
   * The session's `change_seq` after the change (see `SessionStatus::change_seq`): a client
   * that already holds a view with a greater one (an answer read after this change) keeps
   * that view. 0 from servers before it was added.
   */
  change_seq: number;
  /**
   * The session's newest journal seq when its state changed (0 when empty, and from servers
   * before it was added).
   */
  last_seq: number;
  /** The server's verdict after the change: the session needs resuming. */
  needs_resume: boolean;
  /**
   * The state before the change; `null` when the server resends current states after a
   * connection fell behind.
   */
  previous_state: SessionState | null;
  /** The session that changed. */
  session_id: string;
  /** The new state. */
  state: SessionState;
  /** Its task. */
  task_id: string;
  /** The task's state after the change. */
  task_state: TaskState;
  /**
   * The task's title, so that a list row can be updated without a fetch (empty from servers
   * before it was added).
   */
  task_title: string;
  /**
   * When the session's row last changed (RFC 3339 UTC; empty from servers before it was
   * added).
   */
  updated_at: string;
}

/** Why a turn ended: an ACP stop reason, or one the server sets (`interrupted`, `error`). */
export type StopReason = "end_turn" | "max_tokens" | "max_turn_requests" | "refusal" | "cancelled" | "interrupted" | "error" | (string & {});

/**
 * `storage.changed`: sent to every client when the server's database stops being writable (the
 * disk is full) and when it is writable again. While it is not, agents' output is held, not
 * lost: the server stops reading the agents whose updates could not be saved (they wait, or
 * their agent host keeps their output) and saves those updates, in order, once there is room.
 */
export interface StorageChanged {
  /** Why, for people (the database's error when it is not writable). */
  reason: string;
  /** False from the first write refused for want of space, true once a write succeeds again. */
  writable: boolean;
}

/**
 * `session.subscribe`: the session's events on this connection, replayed from `since_seq`
 * and then live (docs/PROTOCOL.md §6).
 */
export interface SubscribeParams {
  /** The session to follow. */
  session_id: string;
  /** Replay every event after this sequence number before going live. */
  since_seq?: number | null;
}

/** The answer to `session.subscribe`, sent before the replayed events. */
export interface SubscribeResult {
  /** The newest seq in the journal when subscribing (0 when empty). */
  current_seq: number;
  /** The session. */
  session_id: string;
}

/** A unit of work given to an agent. */
export interface Task {
  /** Name of the agent that runs the task's sessions (as in `agent.list`). */
  agent: string;
  /**
   * Archived tasks are left out of `task.list` and `task.session.list` unless asked for;
   * their data is kept.
   */
  archived: boolean;
  /**
   * The branch the repository had checked out when the worktree was made: what `task.merge`
   * merges into. Absent without a worktree, or when HEAD was detached.
   */
  base_branch?: string;
  /**
   * The commit the task's work starts from (the repository's HEAD when the task was
   * created): what `task.changes` compares with. Absent when its directory is in no git
   * repository, and for tasks created before it was kept.
   */
  base_commit?: string;
  /** When the task was created (RFC 3339, UTC). */
  created_at: string;
  /** What the agent is asked to do (may be empty). */
  description: string;
  /** The task's id (server-assigned). */
  id: string;
  /** The MCP servers the task added (`task.create`), without their secrets. */
  mcp_servers?: McpServerInfo[];
  /** The address of the pull request `task.pull_request` opened. */
  pull_request_url?: string;
  /** The git repository the task's worktree was made from; absent when there is none. */
  repository?: string;
  /** Where the task is in its lifecycle. */
  state: TaskState;
  /** Short title shown in lists. */
  title: string;
  /** When the task last changed (RFC 3339, UTC). */
  updated_at: string;
  /** The directory agents of this task work in (the worktree when one was created). */
  workdir: string;
  /**
   * The branch of the task's worktree (`baton/<first 12 hex of the task id>`); absent when no
   * worktree was created.
   */
  worktree_branch?: string;
}

/**
 * Hides a task (and its sessions) from the default lists; nothing is deleted. Its agents keep
 * running unless `stop_agents` is given.
 */
export interface TaskArchiveParams {
  /**
   * Stop the task's running (or starting) agents first, as `task.session.stop` does; without
   * it they keep running while the task is archived.
   */
  stop_agents?: boolean;
  /** The task to archive. */
  task_id: string;
}

/** The answer to `task.archive` and `task.unarchive`. */
export interface TaskArchiveResult {
  /** The sessions whose agents `task.archive` stopped (`stop_agents`); absent when none. */
  stopped_sessions?: string[];
  /** The task after the change. */
  task: Task;
}

/**
 * `task.changes`: what the task's agent changed, against the task's base: committed changes
 * (its branch since the commit its worktree was made from) and uncommitted ones apart.
 */
export interface TaskChangesParams {
  /**
   * Count the lines each file adds and removes (the default). `false` answers sooner when
   * many files changed (git reads every file to count): the files and their status only,
   * every count 0 and `counted` false. A client can show that list at once and ask again
   * with counts.
   */
  counts?: boolean;
  /** Most files to return (1 to 2000; 500 when absent). */
  limit?: number | null;
  /**
   * How many files of the list to skip (committed ones first, then uncommitted ones, each
   * sorted by path).
   */
  offset?: number;
  /** The task. */
  task_id: string;
}

/** The changed files of a task. */
export interface TaskChangesResult {
  /** Lines added and removed over all files (both parts, every page). */
  added: number;
  /** What the work is compared with. */
  base: ChangeBase;
  /** The branch checked out in the working directory (absent when detached). */
  branch?: string;
  /** Commits on the branch since the base. */
  commits: number;
  /**
   * False when asked without counts (`counts: false`): `added`, `removed` and `binary` are
   * then unknown (0 and false) here and in every file.
   */
  counted: boolean;
  /** The page of files asked for: committed ones first, then uncommitted ones. */
  files: ChangedFile[];
  /** See `added`. */
  removed: number;
  /** The task. */
  task_id: string;
  /** How many files there are in all (both parts). */
  total: number;
  /** The directory compared (the task's working directory). */
  workdir: string;
}

/** `task.commit`: commits the task's uncommitted changes on its branch. */
export interface TaskCommitParams {
  /** Commit while the task's agent is in a turn (its edits may land half done). */
  force?: boolean;
  /** The commit message (not empty). */
  message: string;
  /**
   * The files to commit, as `task.changes` lists them (a rename by its new path); absent:
   * every uncommitted change. Other changes stay uncommitted.
   */
  paths?: string[] | null;
  /** The task. */
  task_id: string;
}

/** A commit made. */
export interface TaskCommitResult {
  /** The branch it is on (absent when detached). */
  branch?: string;
  /** The new commit (full hash). */
  commit: string;
  /** How many files it changed. */
  files: number;
}

/** `task.create`: creates a task and its first session. */
export interface TaskCreateParams {
  /** Agent name from `agent.list`; a client never supplies a command line. */
  agent: string;
  /** What to do; the first prompt when `start` is true. Default `""`. */
  description?: string;
  /**
   * MCP servers the task's agents get, besides those agents.toml gives the agent (at most
   * 16, names unique). Kept with the task and passed on every start and resume.
   */
  mcp_servers?: McpServerConfig[];
  /** A git repository; with `worktree: true` the task gets its own worktree and branch. */
  repository?: string | null;
  /** Launch the agent right away with the description as the first prompt. */
  start?: boolean;
  /** The task's title; must not be empty. */
  title: string;
  /** Absolute working directory; defaults to the server's working directory. */
  workdir?: string | null;
  /**
   * Create a worktree and branch of `repository` for the task (needs `repository`).
   * Default false.
   */
  worktree?: boolean;
}

/** The answer to `task.create`. */
export interface TaskCreateResult {
  /** Its first session (`STARTING` when `start` was true, else `CREATED`). */
  session: SessionInfo;
  /** The new task. */
  task: Task;
}

/** Deletes a task with its sessions, their journals and history files, and its worktree. */
export interface TaskDeleteParams {
  /**
   * Delete the worktree even when it has uncommitted changes; without it, a worktree with
   * changes is not deleted (`CONFLICT`, nothing is deleted).
   */
  discard_changes?: boolean;
  /** Leave the worktree on disk (the task and its sessions are deleted). */
  keep_worktree?: boolean;
  /**
   * Stop the task's running agents first; without it, a task with a running (or starting)
   * agent is not deleted (`CONFLICT`).
   */
  stop_agents?: boolean;
  /** The task to delete. */
  task_id: string;
}

/** The answer to `task.delete`. */
export interface TaskDeleteResult {
  /** The sessions deleted with the task. */
  session_ids: string[];
  /** The deleted task. */
  task_id: string;
  /** The worktree directory that was removed (its branch is kept in the repository). */
  worktree_removed?: string;
}

/** `task.deleted`: sent to every client when a task and its sessions were deleted. */
export interface TaskDeleted {
  /** Its sessions, deleted with it. */
  session_ids: string[];
  /** The deleted task. */
  task_id: string;
}

/** `task.diff`: the diff of one changed file. */
export interface TaskDiffParams {
  /**
   * Which part's diff: the committed one (base to the branch's last commit) or the
   * uncommitted one (the last commit to the working directory).
   */
  part: ChangePart;
  /** The file's path, as `task.changes` lists it. */
  path: string;
  /** The task. */
  task_id: string;
}

/** One file's diff. */
export interface TaskDiffResult {
  /** True for a binary file (its diff is not sent). */
  binary?: boolean;
  /**
   * The unified diff (git's format, 3 lines of context), without git's header lines
   * (`diff --git`, `index`): from the first `---` line on. Empty for a binary file.
   */
  diff: string;
  /** The part. */
  part: ChangePart;
  /** The file. */
  path: string;
  /** True when the diff was longer than 2 MiB and is cut there. */
  truncated?: boolean;
}

/** `task.list`: the tasks, filtered by their `archived` flag. */
export interface TaskListParams {
  /** Which tasks by their `archived` flag; default `exclude`. */
  archived?: ArchivedFilter | null;
}

/** The answer to `task.list`. */
export interface TaskListResult {
  /** The tasks. */
  tasks: Task[];
}

/**
 * `task.merge`: merges the task's branch into its base branch in the repository the worktree
 * was made from: a fast-forward when the base has not moved, else a merge commit. Refused,
 * with nothing changed, when the repository's working tree has uncommitted changes to tracked
 * files, when it has another branch checked out, when the task's worktree has uncommitted
 * changes, or when the merge would conflict (`details.conflicts` lists the files).
 */
export interface TaskMergeParams {
  /** Merge while the task's agent is in a turn. */
  force?: boolean;
  /** After the merge, remove the task's worktree and its branch, and archive the task. */
  remove_worktree?: boolean;
  /** The task (one with a worktree). */
  task_id: string;
}

/** A merge made. */
export interface TaskMergeResult {
  /** Its commit after the merge. */
  commit: string;
  /** How many of the task's commits it brought. */
  commits: number;
  /** True when it was a fast-forward (no merge commit). */
  fast_forward: boolean;
  /** The branch merged into. */
  into: string;
  /** The worktree removed (with `remove_worktree`). */
  worktree_removed?: string;
}

/**
 * `task.pull_request`: pushes the task's branch to the repository's `origin` and opens a pull
 * request with the GitHub CLI (`gh`), which must be installed and logged in (else the error
 * gives the exact commands to run). The pull request's address is kept on the task.
 */
export interface TaskPullRequestParams {
  /** Its description; the task's description when absent. */
  body?: string | null;
  /** Open it while the task's agent is in a turn. */
  force?: boolean;
  /** The task (one with a worktree). */
  task_id: string;
  /** The pull request's title; the task's title when absent. */
  title?: string | null;
}

/** A pull request opened. */
export interface TaskPullRequestResult {
  /** The branch it asks to merge into. */
  base: string;
  /** The branch pushed. */
  branch: string;
  /** Its address. */
  url: string;
}

/**
 * `task.shell`: the command that opens a shell where the task's agent works: the user's
 * shell in its working directory, `docker exec -it` into its container, or `ssh -t` to its
 * host. Batond runs nothing: the client runs the command (the TUI on its terminal) or shows it.
 */
export interface TaskShellParams {
  /** The task. */
  task_id: string;
}

/** Where and how to open the shell. */
export interface TaskShellResult {
  /**
   * The program and its arguments; empty for `local`, where the client runs the user's own
   * `$SHELL` in `workdir`.
   */
  argv?: string[];
  /** The command as one line to paste in a terminal. */
  command: string;
  /** `local`, `docker` or `ssh`: where the agent runs. */
  runtime: string;
  /** The agent's working directory (on its host or in its container). */
  workdir: string;
}

/** Lifecycle of a task, moved along with its sessions. */
export type TaskState = "TODO" | "IN_PROGRESS" | "REVIEW" | "COMPLETED" | "FAILED";

/** Shows an archived task in the default lists again. */
export interface TaskUnarchiveParams {
  /** The task to unarchive. */
  task_id: string;
}

/** Changes a task's title and/or description; a field left out keeps its value. */
export interface TaskUpdateParams {
  /** The new description. */
  description?: string | null;
  /** The task to change. */
  task_id: string;
  /** Trimmed; must not be empty. */
  title?: string | null;
}

/** The answer to `task.update`. */
export interface TaskUpdateResult {
  /** The task after the change. */
  task: Task;
}

/** How a terminal's command exited (ACP `TerminalExitStatus`). */
export interface TerminalExit {
  /** Its exit code, when it exited by itself. */
  exit_code?: number;
  /** The signal that ended it (`SIGKILL`...), when one did. */
  signal?: string;
}

/** Where a tool call stands (ACP `ToolCallStatus`). */
export type ToolCallStatus = "pending" | "in_progress" | "completed" | "failed" | (string & {});

/**
 * Token counts and cost of one finished turn, as the agent reported them: tokens from the
 * prompt's answer (ACP `PromptResponse.usage`), cost and context window from the last
 * `usage_update` it sent during the turn. A turn whose agent reported nothing has every field
 * absent.
 */
export interface TurnUsage {
  /** Input tokens read from the agent's prompt cache. */
  cached_read_tokens?: number;
  /** Input tokens written to the agent's prompt cache. */
  cached_write_tokens?: number;
  /** Size of the agent's context window. */
  context_size?: number;
  /** Tokens in the agent's context window when the turn ended. */
  context_used?: number;
  /** The session's cumulative cost when the turn ended (ACP reports cost per session). */
  cost?: Cost;
  /** Input tokens of the turn. */
  input_tokens?: number;
  /** Output tokens of the turn. */
  output_tokens?: number;
  /** When the turn's usage was recorded (RFC 3339 UTC). */
  recorded_at: string;
  /** Thought (reasoning) tokens. */
  thought_tokens?: number;
  /** All tokens of the turn, as the agent counted them. */
  total_tokens?: number;
  /** The turn's id (as in its events). */
  turn_id?: string;
  /** Sequence number of the turn's `turn_started` event. */
  turn_seq: number;
}

/**
 * An event of a kind a newer server added, with its other fields as sent: skip it (or show it
 * generically); its seq still counts.
 */
export interface UnknownEvent {
  kind: string & {};
  [field: string]: unknown;
}

/** `session.unsubscribe`: stops the session's events on this connection. */
export interface UnsubscribeParams {
  /** The session to stop following. */
  session_id: string;
}

/** The answer to `session.unsubscribe`. */
export interface UnsubscribeResult {
  /** The session. */
  session_id: string;
}

/**
 * `usage.get`: usage of one session (its turns and their sum) and the total over every
 * session.
 */
export interface UsageGetParams {
  /** The session whose usage to include; only the total without it. */
  session_id?: string | null;
}

/** The answer to `usage.get`. */
export interface UsageGetResult {
  /** The session's usage, when one was asked for. */
  session?: SessionUsage;
  /** Usage summed over every session the server knows (archived tasks' included). */
  total: UsageSummary;
}

/** Usage summed over turns: of one session, or of every session. */
export interface UsageSummary {
  /** Sum over the reported turns; absent when no turn reported it. */
  cached_read_tokens?: number;
  /** Sum over the reported turns; absent when no turn reported it. */
  cached_write_tokens?: number;
  /**
   * Cost per currency: for one session its latest cumulative cost, in total the sum of
   * those. Empty when no agent reported a cost.
   */
  cost?: Cost[];
  /** Sum over the reported turns; absent when no turn reported it. */
  input_tokens?: number;
  /** Sum over the reported turns; absent when no turn reported it. */
  output_tokens?: number;
  /** Sessions counted (1 for a session's own summary). */
  sessions: number;
  /** Sum over the reported turns; absent when no turn reported it. */
  thought_tokens?: number;
  /** Sum over the reported turns; absent when no turn reported it. */
  total_tokens?: number;
  /** Finished turns whose agent reported token counts. */
  turns_reported: number;
  /** Finished turns whose agent reported none: their tokens are unknown, not zero. */
  turns_unreported: number;
}

/** Every action: its request payload (`params`) and its answer (`result`). */
export interface Actions {
  "agent.list": { params: AgentListParams; result: AgentListResult };
  "device.list": { params: DeviceListParams; result: DeviceListResult };
  "device.pair": { params: DevicePairParams; result: DevicePairResult };
  "device.revoke": { params: DeviceRevokeParams; result: DeviceRevokeResult };
  "message.add": { params: MessageAddParams; result: MessageAddResult };
  "message.list": { params: MessageListParams; result: MessageListResult };
  "message.search": { params: MessageSearchParams; result: MessageSearchResult };
  "message.text": { params: MessageTextParams; result: MessageTextResult };
  "permission.list": { params: PermissionListParams; result: PermissionListResult };
  "permission.respond": { params: PermissionRespondParams; result: PermissionRespondResult };
  "permission.rule.list": { params: PermissionRuleListParams; result: PermissionRuleListResult };
  "permission.rule.revoke": { params: PermissionRuleRevokeParams; result: PermissionRuleRevokeResult };
  "ping": { params: PingParams; result: PingResult };
  "push.key": { params: PushKeyParams; result: PushKeyResult };
  "push.subscribe": { params: PushSubscribeParams; result: PushSubscribeResult };
  "push.unsubscribe": { params: PushUnsubscribeParams; result: PushUnsubscribeResult };
  "queue.edit": { params: QueueEditParams; result: QueueResult };
  "queue.list": { params: QueueListParams; result: QueueResult };
  "queue.release": { params: QueueReleaseParams; result: QueueResult };
  "queue.remove": { params: QueueRemoveParams; result: QueueResult };
  "session.export": { params: SessionExportParams; result: SessionExportResult };
  "session.options": { params: SessionOptionsParams; result: SessionOptionsResult };
  "session.set_mode": { params: SessionSetModeParams; result: SessionOptionsResult };
  "session.set_option": { params: SessionSetOptionParams; result: SessionOptionsResult };
  "session.subscribe": { params: SubscribeParams; result: SubscribeResult };
  "session.unsubscribe": { params: UnsubscribeParams; result: UnsubscribeResult };
  "task.archive": { params: TaskArchiveParams; result: TaskArchiveResult };
  "task.changes": { params: TaskChangesParams; result: TaskChangesResult };
  "task.commit": { params: TaskCommitParams; result: TaskCommitResult };
  "task.create": { params: TaskCreateParams; result: TaskCreateResult };
  "task.delete": { params: TaskDeleteParams; result: TaskDeleteResult };
  "task.diff": { params: TaskDiffParams; result: TaskDiffResult };
  "task.list": { params: TaskListParams; result: TaskListResult };
  "task.merge": { params: TaskMergeParams; result: TaskMergeResult };
  "task.pull_request": { params: TaskPullRequestParams; result: TaskPullRequestResult };
  "task.session.cancel": { params: SessionCancelParams; result: SessionCancelResult };
  "task.session.fork": { params: SessionForkParams; result: SessionForkResult };
  "task.session.list": { params: SessionListParams; result: SessionListResult };
  "task.session.resume": { params: SessionResumeParams; result: SessionResumeResult };
  "task.session.start": { params: SessionStartParams; result: SessionStartResult };
  "task.session.status": { params: SessionStatusParams; result: SessionStatus };
  "task.session.stop": { params: SessionStopParams; result: SessionStopResult };
  "task.shell": { params: TaskShellParams; result: TaskShellResult };
  "task.unarchive": { params: TaskUnarchiveParams; result: TaskArchiveResult };
  "task.update": { params: TaskUpdateParams; result: TaskUpdateResult };
  "usage.get": { params: UsageGetParams; result: UsageGetResult };
}

/** Every notification the server sends, with its payload. */
export interface Notifications {
  "attention.changed": AttentionChanged;
  "permission.queue_changed": PermissionQueueChanged;
  "server.hello": Hello;
  "server.shutdown": Shutdown;
  "session.event": EventRecord;
  "session.state_changed": StateChanged;
  "storage.changed": StorageChanged;
  "task.deleted": TaskDeleted;
  "task.updated": Task;
}

/** An action name. */
export type Action = keyof Actions;
/** A notification name. */
export type NotificationAction = keyof Notifications;

/** A request frame for action `A` (a union over the actions when `A` is). */
export type RequestFrame<A extends Action = Action> = A extends Action
  ? { id: string; type: "request"; action: A; payload?: Actions[A]["params"]; timestamp?: string }
  : never;

/** A response frame: the answer to the request with the same `id`. */
export type ResponseFrame<A extends Action = Action> = A extends Action
  ? { id: string; type: "response"; action: A; payload: Actions[A]["result"]; timestamp: string }
  : never;

/** A notification frame the server sends on its own, of a notification these declarations know. */
export type NotificationFrame<N extends NotificationAction = NotificationAction> = N extends NotificationAction
  ? { type: "notification"; action: N; payload: Notifications[N]; timestamp: string }
  : never;

/**
 * A notification of a name these declarations do not know: a newer server may send new ones.
 * Ignore it (or show it generically).
 */
export interface UnknownNotificationFrame {
  type: "notification";
  action: string & {};
  payload: unknown;
  timestamp: string;
}

/** An error frame: the failed answer to a request (`id` absent when it could not be read). */
export interface ErrorFrame {
  id?: string;
  type: "error";
  action: string;
  payload: ErrorPayload;
  timestamp: string;
}

/** Any frame the server sends. */
export type ServerFrame = ResponseFrame | NotificationFrame | UnknownNotificationFrame | ErrorFrame;
