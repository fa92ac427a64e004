//! Every client→server action: its params struct (the request payload) and its result.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    AgentInfo, ArchivedFilter, DeviceListParams, DeviceListResult, DevicePairParams, DevicePairResult,
    DeviceRevokeParams, DeviceRevokeResult, ErrorPayload, Message, OptionValue, PermissionListParams,
    PermissionListResult, PermissionRuleListParams, PermissionRuleListResult, PermissionRuleRevokeParams,
    PermissionRuleRevokeResult, PushKeyParams, PushKeyResult, PushSubscribeParams, PushSubscribeResult,
    PushUnsubscribeParams, PushUnsubscribeResult, QueueEditParams, QueueListParams, QueueReleaseParams,
    QueueRemoveParams, QueueResult, QueuedMessage, SessionInfo, SessionOptionsParams, SessionOptionsResult,
    SessionOrder, SessionSetModeParams, SessionSetOptionParams, SessionState, SessionStatus, Task, TaskChangesParams,
    TaskChangesResult, TaskCommitParams, TaskCommitResult, TaskDiffParams, TaskDiffResult, TaskMergeParams,
    TaskMergeResult, TaskPullRequestParams, TaskPullRequestResult, TaskShellParams, TaskShellResult, UsageGetParams,
    UsageGetResult, MAX_CHANGES_PAGE, MAX_COMMIT_PATHS, MAX_PERMISSION_PAGE,
};

/// A request payload: names its action and the type of its result.
pub trait Request: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The action name sent in the envelope (`task.create`...).
    const ACTION: &'static str;
    /// The type of the action's result (the response payload).
    type Response: Serialize + DeserializeOwned + Send + 'static;
}

/// Declares the action table once: the `Request` impls, and `ClientRequest`, the enum the server
/// dispatches on.
macro_rules! actions {
    ($($variant:ident($params:ty) => $action:literal -> $result:ty;)+) => {
        $(impl Request for $params {
            const ACTION: &'static str = $action;
            type Response = $result;
        })+

        /// Every request a client can send, decoded from an envelope's action and payload.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ClientRequest {
            $(#[doc = concat!("`", $action, "`.")] $variant($params)),+
        }

        impl ClientRequest {
            /// Every action name, in table order.
            pub const ACTIONS: &'static [&'static str] = &[$($action),+];

            /// The request's action name.
            pub fn action(&self) -> &'static str {
                match self { $(ClientRequest::$variant(_) => $action),+ }
            }

            /// Decodes a request. A `null` payload is read as `{}` so that actions without
            /// parameters may omit it.
            pub fn parse(action: &str, payload: Value) -> Result<Self, RequestParseError> {
                let payload = if payload.is_null() { Value::Object(Default::default()) } else { payload };
                match action {
                    $($action => serde_json::from_value::<$params>(payload)
                        .map(ClientRequest::$variant)
                        .map_err(|e| RequestParseError::InvalidPayload { action: $action, reason: e.to_string() }),)+
                    other => Err(RequestParseError::UnknownAction(other.to_string())),
                }
            }

            /// The request's params as a JSON payload.
            pub fn payload(&self) -> Value {
                match self { $(ClientRequest::$variant(p) => serde_json::to_value(p).unwrap_or_default()),+ }
            }

            /// `(action, params schema, result schema)` for every action, in table order; the
            /// schemas are references into the definitions of `params` and `results`.
            pub fn schemas(
                params: &mut schemars::SchemaGenerator,
                results: &mut schemars::SchemaGenerator,
            ) -> Vec<(&'static str, schemars::Schema, schemars::Schema)> {
                vec![$(($action, params.subschema_for::<$params>(), results.subschema_for::<$result>())),+]
            }
        }
    };
}

/// Longest id a client may send (ids the server hands out are about 40 characters).
pub const MAX_ID_CHARS: usize = 128;

/// Checks an id a client sent before it is looked up or becomes part of a file name (history
/// files, worktrees): 1 to [`MAX_ID_CHARS`] ASCII letters, digits, `-` or `_`. Anything else
/// (`..`, `/`, NUL, spaces, non-ASCII) is a `VALIDATION_ERROR` naming the field.
pub fn validate_id(field: &str, id: &str) -> Result<(), ErrorPayload> {
    let well_formed = !id.is_empty()
        && id.len() <= MAX_ID_CHARS
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if well_formed {
        return Ok(());
    }
    let shown: String = id.chars().take(40).collect();
    Err(ErrorPayload::validation(format!(
        "{field} {shown:?} is not a valid id (1 to {MAX_ID_CHARS} ASCII letters, digits, '-' or '_')"
    )))
}

/// Checks an id an agent chose (a mode, an option or one of its values): agents use ids like
/// `gpt-5.1-codex/high` or `claude-sonnet-4-5@20250929`, so only length and control
/// characters are checked; whether the agent offers it is checked against its offer.
pub fn validate_option_id(field: &str, id: &str) -> Result<(), ErrorPayload> {
    if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
        let shown: String = id.chars().filter(|c| !c.is_control()).take(40).collect();
        return Err(ErrorPayload::validation(format!(
            "{field} {shown:?} is not a valid id (1 to 256 bytes, no control characters)"
        )));
    }
    Ok(())
}

