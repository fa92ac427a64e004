//! The decisions: status, resume, prompts and the state machine (the rules are in
//! docs/RESUME.md, the modules in docs/ARCHITECTURE.md). The gateway calls the public methods;
//! each returns the protocol's result type or an `ErrorPayload`.

mod agent_requests;
mod changes;
mod execution;
mod fork;
pub mod launch;
mod life;
mod options;
mod prompt;
mod queue;
mod tasks;
mod usage;
mod worktree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_protocol::*;

use crate::session_status::{self, Live, SessionFacts};
pub use execution::{Execution, Phase};
pub use launch::hosted::Recovered;

use crate::agent::history::HistoryStore;
use crate::agent::host::client::AgentHost;
use crate::agent::registry::Registry;
use crate::agent_runtime::AgentRuntime;
use crate::store::{
    ExecutorRecord, ExecutorStatus, NewTask, SessionKey, SessionQuery, SessionRecord, Store, StoreError, Transition,
};

/// Bounds on waiting for agents.
#[derive(Debug, Clone)]
pub struct Timeouts {
    /// `initialize`, `session/new`, `session/load`, `session/resume`.
    pub handshake: Duration,
    /// ensureSessionRunning: how long a prompt waits for a resumed agent to be ready (90 s by
    /// default; docs/RESUME.md, 'Prompts and lazy resume').
    pub ready: Duration,
    /// How long an agent has to end a turn after `session/cancel`; one that ignores the cancel
    /// is stopped then, the turn ends as cancelled and the session stays resumable.
    pub cancel_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            handshake: Duration::from_secs(60),
            ready: Duration::from_secs(90),
            cancel_grace: Duration::from_secs(10),
        }
    }
}

pub struct Orchestrator {
    store: Store,
    registry: Registry,
    history: HistoryStore,
    data_dir: PathBuf,
    timeouts: Timeouts,
    /// The live execution of each session that has one (launching or ready).
    executions: Mutex<HashMap<String, Arc<Execution>>>,
    shutting_down: AtomicBool,
    /// The agent host of the data dir (started when a hosted agent is first needed).
    host: Arc<AgentHost>,
    /// The runtime of agents that do not name one.
    default_runtime: AgentRuntime,
    /// One lock per task, held by `task.delete` for its whole course and by every launch of
    /// one of the task's sessions (with the session's creation, for a new one): a launch never
    /// races a deletion into an agent whose session is gone.
    task_locks: KeyedLocks,
    /// One lock per session, held while its queue sends its next message: two turn ends (or a
    /// turn end and `queue.release`) never both take the queue's head.
    queue_locks: KeyedLocks,
    /// Sessions whose agent of the previous run is being reconnected to in the background
    /// (startup recovery of Docker and ssh agents): they report `agent_reconnecting`, and a
    /// launch or stop waits for the end of it.
    recovering: tokio::sync::watch::Sender<std::collections::HashSet<String>>,
}

/// How agents of the `hosted` runtime are run.
pub struct Hosting {
    pub host: Arc<AgentHost>,
    pub default_runtime: AgentRuntime,
}

type ApiResult<T> = Result<T, ErrorPayload>;

/// Async locks by key (a task id, a session id), made when first asked for and forgotten once
/// no guard or waiter holds them.
#[derive(Default)]
pub(crate) struct KeyedLocks(Mutex<HashMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>>);

