//! Tasks, sessions and executor records: rows, queries and compare-and-set transitions, and
//! the refreshes of a session's attention (recorded through `store::attention`).

use baton_protocol::{
    now_timestamp, ArchivedFilter, Attention, Notification, PermissionQueueChanged, SessionOrder, SessionState,
    StateChanged, Task, TaskDeleted, TaskState,
};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::attention::{set_attention_in, RecordedAttention};
use super::{Outbox, Store, StoreError, StoreResult};
use crate::agent_runtime::AgentRuntime;
use crate::attention::{attention, AttentionFacts};
use crate::session_status::{self, Live, SessionFacts};

/// A session joined with the task fields the orchestrator needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    pub task_id: String,
    pub agent: String,
    pub state: SessionState,
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub last_seq: u64,
    pub turn_open: bool,
    pub task_title: String,
    pub task_description: String,
    pub task_state: TaskState,
    pub workdir: String,
    pub task_archived: bool,
    /// The server-wide change sequence when a list row of this session last changed.
    pub change_seq: u64,
    /// Why the session needs the user ([`crate::attention`]); `None` when nothing.
    pub attention: Option<Attention>,
    /// Since when it has needed the user for that reason.
    pub attention_since: Option<String>,
    /// The session this one was forked from, and the source's last event it copied.
    pub forked_from: Option<(String, u64)>,
}

impl SessionRecord {
    /// The session's attention as recorded.
    pub fn recorded_attention(&self) -> RecordedAttention<'_> {
        RecordedAttention { session_id: &self.id, reason: self.attention, since: self.attention_since.as_deref() }
    }
}

baton_protocol::string_enum! {
    /// Where a session's agent process stands, as its executor record says (`executors_running.status`).
    #[derive(Default)]
    ExecutorStatus {
        /// The record exists (a worktree was prepared) but no agent was launched yet.
        #[default]
        Created => "created",
        /// Launched; initialize and the restore are under way.
        Starting => "starting",
        Ready => "ready",
        /// The agent exited on its own.
        Exited => "exited",
        /// The launch failed.
        Failed => "failed",
        /// Stopped by a client, or forgotten by startup reconciliation.
        Stopped => "stopped",
    }
}

impl ExecutorStatus {
    /// The process still runs: its pid is kept.
    pub fn has_process(self) -> bool {
        matches!(self, ExecutorStatus::Starting | ExecutorStatus::Ready)
    }
}

/// The runtime record of a session's agent (ExecutorRunning in docs/RESUME.md's glossary).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutorRecord {
    pub session_id: String,
    pub resume_token: Option<String>,
    pub last_message_uuid: Option<String>,
    pub agent_execution_id: Option<String>,
    pub runtime: AgentRuntime,
    pub pid: Option<u32>,
    pub pid_start_time: Option<u64>,
    pub worktree_id: Option<String>,
    pub worktree_path: Option<String>,
    pub worktree_branch: Option<String>,
    pub status: ExecutorStatus,
}

impl ExecutorRecord {
    /// The record holds a resume token (an empty one is none).
    pub fn has_resume_token(&self) -> bool {
        session_status::has_resume_token(self.resume_token.as_deref())
    }
}

/// A leftover agent process recorded by a previous run of the server.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftoverProcess {
    pub session_id: String,
    pub pid: u32,
    pub start_time: Option<u64>,
    /// Marks the agent's whole process tree (`runtime::TREE_MARKER_ENV`).
    pub execution_id: Option<String>,
}

fn parse_state<T>(text: String, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("unknown state {text}").into(),
        )
    })
}

const SESSION_COLUMNS: &str = "s.id, s.task_id, s.agent, s.state, s.last_error, s.created_at, s.updated_at, \
     s.last_seq, s.turn_open, t.title, t.description, t.state, t.workdir, t.archived, s.change_seq, \
     s.attention, s.attention_since, s.forked_from, s.forked_at_seq";

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.get(0)?,
        task_id: row.get(1)?,
        agent: row.get(2)?,
        state: parse_state(row.get(3)?, SessionState::parse)?,
        last_error: row.get(4)?,
        created_at: row.get(5)?,
        updated_at: row.get(6)?,
        last_seq: row.get::<_, i64>(7)? as u64,
        turn_open: row.get::<_, i64>(8)? != 0,
        task_title: row.get(9)?,
        task_description: row.get(10)?,
        task_state: parse_state(row.get(11)?, TaskState::parse)?,
        workdir: row.get(12)?,
        task_archived: row.get::<_, i64>(13)? != 0,
        change_seq: row.get::<_, i64>(14)? as u64,
        // An unknown reason (a newer server's) reads as none rather than failing the row.
        attention: row.get::<_, Option<String>>(15)?.as_deref().and_then(Attention::parse),
        attention_since: row.get(16)?,
        forked_from: match (row.get::<_, Option<String>>(17)?, row.get::<_, Option<i64>>(18)?) {
            (Some(source), Some(seq)) => Some((source, seq as u64)),
            _ => None,
        },
    })
}