/// A path inside a repository as `task.changes` lists it: relative, no `..` component, no NUL
/// or other control character, at most 4096 bytes. Git is given it as a literal pathspec.
pub fn validate_repo_path(path: &str) -> Result<(), ErrorPayload> {
    let bad = path.is_empty()
        || path.len() > 4096
        || path.starts_with('/')
        || path.chars().any(char::is_control)
        || path.split('/').any(|part| part == "..");
    if bad {
        let shown: String = path.chars().filter(|c| !c.is_control()).take(80).collect();
        return Err(ErrorPayload::validation(format!(
            "path {shown:?} is not a file of the repository (relative, no .. component, no control characters)"
        )));
    }
    Ok(())
}

impl ClientRequest {
    /// Checks the ids a request carries (see [`validate_id`]). The server runs it before the
    /// request reaches the store or the file system.
    pub fn validate(&self) -> Result<(), ErrorPayload> {
        match self {
            ClientRequest::AgentList(_) | ClientRequest::TaskList(_) | ClientRequest::Ping(_) => Ok(()),
            ClientRequest::TaskCreate(p) => {
                crate::validate_mcp_servers(&p.mcp_servers).map_err(ErrorPayload::validation)
            }
            ClientRequest::SessionList(p) => {
                if let Some(limit) = p.limit {
                    if limit == 0 || limit > MAX_SESSION_PAGE {
                        return Err(ErrorPayload::validation(format!(
                            "limit must be between 1 and {MAX_SESSION_PAGE} (got {limit})"
                        )));
                    }
                }
                p.task_id.as_deref().map_or(Ok(()), |id| validate_id("task_id", id))
            }
            ClientRequest::SessionStart(p) => validate_id("task_id", &p.task_id),
            ClientRequest::TaskUpdate(TaskUpdateParams { task_id, .. })
            | ClientRequest::TaskArchive(TaskArchiveParams { task_id, .. })
            | ClientRequest::TaskUnarchive(TaskUnarchiveParams { task_id })
            | ClientRequest::TaskDelete(TaskDeleteParams { task_id, .. })
            | ClientRequest::TaskMerge(TaskMergeParams { task_id, .. })
            | ClientRequest::TaskPullRequest(TaskPullRequestParams { task_id, .. })
            | ClientRequest::TaskShell(TaskShellParams { task_id }) => validate_id("task_id", task_id),
            ClientRequest::TaskChanges(p) => {
                if let Some(limit) = p.limit {
                    if limit == 0 || limit > MAX_CHANGES_PAGE {
                        return Err(ErrorPayload::validation(format!(
                            "limit must be between 1 and {MAX_CHANGES_PAGE} (got {limit})"
                        )));
                    }
                }
                validate_id("task_id", &p.task_id)
            }
            ClientRequest::TaskDiff(p) => {
                validate_id("task_id", &p.task_id)?;
                validate_repo_path(&p.path)
            }
            ClientRequest::TaskCommit(p) => {
                validate_id("task_id", &p.task_id)?;
                if p.message.trim().is_empty() {
                    return Err(ErrorPayload::validation("message must not be empty: say what the commit does"));
                }
                if p.message.contains('\0') {
                    return Err(ErrorPayload::validation("message must not contain a NUL character"));
                }
                if let Some(paths) = &p.paths {
                    if paths.is_empty() || paths.len() > MAX_COMMIT_PATHS {
                        return Err(ErrorPayload::validation(format!(
                            "paths must list 1 to {MAX_COMMIT_PATHS} files (leave it out to commit every change)"
                        )));
                    }
                    paths.iter().try_for_each(|path| validate_repo_path(path))?;
                }
                Ok(())
            }
            ClientRequest::SessionStatus(SessionStatusParams { session_id })
            | ClientRequest::SessionResume(SessionResumeParams { session_id, .. })
            | ClientRequest::SessionCancel(SessionCancelParams { session_id })
            | ClientRequest::SessionStop(SessionStopParams { session_id })
            | ClientRequest::MessageAdd(MessageAddParams { session_id, .. })
            | ClientRequest::MessageList(MessageListParams { session_id, .. })
            | ClientRequest::MessageText(MessageTextParams { session_id, .. })
            | ClientRequest::Subscribe(SubscribeParams { session_id, .. })
            | ClientRequest::Unsubscribe(UnsubscribeParams { session_id })
            | ClientRequest::SessionExport(SessionExportParams { session_id, .. }) => {
                validate_id("session_id", session_id)
            }
            ClientRequest::MessageSearch(p) => {
                if p.query.trim().is_empty() || p.query.chars().count() > MAX_SEARCH_QUERY_CHARS {
                    return Err(ErrorPayload::validation(format!(
                        "query must have 1 to {MAX_SEARCH_QUERY_CHARS} characters besides spaces"
                    )));
                }
                if p.query.contains('\0') {
                    return Err(ErrorPayload::validation("query must not contain a NUL character"));
                }
                let words = p.query.split_whitespace().count();
                if words > MAX_SEARCH_WORDS {
                    return Err(ErrorPayload::validation(format!(
                        "query must have at most {MAX_SEARCH_WORDS} words (got {words})"
                    )));
                }
                let prefixes = p.query.split_whitespace().filter(|word| word.ends_with('*')).count();
                if prefixes > MAX_SEARCH_PREFIXES {
                    return Err(ErrorPayload::validation(format!(
                        "query must have at most {MAX_SEARCH_PREFIXES} words ending in * (got {prefixes})"
                    )));
                }
                if let Some(limit) = p.limit {
                    if limit == 0 || limit > MAX_SEARCH_PAGE {
                        return Err(ErrorPayload::validation(format!(
                            "limit must be between 1 and {MAX_SEARCH_PAGE} (got {limit})"
                        )));
                    }
                }
                p.session_id.as_deref().map_or(Ok(()), |id| validate_id("session_id", id))
            }
            ClientRequest::PermissionRespond(p) => {
                validate_id("session_id", &p.session_id)?;
                validate_id("request_id", &p.request_id)
            }
            ClientRequest::SessionFork(SessionForkParams { session_id, .. })
            | ClientRequest::SessionOptions(SessionOptionsParams { session_id })
            | ClientRequest::QueueList(QueueListParams { session_id })
            | ClientRequest::QueueRelease(QueueReleaseParams { session_id }) => validate_id("session_id", session_id),
            ClientRequest::QueueEdit(QueueEditParams { session_id, id, .. })
            | ClientRequest::QueueRemove(QueueRemoveParams { session_id, id }) => {
                validate_id("session_id", session_id)?;
                validate_id("id", id)
            }
            ClientRequest::SessionSetMode(p) => {
                validate_id("session_id", &p.session_id)?;
                validate_option_id("mode_id", &p.mode_id)
            }
            ClientRequest::SessionSetOption(p) => {
                validate_id("session_id", &p.session_id)?;
                validate_option_id("option_id", &p.option_id)?;
                match &p.value {
                    OptionValue::Id(value) => validate_option_id("value", value),
                    OptionValue::Bool(_) => Ok(()),
                }
            }
            ClientRequest::UsageGet(p) => p.session_id.as_deref().map_or(Ok(()), |id| validate_id("session_id", id)),
            ClientRequest::PermissionList(p) => match p.limit {
                Some(limit) if limit == 0 || limit > MAX_PERMISSION_PAGE => Err(ErrorPayload::validation(format!(
                    "limit must be between 1 and {MAX_PERMISSION_PAGE} (got {limit})"
                ))),
                _ => Ok(()),
            },
            ClientRequest::PermissionRuleList(PermissionRuleListParams { session_id }) => {
                validate_id("session_id", session_id)
            }
            ClientRequest::PermissionRuleRevoke(p) => {
                validate_id("session_id", &p.session_id)?;
                validate_id("rule_id", &p.rule_id)
            }
            ClientRequest::DevicePair(p) => {
                if let Some(name) = &p.name {
                    let length = name.chars().count();
                    if name.trim().is_empty() || length > 64 || name.chars().any(char::is_control) {
                        return Err(ErrorPayload::validation(
                            "name must be 1 to 64 characters, not all blank, without control characters",
                        ));
                    }
                }
                match p.expires_in_secs {
                    Some(secs) if secs == 0 || secs > crate::MAX_PAIRING_SECS => Err(ErrorPayload::validation(
                        format!("expires_in_secs must be between 1 and {} (got {secs})", crate::MAX_PAIRING_SECS),
                    )),
                    _ => Ok(()),
                }
            }
            ClientRequest::DeviceList(_) => Ok(()),
            ClientRequest::DeviceRevoke(p) => validate_id("device_id", &p.device_id),
            ClientRequest::PushKey(_) => Ok(()),
            ClientRequest::PushSubscribe(p) => {
                let web = p.endpoint.starts_with("https://") || p.endpoint.starts_with("http://");
                if !web || p.endpoint.len() > 2048 || p.endpoint.chars().any(char::is_whitespace) {
                    return Err(ErrorPayload::validation("endpoint must be an http(s) URL of at most 2048 bytes"));
                }
                let base64url = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                if !(80..=100).contains(&p.p256dh.len()) || !base64url(&p.p256dh) {
                    return Err(ErrorPayload::validation("p256dh must be a P-256 public key in base64url"));
                }
                if !(16..=32).contains(&p.auth.len()) || !base64url(&p.auth) {
                    return Err(ErrorPayload::validation("auth must be a 16-byte secret in base64url"));
                }
                Ok(())
            }
            ClientRequest::PushUnsubscribe(p) => match p.endpoint.len() {
                1..=2048 => Ok(()),
                _ => Err(ErrorPayload::validation("endpoint must be 1 to 2048 bytes")),
            },
        }
    }
}