impl KeyedLocks {
    /// The lock of `key`; held until the guard is dropped.
    pub(crate) async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().unwrap_or_else(|p| p.into_inner());
            locks.retain(|_, lock| lock.strong_count() > 0);
            match locks.get(key).and_then(std::sync::Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(tokio::sync::Mutex::new(()));
                    locks.insert(key.to_string(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }
}

impl Orchestrator {
    /// The lock of a task (see `task_locks`); held until the guard is dropped.
    pub(crate) async fn lock_task(&self, task_id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.task_locks.lock(task_id).await
    }
}

/// The result of a store write the caller goes on after either way (the agent already exited,
/// a launch is being rolled back...): a failure is logged with what was lost, never dropped.
/// What it leaves behind is repaired by the paths that read it: a RUNNING session without an
/// agent takes the next message through a lazy resume, and startup reconciliation settles the
/// rest.
pub(crate) fn store_logged<T>(session_id: &str, what: &str, result: Result<T, StoreError>) -> Option<T> {
    result.map_err(|e| tracing::error!(%session_id, "cannot record {what}: {e}")).ok()
}

impl Orchestrator {
    pub fn new(
        store: Store,
        registry: Registry,
        data_dir: &Path,
        timeouts: Timeouts,
        hosting: Hosting,
    ) -> Arc<Orchestrator> {
        Arc::new(Orchestrator {
            store,
            registry,
            history: HistoryStore::new(data_dir),
            data_dir: data_dir.to_path_buf(),
            timeouts,
            executions: Mutex::new(HashMap::new()),
            task_locks: KeyedLocks::default(),
            queue_locks: KeyedLocks::default(),
            shutting_down: AtomicBool::new(false),
            host: hosting.host,
            default_runtime: hosting.default_runtime,
            recovering: tokio::sync::watch::Sender::new(Default::default()),
        })
    }

    /// Marks `sessions` as being reconnected to their agents (see `recovering`).
    pub fn begin_recovery(&self, sessions: impl IntoIterator<Item = String>) {
        self.recovering.send_modify(|set| set.extend(sessions));
    }

    fn is_recovering(&self, session_id: &str) -> bool {
        self.recovering.borrow().contains(session_id)
    }

    /// The reconnection of `session_id` is over: clients are told (a `session.state_changed`
    /// to the same state, `needs_resume` as it is now), with why it failed in `last_error`.
    pub(crate) async fn end_recovery(&self, session_id: &str, error: Option<String>) {
        self.recovering.send_modify(|set| {
            set.remove(session_id);
        });
        let Ok((session, _)) = self.store.get_session(session_id).await else { return };
        let transition = Transition {
            session_id: session_id.to_string(),
            from: vec![session.state],
            to: session.state,
            task_state: None,
            agent: self.live(session_id).0,
            last_error: error.map(Some),
        };
        store_logged(session_id, "the end of the reconnection", self.store.transition(transition).await);
    }

    /// Waits (at most the ready timeout) until `session_id` is no longer being reconnected to.
    pub(crate) async fn wait_recovered(&self, session_id: &str) -> ApiResult<()> {
        if !self.is_recovering(session_id) {
            return Ok(());
        }
        let mut recovering = self.recovering.subscribe();
        let done = async { recovering.wait_for(|set| !set.contains(session_id)).await.map(|_| ()) };
        match tokio::time::timeout(self.timeouts.ready, done).await {
            Ok(_) => Ok(()),
            Err(_) => Err(ErrorPayload::unavailable(format!(
                "the server is still reconnecting to this session's agent after {} s; try again",
                self.timeouts.ready.as_secs()
            ))),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn execution(&self, session_id: &str) -> Option<Arc<Execution>> {
        self.executions.lock().ok().and_then(|map| map.get(session_id).cloned())
    }

    /// Detaches `execution` if it is still the session's one.
    pub(crate) fn detach(&self, execution: &Arc<Execution>) {
        if let Ok(mut map) = self.executions.lock() {
            if map.get(execution.session_id()).is_some_and(|e| Arc::ptr_eq(e, execution)) {
                map.remove(execution.session_id());
            }
        }
    }

    fn live(&self, session_id: &str) -> (Live, Option<u32>) {
        match self.execution(session_id) {
            Some(e) if e.life().is_launched() && !e.process().has_exited() => (Live::Running, Some(e.process().pid())),
            // A launch whose process already ended is being rolled back: nothing runs.
            Some(e) if e.phase() == Phase::Starting && !e.process().has_exited() => {
                (Live::Starting, Some(e.process().pid()))
            }
            _ if self.is_recovering(session_id) => (Live::Reconnecting, None),
            _ => (Live::None, None),
        }
    }

    fn status_of(&self, session: &SessionRecord, executor: Option<&ExecutorRecord>) -> SessionStatus {
        let (live, pid) = self.live(&session.id);
        let has_resume_token = executor.is_some_and(ExecutorRecord::has_resume_token);
        let verdict = session_status::evaluate(SessionFacts { state: session.state, has_resume_token, agent: live });
        SessionStatus {
            session_id: session.id.clone(),
            task_id: session.task_id.clone(),
            agent: session.agent.clone(),
            state: session.state,
            task_state: session.task_state,
            is_agent_running: live == Live::Running,
            is_resumable: verdict.is_resumable,
            needs_resume: verdict.needs_resume,
            resume_reason: verdict.reason,
            has_resume_token,
            last_error: session.last_error.clone(),
            worktree_path: executor.and_then(|e| e.worktree_path.clone()),
            agent_pid: pid,
            attention: session.attention,
            attention_since: session.attention_since.clone(),
            change_seq: session.change_seq,
        }
    }

    fn session_info(&self, session: &SessionRecord, executor: Option<&ExecutorRecord>) -> SessionInfo {
        SessionInfo {
            status: self.status_of(session, executor),
            task_title: session.task_title.clone(),
            task_archived: session.task_archived,
            created_at: session.created_at.clone(),
            updated_at: session.updated_at.clone(),
            last_seq: session.last_seq,
            forked_from: session
                .forked_from
                .clone()
                .map(|(session_id, seq)| baton_protocol::ForkOrigin { session_id, seq }),
        }
    }

    pub fn agent_list(&self) -> AgentListResult {
        AgentListResult { agents: self.registry.list() }
    }

    pub async fn create_task(self: &Arc<Self>, params: TaskCreateParams) -> ApiResult<TaskCreateResult> {
        let title = params.title.trim().to_string();
        if title.is_empty() {
            return Err(ErrorPayload::validation("title must not be empty"));
        }
        self.known_agent(&params.agent, params.start)?;
        let task_id = format!("task-{}", uuid::Uuid::new_v4().simple());
        let session_id = format!("sess-{}", uuid::Uuid::new_v4().simple());
        let workdir = worktree::prepare_workdir(&self.data_dir, &task_id, &params).await?;
        let worktree = workdir.worktree;
        let now = now_timestamp();
        let task = Task {
            id: task_id,
            title,
            description: params.description.clone(),
            state: TaskState::Todo,
            agent: params.agent.clone(),
            workdir: workdir.path.to_string_lossy().into_owned(),
            repository: params.repository.clone(),
            worktree_branch: worktree.as_ref().map(|w| w.branch.clone()),
            base_commit: workdir.base_commit,
            base_branch: workdir.base_branch,
            pull_request_url: None,
            created_at: now.clone(),
            updated_at: now,
            archived: false,
            mcp_servers: params.mcp_servers.iter().map(baton_protocol::McpServerConfig::info).collect(),
        };
        let new = NewTask {
            task,
            mcp_servers: params.mcp_servers.clone(),
            session_id: session_id.clone(),
            worktree_path: worktree.map(|w| w.path.to_string_lossy().into_owned()),
        };
        let (task, _) = self.store.create_task(new).await?;
        if params.start {
            self.launch(&session_id, launch::LaunchIntent::Start { prompt: None }).await?;
        }
        let (session, executor) = self.store.get_session(&session_id).await?;
        let task = self.store.get_task(&task.id).await?;
        Ok(TaskCreateResult { task, session: self.session_info(&session, executor.as_ref()) })
    }

    /// The agent must be configured, and installed when it is about to be started (so that a
    /// task is not created only to fail at once).
    fn known_agent(&self, name: &str, starting: bool) -> ApiResult<()> {
        let Some(agent) = self.registry.get(name) else {
            let known: Vec<String> = self.registry.list().into_iter().map(|a| a.name).collect();
            return Err(ErrorPayload::validation(format!(
                "unknown agent {name:?}; known agents: {}",
                known.join(", ")
            )));
        };
        if starting && !agent.is_installed() {
            return Err(ErrorPayload::validation(format!(
                "agent {name} is not installed: {} was not found (configure it in agents.toml)",
                agent.command
            )));
        }
        Ok(())
    }

    pub async fn start_session(self: &Arc<Self>, params: SessionStartParams) -> ApiResult<SessionStartResult> {
        let _task = self.lock_task(&params.task_id).await;
        let task = self.store.get_task(&params.task_id).await?;
        let agent = params.agent.unwrap_or(task.agent.clone());
        self.known_agent(&agent, true)?;
        let session_id = format!("sess-{}", uuid::Uuid::new_v4().simple());
        self.store.create_session(task.id.clone(), session_id.clone(), agent).await?;
        self.launch_locked(&session_id, launch::LaunchIntent::Start { prompt: params.prompt }).await?;
        let (session, executor) = self.store.get_session(&session_id).await?;
        Ok(SessionStartResult { session: self.session_info(&session, executor.as_ref()) })
    }

    pub async fn list_tasks(&self, archived: Option<ArchivedFilter>) -> ApiResult<TaskListResult> {
        let archived = archived.unwrap_or(ArchivedFilter::Exclude);
        Ok(TaskListResult { tasks: self.store.list_tasks(archived).await? })
    }

    /// A page of sessions of one task or of all; archived tasks' sessions are left out unless
    /// asked for, or unless the task is named.
    pub async fn list_sessions(&self, params: SessionListParams) -> ApiResult<SessionListResult> {
        let default = if params.task_id.is_some() { ArchivedFilter::Include } else { ArchivedFilter::Exclude };
        let order = params.order.unwrap_or(if params.changed_since.is_some() {
            SessionOrder::Changed
        } else {
            SessionOrder::Created
        });
        let after = params.cursor.as_deref().map(|cursor| decode_cursor(cursor, order)).transpose()?;
        let query = SessionQuery {
            task_id: params.task_id,
            archived: params.archived.unwrap_or(default),
            states: params.state,
            changed_since: params.changed_since,
            order,
            limit: Some(params.limit.unwrap_or(DEFAULT_SESSION_PAGE) as usize),
            after,
        };
        let page = self.store.session_page(query).await?;
        Ok(SessionListResult {
            sessions: page.rows.iter().map(|(s, e)| self.session_info(s, e.as_ref())).collect(),
            next_cursor: page.next.map(|key| encode_cursor(order, &key)),
            change_seq: page.change_seq,
            attention_count: page.attention_count,
        })
    }

    pub async fn session_status(&self, session_id: &str) -> ApiResult<SessionStatus> {
        let (session, executor) = self.store.get_session(session_id).await?;
        Ok(self.status_of(&session, executor.as_ref()))
    }

    pub async fn list_messages(&self, params: MessageListParams) -> ApiResult<MessageListResult> {
        let limit = params.limit.unwrap_or(200);
        if !(1..=1000).contains(&limit) {
            return Err(ErrorPayload::validation("limit must be between 1 and 1000"));
        }
        let (messages, has_more, cut) =
            self.store.list_messages(&params.session_id, params.before_seq, params.after_seq, limit as usize).await?;
        Ok(MessageListResult { messages, has_more, cut })
    }

    /// A part of one entry's text (`message.text`), by byte offsets at character boundaries.
    pub async fn message_text(&self, params: MessageTextParams) -> ApiResult<MessageTextResult> {
        let limit = params.limit.unwrap_or(MESSAGE_TEXT_CUT as u32);
        if !(1..=MAX_MESSAGE_TEXT_PART).contains(&limit) {
            return Err(ErrorPayload::validation(format!("limit must be between 1 and {MAX_MESSAGE_TEXT_PART}")));
        }
        let offset = usize::try_from(params.offset.unwrap_or(0)).unwrap_or(usize::MAX);
        let part = self.store.message_text_part(&params.session_id, params.seq, offset, limit as usize).await?;
        let Some((text, total)) = part else {
            return Err(ErrorPayload::not_found(format!(
                "session {} has no entry with seq {}",
                params.session_id, params.seq
            )));
        };
        let end = offset + text.len();
        Ok(MessageTextResult {
            seq: params.seq,
            text,
            offset: offset as u64,
            total_bytes: total as u64,
            next_offset: (end < total).then_some(end as u64),
        })
    }

    /// One page of full-text search hits (`message.search`).
    pub async fn search_messages(&self, params: MessageSearchParams) -> ApiResult<MessageSearchResult> {
        let limit = params.limit.unwrap_or(DEFAULT_SEARCH_PAGE).clamp(1, MAX_SEARCH_PAGE) as usize;
        let page = self.store.search(params.query, params.session_id, limit, params.cursor).await?;
        Ok(MessageSearchResult { hits: page.hits, next_cursor: page.next_cursor })
    }

    /// One page of the session's transcript (`session.export`).
    pub async fn export_session(&self, params: SessionExportParams) -> ApiResult<SessionExportResult> {
        let page = crate::export::export_page_from(
            &self.store,
            &params.session_id,
            params.format,
            params.thoughts,
            params.cursor,
            baton_protocol::MAX_EXPORT_PAGE_BYTES,
        )
        .await
        .map_err(crate::export::ExportError::payload)?;
        Ok(SessionExportResult {
            session_id: params.session_id,
            format: params.format,
            content: page.content,
            next_cursor: page.next_cursor,
            file_name: page.file_name,
        })
    }

    pub async fn cancel(self: &Arc<Self>, session_id: &str) -> ApiResult<SessionCancelResult> {
        self.store.get_session(session_id).await?;
        let execution = self.execution(session_id);
        let open = execution.clone().and_then(|e| e.life().cancel_turn().ok().map(|turn| (e, turn)));
        let Some((execution, turn)) = open else {
            // A turn whose end the database refused (a full disk) is over: the answer is the
            // one a message to the session gets meanwhile.
            if let Some(unsaved) = execution.and_then(|e| e.unsaved_turn_end_reason()) {
                return Err(prompt::unsaved_turn_end(&unsaved, "there is nothing to cancel"));
            }
            return Err(ErrorPayload::conflict("no turn is running in this session"));
        };
        execution.cancel_permissions();
        let acp_session = execution.acp_session_id().unwrap_or_default();
        if let Some(acp) = execution.acp() {
            let cancel = crate::agent::acp::outgoing::cancel(&acp_session);
            acp.notify(cancel.method, cancel.params)
                .map_err(|e| ErrorPayload::unavailable(format!("cannot reach the agent: {e}")))?;
        }
        tokio::spawn(self.clone().enforce_cancel(execution, turn));
        Ok(SessionCancelResult { session_id: session_id.to_string() })
    }

    /// An agent still in the cancelled turn when the grace period is over ignored the cancel:
    /// the turn is ended as `cancelled` with an error saying so, and the agent is stopped. Its
    /// exit watcher then makes the session resumable, as after any exit of an agent.
    async fn enforce_cancel(self: Arc<Self>, execution: Arc<Execution>, turn: u64) {
        let grace = self.timeouts.cancel_grace;
        if execution.process().wait_for(grace).await.is_some() {
            return;
        }
        let attached = self.execution(execution.session_id()).is_some_and(|e| Arc::ptr_eq(&e, &execution));
        // Only the cancelled turn, if it is still open: a turn that ended meanwhile is recorded
        // by whoever ended it.
        if !attached {
            return;
        }
        let Ok(turn) = execution.life().close_turn_number(turn) else {
            return;
        };
        let session_id = execution.session_id().to_string();
        let message = format!(
            "The agent did not stop within {} s of the cancel, so it was stopped. \
             The session resumes when you send a message.",
            grace.as_secs_f64()
        );
        tracing::warn!(%session_id, "the agent ignored session/cancel; stopping it");
        execution.flush_agent_history();
        let events = vec![
            SessionEvent::Error { message },
            SessionEvent::TurnCompleted { stop_reason: StopReason::Cancelled, turn_id: turn.id },
        ];
        if let Err(e) = self.store.append_events(&session_id, events).await {
            tracing::error!(%session_id, "cannot record the forced cancel: {e}");
        }
        self.after_turn(&session_id);
        let exit = execution.process().kill().await;
        tracing::info!(%session_id, %exit, "agent stopped after ignoring a cancel");
    }

    pub async fn stop(self: &Arc<Self>, session_id: &str) -> ApiResult<SessionStopResult> {
        // An agent being reconnected to is stopped once it is attached.
        self.wait_recovered(session_id).await?;
        let (session, _) = self.store.get_session(session_id).await?;
        if session.state.is_terminal() {
            return Err(ErrorPayload::conflict(format!("session is already {}", session.state)));
        }
        // COMPLETED first: from then on every launch fails its compare-and-set to STARTING, so
        // the execution taken below is the last one (a launch racing the stop, e.g. a message
        // that was waiting for the agent, cannot attach a new agent to the stopped session).
        let from = SessionState::ALL.iter().copied().filter(|s| !s.is_terminal()).collect();
        let transition = Transition {
            session_id: session_id.to_string(),
            from,
            to: SessionState::Completed,
            task_state: Some(TaskState::Completed),
            agent: Live::None,
            last_error: None,
        };
        let Some(changed) = self.store.transition(transition).await? else {
            let (session, _) = self.store.get_session(session_id).await?;
            return Err(ErrorPayload::conflict(format!("session is already {}", session.state)));
        };
        let execution = self.executions.lock().ok().and_then(|mut map| map.remove(session_id));
        let mut events = Vec::new();
        if let Some(execution) = execution {
            let interrupted_turn = execution.stop_life("stopped");
            execution.cancel_permissions();
            let exit = execution.process().kill().await;
            tracing::info!(session_id, %exit, "agent stopped");
            execution.flush_agent_history();
            if let Some(turn) = interrupted_turn {
                events.push(SessionEvent::TurnCompleted { stop_reason: StopReason::Cancelled, turn_id: turn.id });
            }
            store_logged(
                session_id,
                "the executor status",
                self.store.set_executor_status(session_id, execution.id(), ExecutorStatus::Stopped).await,
            );
        }
        events.push(SessionEvent::status("Session stopped."));
        self.store.append_events(session_id, events).await?;
        self.after_turn(session_id);
        Ok(SessionStopResult { session_id: session_id.to_string(), state: changed.state })
    }

    /// Stops every standalone agent (server shutdown). Sessions keep their states: after the
    /// next start they report `needs_resume`. Hosted agents keep running in the agent host and
    /// are reattached by the next start.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        let executions: Vec<Arc<Execution>> =
            self.executions.lock().map(|mut map| map.drain().map(|(_, e)| e).collect()).unwrap_or_default();
        let (hosted, executions): (Vec<_>, Vec<_>) =
            executions.into_iter().partition(|e| e.is_hosted() && e.is_ready());
        for execution in hosted {
            execution.checked(execution.life().begin_stopping());
            if let Some(acp) = execution.acp() {
                acp.freeze_acks();
            }
        }
        let kills = executions.iter().map(|execution| {
            execution.checked(execution.life().begin_stopping());
            execution.cancel_permissions();
            execution.process().kill()
        });
        let _ = tokio::time::timeout(Duration::from_secs(5), futures_util::future::join_all(kills)).await;
    }

    /// At startup, once hosted agents are reattached: records what every session needs from
    /// the user now (`attention`). Agents of the previous run are gone, so sessions that waited
    /// for input now need resuming.
    pub async fn settle_attention(&self) -> crate::store::StoreResult<usize> {
        let sessions = self.store.attention_inputs().await?;
        // Only the sessions whose reason changes are written (at a clean restart: those that
        // waited for input and now need resuming); the others would be read and left alone.
        // The verdict is the one `status_of` gives, from the same facts.
        let verdicts = sessions
            .into_iter()
            .filter_map(|session| {
                let (agent, _) = self.live(&session.session_id);
                let facts = SessionFacts { state: session.state, has_resume_token: session.has_resume_token, agent };
                let needs_resume = session_status::evaluate(facts).needs_resume;
                let facts = crate::attention::AttentionFacts::new(session.state, needs_resume, session.has_error);
                (crate::attention::attention(facts) != session.attention).then_some((session.session_id, needs_resume))
            })
            .collect();
        self.store.settle_attention(verdicts).await
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

/// A page cursor: the order it belongs to and the key of the last row sent, in one string that
/// clients pass back unread. `|` separates the fields: ids and timestamps never contain it.
fn encode_cursor(order: SessionOrder, key: &SessionKey) -> String {
    format!("{}|{}|{}|{}", order.as_str(), key.rank, key.created_at, key.id)
}

fn decode_cursor(cursor: &str, order: SessionOrder) -> ApiResult<SessionKey> {
    let invalid = || ErrorPayload::validation("cursor is not one this server handed out (pass next_cursor back as is)");
    let mut fields = cursor.splitn(4, '|');
    let (Some(of), Some(rank), Some(created_at), Some(id)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(invalid());
    };
    if of != order.as_str() {
        return Err(ErrorPayload::validation(format!(
            "cursor belongs to order {of:?}, not {:?}: page with the order of the first page",
            order.as_str()
        )));
    }
    let rank = rank.parse::<u64>().map_err(|_| invalid())?;
    baton_protocol::validate_id("cursor", id).map_err(|_| invalid())?;
    Ok(SessionKey { rank, created_at: created_at.to_string(), id: id.to_string() })
}
