//! What the app asks the outside world to do, and what comes back. The app only produces
//! [`Command`]s and consumes [`Outcome`]s; the runner performs them in spawned tasks, so the
//! app stays pure (testable without a server) and the UI never waits on the network.

use std::time::Duration;

use std::path::PathBuf;

use baton_protocol::{
    AgentInfo, ClientError, ExportFormat, MessageListResult, MessageSearchResult, PermissionListResult, PermissionRule,
    SessionInfo, SessionResumeResult, SessionStatus, SessionStopResult, SubscribeResult, Task, TaskArchiveResult,
    TaskCreateParams, TaskCreateResult, TaskDeleteResult, UsageGetResult,
};

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Send(Request),
    /// Start the local server again if it crashed: the one we were connected to went away (see
    /// [`crate::launcher::restart_server`], which decides from `DATA_DIR/batond.url`).
    StartServer,
    /// Try to connect to the server after waiting `after`.
    Connect {
        after: Duration,
    },
    /// Put this text on the clipboard of the user's terminal (OSC 52; see `clipboard`).
    Copy(String),
    /// Stop the local server and its agents, hosted ones included (`batond stop --agents`).
    StopServer,
    /// Write these bytes to the terminal: an alert (see `alerts`).
    Alert(String),
    /// Turn the terminal's mouse reporting on or off (see `app/mouse.rs`).
    Mouse(bool),
    /// Step aside and run a shell on the terminal (see `app/shell.rs`); the screen comes back
    /// when it exits.
    Shell(baton_protocol::TaskShellResult),
}

/// One server request; each maps to one protocol action.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// The first page of the session list (newest sessions first).
    ListSessions,
    /// The page after `cursor` (the `next_cursor` of the page before).
    MoreSessions {
        cursor: String,
    },
    ListAgents,
    SessionStatus {
        session_id: String,
    },
    Resume {
        session_id: String,
        fresh: bool,
        /// Launch a FAILED session again (the user fixed its cause).
        retry_failed: bool,
        /// Sent by the auto-resume rather than by a key.
        automatic: bool,
    },
    Cancel {
        session_id: String,
    },
    Stop {
        session_id: String,
    },
    SendMessage {
        session_id: String,
        content: String,
        /// Ctrl-S: cancel the running turn and send this first (`message.add` with `steer`).
        steer: bool,
    },
    LoadMessages {
        session_id: String,
    },
    /// The page of `message.list` before the oldest entry held (see `app/older_messages.rs`).
    LoadOlderMessages {
        session_id: String,
        before_seq: u64,
    },
    Subscribe {
        session_id: String,
        since_seq: Option<u64>,
    },
    Unsubscribe {
        session_id: String,
    },
    RespondPermission {
        session_id: String,
        request_id: String,
        option_id: String,
    },
    CreateTask(TaskCreateParams),
    /// `task.session.start`: a new session of the task, with the task's agent, starting idle.
    StartSession {
        task_id: String,
    },
    RenameTask {
        task_id: String,
        title: String,
    },
    /// `task.archive`, stopping the task's running agents first.
    ArchiveTask {
        task_id: String,
    },
    UnarchiveTask {
        task_id: String,
    },
    /// The sessions of archived tasks (`task.session.list` with `archived: only`).
    ListArchived,
    DeleteTask {
        task_id: String,
        stop_agents: bool,
    },
    /// `permission.list`: the approval queue (its first page).
    ListPermissions,
    ListRules {
        session_id: String,
    },
    RevokeRule {
        session_id: String,
        rule_id: String,
    },
    /// `session.options`.
    Options {
        session_id: String,
    },
    /// `session.set_mode`.
    SetMode {
        session_id: String,
        mode_id: String,
    },
    /// `session.set_option`.
    SetOption {
        session_id: String,
        option_id: String,
        value: baton_protocol::OptionValue,
    },
    /// `queue.list`.
    QueueList {
        session_id: String,
    },
    /// `queue.edit`.
    QueueEdit {
        session_id: String,
        id: String,
        content: String,
    },
    /// `queue.remove`.
    QueueRemove {
        session_id: String,
        id: String,
    },
    /// `queue.release`.
    QueueRelease {
        session_id: String,
    },
    /// `device.list`.
    ListDevices,
    /// `device.pair` for a phone (watch and answer): the page's address is made from the
    /// server's (see `app/devices.rs`).
    PairDevice {
        server_url: String,
    },
    /// `device.revoke`.
    RevokeDevice {
        device_id: String,
    },
    /// Every page of `session.export`, written to `path` on this machine (see `app/export.rs`).
    Export {
        session_id: String,
        format: ExportFormat,
        thoughts: bool,
        path: PathBuf,
        /// Replace a file that is there; without it, an existing file is left alone.
        overwrite: bool,
    },
    /// A page of `message.search` (see `app/search.rs`).
    Search {
        query: String,
        cursor: Option<String>,
    },
    /// `task.session.fork`; with `agent`, the conversation handed to that agent.
    Fork {
        session_id: String,
        agent: Option<String>,
    },
    /// `usage.get`: the total, and the session's own when one is given (see `app/usage.rs`).
    Usage {
        session_id: Option<String>,
    },
    /// `task.changes` (the first page of 2000 files), with or without line counts.
    Changes {
        task_id: String,
        counts: bool,
    },
    /// `task.diff`.
    Diff {
        task_id: String,
        path: String,
        part: baton_protocol::ChangePart,
    },
    /// `task.commit`.
    Commit {
        task_id: String,
        message: String,
        paths: Option<Vec<String>>,
        force: bool,
    },
    /// `task.merge`.
    Merge {
        task_id: String,
        remove_worktree: bool,
        force: bool,
    },
    /// `task.pull_request`.
    PullRequest {
        task_id: String,
        force: bool,
    },
    /// `task.shell`.
    Shell {
        task_id: String,
    },
}