/// Why a request could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestParseError {
    /// The action is not one this version knows (`UNKNOWN_ACTION`).
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    /// The payload does not fit the action (`BAD_REQUEST`).
    #[error("invalid payload for {action}: {reason}")]
    InvalidPayload {
        /// The action.
        action: &'static str,
        /// The decode error.
        reason: String,
    },
}

impl RequestParseError {
    /// The error frame's payload: `UNKNOWN_ACTION` (listing the actions), `VALIDATION_ERROR`
    /// for a number out of its range (`limit: -1` is refused as `limit: 0` is), `BAD_REQUEST`
    /// for any other payload that does not fit the action.
    pub fn to_error(&self) -> ErrorPayload {
        match self {
            RequestParseError::UnknownAction(_) => ErrorPayload::new(crate::ErrorCode::UnknownAction, self.to_string())
                .with_details(serde_json::json!({"actions": ClientRequest::ACTIONS})),
            // serde reports an integer that does not fit the field's type (a negative or too
            // large count) as an invalid *value*, unlike a value of the wrong type; serde_json
            // gives no other way to tell them apart than the text of its message.
            RequestParseError::InvalidPayload { reason, .. } if reason.starts_with("invalid value: integer") => {
                ErrorPayload::validation(format!("{self} (out of range)"))
            }
            RequestParseError::InvalidPayload { .. } => ErrorPayload::bad_request(self.to_string()),
        }
    }
}