/// A task's MCP servers, from their column.
fn mcp_servers_of(text: &str) -> Result<Vec<baton_protocol::McpServerConfig>, String> {
    serde_json::from_str(text).map_err(|e| format!("the task's MCP servers do not read: {e}"))
}

const TASK_COLUMNS: &str =
    "id, title, description, state, agent, workdir, repository, worktree_branch, created_at, updated_at, archived, \
     mcp_servers, base_commit, base_branch, pull_request_url";

fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Task> {
    Ok(Task {
        id: row.get(0)?,
        title: row.get(1)?,
        description: row.get(2)?,
        state: parse_state(row.get(3)?, TaskState::parse)?,
        agent: row.get(4)?,
        workdir: row.get(5)?,
        repository: row.get(6)?,
        worktree_branch: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
        archived: row.get::<_, i64>(10)? != 0,
        // Shown without secrets; a row that does not read shows none (the launch says why).
        mcp_servers: mcp_servers_of(&row.get::<_, String>(11)?)
            .unwrap_or_default()
            .iter()
            .map(baton_protocol::McpServerConfig::info)
            .collect(),
        base_commit: row.get(12)?,
        base_branch: row.get(13)?,
        pull_request_url: row.get(14)?,
    })
}

const EXECUTOR_COLUMNS: &str = "session_id, resume_token, last_message_uuid, agent_execution_id, runtime, pid, \
     pid_start_time, worktree_id, worktree_path, worktree_branch, status";

fn executor_from_row(row: &Row<'_>) -> rusqlite::Result<ExecutorRecord> {
    executor_from_row_at(row, 0)
}

/// A text column holding one of an enum's spellings; any other text is a damaged row.
fn parse_column<T>(row: &Row<'_>, at: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = row.get(at)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            at,
            rusqlite::types::Type::Text,
            format!("unknown value {text:?} in executors_running").into(),
        )
    })
}

/// The executor columns starting at column `at` of the row.
fn executor_from_row_at(row: &Row<'_>, at: usize) -> rusqlite::Result<ExecutorRecord> {
    Ok(ExecutorRecord {
        session_id: row.get(at)?,
        resume_token: row.get(at + 1)?,
        last_message_uuid: row.get(at + 2)?,
        agent_execution_id: row.get(at + 3)?,
        runtime: parse_column(row, at + 4, AgentRuntime::parse)?,
        pid: row.get::<_, Option<i64>>(at + 5)?.map(|p| p as u32),
        pid_start_time: row.get::<_, Option<i64>>(at + 6)?.map(|p| p as u64),
        worktree_id: row.get(at + 7)?,
        worktree_path: row.get(at + 8)?,
        worktree_branch: row.get(at + 9)?,
        status: parse_column(row, at + 10, ExecutorStatus::parse)?,
    })
}

/// The executor columns of `executors_running e`, for joins.
const JOINED_EXECUTOR_COLUMNS: &str = "e.session_id, e.resume_token, e.last_message_uuid, e.agent_execution_id, \
     e.runtime, e.pid, e.pid_start_time, e.worktree_id, e.worktree_path, e.worktree_branch, e.status";

pub fn get_task(conn: &Connection, task_id: &str) -> StoreResult<Task> {
    conn.query_row(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"), [task_id], task_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))
}

pub fn get_session(conn: &Connection, session_id: &str) -> StoreResult<SessionRecord> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM task_sessions s JOIN tasks t ON t.id = s.task_id WHERE s.id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([session_id], session_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))
}

pub fn get_executor(conn: &Connection, session_id: &str) -> StoreResult<Option<ExecutorRecord>> {
    let sql = format!("SELECT {EXECUTOR_COLUMNS} FROM executors_running WHERE session_id = ?1");
    Ok(conn.prepare_cached(&sql)?.query_row([session_id], executor_from_row).optional()?)
}

/// What a new task (and its first session) is made of.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub task: Task,
    /// The MCP servers it adds, with their secrets (the `Task` shows them without).
    pub mcp_servers: Vec<baton_protocol::McpServerConfig>,
    pub session_id: String,
    pub worktree_path: Option<String>,
}

