// Baton wire protocol: TypeScript declarations generated from its JSON Schema.
// Do not edit: regenerate with `cargo run -p baton-server -- schema --typescript > server/web/protocol.d.ts`.

/** The protocol version these declarations describe. */
export type ProtocolVersion = 1;

/** An agent the server can run, as `agent.list` shows it. */
export interface AgentInfo {
  display_name: string;
  history_context_injection: boolean;
  /** The agent's command was found (on PATH, or as an absolute path). */
  installed: boolean;
  name: string;
  native_session_resume: boolean;
}

export type AgentListParams = Record<string, unknown>;

export interface AgentListResult {
  agents: AgentInfo[];
}

/** Which tasks a list shows, by their `archived` flag. */
export type ArchivedFilter = "exclude" | "include" | "only";

/**
 * The one frame shape of the protocol.
 *
 * Requests carry a client-chosen `id`; the response or error echoes `id` and `action`.
 */
export interface Envelope {
  action?: string;
  id?: string | null;
  payload?: unknown;
  timestamp?: string | null;
  type: MessageType;
}

/** Error codes of the protocol (the `code` of an error payload). */
export type ErrorCode = "BAD_REQUEST" | "VALIDATION_ERROR" | "NOT_FOUND" | "CONFLICT" | "UNAUTHORIZED" | "FORBIDDEN" | "UNKNOWN_ACTION" | "UNAVAILABLE" | "INTERNAL_ERROR";

/** Payload of an `error` envelope. */
export interface ErrorPayload {
  code: ErrorCode;
  details?: unknown;
  message: string;
}

/** A journaled event with its sequence number: the payload of `session.event`. */
export interface EventRecord {
  created_at: string;
  event: SessionEvent;
  seq: number;
  session_id: string;
}

/** `server.hello`: the first frame on every connection. */
export interface Hello {
  capabilities: string[];
  protocol_version: number;
  server_version: string;
}

/**
 * One entry of the folded message view (`message.list`): a whole agent message, one tool call
 * with its latest status, a status line...
 */
export interface Message {
  created_at: string;
  /** Kind-specific detail: tool call fields, plan entries, permission options. */
  data?: unknown;
  kind: MessageKind;
  message_id?: string;
  /** Sequence number of the first event folded into this entry; entries are ordered by it. */
  seq: number;
  status?: string;
  text: string;
  tool_call_id?: string;
  updated_at: string;
}

export interface MessageAddParams {
  content: string;
  session_id: string;
}

export interface MessageAddResult {
  message: Message;
  /**
   * The id of the turn the message opened, carried by that turn's `user_message`,
   * `turn_started` and `turn_completed` events (live and replayed). Absent from older servers.
   */
  turn_id?: string;
}

/** What a folded message row shows. */
export type MessageKind = "user" | "agent" | "thought" | "tool_call" | "plan" | "status" | "error" | "permission";

export interface MessageListParams {
  after_seq?: number | null;
  before_seq?: number | null;
  /** At most this many messages (1..=1000, default 200). */
  limit?: number | null;
  session_id: string;
}

export interface MessageListResult {
  has_more: boolean;
  messages: Message[];
}

/** What an envelope is: a client request, its response or error, or a server notification. */
export type MessageType = "request" | "response" | "notification" | "error";

export interface PermissionOption {
  /** `allow_once`, `allow_always`, `reject_once` or `reject_always`. */
  kind: string;
  name: string;
  option_id: string;
}

export interface PermissionRespondParams {
  option_id: string;
  request_id: string;
  session_id: string;
}