actions! {
    AgentList(AgentListParams) => "agent.list" -> AgentListResult;
    TaskCreate(TaskCreateParams) => "task.create" -> TaskCreateResult;
    TaskList(TaskListParams) => "task.list" -> TaskListResult;
    TaskUpdate(TaskUpdateParams) => "task.update" -> TaskUpdateResult;
    TaskArchive(TaskArchiveParams) => "task.archive" -> TaskArchiveResult;
    TaskUnarchive(TaskUnarchiveParams) => "task.unarchive" -> TaskArchiveResult;
    TaskDelete(TaskDeleteParams) => "task.delete" -> TaskDeleteResult;
    SessionList(SessionListParams) => "task.session.list" -> SessionListResult;
    SessionStatus(SessionStatusParams) => "task.session.status" -> SessionStatus;
    SessionResume(SessionResumeParams) => "task.session.resume" -> SessionResumeResult;
    SessionStart(SessionStartParams) => "task.session.start" -> SessionStartResult;
    SessionCancel(SessionCancelParams) => "task.session.cancel" -> SessionCancelResult;
    SessionStop(SessionStopParams) => "task.session.stop" -> SessionStopResult;
    MessageAdd(MessageAddParams) => "message.add" -> MessageAddResult;
    MessageList(MessageListParams) => "message.list" -> MessageListResult;
    MessageText(MessageTextParams) => "message.text" -> MessageTextResult;
    Subscribe(SubscribeParams) => "session.subscribe" -> SubscribeResult;
    Unsubscribe(UnsubscribeParams) => "session.unsubscribe" -> UnsubscribeResult;
    PermissionRespond(PermissionRespondParams) => "permission.respond" -> PermissionRespondResult;
    Ping(PingParams) => "ping" -> PingResult;
    SessionFork(SessionForkParams) => "task.session.fork" -> SessionForkResult;
    UsageGet(UsageGetParams) => "usage.get" -> UsageGetResult;
    SessionExport(SessionExportParams) => "session.export" -> SessionExportResult;
    MessageSearch(MessageSearchParams) => "message.search" -> MessageSearchResult;
    PermissionList(PermissionListParams) => "permission.list" -> PermissionListResult;
    PermissionRuleList(PermissionRuleListParams) => "permission.rule.list" -> PermissionRuleListResult;
    PermissionRuleRevoke(PermissionRuleRevokeParams) => "permission.rule.revoke" -> PermissionRuleRevokeResult;
    SessionOptions(SessionOptionsParams) => "session.options" -> SessionOptionsResult;
    SessionSetMode(SessionSetModeParams) => "session.set_mode" -> SessionOptionsResult;
    SessionSetOption(SessionSetOptionParams) => "session.set_option" -> SessionOptionsResult;
    QueueList(QueueListParams) => "queue.list" -> QueueResult;
    QueueEdit(QueueEditParams) => "queue.edit" -> QueueResult;
    QueueRemove(QueueRemoveParams) => "queue.remove" -> QueueResult;
    QueueRelease(QueueReleaseParams) => "queue.release" -> QueueResult;
    DevicePair(DevicePairParams) => "device.pair" -> DevicePairResult;
    DeviceList(DeviceListParams) => "device.list" -> DeviceListResult;
    DeviceRevoke(DeviceRevokeParams) => "device.revoke" -> DeviceRevokeResult;
    PushKey(PushKeyParams) => "push.key" -> PushKeyResult;
    PushSubscribe(PushSubscribeParams) => "push.subscribe" -> PushSubscribeResult;
    PushUnsubscribe(PushUnsubscribeParams) => "push.unsubscribe" -> PushUnsubscribeResult;
    TaskChanges(TaskChangesParams) => "task.changes" -> TaskChangesResult;
    TaskDiff(TaskDiffParams) => "task.diff" -> TaskDiffResult;
    TaskCommit(TaskCommitParams) => "task.commit" -> TaskCommitResult;
    TaskMerge(TaskMergeParams) => "task.merge" -> TaskMergeResult;
    TaskPullRequest(TaskPullRequestParams) => "task.pull_request" -> TaskPullRequestResult;
    TaskShell(TaskShellParams) => "task.shell" -> TaskShellResult;
}

fn default_true() -> bool {
    true
}

/// `agent.list`: no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentListParams {}

/// The answer to `agent.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentListResult {
    /// The configured agents, sorted by name.
    pub agents: Vec<AgentInfo>,
}

/// `task.create`: creates a task and its first session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskCreateParams {
    /// The task's title; must not be empty.
    pub title: String,
    /// What to do; the first prompt when `start` is true. Default `""`.
    #[serde(default)]
    pub description: String,
    /// Agent name from `agent.list`; a client never supplies a command line.
    pub agent: String,
    /// Absolute working directory; defaults to the server's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// A git repository; with `worktree: true` the task gets its own worktree and branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Create a worktree and branch of `repository` for the task (needs `repository`).
    /// Default false.
    #[serde(default)]
    pub worktree: bool,
    /// Launch the agent right away with the description as the first prompt.
    #[serde(default = "default_true")]
    pub start: bool,
    /// MCP servers the task's agents get, besides those agents.toml gives the agent (at most
    /// 16, names unique). Kept with the task and passed on every start and resume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::McpServerConfig>,
}