/// A transition of a session's state, compare-and-set against the states it may come from.
#[derive(Debug, Clone)]
pub struct Transition {
    pub session_id: String,
    /// The session must be in one of these states; otherwise nothing changes.
    pub from: Vec<SessionState>,
    pub to: SessionState,
    /// Move the task too.
    pub task_state: Option<TaskState>,
    /// What runs for the session once the change is made. With the stored state it decides the
    /// notification's `needs_resume` ([`session_status::evaluate`], as every status read).
    pub agent: Live,
    /// `Some(None)` clears `last_error`, `Some(Some(e))` sets it.
    pub last_error: Option<Option<String>>,
}

/// Applies a transition inside a write; `None` when the CAS did not match.
pub fn transition_in(conn: &Connection, outbox: &mut Outbox, t: &Transition) -> StoreResult<Option<StateChanged>> {
    let session = get_session(conn, &t.session_id)?;
    if !t.from.contains(&session.state) {
        return Ok(None);
    }
    let now = now_timestamp();
    let changed = conn.execute(
        "UPDATE task_sessions SET state = ?1, updated_at = ?2 WHERE id = ?3 AND state = ?4",
        params![t.to.as_str(), now, t.session_id, session.state.as_str()],
    )?;
    if changed == 0 {
        return Ok(None);
    }
    if let Some(error) = &t.last_error {
        conn.execute("UPDATE task_sessions SET last_error = ?1 WHERE id = ?2", params![error, t.session_id])?;
    }
    let has_resume_token = get_executor(conn, &t.session_id)?.is_some_and(|e| e.has_resume_token());
    let needs_resume = session_status::needs_resume(SessionFacts { state: t.to, has_resume_token, agent: t.agent });
    let mut task_state = session.task_state;
    // A task is done only when every session of it is: stopping one session leaves the task's
    // state alone while another one still works or waits for the user.
    let others_live = t.task_state == Some(TaskState::Completed) && {
        let live: i64 = conn.query_row(
            "SELECT COUNT(*) FROM task_sessions WHERE task_id = ?1 AND id != ?2 \
             AND state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')",
            params![session.task_id, t.session_id],
            |row| row.get(0),
        )?;
        live > 0
    };
    if let Some(new_task_state) = t.task_state.filter(|_| !others_live) {
        task_state = new_task_state;
        set_task_state_in(conn, outbox, &session.task_id, new_task_state)?;
    }
    // Transitions happen with no permission request pending: a turn ends once its requests
    // are answered, and cancel, stop and exit answer them `cancelled` first.
    let last_error = match &t.last_error {
        Some(error) => error.is_some(),
        None => session.last_error.is_some(),
    };
    let facts = AttentionFacts::new(t.to, needs_resume, last_error);
    let attention = set_attention_in(conn, session.recorded_attention(), attention(facts))?;
    let changed = StateChanged {
        session_id: t.session_id.clone(),
        task_id: session.task_id.clone(),
        task_title: session.task_title.clone(),
        state: t.to,
        previous_state: Some(session.state),
        task_state,
        needs_resume,
        last_seq: session.last_seq,
        updated_at: now,
        attention: attention.reason,
        attention_since: attention.since.clone(),
        change_seq: change_seq_of(conn, &t.session_id)?,
    };
    outbox.push(Notification::StateChanged(changed.clone()).into());
    attention.tell_count(conn, outbox, session.task_archived)?;
    Ok(Some(changed))
}

/// The session's place in the change sequence now (after the changes of the write that reads
/// it): what its notification carries, so that a client can tell it from an older view.
fn change_seq_of(conn: &Connection, session_id: &str) -> StoreResult<u64> {
    let seq: i64 =
        conn.query_row("SELECT change_seq FROM task_sessions WHERE id = ?1", params![session_id], |row| row.get(0))?;
    Ok(seq.max(0) as u64)
}

/// What a refresh may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    /// A permission was asked (set `permission`) or answered (clear it, if it is still set).
    Permission,
    /// Everything (at startup).
    All,
}

/// Derives and records a session's attention from `needs_resume` and `permission_pending` and
/// its stored state; when the reason changed, every client is told with a
/// `session.state_changed` whose state is unchanged (and `attention.changed` when the count
/// moved). Returns the notification sent, if any.
fn refresh_in(
    conn: &Connection,
    outbox: &mut Outbox,
    session_id: &str,
    needs_resume: bool,
    permission_pending: bool,
    scope: Refresh,
) -> StoreResult<Option<StateChanged>> {
    let session = get_session(conn, session_id)?;
    if scope == Refresh::Permission && !permission_pending && session.attention != Some(Attention::Permission) {
        // The answer came after a transition already recorded what the session needs now.
        return Ok(None);
    }
    let facts = AttentionFacts {
        state: session.state,
        needs_resume,
        permission_pending,
        has_error: session.last_error.is_some(),
    };
    let update = set_attention_in(conn, session.recorded_attention(), attention(facts))?;
    if !update.changed {
        return Ok(None);
    }
    let changed = StateChanged {
        session_id: session.id.clone(),
        task_id: session.task_id.clone(),
        task_title: session.task_title.clone(),
        state: session.state,
        previous_state: Some(session.state),
        task_state: session.task_state,
        needs_resume,
        last_seq: session.last_seq,
        updated_at: session.updated_at.clone(),
        attention: update.reason,
        attention_since: update.since.clone(),
        change_seq: change_seq_of(conn, &session.id)?,
    };
    outbox.push(Notification::StateChanged(changed.clone()).into());
    update.tell_count(conn, outbox, session.task_archived)?;
    Ok(Some(changed))
}