impl Request {
    /// The longest a request may take. Sending a message may first resume the agent, which the
    /// server bounds at 90 s, so it gets more than that.
    pub fn timeout(&self) -> Duration {
        match self {
            Request::SendMessage { .. } => Duration::from_secs(120),
            // Per page; a long transcript takes several.
            Request::Export { .. } => Duration::from_secs(60),
            // Git over a large repository, a push over the network.
            Request::Commit { .. } | Request::Merge { .. } | Request::PullRequest { .. } => Duration::from_secs(120),
            _ => Duration::from_secs(30),
        }
    }
}

/// A successful answer, typed by request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The whole list in one answer.
    Sessions(Vec<SessionInfo>),
    /// A page of the list: the first one (`appended: false`) or one that follows.
    SessionPage {
        rows: Vec<SessionInfo>,
        next_cursor: Option<String>,
        appended: bool,
        /// The server-wide count of sessions that need the user, when the page was read.
        attention_count: u64,
    },
    Agents(Vec<AgentInfo>),
    Status(SessionStatus),
    Resumed(SessionResumeResult),
    Cancelled,
    Stopped(SessionStopResult),
    /// The message started a turn, or (`queued`) waits for the running one to end.
    MessageSent {
        queued: bool,
    },
    /// The paired devices (`device.list`).
    Devices(Vec<baton_protocol::DeviceInfo>),
    /// A pairing code, with the address and QR code to open it by.
    Paired(Box<crate::app::Pairing>),
    /// A device revoked.
    DeviceRevoked(baton_protocol::DeviceRevokeResult),
    /// The answer of a `queue.*` action: the session's queue.
    Queue(Box<baton_protocol::QueueResult>),
    Messages(MessageListResult),
    Subscribed(SubscribeResult),
    Unsubscribed,
    PermissionAnswered,
    TaskCreated(Box<TaskCreateResult>),
    SessionStarted(Box<SessionInfo>),
    TaskChanged(Box<Task>),
    /// `task.archive` answered: the task, and the sessions whose agents it stopped.
    TaskArchived(Box<TaskArchiveResult>),
    ArchivedSessions(Vec<SessionInfo>),
    TaskDeleted(TaskDeleteResult),
    Permissions(PermissionListResult),
    Rules {
        session_id: String,
        rules: Vec<PermissionRule>,
    },
    RuleRevoked(PermissionRule),
    /// The answer of `session.options`, `session.set_mode` or `session.set_option`.
    Options(Box<baton_protocol::SessionOptionsResult>),
    /// The whole export was written to `path` (absolute).
    Exported {
        path: PathBuf,
        bytes: usize,
    },
    /// The server gave the export, and the file could not be written.
    ExportNotWritten {
        reason: String,
        /// The file is there, and the request did not say to overwrite it.
        exists: bool,
    },
    SearchHits(MessageSearchResult),
    Forked(Box<SessionInfo>),
    Usage(Box<UsageGetResult>),
    Changes(Box<baton_protocol::TaskChangesResult>),
    Diff {
        task_id: String,
        result: Box<baton_protocol::TaskDiffResult>,
    },
    Committed(baton_protocol::TaskCommitResult),
    Merged(baton_protocol::TaskMergeResult),
    PullRequestOpened(baton_protocol::TaskPullRequestResult),
    Shell(baton_protocol::TaskShellResult),
}

/// What [`Command::StartServer`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerRestart {
    /// The server had crashed (its `batond.url` was left behind); this `baton` started it again.
    Started,
    /// It had crashed, and another `baton` started it again first: it answers.
    StartedByAnother,
    /// Its `batond.url` is gone: it was shut down cleanly, on purpose, so it is left stopped.
    Stopped,
    /// Our data dir's `batond.url` names another URL: the server we lost was not started on our
    /// data dir, so it is not ours to start.
    NotOurs(String),
}

/// The result of one request, with the request it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The connection the request went out on; failures from an older connection are stale.
    pub epoch: u64,
    pub request: Request,
    pub result: Result<Reply, ClientError>,
}