impl TaskCreateParams {
    /// A task for `agent` whose first prompt is `description`. Defaults: `start: true` (the
    /// agent launches at once with the description as its first prompt), no `workdir` (the
    /// server's working directory), no `repository`, `worktree: false`. Set the fields to change
    /// them, or use [`TaskCreateParams::workdir`] and [`TaskCreateParams::start`].
    pub fn new(title: impl Into<String>, description: impl Into<String>, agent: impl Into<String>) -> Self {
        TaskCreateParams {
            title: title.into(),
            description: description.into(),
            agent: agent.into(),
            workdir: None,
            repository: None,
            worktree: false,
            start: true,
            mcp_servers: Vec::new(),
        }
    }

    /// The same task working in `workdir` (an absolute directory).
    pub fn workdir(mut self, workdir: impl Into<String>) -> Self {
        self.workdir = Some(workdir.into());
        self
    }

    /// The same task, launched at once (`true`, the default) or left `CREATED` (`false`).
    pub fn start(mut self, start: bool) -> Self {
        self.start = start;
        self
    }
}

/// The answer to `task.create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskCreateResult {
    /// The new task.
    pub task: Task,
    /// Its first session (`STARTING` when `start` was true, else `CREATED`).
    pub session: SessionInfo,
}

/// `task.list`: the tasks, filtered by their `archived` flag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskListParams {
    /// Which tasks by their `archived` flag; default `exclude`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<ArchivedFilter>,
}

/// The answer to `task.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskListResult {
    /// The tasks.
    pub tasks: Vec<Task>,
}

/// Changes a task's title and/or description; a field left out keeps its value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskUpdateParams {
    /// The task to change.
    pub task_id: String,
    /// Trimmed; must not be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The new description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The answer to `task.update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskUpdateResult {
    /// The task after the change.
    pub task: Task,
}

/// Hides a task (and its sessions) from the default lists; nothing is deleted. Its agents keep
/// running unless `stop_agents` is given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskArchiveParams {
    /// The task to archive.
    pub task_id: String,
    /// Stop the task's running (or starting) agents first, as `task.session.stop` does; without
    /// it they keep running while the task is archived.
    #[serde(default)]
    pub stop_agents: bool,
}

/// Shows an archived task in the default lists again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskUnarchiveParams {
    /// The task to unarchive.
    pub task_id: String,
}

/// The answer to `task.archive` and `task.unarchive`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskArchiveResult {
    /// The task after the change.
    pub task: Task,
    /// The sessions whose agents `task.archive` stopped (`stop_agents`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped_sessions: Vec<String>,
}

/// Deletes a task with its sessions, their journals and history files, and its worktree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDeleteParams {
    /// The task to delete.
    pub task_id: String,
    /// Stop the task's running agents first; without it, a task with a running (or starting)
    /// agent is not deleted (`CONFLICT`).
    #[serde(default)]
    pub stop_agents: bool,
    /// Delete the worktree even when it has uncommitted changes; without it, a worktree with
    /// changes is not deleted (`CONFLICT`, nothing is deleted).
    #[serde(default)]
    pub discard_changes: bool,
    /// Leave the worktree on disk (the task and its sessions are deleted).
    #[serde(default)]
    pub keep_worktree: bool,
}

/// The answer to `task.delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDeleteResult {
    /// The deleted task.
    pub task_id: String,
    /// The sessions deleted with the task.
    pub session_ids: Vec<String>,
    /// The worktree directory that was removed (its branch is kept in the repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_removed: Option<String>,
}

/// Rows of a `task.session.list` page when the request gives no `limit`.
pub const DEFAULT_SESSION_PAGE: u32 = 100;
/// The largest `limit` of a `task.session.list` page.
pub const MAX_SESSION_PAGE: u32 = 1000;

/// `task.session.list`: one page of sessions, filtered and ordered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionListParams {
    /// Only the sessions of this task; all tasks when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Which sessions by their task's `archived` flag; default `exclude`, or `include` when
    /// `task_id` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<ArchivedFilter>,
    /// Only sessions in one of these states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Vec<SessionState>>,
    /// Only sessions changed (created, state, error, task title or flag, agent record) after
    /// this value of the server's change sequence: the `change_seq` of an earlier answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_since: Option<u64>,
    /// Default `created`, or `changed` with `changed_since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<SessionOrder>,
    /// Rows per page, 1 to 1000; default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page (same filters and order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The answer to `task.session.list`: one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionListResult {
    /// The page's rows, in the requested order.
    pub sessions: Vec<SessionInfo>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The server's change sequence when the page was read: pass it as `changed_since` to get
    /// only the rows changed since.
    #[serde(default)]
    pub change_seq: u64,
    /// Sessions of tasks that are not archived that need the user (their `attention` is set),
    /// server-wide, whatever the filters; `attention.changed` tells when it changes.
    #[serde(default)]
    pub attention_count: u64,
}

/// `task.session.status`: the resume-relevant status of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStatusParams {
    /// The session to report on.
    pub session_id: String,
}

impl SessionStatusParams {
    /// The status of `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        SessionStatusParams { session_id: session_id.into() }
    }
}

