//! Shared shapes: tasks, sessions, their states and status, folded messages, agents.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Declares a string-valued state enum whose one spelling is used in SQLite, on the wire and in
/// the TUI, so the three can never disagree. Exported for the server's own string enums (a
/// crate using it depends on `serde` and `schemars`); more derives go in the leading attributes
/// (`#[derive(Default)]` with `#[default]` on a variant, `#[derive(clap::ValueEnum)]`).
#[macro_export]
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value's one spelling (wire, SQLite and TUI).
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The value spelled `text`, or `None` for an unknown spelling.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum! {
    /// Lifecycle of one agent session: the states and their transitions are in docs/PROTOCOL.md §3.
    SessionState {
        /// Created, no agent launched yet.
        Created => "CREATED",
        /// An agent is being launched (or restored) for the session.
        Starting => "STARTING",
        /// The agent is working on a turn.
        Running => "RUNNING",
        /// The agent's turn is over; the session waits for the next prompt.
        WaitingForInput => "WAITING_FOR_INPUT",
        /// The session was completed, e.g. by `task.session.stop` (terminal).
        Completed => "COMPLETED",
        /// The session failed (terminal; `last_error` says why).
        Failed => "FAILED",
        /// The session was cancelled (terminal).
        Cancelled => "CANCELLED",
    }
}

impl SessionState {
    /// States in which an agent is (or should be) attached: the ones resume applies to.
    pub fn is_active(self) -> bool {
        matches!(self, SessionState::Starting | SessionState::Running | SessionState::WaitingForInput)
    }

    /// States that block resume.
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Completed | SessionState::Failed | SessionState::Cancelled)
    }
}

string_enum! {
    /// Lifecycle of a task, moved along with its sessions.
    TaskState {
        /// No agent of the task has become ready yet.
        Todo => "TODO",
        /// An agent is working on a turn.
        InProgress => "IN_PROGRESS",
        /// The agent's turn is over (or it went idle): the work waits for the user.
        Review => "REVIEW",
        /// The task is done.
        Completed => "COMPLETED",
        /// The task failed.
        Failed => "FAILED",
    }
}

string_enum! {
    /// Why `needs_resume` is what it is (the status cases of docs/RESUME.md, plus the non-active ones).
    ResumeReason {
        /// Case 1: an agent is attached to the session.
        AgentRunning => "agent_running",
        /// Case 2: an agent is being launched for the session right now.
        AgentStarting => "agent_starting",
        /// Case 3: active session with a resume token and no agent.
        AgentNotRunning => "agent_not_running",
        /// Case 4: active session without a token but with an executor record.
        AgentNotRunningFreshStart => "agent_not_running_fresh_start",
        /// The session ended (COMPLETED, FAILED, CANCELLED): resume is blocked.
        TerminalState => "terminal_state",
        /// The session was created but never started.
        NotStarted => "not_started",
        /// The server is reconnecting to the session's agent, which outlived the previous
        /// server (in Docker, over ssh): wait for the `session.state_changed` that ends it.
        AgentReconnecting => "agent_reconnecting",
    }
}

/// A unit of work given to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// The task's id (server-assigned).
    pub id: String,
    /// Short title shown in lists.
    pub title: String,
    /// What the agent is asked to do (may be empty).
    pub description: String,
    /// Where the task is in its lifecycle.
    pub state: TaskState,
    /// Name of the agent that runs the task's sessions (as in `agent.list`).
    pub agent: String,
    /// The directory agents of this task work in (the worktree when one was created).
    pub workdir: String,
    /// The git repository the task's worktree was made from; absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// The branch of the task's worktree (`baton/<first 12 hex of the task id>`); absent when no
    /// worktree was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_branch: Option<String>,
    /// The commit the task's work starts from (the repository's HEAD when the task was
    /// created): what `task.changes` compares with. Absent when its directory is in no git
    /// repository, and for tasks created before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// The branch the repository had checked out when the worktree was made: what `task.merge`
    /// merges into. Absent without a worktree, or when HEAD was detached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// The address of the pull request `task.pull_request` opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request_url: Option<String>,
    /// When the task was created (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// When the task last changed (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// Archived tasks are left out of `task.list` and `task.session.list` unless asked for;
    /// their data is kept.
    #[serde(default)]
    pub archived: bool,
    /// The MCP servers the task added (`task.create`), without their secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::McpServerInfo>,
}

string_enum! {
    /// Which tasks a list shows, by their `archived` flag.
    ArchivedFilter {
        /// Only tasks that are not archived (the default).
        Exclude => "exclude",
        /// Archived and not archived tasks.
        Include => "include",
        /// Only archived tasks.
        Only => "only",
    }
}

string_enum! {
    /// The order of `task.session.list`.
    SessionOrder {
        /// Oldest first (by creation; the default without `changed_since`).
        Created => "created",
        /// Newest first (by creation).
        Recent => "recent",
        /// Sessions that wait for the user (`WAITING_FOR_INPUT`, `FAILED`) first, then the
        /// others; newest first within each.
        Attention => "attention",
        /// By the server's change sequence, oldest change first (the default with
        /// `changed_since`).
        Changed => "changed",
    }
}

impl SessionState {
    /// The session waits for the user: its turn is over, or it failed.
    pub fn needs_attention(self) -> bool {
        matches!(self, SessionState::WaitingForInput | SessionState::Failed)
    }
}