impl Store {
    /// Records a session's attention after one of its agent's permission requests was asked
    /// or answered: `permission_pending` says whether any still waits for an answer. Every
    /// client is told how the approval queue changed (`permission.queue_changed`), after the
    /// commit like the attention's own notifications.
    pub async fn permission_attention(
        &self,
        session_id: &str,
        needs_resume: bool,
        permission_pending: bool,
        queue: PermissionQueueChanged,
    ) -> StoreResult<Option<StateChanged>> {
        let session_id = session_id.to_string();
        self.write(move |conn, outbox| {
            let changed = refresh_in(conn, outbox, &session_id, needs_resume, permission_pending, Refresh::Permission)?;
            outbox.push(Notification::PermissionQueueChanged(queue).into());
            Ok(changed)
        })
        .await
    }

    /// At startup: records the attention of every session from its `needs_resume` verdict
    /// (`verdicts`: session id, needs_resume). Nobody waits for a permission answer yet.
    pub async fn settle_attention(&self, verdicts: Vec<(String, bool)>) -> StoreResult<usize> {
        self.write(move |conn, outbox| {
            let mut changed = 0;
            for (session_id, needs_resume) in &verdicts {
                if refresh_in(conn, outbox, session_id, *needs_resume, false, Refresh::All)?.is_some() {
                    changed += 1;
                }
            }
            Ok(changed)
        })
        .await
    }
}

pub fn set_task_state_in(conn: &Connection, outbox: &mut Outbox, task_id: &str, state: TaskState) -> StoreResult<()> {
    let before = get_task(conn, task_id)?;
    if before.state == state {
        return Ok(());
    }
    conn.execute(
        "UPDATE tasks SET state = ?1, updated_at = ?2 WHERE id = ?3",
        params![state.as_str(), now_timestamp(), task_id],
    )?;
    outbox.push(Notification::TaskUpdated(get_task(conn, task_id)?).into());
    Ok(())
}