export interface PermissionRespondResult {
  request_id: string;
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

export interface PlanEntry {
  content: string;
  priority: string;
  status: string;
}

/** Why `needs_resume` is what it is (the seed's status cases, plus the non-active ones). */
export type ResumeReason = "agent_running" | "agent_starting" | "agent_not_running" | "agent_not_running_fresh_start" | "terminal_state" | "not_started";

export interface SessionCancelParams {
  session_id: string;
}

export interface SessionCancelResult {
  session_id: string;
}

/**
 * One entry of a session's journal. Every event gets a per-session sequence number and is
 * durable before it is broadcast (`session.event`). A newer server may add kinds: they decode
 * as `Unknown`, whose seq counts like any other.
 */
export type SessionEvent = {
  kind: "user_message";
  text: string;
  /**
   * The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
   * the `turn_id` it answered. Absent on events journaled before turns had ids, and on
   * the close of a turn the server found open after a restart.
   */
  turn_id?: string;
} | {
  kind: "message_chunk";
  message_id?: string;
  text: string;
} | {
  kind: "thought_chunk";
  message_id?: string;
  text: string;
} | {
  content?: unknown;
  kind: "tool_call";
  raw_input?: unknown;
  status?: string;
  title: string;
  tool_call_id: string;
  tool_kind?: string;
} | {
  content?: unknown;
  kind: "tool_call_update";
  raw_output?: unknown;
  status?: string;
  title?: string;
  tool_call_id: string;
} | {
  entries: PlanEntry[];
  kind: "plan";
} | {
  kind: "status";
  message: string;
} | {
  kind: "error";
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
  stop_reason: string;
  /**
   * The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
   * the `turn_id` it answered. Absent on events journaled before turns had ids, and on
   * the close of a turn the server found open after a restart.
   */
  turn_id?: string;
} | {
  kind: "permission_request";
  options: PermissionOption[];
  request_id: string;
  tool_call: unknown;
} | {
  kind: "permission_resolved";
  option_id?: string;
  request_id: string;
} | {
  commands: unknown[];
  kind: "available_commands";
} | {
  kind: "mode";
  mode_id: string;
} | {
  kind: "agent_update";
  raw: unknown;
  update_kind: string;
};

/** One row of `task.session.list`: the status fields plus what a list needs to show. */
export interface SessionInfo {
  agent: string;
  /** Process id of the attached agent, when one runs. */
  agent_pid?: number;
  created_at: string;
  has_resume_token: boolean;
  is_agent_running: boolean;
  is_resumable: boolean;
  last_error: string | null;
  /** Sequence number of the newest event in the session's journal (0 when empty). */
  last_seq: number;
  needs_resume: boolean;
  resume_reason: ResumeReason;
  session_id: string;
  state: SessionState;
  /** The session's task is archived. */
  task_archived: boolean;
  task_id: string;
  task_state: TaskState;
  task_title: string;
  updated_at: string;
  worktree_path: string | null;
}

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
  task_id?: string | null;
}

export interface SessionListResult {
  /**
   * The server's change sequence when the page was read: pass it as `changed_since` to get
   * only the rows changed since.
   */
  change_seq: number;
  /** The cursor of the next page; absent on the last page. */
  next_cursor?: string;
  sessions: SessionInfo[];
}

/** The order of `task.session.list`. */
export type SessionOrder = "created" | "recent" | "attention" | "changed";

export interface SessionResumeParams {
  /** Start over without the resume token (the conversation is not restored). */
  fresh?: boolean;
  session_id: string;
}

export interface SessionResumeResult {
  /** False when the session already had an agent (running or starting): nothing was launched. */
  launched: boolean;
  session_id: string;
  /**
   * `STARTING` when this request launched the agent; the current state when an agent was
   * already attached or starting. Readiness arrives as `session.state_changed`.
   */
  state: SessionState;
}

export interface SessionStartParams {
  /** Defaults to the task's agent. */
  agent?: string | null;
  /** First prompt; defaults to the task description. */
  prompt?: string | null;
  task_id: string;
}

export interface SessionStartResult {
  session: SessionInfo;
}

/** Lifecycle of one agent session: the states and their transitions are in docs/PROTOCOL.md §3. */
export type SessionState = "CREATED" | "STARTING" | "RUNNING" | "WAITING_FOR_INPUT" | "COMPLETED" | "FAILED" | "CANCELLED";

/**
 * The resume-relevant status of a session: the payload of `task.session.status` and part of
 * every row of `task.session.list`. Clients never infer `needs_resume`; the server says it.
 */
export interface SessionStatus {
  agent: string;
  /** Process id of the attached agent, when one runs. */
  agent_pid?: number;
  has_resume_token: boolean;
  is_agent_running: boolean;
  is_resumable: boolean;
  last_error: string | null;
  needs_resume: boolean;
  resume_reason: ResumeReason;
  session_id: string;
  state: SessionState;
  task_id: string;
  task_state: TaskState;
  worktree_path: string | null;
}

export interface SessionStatusParams {
  session_id: string;
}

export interface SessionStopParams {
  session_id: string;
}

export interface SessionStopResult {
  session_id: string;
  state: SessionState;
}

/**
 * `server.shutdown`: the server is stopping (SIGTERM, Ctrl-C). The connection's close frame
 * follows, with code 1001 "going away": reconnect, a restarted server will be back.
 */
export interface Shutdown {
  /** Why, for people ("the server is shutting down"). */
  reason: string;
}