/// `task.session.resume`: attaches an agent to a session that has none, restoring its
/// conversation when it can.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionResumeParams {
    /// The session to resume.
    pub session_id: String,
    /// Start over without the resume token (the conversation is not restored).
    #[serde(default)]
    pub fresh: bool,
    /// Launch a `FAILED` session again, once what failed it is fixed (an agent command
    /// installed, agents.toml corrected). Without it a `FAILED` session is refused with
    /// `CONFLICT`; for a session in any other state it changes nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry_failed: bool,
}

impl SessionResumeParams {
    /// Resume with the saved conversation (`fresh: false`).
    pub fn new(session_id: impl Into<String>) -> Self {
        SessionResumeParams { session_id: session_id.into(), fresh: false, retry_failed: false }
    }

    /// Start over without the saved conversation (`fresh: true`).
    pub fn fresh(session_id: impl Into<String>) -> Self {
        SessionResumeParams { session_id: session_id.into(), fresh: true, retry_failed: false }
    }

    /// Launch a `FAILED` session again (with its saved conversation), its cause fixed.
    pub fn retry_failed(session_id: impl Into<String>) -> Self {
        SessionResumeParams { session_id: session_id.into(), fresh: false, retry_failed: true }
    }
}

/// The answer to `task.session.resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionResumeResult {
    /// The session.
    pub session_id: String,
    /// `STARTING` when this request launched the agent; the current state when an agent was
    /// already attached or starting. Readiness arrives as `session.state_changed`.
    pub state: SessionState,
    /// False when the session already had an agent (running or starting): nothing was launched.
    pub launched: bool,
}

/// `task.session.start`: a new session of an existing task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStartParams {
    /// The task the session belongs to.
    pub task_id: String,
    /// Defaults to the task's agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// First prompt; defaults to the task description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

/// The answer to `task.session.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStartResult {
    /// The new session (`STARTING`).
    pub session: SessionInfo,
}

/// `task.session.cancel`: cancels the running turn; the session goes back to
/// `WAITING_FOR_INPUT`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionCancelParams {
    /// The session whose turn to cancel.
    pub session_id: String,
}

/// The answer to `task.session.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionCancelResult {
    /// The session.
    pub session_id: String,
}

/// `task.session.stop`: stops the agent and completes the session (and its task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStopParams {
    /// The session to stop.
    pub session_id: String,
}

/// The answer to `task.session.stop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStopResult {
    /// The session.
    pub session_id: String,
    /// Its state now (`COMPLETED`).
    pub state: SessionState,
}

/// `message.add`: sends a prompt to the session's agent, resuming the session first when no
/// agent runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageAddParams {
    /// The session whose agent gets the message.
    pub session_id: String,
    /// The prompt; must not be empty or whitespace only.
    pub content: String,
    /// While a turn runs: cancel it (ACP `session/cancel`) and send this message as soon as the
    /// agent has stopped, ahead of the other queued messages. Without it, a message sent while a
    /// turn runs waits in the session's queue for the turn to end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub steer: bool,
}

impl MessageAddParams {
    /// The message `content` for the session's agent (queued if a turn runs).
    pub fn new(session_id: impl Into<String>, content: impl Into<String>) -> Self {
        MessageAddParams { session_id: session_id.into(), content: content.into(), steer: false }
    }

    /// The message `content`, sent at once: a running turn is cancelled for it.
    pub fn steer(session_id: impl Into<String>, content: impl Into<String>) -> Self {
        MessageAddParams { steer: true, ..MessageAddParams::new(session_id, content) }
    }
}

/// The answer to `message.add`: once the turn has started, the stored message and its turn; when
/// a turn was running, the message as queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageAddResult {
    /// The stored user message: a folded entry of kind `user` with the `seq` of its
    /// `user_message` event. Absent when the message was queued (see `queued`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// The message as it waits in the session's queue, when a turn was running: it is sent
    /// as a turn of its own once the running turn (and the messages queued before it) ended.
    /// Its `user_message` event then says so in the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<QueuedMessage>,
    /// The id of the turn the message opened, carried by that turn's `user_message`,
    /// `turn_started` and `turn_completed` events (live and replayed). Absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// `message.list`: a page of the folded message view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageListParams {
    /// The session whose messages to list.
    pub session_id: String,
    /// Only entries with `seq < before_seq` (paging back); no bound when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_seq: Option<u64>,
    /// Only entries with `seq > after_seq`; no bound when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
    /// At most this many messages (1..=1000, default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl MessageListParams {
    /// The newest 1,000 entries (the most one call returns), oldest first: no `before_seq`, no
    /// `after_seq`, `limit: 1000`. Page back with `before_seq` for older ones.
    pub fn all(session_id: impl Into<String>) -> Self {
        MessageListParams { session_id: session_id.into(), before_seq: None, after_seq: None, limit: Some(1000) }
    }
}

/// The answer to `message.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageListResult {
    /// The entries, oldest first.
    pub messages: Vec<Message>,
    /// More entries match than `limit` allowed.
    pub has_more: bool,
    /// The entries whose `text` is only its start: a finished entry's text longer than
    /// [`MESSAGE_TEXT_CUT`] bytes is cut there (at a character boundary), so that a page stays
    /// small whatever one answer's size; `message.text` reads the rest. Absent when none is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<CutText>,
}

/// The longest text of an entry `message.list` returns whole, in bytes (256 KiB).
pub const MESSAGE_TEXT_CUT: usize = 256 * 1024;