impl Store {
    /// The MCP servers the task of `session_id` added, with their secrets.
    pub async fn task_mcp_servers(&self, session_id: &str) -> StoreResult<Vec<baton_protocol::McpServerConfig>> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            let text: String = conn
                .prepare_cached(
                    "SELECT t.mcp_servers FROM tasks t JOIN task_sessions s ON s.task_id = t.id WHERE s.id = ?1",
                )?
                .query_row([&session_id], |r| r.get(0))
                .optional()?
                .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
            mcp_servers_of(&text).map_err(StoreError::Corrupt)
        })
        .await
    }

    pub async fn create_task(&self, new: NewTask) -> StoreResult<(Task, SessionRecord)> {
        self.write(move |conn, outbox| {
            let t = &new.task;
            conn.execute(
                &format!(
                    "INSERT INTO tasks ({TASK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
                ),
                params![
                    t.id,
                    t.title,
                    t.description,
                    t.state.as_str(),
                    t.agent,
                    t.workdir,
                    t.repository,
                    t.worktree_branch,
                    t.created_at,
                    t.updated_at,
                    t.archived,
                    serde_json::to_string(&new.mcp_servers).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    t.base_commit,
                    t.base_branch,
                    t.pull_request_url
                ],
            )?;
            insert_session_in(
                conn,
                &new.session_id,
                &t.id,
                &t.agent,
                new.worktree_path.as_deref(),
                t.worktree_branch.as_deref(),
            )?;
            outbox.push(Notification::TaskUpdated(t.clone()).into());
            Ok((t.clone(), get_session(conn, &new.session_id)?))
        })
        .await
    }

    /// A further session of an existing task, left CREATED.
    pub async fn create_session(
        &self,
        task_id: String,
        session_id: String,
        agent: String,
    ) -> StoreResult<SessionRecord> {
        self.write(move |conn, _| {
            add_session_in(conn, &task_id, &session_id, &agent)?;
            get_session(conn, &session_id)
        })
        .await
    }

    pub async fn get_task(&self, task_id: &str) -> StoreResult<Task> {
        let task_id = task_id.to_string();
        self.read(move |conn| get_task(conn, &task_id)).await
    }

    pub async fn list_tasks(&self, archived: ArchivedFilter) -> StoreResult<Vec<Task>> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE {} ORDER BY created_at, id",
                archived_sql(archived, "")
            );
            let mut stmt = conn.prepare(&sql)?;
            let rows = stmt.query_map([], task_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn get_session(&self, session_id: &str) -> StoreResult<(SessionRecord, Option<ExecutorRecord>)> {
        let session_id = session_id.to_string();
        self.read(move |conn| Ok((get_session(conn, &session_id)?, get_executor(conn, &session_id)?))).await
    }

    /// Every session of one task or of all, oldest first.
    pub async fn list_sessions(
        &self,
        task_id: Option<String>,
        archived: ArchivedFilter,
    ) -> StoreResult<Vec<(SessionRecord, Option<ExecutorRecord>)>> {
        let query = SessionQuery { task_id, archived, ..SessionQuery::default() };
        Ok(self.session_page(query).await?.rows)
    }

    /// One page of sessions (see `SessionQuery`), with the executor record of each.
    pub async fn session_page(&self, query: SessionQuery) -> StoreResult<SessionPage> {
        self.read(move |conn| session_page_in(conn, &query)).await
    }

    pub async fn transition(&self, t: Transition) -> StoreResult<Option<StateChanged>> {
        self.write(move |conn, outbox| transition_in(conn, outbox, &t)).await
    }

    pub async fn set_last_error(&self, session_id: &str, error: Option<String>) -> StoreResult<()> {
        let session_id = session_id.to_string();
        self.write(move |conn, _| {
            conn.execute(
                "UPDATE task_sessions SET last_error = ?1, updated_at = ?2 WHERE id = ?3",
                params![error, now_timestamp(), session_id],
            )?;
            Ok(())
        })
        .await
    }

    /// Records that `execution_id` now owns the session's agent (pid, status `starting`).
    /// The resume token and worktree are kept: they belong to the session, not the process.
    pub async fn record_launch(
        &self,
        session_id: &str,
        execution_id: &str,
        pid: Option<u32>,
        pid_start_time: Option<u64>,
    ) -> StoreResult<()> {
        let (session_id, execution_id) = (session_id.to_string(), execution_id.to_string());
        self.write(move |conn, _| {
            conn.execute(
                "INSERT INTO executors_running (session_id, agent_execution_id, runtime, pid, pid_start_time, status, updated_at)
                 VALUES (?1, ?2, ?6, ?3, ?4, ?7, ?5)
                 ON CONFLICT(session_id) DO UPDATE SET agent_execution_id = ?2, runtime = ?6, pid = ?3,
                     pid_start_time = ?4, status = ?7, updated_at = ?5",
                params![
                    session_id,
                    execution_id,
                    pid.map(i64::from),
                    pid_start_time.map(|t| t as i64),
                    now_timestamp(),
                    AgentRuntime::Standalone.as_str(),
                    ExecutorStatus::Starting.as_str()
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Sets the executor status, only if `execution_id` still owns the record. Statuses other
    /// than `ready`/`starting` also forget the pid: the process is gone.
    pub async fn set_executor_status(
        &self,
        session_id: &str,
        execution_id: &str,
        status: ExecutorStatus,
    ) -> StoreResult<bool> {
        let (session_id, execution_id) = (session_id.to_string(), execution_id.to_string());
        self.write(move |conn, _| {
            let keep_pid = status.has_process();
            let changed = conn.execute(
                "UPDATE executors_running SET status = ?1, updated_at = ?2,
                     pid = CASE WHEN ?5 THEN pid ELSE NULL END,
                     pid_start_time = CASE WHEN ?5 THEN pid_start_time ELSE NULL END
                 WHERE session_id = ?3 AND agent_execution_id = ?4",
                params![status.as_str(), now_timestamp(), session_id, execution_id, keep_pid],
            )?;
            Ok(changed > 0)
        })
        .await
    }

    /// storeResumeToken: written only by the execution that owns the record (CAS on execution id),
    /// so a stale execution can never overwrite the live token.
    pub async fn store_resume_token(
        &self,
        session_id: &str,
        execution_id: &str,
        token: Option<String>,
    ) -> StoreResult<bool> {
        let (session_id, execution_id) = (session_id.to_string(), execution_id.to_string());
        self.write(move |conn, _| {
            let changed = conn.execute(
                "UPDATE executors_running SET resume_token = ?1, updated_at = ?2
                 WHERE session_id = ?3 AND agent_execution_id = ?4",
                params![token, now_timestamp(), session_id, execution_id],
            )?;
            Ok(changed > 0)
        })
        .await
    }

    /// Records the worktree of a session (created with the task).
    pub async fn set_worktree(&self, session_id: &str, path: String, branch: String) -> StoreResult<()> {
        let session_id = session_id.to_string();
        self.write(move |conn, _| {
            conn.execute(
                "UPDATE executors_running SET worktree_id = ?1, worktree_path = ?2, worktree_branch = ?3 WHERE session_id = ?4",
                params![branch, path, branch, session_id],
            )?;
            Ok(())
        })
        .await
    }
}

/// The SQL condition for `filter` on the `archived` column of tasks (`prefix` is the table's
/// alias with its dot, or empty).
/// Which sessions, in which order, from where: the store's side of `task.session.list`.
#[derive(Debug, Clone)]
pub struct SessionQuery {
    pub task_id: Option<String>,
    pub archived: ArchivedFilter,
    /// Only these states (`None`: any).
    pub states: Option<Vec<SessionState>>,
    /// Only sessions whose `change_seq` is greater.
    pub changed_since: Option<u64>,
    pub order: SessionOrder,
    /// Rows per page (`None`: all).
    pub limit: Option<usize>,
    /// Start after this row (the cursor of the previous page).
    pub after: Option<SessionKey>,
}

impl Default for SessionQuery {
    fn default() -> Self {
        SessionQuery {
            task_id: None,
            archived: ArchivedFilter::Include,
            states: None,
            changed_since: None,
            order: SessionOrder::Created,
            limit: None,
            after: None,
        }
    }
}

/// Where a row sits in an order: a unique key (`id` breaks ties), so a page that starts after
/// it neither repeats nor skips a row that has not changed meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey {
    /// The attention rank (0: needs attention, 1: not) or the change sequence; 0 otherwise.
    pub rank: u64,
    pub created_at: String,
    pub id: String,
}

impl SessionKey {
    fn of(order: SessionOrder, session: &SessionRecord) -> SessionKey {
        let rank = match order {
            SessionOrder::Attention => u64::from(!session.state.needs_attention()),
            SessionOrder::Changed => session.change_seq,
            SessionOrder::Created | SessionOrder::Recent => 0,
        };
        SessionKey { rank, created_at: session.created_at.clone(), id: session.id.clone() }
    }
}

/// A page of sessions.
#[derive(Debug, Clone)]
pub struct SessionPage {
    pub rows: Vec<(SessionRecord, Option<ExecutorRecord>)>,
    /// The key of the last row when more rows follow.
    pub next: Option<SessionKey>,
    /// The server-wide change sequence, read before the rows.
    pub change_seq: u64,
    /// Sessions that need the user, server-wide, in the same snapshot as the rows.
    pub attention_count: u64,
}

fn session_page_in(conn: &Connection, query: &SessionQuery) -> StoreResult<SessionPage> {
    use rusqlite::types::Value as Sql;
    // One snapshot for the change sequence and the rows.
    let tx = conn.unchecked_transaction()?;
    let change_seq: i64 = tx.query_row("SELECT value FROM change_counter", [], |r| r.get(0))?;
    let attention_count = super::attention::attention_count_in(&tx)?;
    let mut clauses = vec![archived_sql(query.archived, "t.")];
    let mut values: Vec<Sql> = Vec::new();
    let mut bind = |value: Sql| {
        values.push(value);
        format!("?{}", values.len())
    };
    if let Some(task_id) = &query.task_id {
        clauses.push(format!("s.task_id = {}", bind(Sql::Text(task_id.clone()))));
    }
    if let Some(states) = &query.states {
        let list: Vec<String> = states.iter().map(|state| bind(Sql::Text(state.as_str().to_string()))).collect();
        clauses.push(if list.is_empty() { "0".to_string() } else { format!("s.state IN ({})", list.join(", ")) });
    }
    if let Some(since) = query.changed_since {
        clauses.push(format!("s.change_seq > {}", bind(Sql::Integer(since.min(i64::MAX as u64) as i64))));
    }
    // The attention rank; the same expression as the index `task_sessions_attention`.
    const RANK: &str = "(s.state NOT IN ('WAITING_FOR_INPUT', 'FAILED'))";
    if let Some(key) = &query.after {
        let rank = bind(Sql::Integer(key.rank.min(i64::MAX as u64) as i64));
        let created = bind(Sql::Text(key.created_at.clone()));
        let id = bind(Sql::Text(key.id.clone()));
        clauses.push(match query.order {
            SessionOrder::Created => format!("(s.created_at, s.id) > ({created}, {id})"),
            SessionOrder::Recent => format!("(s.created_at, s.id) < ({created}, {id})"),
            SessionOrder::Attention => {
                format!("({RANK} > {rank} OR ({RANK} = {rank} AND (s.created_at, s.id) < ({created}, {id})))")
            }
            SessionOrder::Changed => format!("(s.change_seq, s.id) > ({rank}, {id})"),
        });
    }
    let order_by = match query.order {
        SessionOrder::Created => "s.created_at, s.id".to_string(),
        SessionOrder::Recent => "s.created_at DESC, s.id DESC".to_string(),
        SessionOrder::Attention => format!("{RANK}, s.created_at DESC, s.id DESC"),
        SessionOrder::Changed => "s.change_seq, s.id".to_string(),
    };
    // One more row than asked tells whether a next page exists.
    let limit = match query.limit {
        Some(limit) => format!(" LIMIT {}", bind(Sql::Integer(limit.saturating_add(1).min(i64::MAX as usize) as i64))),
        None => String::new(),
    };
    let sql = format!(
        "SELECT {SESSION_COLUMNS}, {JOINED_EXECUTOR_COLUMNS} FROM task_sessions s JOIN tasks t ON t.id = s.task_id
         LEFT JOIN executors_running e ON e.session_id = s.id
         WHERE {} ORDER BY {order_by}{limit}",
        clauses.join(" AND ")
    );
    let executor_at = SESSION_COLUMNS.split(',').count();
    let mut rows = {
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), |row| {
            let session = session_from_row(row)?;
            let executor = match row.get::<_, Option<String>>(executor_at)? {
                Some(_) => Some(executor_from_row_at(row, executor_at)?),
                None => None,
            };
            Ok((session, executor))
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    let next = match query.limit {
        Some(limit) if rows.len() > limit => {
            rows.truncate(limit);
            rows.last().map(|(session, _)| SessionKey::of(query.order, session))
        }
        _ => None,
    };
    Ok(SessionPage { rows, next, change_seq: change_seq.max(0) as u64, attention_count })
}

fn archived_sql(filter: ArchivedFilter, prefix: &str) -> String {
    match filter {
        ArchivedFilter::Exclude => format!("{prefix}archived = 0"),
        ArchivedFilter::Include => "1".to_string(),
        ArchivedFilter::Only => format!("{prefix}archived = 1"),
    }
}

/// What a task's deletion removed from the database, for the files that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedTask {
    pub task: Task,
    pub session_ids: Vec<String>,
}

impl Store {
    /// Changes a task's title and/or description, and tells every client (`task.updated`).
    pub async fn update_task(
        &self,
        task_id: &str,
        title: Option<String>,
        description: Option<String>,
    ) -> StoreResult<Task> {
        let task_id = task_id.to_string();
        self.write(move |conn, outbox| {
            let before = get_task(conn, &task_id)?;
            let title = title.unwrap_or(before.title);
            let description = description.unwrap_or(before.description);
            conn.execute(
                "UPDATE tasks SET title = ?1, description = ?2, updated_at = ?3 WHERE id = ?4",
                params![title, description, now_timestamp(), task_id],
            )?;
            let task = get_task(conn, &task_id)?;
            outbox.push(Notification::TaskUpdated(task.clone()).into());
            Ok(task)
        })
        .await
    }

    /// Archives or unarchives a task; every client is told (`task.updated`) when it changed.
    pub async fn set_archived(&self, task_id: &str, archived: bool) -> StoreResult<Task> {
        let task_id = task_id.to_string();
        self.write(move |conn, outbox| {
            let before = get_task(conn, &task_id)?;
            if before.archived == archived {
                return Ok(before);
            }
            conn.execute(
                "UPDATE tasks SET archived = ?1, updated_at = ?2 WHERE id = ?3",
                params![archived, now_timestamp(), task_id],
            )?;
            let task = get_task(conn, &task_id)?;
            outbox.push(Notification::TaskUpdated(task.clone()).into());
            if super::attention::task_needs_user_in(conn, &task_id)? {
                super::attention::push_count_in(conn, outbox)?;
            }
            Ok(task)
        })
        .await
    }

    /// Keeps the address of the pull request opened for a task; every client is told
    /// (`task.updated`).
    pub async fn set_pull_request(&self, task_id: &str, url: &str) -> StoreResult<Task> {
        let (task_id, url) = (task_id.to_string(), url.to_string());
        self.write(move |conn, outbox| {
            conn.execute(
                "UPDATE tasks SET pull_request_url = ?1, updated_at = ?2 WHERE id = ?3",
                params![url, now_timestamp(), task_id],
            )?;
            let task = get_task(conn, &task_id)?;
            outbox.push(Notification::TaskUpdated(task.clone()).into());
            Ok(task)
        })
        .await
    }

    /// Deletes a task and everything of its sessions in one transaction: the sessions, their
    /// executor records, journals and folded messages. Every client is told (`task.deleted`).
    /// The files (history, worktree) are the caller's.
    pub async fn delete_task(&self, task_id: &str) -> StoreResult<DeletedTask> {
        let task_id = task_id.to_string();
        self.write(move |conn, outbox| {
            let task = get_task(conn, &task_id)?;
            let counted = !task.archived && super::attention::task_needs_user_in(conn, &task_id)?;
            let session_ids: Vec<String> = {
                let mut statement =
                    conn.prepare("SELECT id FROM task_sessions WHERE task_id = ?1 ORDER BY created_at, id")?;
                let ids = statement.query_map([&task_id], |r| r.get(0))?;
                ids.collect::<Result<_, _>>()?
            };
            for session_id in &session_ids {
                conn.execute(
                    "DELETE FROM message_folds_due WHERE message_row IN (SELECT id FROM messages WHERE session_id = ?1)",
                    [session_id],
                )?;
                conn.execute(
                    "DELETE FROM message_parts WHERE message_row IN (SELECT id FROM messages WHERE session_id = ?1)",
                    [session_id],
                )?;
                conn.execute("DELETE FROM messages WHERE session_id = ?1", [session_id])?;
                conn.execute("DELETE FROM session_events WHERE session_id = ?1", [session_id])?;
                conn.execute("DELETE FROM executors_running WHERE session_id = ?1", [session_id])?;
                conn.execute("DELETE FROM turn_usage WHERE session_id = ?1", [session_id])?;
                conn.execute("DELETE FROM permission_rules WHERE session_id = ?1", [session_id])?;
                conn.execute("DELETE FROM session_options WHERE session_id = ?1", [session_id])?;
            }
            conn.execute("DELETE FROM task_sessions WHERE task_id = ?1", [&task_id])?;
            conn.execute("DELETE FROM tasks WHERE id = ?1", [&task_id])?;
            outbox.push(
                Notification::TaskDeleted(TaskDeleted { task_id: task_id.clone(), session_ids: session_ids.clone() })
                    .into(),
            );
            if counted {
                super::attention::push_count_in(conn, outbox)?;
            }
            Ok(DeletedTask { task, session_ids })
        })
        .await
    }
}

/// Inserts a further session of an existing task, CREATED; it shares the task's worktree.
pub(super) fn add_session_in(conn: &Connection, task_id: &str, session_id: &str, agent: &str) -> StoreResult<()> {
    let task = get_task(conn, task_id)?;
    let worktree: Option<(Option<String>, Option<String>)> = conn
        .query_row(
            "SELECT e.worktree_path, e.worktree_branch FROM executors_running e
             JOIN task_sessions s ON s.id = e.session_id
             WHERE s.task_id = ?1 AND e.worktree_path IS NOT NULL LIMIT 1",
            [&task.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (path, branch) = worktree.unwrap_or((None, None));
    insert_session_in(conn, session_id, &task.id, agent, path.as_deref(), branch.as_deref())
}

fn insert_session_in(
    conn: &Connection,
    session_id: &str,
    task_id: &str,
    agent: &str,
    worktree_path: Option<&str>,
    worktree_branch: Option<&str>,
) -> StoreResult<()> {
    let now = now_timestamp();
    conn.execute(
        "INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        params![session_id, task_id, agent, SessionState::Created.as_str(), now],
    )?;
    if worktree_path.is_some() {
        conn.execute(
            "INSERT INTO executors_running (session_id, runtime, worktree_id, worktree_path, worktree_branch, status, updated_at)
             VALUES (?1, ?5, ?2, ?3, ?2, ?6, ?4)",
            params![
                session_id,
                worktree_branch,
                worktree_path,
                now,
                AgentRuntime::Standalone.as_str(),
                ExecutorStatus::Created.as_str()
            ],
        )?;
    }
    Ok(())
}

/// Records for unit tests of pure logic over sessions and executors.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{ExecutorRecord, ExecutorStatus, SessionRecord};
    use baton_protocol::{SessionState, TaskState};

    pub(crate) fn session(state: SessionState) -> SessionRecord {
        SessionRecord {
            id: "s".into(),
            task_id: "t".into(),
            agent: "mock".into(),
            state,
            last_error: None,
            created_at: String::new(),
            updated_at: String::new(),
            last_seq: 0,
            turn_open: false,
            task_title: "t".into(),
            task_description: "d".into(),
            task_state: TaskState::Review,
            workdir: "/tmp".into(),
            task_archived: false,
            change_seq: 0,
            attention: None,
            attention_since: None,
            forked_from: None,
        }
    }

    pub(crate) fn executor(token: Option<&str>) -> ExecutorRecord {
        ExecutorRecord {
            session_id: "s".into(),
            resume_token: token.map(Into::into),
            status: ExecutorStatus::Stopped,
            ..Default::default()
        }
    }
}