/** `session.state_changed`: sent to every client on each session state change. */
export interface StateChanged {
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

export interface SubscribeParams {
  session_id: string;
  /** Replay every event after this sequence number before going live. */
  since_seq?: number | null;
}

export interface SubscribeResult {
  current_seq: number;
  session_id: string;
}

/** A unit of work given to an agent. */
export interface Task {
  agent: string;
  /**
   * Archived tasks are left out of `task.list` and `task.session.list` unless asked for;
   * their data is kept.
   */
  archived: boolean;
  created_at: string;
  description: string;
  id: string;
  repository?: string;
  state: TaskState;
  title: string;
  updated_at: string;
  /** The directory agents of this task work in (the worktree when one was created). */
  workdir: string;
  worktree_branch?: string;
}

/**
 * Hides a task (and its sessions) from the default lists; nothing is deleted and its agents
 * keep running.
 */
export interface TaskArchiveParams {
  task_id: string;
}

export interface TaskArchiveResult {
  task: Task;
}

export interface TaskCreateParams {
  /** Agent name from `agent.list`; a client never supplies a command line. */
  agent: string;
  description?: string;
  /** A git repository; with `worktree: true` the task gets its own worktree and branch. */
  repository?: string | null;
  /** Launch the agent right away with the description as the first prompt. */
  start?: boolean;
  title: string;
  /** Absolute working directory; defaults to the server's working directory. */
  workdir?: string | null;
  worktree?: boolean;
}

export interface TaskCreateResult {
  session: SessionInfo;
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
  task_id: string;
}

export interface TaskDeleteResult {
  /** The sessions deleted with the task. */
  session_ids: string[];
  task_id: string;
  /** The worktree directory that was removed (its branch is kept in the repository). */
  worktree_removed?: string;
}

/** `task.deleted`: sent to every client when a task and its sessions were deleted. */
export interface TaskDeleted {
  session_ids: string[];
  task_id: string;
}

export interface TaskListParams {
  /** Which tasks by their `archived` flag; default `exclude`. */
  archived?: ArchivedFilter | null;
}

export interface TaskListResult {
  tasks: Task[];
}

/** Lifecycle of a task, moved along with its sessions. */
export type TaskState = "TODO" | "IN_PROGRESS" | "REVIEW" | "COMPLETED" | "FAILED";

/** Shows an archived task in the default lists again. */
export interface TaskUnarchiveParams {
  task_id: string;
}

/** Changes a task's title and/or description; a field left out keeps its value. */
export interface TaskUpdateParams {
  description?: string | null;
  task_id: string;
  /** Trimmed; must not be empty. */
  title?: string | null;
}

export interface TaskUpdateResult {
  task: Task;
}

/** An event of a kind a newer server added: skip it, its seq still counts. */
export interface UnknownEvent {
  kind: string;
}

export interface UnsubscribeParams {
  session_id: string;
}

export interface UnsubscribeResult {
  session_id: string;
}

/** Every action: its request payload (`params`) and its answer (`result`). */
export interface Actions {
  "agent.list": { params: AgentListParams; result: AgentListResult };
  "message.add": { params: MessageAddParams; result: MessageAddResult };
  "message.list": { params: MessageListParams; result: MessageListResult };
  "permission.respond": { params: PermissionRespondParams; result: PermissionRespondResult };
  "ping": { params: PingParams; result: PingResult };
  "session.subscribe": { params: SubscribeParams; result: SubscribeResult };
  "session.unsubscribe": { params: UnsubscribeParams; result: UnsubscribeResult };
  "task.archive": { params: TaskArchiveParams; result: TaskArchiveResult };
  "task.create": { params: TaskCreateParams; result: TaskCreateResult };
  "task.delete": { params: TaskDeleteParams; result: TaskDeleteResult };
  "task.list": { params: TaskListParams; result: TaskListResult };
  "task.session.cancel": { params: SessionCancelParams; result: SessionCancelResult };
  "task.session.list": { params: SessionListParams; result: SessionListResult };
  "task.session.resume": { params: SessionResumeParams; result: SessionResumeResult };
  "task.session.start": { params: SessionStartParams; result: SessionStartResult };
  "task.session.status": { params: SessionStatusParams; result: SessionStatus };
  "task.session.stop": { params: SessionStopParams; result: SessionStopResult };
  "task.unarchive": { params: TaskUnarchiveParams; result: TaskArchiveResult };
  "task.update": { params: TaskUpdateParams; result: TaskUpdateResult };
}

/** Every notification the server sends, with its payload. */
export interface Notifications {
  "server.hello": Hello;
  "server.shutdown": Shutdown;
  "session.event": EventRecord;
  "session.state_changed": StateChanged;
  "task.deleted": TaskDeleted;
  "task.updated": Task;
}

/** An action name. */
export type Action = keyof Actions;
/** A notification name. */
export type NotificationAction = keyof Notifications;

/** A request frame for action `A`. */
export interface RequestFrame<A extends Action = Action> {
  id: string;
  type: "request";
  action: A;
  payload?: Actions[A]["params"];
  timestamp?: string;
}

/** A response frame: the answer to the request with the same `id`. */
export interface ResponseFrame<A extends Action = Action> {
  id: string;
  type: "response";
  action: A;
  payload: Actions[A]["result"];
  timestamp: string;
}

/** A notification frame the server sends on its own. */
export interface NotificationFrame<N extends NotificationAction = NotificationAction> {
  type: "notification";
  action: N;
  payload: Notifications[N];
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
export type ServerFrame = ResponseFrame | NotificationFrame | ErrorFrame;