/// The largest `limit` of `message.text`, in bytes (1 MiB).
pub const MAX_MESSAGE_TEXT_PART: u32 = 1024 * 1024;

/// An entry of a `message.list` page whose text is only its start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CutText {
    /// The entry's `seq`.
    pub seq: u64,
    /// The size of its whole text, in bytes (UTF-8).
    pub total_bytes: u64,
}

/// `message.text`: a part of one entry's text, by byte offsets (for an entry `message.list`
/// cut).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageTextParams {
    /// The session of the entry.
    pub session_id: String,
    /// The entry's `seq`.
    pub seq: u64,
    /// Where the part starts, in bytes of the UTF-8 text; a character boundary (default 0:
    /// the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// At most this many bytes (1..=1048576, default 262144); the part ends at the last
    /// character boundary within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// The answer to `message.text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageTextResult {
    /// The entry's `seq`.
    pub seq: u64,
    /// The part of its text.
    pub text: String,
    /// Where the part starts, in bytes.
    pub offset: u64,
    /// The size of the whole text, in bytes.
    pub total_bytes: u64,
    /// Where the next part starts; absent when this part reaches the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

/// `session.subscribe`: the session's events on this connection, replayed from `since_seq`
/// and then live (docs/PROTOCOL.md §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubscribeParams {
    /// The session to follow.
    pub session_id: String,
    /// Replay every event after this sequence number before going live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seq: Option<u64>,
}

impl SubscribeParams {
    /// Live events from now on (`since_seq` absent: nothing older is replayed).
    pub fn from_now(session_id: impl Into<String>) -> Self {
        SubscribeParams { session_id: session_id.into(), since_seq: None }
    }

    /// Every event after `seq` (0 = the whole journal), then live events.
    pub fn since(session_id: impl Into<String>, seq: u64) -> Self {
        SubscribeParams { session_id: session_id.into(), since_seq: Some(seq) }
    }
}

/// The answer to `session.subscribe`, sent before the replayed events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubscribeResult {
    /// The session.
    pub session_id: String,
    /// The newest seq in the journal when subscribing (0 when empty).
    pub current_seq: u64,
}

/// `session.unsubscribe`: stops the session's events on this connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnsubscribeParams {
    /// The session to stop following.
    pub session_id: String,
}

/// The answer to `session.unsubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnsubscribeResult {
    /// The session.
    pub session_id: String,
}

/// `permission.respond`: answers a `permission_request` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRespondParams {
    /// The session whose agent asked.
    pub session_id: String,
    /// The `request_id` of the `permission_request` event.
    pub request_id: String,
    /// The chosen option: one of the request's `options`.
    pub option_id: String,
}

/// The answer to `permission.respond`; a `permission_resolved` event follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRespondResult {
    /// The answered request.
    pub request_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn ids_that_could_name_another_file_are_refused() {
        for good in ["sess-3f9c2a7e5b8d4c1f9e0a6b2d7c4e8f10", "task-1", "a", "A_b-9", &"x".repeat(MAX_ID_CHARS)] {
            assert!(validate_id("session_id", good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_ID_CHARS + 1);
        for bad in ["", "..", "../../etc/passwd", "a/b", "a\\b", "a\0b", "sess 1", "sess.jsonl", "é", "/abs", &long] {
            let error = validate_id("session_id", bad).unwrap_err();
            assert_eq!(error.code, ErrorCode::ValidationError, "{bad:?}");
            assert!(error.message.starts_with("session_id"), "{}", error.message);
        }
        let request = ClientRequest::parse("message.add", serde_json::json!({"session_id": "../x", "content": "hi"}));
        assert!(request.unwrap().validate().is_err());
        let request = ClientRequest::parse("task.session.list", serde_json::json!({"task_id": "a/../../b"}));
        assert!(request.unwrap().validate().is_err());
        assert!(ClientRequest::parse("task.session.list", serde_json::json!({})).unwrap().validate().is_ok());
    }
}

/// `ping`: asks the server for an answer, to tell a live connection from a dead one (browsers
/// cannot see WebSocket pings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PingParams {}

/// The answer to `ping`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PingResult {
    /// The server's clock when it answered (RFC 3339 UTC).
    #[schemars(extend("format" = "date-time"))]
    pub time: String,
}

/// `task.session.fork`: a new session of the same task that starts from the source session's
/// conversation so far. The agent copies its own session (ACP `session/fork`) when it
/// advertises that; otherwise a fresh agent session gets the conversation with the first
/// message. A session in the middle of a turn cannot be forked (`CONFLICT`): wait for the turn
/// to end, or cancel it. With `agent`, the conversation is handed to another agent: the new
/// session runs that agent, which gets the conversation with the first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionForkParams {
    /// The session to fork.
    pub session_id: String,
    /// Another agent (a name of `agent.list`) for the new session: it gets the conversation
    /// so far by history injection, in the same task and working directory. Defaults to the
    /// source's agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl SessionForkParams {
    /// A fork of `session_id` with the source's agent.
    pub fn new(session_id: impl Into<String>) -> Self {
        SessionForkParams { session_id: session_id.into(), agent: None }
    }
}

/// The answer to `task.session.fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionForkResult {
    /// The new session (`STARTING`); its `forked_from` names the source. Readiness arrives as
    /// `session.state_changed`.
    pub session: SessionInfo,
}

