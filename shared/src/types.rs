use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Declares a string-valued state enum whose one spelling is used in SQLite, on the wire and in
/// the TUI, so the three can never disagree.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

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
        Created => "CREATED",
        Starting => "STARTING",
        Running => "RUNNING",
        WaitingForInput => "WAITING_FOR_INPUT",
        Completed => "COMPLETED",
        Failed => "FAILED",
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
        Todo => "TODO",
        InProgress => "IN_PROGRESS",
        Review => "REVIEW",
        Completed => "COMPLETED",
        Failed => "FAILED",
    }
}

string_enum! {
    /// Why `needs_resume` is what it is (the seed's status cases, plus the non-active ones).
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
    }
}

/// A unit of work given to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    pub id: String,
    pub title: String,
    pub description: String,
    pub state: TaskState,
    pub agent: String,
    /// The directory agents of this task work in (the worktree when one was created).
    pub workdir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_branch: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// Archived tasks are left out of `task.list` and `task.session.list` unless asked for;
    /// their data is kept.
    #[serde(default)]
    pub archived: bool,
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
    pub session_id: String,
    pub task_id: String,
    pub agent: String,
    pub state: SessionState,
    pub task_state: TaskState,
    pub is_agent_running: bool,
    pub is_resumable: bool,
    pub needs_resume: bool,
    pub resume_reason: ResumeReason,
    pub has_resume_token: bool,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub worktree_path: Option<String>,
    /// Process id of the attached agent, when one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_pid: Option<u32>,
}

/// One row of `task.session.list`: the status fields plus what a list needs to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    #[serde(flatten)]
    pub status: SessionStatus,
    pub task_title: String,
    /// The session's task is archived.
    #[serde(default)]
    pub task_archived: bool,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// Sequence number of the newest event in the session's journal (0 when empty).
    pub last_seq: u64,
}

string_enum! {
    /// What a folded message row shows.
    MessageKind {
        User => "user",
        Agent => "agent",
        Thought => "thought",
        ToolCall => "tool_call",
        Plan => "plan",
        Status => "status",
        Error => "error",
        Permission => "permission",
    }
}

/// One entry of the folded message view (`message.list`): a whole agent message, one tool call
/// with its latest status, a status line...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Sequence number of the first event folded into this entry; entries are ordered by it.
    pub seq: u64,
    pub kind: MessageKind,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Kind-specific detail: tool call fields, plan entries, permission options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
}

/// An agent the server can run, as `agent.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentInfo {
    pub name: String,
    pub display_name: String,
    pub native_session_resume: bool,
    pub history_context_injection: bool,
    /// The agent's command was found (on PATH, or as an absolute path).
    pub installed: bool,
}