impl ArchivedFilter {
    /// Whether a task with this `archived` flag is shown.
    pub fn shows(self, archived: bool) -> bool {
        match self {
            ArchivedFilter::Exclude => !archived,
            ArchivedFilter::Include => true,
            ArchivedFilter::Only => archived,
        }
    }
}

/// The resume-relevant status of a session: the payload of `task.session.status` and part of
/// every row of `task.session.list`. Clients never infer `needs_resume`; the server says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStatus {
    /// The session's id.
    pub session_id: String,
    /// The id of the session's task.
    pub task_id: String,
    /// Name of the agent that runs the session.
    pub agent: String,
    /// The session's lifecycle state.
    pub state: SessionState,
    /// The lifecycle state of the session's task.
    pub task_state: TaskState,
    /// An agent process is attached to the session now.
    pub is_agent_running: bool,
    /// `task.session.resume` applies: no agent is attached or starting and the session is not
    /// terminal (docs/PROTOCOL.md §3).
    pub is_resumable: bool,
    /// The session is active but has no agent: call `task.session.resume` before prompting.
    pub needs_resume: bool,
    /// Why `needs_resume` is what it is.
    pub resume_reason: ResumeReason,
    /// The server holds the agent's native session id, so resume can reload it.
    pub has_resume_token: bool,
    /// The last error the session hit (launch or restore failure...); null when none.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The directory the session's agent works in; null when unknown.
    #[serde(default)]
    pub worktree_path: Option<String>,
    /// Process id of the attached agent, when one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_pid: Option<u32>,
    /// Why the session needs the user now; absent when it needs nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<Attention>,
    /// Since when it has needed the user for that reason (RFC 3339 UTC); absent with
    /// `attention`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub attention_since: Option<String>,
    /// The session's place in the server's change sequence when this was read (the
    /// `change_seq` that `task.session.list` orders and filters by): a later view of the
    /// session has a greater one. Answers and notifications are not ordered with one another on
    /// the wire, so a client keeps, of two views of a session, the one with the greater value
    /// ([`supersedes`]). 0 from servers before it was added.
    #[serde(default)]
    pub change_seq: u64,
}

/// Whether a view of a session stamped `incoming` (its `change_seq`) may replace the one a
/// client holds, stamped `held`: not when it is older (an answer read before a change whose
/// notification came first). An unstamped view (0, from a server before the field) may.
pub fn supersedes(incoming: u64, held: u64) -> bool {
    incoming == 0 || incoming >= held
}

/// One row of `task.session.list`: the status fields plus what a list needs to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    /// The session's status; its fields appear inline in the row.
    #[serde(flatten)]
    pub status: SessionStatus,
    /// The title of the session's task.
    pub task_title: String,
    /// The session's task is archived.
    #[serde(default)]
    pub task_archived: bool,
    /// When the session was created (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// When the session last changed (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// Sequence number of the newest event in the session's journal (0 when empty).
    pub last_seq: u64,
    /// The session this one was forked from (`task.session.fork`); absent when it is not a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
}

/// Where a forked session came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkOrigin {
    /// The source session.
    pub session_id: String,
    /// The source's last journal event the fork copied: the fork starts from the conversation
    /// up to and including it.
    pub seq: u64,
}

string_enum! {
    /// What a folded message row shows.
    MessageKind {
        /// A prompt the user sent.
        User => "user",
        /// A whole agent message.
        Agent => "agent",
        /// The agent's thinking.
        Thought => "thought",
        /// One tool call with its latest status.
        ToolCall => "tool_call",
        /// The agent's latest plan.
        Plan => "plan",
        /// A status line.
        Status => "status",
        /// An error line.
        Error => "error",
        /// A permission request and its answer.
        Permission => "permission",
    }
}

/// One entry of the folded message view (`message.list`): a whole agent message, one tool call
/// with its latest status, a status line...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Sequence number of the first event folded into this entry; entries are ordered by it.
    pub seq: u64,
    /// What the entry shows.
    pub kind: MessageKind,
    /// The entry's text: message text, tool call title, status or error line.
    pub text: String,
    /// The chunks' message id for `agent`/`thought` entries that had one; for `permission`, the
    /// request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The tool call's id, for `tool_call` entries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Latest status of a tool call (`pending`, `in_progress`, `completed`, `failed`) or of a
    /// permission request (`pending`, `selected:<option_id>`, `cancelled`); absent for other
    /// kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Kind-specific detail: tool call fields, plan entries, permission options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Time of the first event folded into the entry (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// Time of the last event folded into the entry (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
}

/// An agent the server can run, as `agent.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentInfo {
    /// The name tasks use to pick the agent (`task.create`'s `agent`).
    pub name: String,
    /// A human-readable name.
    pub display_name: String,
    /// The agent can reload its own session on resume (ACP `session/load`).
    pub native_session_resume: bool,
    /// On a resume without native reload, the server replays the journal's history to the
    /// agent as context.
    pub history_context_injection: bool,
    /// The agent's command was found (on PATH, or as an absolute path).
    pub installed: bool,
    /// The MCP servers agents.toml gives it, without their secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::McpServerInfo>,
}

string_enum! {
    /// Why a session needs the user now (the `attention` of a session row and of
    /// `session.state_changed`); absent when it needs nothing.
    Attention {
        /// The agent asked for a permission that nobody has answered yet.
        Permission => "permission",
        /// The agent's turn is over: the session waits for the next prompt.
        Input => "input",
        /// The session is active but no agent runs for it: resume it before prompting.
        Resume => "resume",
        /// The session failed (`last_error` says why).
        Failed => "failed",
    }
}