/// The most content one `session.export` page carries, in bytes: escaped as JSON (at most six
/// bytes for one), a page stays inside [`crate::MAX_FRAME_BYTES`].
pub const MAX_EXPORT_PAGE_BYTES: usize = 512 * 1024;

/// What `session.export` writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// A Markdown transcript of the folded view: messages, thoughts (when asked for), tool
    /// calls with their input, results and diffs (```diff blocks), plans, permission requests
    /// with their decisions, status and error lines, each with its time.
    #[default]
    Markdown,
    /// The journal: one [`crate::EventRecord`] (as in `session.event`) per line, oldest first;
    /// each line decodes back to the event it was.
    Jsonl,
}

impl ExportFormat {
    /// The file name extension (`md`, `jsonl`).
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "md",
            ExportFormat::Jsonl => "jsonl",
        }
    }

    /// A file name for the export of `session_id` of the task titled `title`: lower-case
    /// letters, digits and dashes of the title (at most 40), the session id, the extension.
    /// The server names its exports so and clients default to it, so both agree.
    pub fn file_name(self, title: &str, session_id: &str) -> String {
        let mut slug = String::new();
        for c in title.chars().flat_map(char::to_lowercase) {
            if slug.len() >= 40 {
                break;
            }
            if c.is_ascii_alphanumeric() {
                slug.push(c);
            } else if !slug.is_empty() && !slug.ends_with('-') {
                slug.push('-');
            }
        }
        let slug = slug.trim_end_matches('-');
        let stem = if slug.is_empty() { session_id.to_string() } else { format!("{slug}-{session_id}") };
        format!("{stem}.{}", self.extension())
    }
}

/// `session.export`: one page of a session's transcript as Markdown or JSON Lines. Ask again
/// with `next_cursor` until it is absent and join the pages' `content` in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionExportParams {
    /// The session to export.
    pub session_id: String,
    /// `markdown` (default) or `jsonl`.
    #[serde(default)]
    pub format: ExportFormat,
    /// Include the agent's thoughts (`thought` entries, `thought_chunk` events). Default false.
    #[serde(default)]
    pub thoughts: bool,
    /// Where the page starts: the `next_cursor` of the previous page (same format and
    /// `thoughts`); absent for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl SessionExportParams {
    /// The first page of `session_id` in `format`, without thoughts.
    pub fn new(session_id: impl Into<String>, format: ExportFormat) -> Self {
        SessionExportParams { session_id: session_id.into(), format, thoughts: false, cursor: None }
    }
}

/// The answer to `session.export`: one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionExportResult {
    /// The session.
    pub session_id: String,
    /// The format of `content`.
    pub format: ExportFormat,
    /// This page's part of the export (at most [`MAX_EXPORT_PAGE_BYTES`] bytes); pages end
    /// between entries or lines unless one alone is larger than a page.
    pub content: String,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// A file name for the export: the task's title made safe, the session id and the
    /// format's extension.
    pub file_name: String,
}

/// Hits of a `message.search` page when the request gives no `limit`.
pub const DEFAULT_SEARCH_PAGE: u32 = 50;
/// The largest `limit` of a `message.search` page.
pub const MAX_SEARCH_PAGE: u32 = 200;
/// The longest `message.search` query, in characters.
pub const MAX_SEARCH_QUERY_CHARS: usize = 500;
/// The most words (separated by spaces) in a `message.search` query: each is one more list of
/// the index to read and intersect.
pub const MAX_SEARCH_WORDS: usize = 16;
/// The most prefix words (ending in `*`) in a `message.search` query: each reads the lists of
/// every indexed word it starts, which for a short prefix is much of the index.
pub const MAX_SEARCH_PREFIXES: usize = 4;
/// The longest a `message.search` page may take, in milliseconds; a query that needs more is a
/// `VALIDATION_ERROR` (asking for longer prefixes or fewer words) rather than a reader held for
/// everyone else.
pub const MAX_SEARCH_MILLIS: u64 = 2_000;

/// `message.search`: full-text search over the folded message view of every session (or of
/// one), newest entry first, one page per request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageSearchParams {
    /// Words to find, separated by spaces; an entry matches when it has every word (case and
    /// accents ignored). A word ending in `*` matches as a prefix. Nothing else is an operator.
    pub query: String,
    /// Only the entries of this session; every session when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Hits per page, 1 to 200; default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page (same query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl MessageSearchParams {
    /// The first page of hits of `query` across every session.
    pub fn new(query: impl Into<String>) -> Self {
        MessageSearchParams { query: query.into(), session_id: None, limit: None, cursor: None }
    }
}

/// A piece of a hit's snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SnippetPart {
    /// The text of the piece.
    pub text: String,
    /// The piece is a match of the query (show it marked).
    #[serde(default)]
    pub matched: bool,
}

/// One entry of the folded view that matches a `message.search` query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHit {
    /// The session whose entry matched.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// The task's title.
    pub task_title: String,
    /// The entry's `seq`, as `message.list` gives it: list with `before_seq: seq + 1` to show
    /// the entry in context.
    pub seq: u64,
    /// What the entry is.
    pub kind: crate::MessageKind,
    /// The part of the entry's text around the match (`…` where cut), in pieces whose
    /// `matched` says which are matches; joined, the pieces are the snippet's text.
    pub snippet: Vec<SnippetPart>,
    /// When the entry was created (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

/// The answer to `message.search`: one page of hits, newest entry first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageSearchResult {
    /// The page's hits.
    pub hits: Vec<SearchHit>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
