//! One live agent attached to a session: its process, its ACP connection, and the handler that
//! turns what the agent sends into journal events, history entries and answers.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use baton_protocol::{PermissionChange, PermissionOption, PermissionQueueChanged, SessionEvent, ToolCallStatus};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::agent_requests::agent_fs::{self, Workdir};
use super::agent_requests::permissions::{self, Permissions, Refusal};
use super::agent_requests::sandbox::WorkdirPin;
use super::agent_requests::sandbox::{Refusal as SandboxRefusal, Sandbox};
use super::agent_requests::standing_answers;
use super::agent_requests::terminals::{Create, Journal, RemotePlace, Terminals};
use super::launch::restore_ladder::{RestoreHooks, RestoreMethod};
pub use super::life::Phase;
use super::life::{Life, Refused, Turn, TurnAnswer};
use crate::agent::acp::{outgoing, AcpConnection, AgentHandler, BoxFuture, LineDone, Params, RpcError};
use crate::agent::history::{EntryType, HistoryEntry, HistoryStore};
use crate::agent::registry::AgentSpec;
use crate::agent::runtime::ProcessHandle;
use crate::agent::translate::tool_content_text;
use crate::store::{PendingWrite, Store, StoreError, Transition};

/// Journal writes an execution may have queued before it waits for the oldest to commit (the
/// writer commits up to 512 writes at once, so this keeps a full batch in flight).
const MAX_QUEUED_WRITES: usize = 1024;

/// Session-scoped state the handler needs that is not the process itself. Every field is
/// private: the life cycle changes through its transitions (`life()`), the rest through the
/// named methods below.
pub struct Execution {
    id: String,
    session_id: String,
    agent: AgentSpec,
    workdir: PathBuf,
    /// Which directory `workdir` was when the agent was launched (None: it could not be told,
    /// and no file request is served).
    workdir_pin: Option<WorkdirPin>,
    /// The working directory as the agent finds it (`workdir` unless its runtime maps it).
    agent_workdir: PathBuf,
    process: ProcessHandle,
    /// The agent runs in the agent host: updates move the session's output cursor.
    hosted: bool,
    store: Store,
    history: HistoryStore,
    /// Starting, ready, in a turn (with what the turn's end needs), gone: changed only by its
    /// checked transitions.
    life: Life,
    /// What ends a turn beside the life cycle.
    turn_end: Mutex<TurnEnd>,
    /// Conversation updates are replay until we send a prompt (session/load, and agents that
    /// replay during session/resume): we already store the conversation.
    suppress_history: AtomicBool,
    /// Whether the recorded history goes into the next prompt (the three-way switch).
    resume_context: Mutex<ResumeContext>,
    /// The agent's permission requests waiting for an answer.
    permissions: Permissions,
    /// Agent text not yet recorded to history (flushed at a tool call and at the turn's end).
    history_buffer: Mutex<String>,
    tool_titles: Mutex<HashMap<String, String>>,
    /// Journal writes queued for agent updates and not yet awaited, oldest first.
    pending_writes: Mutex<VecDeque<QueuedUpdate>>,
    /// Held while a prompt opens its turn and is written, and by the exit watcher while it
    /// decides what became of the turn: an exit in between cannot close a turn whose prompt is
    /// still being sent.
    prompt_gate: tokio::sync::Mutex<()>,
    /// Held by whoever tries to save a turn's end the database refused (`TurnEnd::unrecorded`):
    /// a message and the wait for room on the disk try one at a time, and the end stays where a
    /// cancel sees it until a try saved it.
    close_gate: tokio::sync::Mutex<()>,
    /// The authentication methods the agent offered at `initialize`, for the hint of a turn
    /// refused for authentication.
    auth_methods: Mutex<Vec<crate::agent::auth::AuthMethod>>,
    /// The agent is offered terminals (ACP `terminal/*`): it runs on this machine, or its
    /// runtime runs commands where it is (`remote_terminals`).
    offers_terminals: bool,
    remote_terminals: Option<RemotePlace>,
    terminals: Arc<Terminals>,
    /// A task kills the terminals once the execution is gone (started with the first one).
    terminals_watched: AtomicBool,
}

/// The end of a turn the database refused to record (its events and transition), retried
/// before the next prompt.
pub type UnrecordedClose = (Vec<SessionEvent>, Transition);

/// What ends a turn, beside the life cycle's open turn. Not the turn's own data: the answer
/// task outlives the turn's stage (the exit watcher waits for it after the turn closed, so that
/// the turn's end is journaled before the exit's own lines), and an end the database refused
/// stays to be saved once the turn is over (as does the undo of a turn that never started).
#[derive(Default)]
struct TurnEnd {
    /// The task waiting for the running prompt's answer (it closes the turn).
    answer_task: Option<tokio::task::JoinHandle<()>>,
    unrecorded: Option<UnrecordedClose>,
    /// Why the database last refused the end of a turn (kept while it is not saved).
    unsaved_because: Option<String>,
}

/// buildEffectivePrompt's switch: the recorded history goes into the first prompt after a
/// fresh start of an agent that restored nothing, once.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
enum ResumeContext {
    #[default]
    NotNeeded,
    Pending,
    Injected,
}

/// An agent update queued for the journal: its write, and the update itself, written again if
/// the disk had no room for it.
struct QueuedUpdate {
    write: PendingWrite<u64>,
    event: SessionEvent,
    /// Its line in a hosted agent's output.
    host_seq: Option<u64>,
}

/// The first wait before updates the disk had no room for are written again; it doubles up to
/// [`MOST_WAIT_FOR_ROOM`].
const FIRST_WAIT_FOR_ROOM: std::time::Duration = std::time::Duration::from_millis(50);
pub(crate) const MOST_WAIT_FOR_ROOM: std::time::Duration = std::time::Duration::from_secs(2);

impl ResumeContext {
    /// Pending → Injected, answering whether this prompt is the one to carry the history.
    fn take(&mut self) -> bool {
        let pending = *self == ResumeContext::Pending;
        if pending {
            *self = ResumeContext::Injected;
        }
        pending
    }

    /// NotNeeded → Pending; an injection already made is not made again.
    fn ask(&mut self) {
        if *self == ResumeContext::NotNeeded {
            *self = ResumeContext::Pending;
        }
    }
}

impl Execution {
    /// An execution of a standalone agent process (`in_agent_host` for a hosted one).
    pub fn new(
        id: String,
        session_id: String,
        agent: AgentSpec,
        (workdir, workdir_pin): (PathBuf, Option<WorkdirPin>),
        process: ProcessHandle,
        store: Store,
        history: HistoryStore,
    ) -> Execution {
        Execution {
            id,
            session_id,
            agent,
            workdir_pin,
            agent_workdir: workdir.clone(),
            workdir,
            process,
            hosted: false,
            store,
            history,
            life: Life::default(),
            turn_end: Mutex::new(TurnEnd::default()),
            suppress_history: AtomicBool::new(false),
            resume_context: Mutex::new(ResumeContext::default()),
            permissions: Permissions::default(),
            history_buffer: Mutex::new(String::new()),
            tool_titles: Mutex::new(HashMap::new()),
            pending_writes: Mutex::new(VecDeque::new()),
            prompt_gate: tokio::sync::Mutex::new(()),
            close_gate: tokio::sync::Mutex::new(()),
            auth_methods: Mutex::new(Vec::new()),
            offers_terminals: false,
            remote_terminals: None,
            terminals: Arc::new(Terminals::default()),
            terminals_watched: AtomicBool::new(false),
        }
    }

    /// The agent runs on this machine: it is offered terminals.
    pub fn offering_terminals(self) -> Execution {
        Execution { offers_terminals: true, ..self }
    }

    /// The agent runs elsewhere, and its runtime runs its terminals there.
    pub fn offering_remote_terminals(self, place: RemotePlace) -> Execution {
        Execution { offers_terminals: true, remote_terminals: Some(place), ..self }
    }

    /// Whether the agent is offered terminals (`initialize`'s client capabilities).
    pub fn offers_terminals(&self) -> bool {
        self.offers_terminals
    }

    /// The agent runs in the agent host.
    pub fn in_agent_host(self) -> Execution {
        Execution { hosted: true, ..self }
    }

    /// The agent finds the working directory at `path` (on another machine).
    pub fn seeing_workdir_at(self, path: PathBuf) -> Execution {
        Execution { agent_workdir: path, ..self }
    }

    /// The working directory as the agent finds it: what it is told over ACP.
    pub fn agent_workdir(&self) -> &Path {
        &self.agent_workdir
    }

    /// A file request's params with the agent's path of a file as batond's own.
    fn local_paths(&self, mut params: Value) -> Value {
        if self.agent_workdir == self.workdir {
            return params;
        }
        let local = params
            .get("path")
            .and_then(Value::as_str)
            .and_then(|path| Path::new(path).strip_prefix(&self.agent_workdir).ok())
            .map(|rest| self.workdir.join(rest));
        if let Some(local) = local {
            params["path"] = Value::String(local.to_string_lossy().into_owned());
        }
        params
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn agent(&self) -> &AgentSpec {
        &self.agent
    }

    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    pub fn process(&self) -> &ProcessHandle {
        &self.process
    }

    pub fn is_hosted(&self) -> bool {
        self.hosted
    }

    fn turn_end(&self) -> std::sync::MutexGuard<'_, TurnEnd> {
        // Slots that are set and taken whole: a panic elsewhere cannot leave them torn.
        self.turn_end.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reattached to an agent a previous server started: ready, or in the turn that server
    /// opened, whose prompt's answer the returned receiver gets. None also when refused.
    pub fn reattached(&self, turn_open: bool) -> Option<oneshot::Receiver<TurnAnswer>> {
        self.checked(self.life.reattached(turn_open)).flatten()
    }

    /// Holds the task waiting for the running prompt's answer (the exit watcher waits for it).
    pub fn hold_answer_task(&self, task: tokio::task::JoinHandle<()>) {
        self.turn_end().answer_task = Some(task);
    }

    pub fn take_answer_task(&self) -> Option<tokio::task::JoinHandle<()>> {
        self.turn_end().answer_task.take()
    }

    /// Keeps the end of a turn the database refused to record, to be tried again
    /// ([`Execution::hold_close_gate`], [`Execution::unrecorded_close`]).
    pub fn keep_unrecorded_close(&self, events: Vec<SessionEvent>, transition: Transition) {
        self.turn_end().unrecorded = Some((events, transition));
    }

    /// Held while the end the database refused is tried again: one try at a time.
    pub async fn hold_close_gate(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.close_gate.lock().await
    }

    /// A copy of the end the database refused, to try again (under the close gate). It stays
    /// kept, so that the session shows its turn's end unsaved, until [`Execution::close_recorded`].
    pub fn unrecorded_close(&self) -> Option<UnrecordedClose> {
        self.turn_end().unrecorded.clone()
    }

    /// The end the database refused is saved now.
    pub fn close_recorded(&self) {
        let mut turn_end = self.turn_end();
        turn_end.unrecorded = None;
        turn_end.unsaved_because = None;
    }

    /// Notes why the end of the turn could not be saved (for `unsaved_turn_end_reason`).
    pub fn note_unsaved_turn_end(&self, reason: String) {
        self.turn_end().unsaved_because = Some(reason);
    }

    /// Why the end of the last turn is not saved yet, while it is not (a turn that never
    /// started, whose undo is kept, is not one).
    pub fn unsaved_turn_end_reason(&self) -> Option<String> {
        let turn_end = self.turn_end();
        let ended = turn_end.unrecorded.as_ref().is_some_and(|(events, _)| !events.is_empty());
        ended.then(|| turn_end.unsaved_because.clone().unwrap_or_else(|| "the database refused it".into()))
    }

    /// Held while a prompt opens its turn and is written, and while the exit watcher decides
    /// what became of the turn.
    pub async fn hold_prompt_gate(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.prompt_gate.lock().await
    }

    /// The agent restored nothing: the recorded history goes into the next prompt.
    pub fn inject_history_into_next_prompt(&self) {
        self.resume_context.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).ask();
    }

    /// Whether this prompt carries the recorded history (true once after
    /// `inject_history_into_next_prompt`).
    pub fn take_history_injection(&self) -> bool {
        self.resume_context.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }

    /// The ACP connection over the agent's pipes, made once (refused once gone: logged).
    pub fn attach(&self, acp: AcpConnection) {
        self.checked(self.life.connected(acp));
    }

    pub fn acp(&self) -> Option<AcpConnection> {
        self.life.acp()
    }

    pub fn set_auth_methods(&self, methods: Vec<crate::agent::auth::AuthMethod>) {
        if let Ok(mut slot) = self.auth_methods.lock() {
            *slot = methods;
        }
    }

    pub fn auth_methods(&self) -> Vec<crate::agent::auth::AuthMethod> {
        self.auth_methods.lock().map(|m| m.clone()).unwrap_or_default()
    }

    pub fn acp_session_id(&self) -> Option<String> {
        self.life.acp_session()
    }

    /// Records the ACP session the launch made or restored (refused once gone: logged).
    pub fn set_acp_session_id(&self, id: String) {
        self.checked(self.life.acp_session_made(id));
    }

    /// The life cycle (see `life.rs`): every change of it goes through its transitions.
    pub fn life(&self) -> &Life {
        &self.life
    }

    pub fn phase(&self) -> Phase {
        self.life.phase()
    }

    /// The result of a transition the caller goes on after either way: a refusal is the race it
    /// lost (e.g. a launch finishing after a stop took its execution: `Gone` is final), logged.
    pub fn checked<T>(&self, result: Result<T, Refused>) -> Option<T> {
        result.map_err(|refused| tracing::debug!(session_id = %self.session_id, "{refused}")).ok()
    }

    /// Stops the life cycle: stopping, then gone with `reason`. Returns the turn that was open,
    /// whose end the caller records; None also when it was gone already.
    pub fn stop_life(&self, reason: &str) -> Option<Turn> {
        // Refused only when already gone, which `gone` then reports as well.
        let _ = self.life.begin_stopping();
        self.checked(self.life.gone(reason)).flatten()
    }

    /// Waits until the phase satisfies `done`, and returns it.
    pub async fn wait_phase(&self, done: impl Fn(&Phase) -> bool) -> Phase {
        let mut phase = self.life.subscribe();
        let reached = phase.wait_for(|p| done(p)).await.map(|p| p.clone());
        reached.unwrap_or_else(|_| Phase::Gone("the execution ended".into()))
    }

    /// The agent can take a prompt: ready, process alive, pipes open.
    pub fn is_alive(&self) -> bool {
        self.life.is_running() && !self.process.has_exited() && self.acp().is_some_and(|a| !a.is_closed())
    }

    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Ready
    }

    /// Gives up a launch that takes too long: the agent is killed, the launch fails with
    /// `reason`, and the session stays resumable.
    pub async fn abandon(&self, reason: String) {
        // Refused once the launch got ready or gone: then it was not given up (logged).
        self.checked(self.life.abandon(reason));
        self.process.kill().await;
        self.wait_phase(|p| matches!(p, Phase::Gone(_))).await;
    }

    pub fn abandon_reason(&self) -> Option<String> {
        self.life.abandoned()
    }

    /// From now on conversation updates are live, not replay.
    pub fn end_replay(&self) {
        self.suppress_history.store(false, Ordering::SeqCst);
    }

    pub fn history_enabled(&self) -> bool {
        self.agent.history_context_injection
    }

    pub fn record_history(&self, entry: HistoryEntry) {
        if !self.history_enabled() {
            return;
        }
        if let Err(e) = self.history.append(&entry) {
            tracing::warn!(session_id = %self.session_id, "cannot record history: {e}");
        }
    }

    /// Records the agent text received since the last flush as one agent message.
    pub fn flush_agent_history(&self) {
        let text = self.history_buffer.lock().map(|mut b| std::mem::take(&mut *b)).unwrap_or_default();
        if !text.trim().is_empty() {
            self.record_history(HistoryEntry::new(&self.session_id, EntryType::AgentMessage, text));
        }
    }

    /// Abandons every pending permission request (on cancel, stop or exit): ACP requires
    /// them to be answered `cancelled`.
    pub fn cancel_permissions(&self) {
        self.permissions.cancel_all();
    }

    /// Takes the answer of a pending permission request (delivered to the agent by
    /// `Claimed::deliver`).
    pub fn claim_permission(&self, request_id: &str, option_id: &str) -> Result<permissions::Claimed, Refusal> {
        self.permissions.claim(request_id, option_id)
    }

    /// The agent's permission requests waiting for an answer.
    pub fn pending_permissions(&self) -> Vec<permissions::Asked> {
        self.permissions.pending()
    }

    async fn append(&self, event: SessionEvent) {
        if let Err(e) = self.store.append(&self.session_id, event).await {
            tracing::error!(session_id = %self.session_id, "cannot journal an agent event: {e}");
        }
    }

    fn record_update_history(&self, event: &SessionEvent) {
        if !self.history_enabled() {
            return;
        }
        match event {
            SessionEvent::MessageChunk { text, .. } => {
                if let Ok(mut buffer) = self.history_buffer.lock() {
                    buffer.push_str(text);
                }
            }
            SessionEvent::ToolCall { tool_call_id, title, status, .. } => {
                self.flush_agent_history();
                if let Ok(mut titles) = self.tool_titles.lock() {
                    titles.insert(tool_call_id.clone(), title.clone());
                }
                let entry = HistoryEntry::tool(
                    &self.session_id,
                    EntryType::ToolCall,
                    title,
                    tool_call_id,
                    status.as_ref().map(ToolCallStatus::as_str),
                    "",
                );
                self.record_history(entry);
            }
            SessionEvent::ToolCallUpdate { tool_call_id, status: Some(status), content, .. }
                if status.is_finished() =>
            {
                let name = self
                    .tool_titles
                    .lock()
                    .ok()
                    .and_then(|t| t.get(tool_call_id).cloned())
                    .unwrap_or_else(|| tool_call_id.clone());
                let text = content.as_ref().map(tool_content_text).unwrap_or_default();
                let entry = HistoryEntry::tool(
                    &self.session_id,
                    EntryType::ToolResult,
                    &name,
                    tool_call_id,
                    Some(status.as_str()),
                    text,
                );
                self.record_history(entry);
            }
            _ => {}
        }
    }

    async fn on_update(self: Arc<Self>, params: Params, seq: u64) {
        let translated = params.into_update();
        if translated.is_history && self.suppress_history.load(Ordering::SeqCst) {
            tracing::debug!(session_id = %self.session_id, "dropped replayed update");
            return;
        }
        let Some(mut event) = translated.event else {
            return;
        };
        self.scope_tool_call(&mut event);
        self.record_update_history(&event);
        // Queued without waiting for the commit: a stream of updates shares group commits.
        // `flush` waits before the turn's answer is delivered.
        let host_seq = self.hosted.then_some(seq);
        match self.submit_update(event.clone(), host_seq) {
            Ok(write) => {
                // Bounded: an agent that streams faster than the disk commits waits here (and
                // then on its pipe) instead of growing the writer's queue without end.
                let oldest = self.pending_writes.lock().ok().and_then(|mut queue| {
                    queue.push_back(QueuedUpdate { write, event, host_seq });
                    if queue.len() > MAX_QUEUED_WRITES {
                        queue.pop_front()
                    } else {
                        None
                    }
                });
                if let Some(oldest) = oldest {
                    match oldest.write.wait().await {
                        Ok(_) => {}
                        Err(e) if e.is_disk_full() => {
                            self.write_again_when_room(vec![(oldest.event, oldest.host_seq)]).await
                        }
                        Err(e) => tracing::error!(session_id = %self.session_id, "cannot journal an agent event: {e}"),
                    }
                }
            }
            Err(e) => tracing::error!(session_id = %self.session_id, "cannot journal an agent event: {e}"),
        }
    }

    fn submit_update(&self, event: SessionEvent, host_seq: Option<u64>) -> Result<PendingWrite<u64>, StoreError> {
        match host_seq {
            Some(seq) => self.store.submit_append_hosted(&self.session_id, event, seq),
            None => self.store.submit_append(&self.session_id, event),
        }
    }

    /// The disk had no room for the updates in `failed` (oldest first). Every update queued
    /// after them failed too (the store holds the session's updates behind one that failed),
    /// and they are all written again, in order, once there is room: tried again after a wait
    /// that doubles up to [`MOST_WAIT_FOR_ROOM`]. Meanwhile nothing more is read from the agent
    /// (this runs on its dispatch loop): the agent waits on its output, or its agent host keeps
    /// it. Every client hears that the disk is full from the store (`storage.changed`).
    async fn write_again_when_room(&self, mut failed: Vec<(SessionEvent, Option<u64>)>) {
        let mut wait = FIRST_WAIT_FOR_ROOM;
        let mut tries = 0u64;
        loop {
            let queued: Vec<QueuedUpdate> =
                self.pending_writes.lock().map(|mut queue| queue.drain(..).collect()).unwrap_or_default();
            for update in queued {
                match update.write.wait().await {
                    Ok(_) => {}
                    Err(e) if e.is_disk_full() => failed.push((update.event, update.host_seq)),
                    Err(e) => tracing::error!(session_id = %self.session_id, "cannot journal an agent event: {e}"),
                }
            }
            if failed.is_empty() {
                if tries > 0 {
                    tracing::info!(session_id = %self.session_id, tries, "the agent's held updates are saved");
                }
                return;
            }
            if tries == 0 {
                tracing::warn!(
                    session_id = %self.session_id,
                    held = failed.len(),
                    "the disk is full: the agent's output is held until its updates can be saved"
                );
            }
            tries += 1;
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MOST_WAIT_FOR_ROOM);
            if let Err(e) = self.store.release_held(&self.session_id) {
                tracing::error!(session_id = %self.session_id, "cannot journal the agent's held updates: {e}");
                return;
            }
            for (event, host_seq) in failed.drain(..) {
                match self.submit_update(event.clone(), host_seq) {
                    Ok(write) => {
                        if let Ok(mut queue) = self.pending_writes.lock() {
                            queue.push_back(QueuedUpdate { write, event, host_seq });
                        }
                    }
                    Err(e) => {
                        tracing::error!(session_id = %self.session_id, "cannot journal the agent's held updates: {e}");
                        return;
                    }
                }
            }
        }
    }

    /// Tool-call ids are the agent process's own (the mock agent counts `tool-1`, `tool-2`...
    /// from each start): another execution's `tool-1` is another tool call, so the id the
    /// journal folds by is scoped to this execution (a reattached hosted agent keeps its id).
    fn scope_tool_call(&self, event: &mut SessionEvent) {
        if let SessionEvent::ToolCall { tool_call_id, .. } | SessionEvent::ToolCallUpdate { tool_call_id, .. } = event {
            let scope = self.id.rsplit('-').next().unwrap_or(&self.id);
            let scope = &scope[..scope.len().min(8)];
            *tool_call_id = format!("{tool_call_id}@{scope}");
        }
    }

    /// Waits until every update queued so far is saved (written again first if the disk had no
    /// room for some).
    async fn flush_writes(&self) {
        let queued: Vec<QueuedUpdate> =
            self.pending_writes.lock().map(|mut queue| queue.drain(..).collect()).unwrap_or_default();
        let mut failed = Vec::new();
        for update in queued {
            match update.write.wait().await {
                Ok(_) => {}
                Err(e) if e.is_disk_full() => failed.push((update.event, update.host_seq)),
                Err(e) => tracing::error!(session_id = %self.session_id, "cannot journal an agent event: {e}"),
            }
        }
        if !failed.is_empty() {
            self.write_again_when_room(failed).await;
        }
    }

    /// session/request_permission: journaled as a request, answered by a client (or cancelled),
    /// journaled as resolved, and the answer goes back to the agent.
    async fn on_permission(self: Arc<Self>, params: Value) -> Result<Value, RpcError> {
        let options = match permissions::parse_options(&params) {
            Ok(options) => options,
            Err(error) => {
                // Answered with the error, and shown: the agent's turn goes on without it.
                tracing::warn!(session_id = %self.session_id, %error, "refused a permission request with invalid params");
                let message = format!(
                    "The agent sent a permission request that could not be read ({error}); it was answered with an \
                     error."
                );
                self.append(SessionEvent::Error { message }).await;
                return Err(error);
            }
        };
        let tool_call = params.get("toolCall").cloned().unwrap_or(Value::Null);
        if let Some(outcome) = self.answer_by_rule(&tool_call, &options).await {
            return Ok(outcome);
        }
        let (request_id, answer) = self.permissions.register(tool_call.clone(), &options);
        let asked = SessionEvent::PermissionRequest { request_id: request_id.clone(), tool_call, options };
        match self.store.append(&self.session_id, asked).await {
            Ok(record) => self.permissions.journaled(&request_id, record.seq),
            Err(e) => tracing::error!(session_id = %self.session_id, "cannot journal an agent event: {e}"),
        }
        self.record_attention(&request_id, PermissionChange::Requested, None, None).await;
        let choice = answer.await.ok().flatten();
        self.append(SessionEvent::PermissionResolved { request_id: request_id.clone(), option_id: choice.clone() })
            .await;
        let change = if choice.is_some() { PermissionChange::Answered } else { PermissionChange::Cancelled };
        self.record_attention(&request_id, change, choice.clone(), None).await;
        Ok(outgoing::permission_outcome(choice))
    }

    /// Answers a request with the session's standing rule for its tool, if one applies (see
    /// `standing_answers`), and tells every client.
    async fn answer_by_rule(&self, tool_call: &Value, options: &[PermissionOption]) -> Option<Value> {
        let applied = standing_answers::apply(&self.store, &self.session_id, tool_call, options).await?;
        let option_id = Some(applied.option_id.clone());
        self.record_attention(&applied.request_id, PermissionChange::Answered, option_id, Some(applied.rule_id)).await;
        Some(outgoing::permission_outcome(Some(applied.option_id)))
    }

    /// Records whether the session waits for a permission answer (its `attention`), and tells
    /// every client how the approval queue changed.
    async fn record_attention(
        &self,
        request_id: &str,
        change: PermissionChange,
        option_id: Option<String>,
        rule_id: Option<String>,
    ) {
        // An agent that exited needs resuming; its exit's transition records that too.
        let needs_resume = self.process.has_exited();
        let pending = self.permissions.any_pending();
        let changed = PermissionQueueChanged {
            session_id: self.session_id.clone(),
            request_id: request_id.to_string(),
            change,
            option_id,
            rule_id,
        };
        if let Err(e) = self.store.permission_attention(&self.session_id, needs_resume, pending, changed).await {
            tracing::error!(session_id = %self.session_id, "cannot record what the session needs: {e}");
        }
    }
}

impl Execution {
    /// The server's data dir (where the database lives): out of reach of the agent's file
    /// requests.
    fn data_dir(&self) -> PathBuf {
        self.store.path().parent().unwrap_or(Path::new("/")).to_path_buf()
    }

    /// Where the agent's file requests are confined: the working directory it was launched in.
    fn fs_workdir(&self) -> Workdir<'_> {
        Workdir { path: &self.workdir, pin: self.workdir_pin }
    }
}

impl Execution {
    /// The agent's `terminal/*` requests (see `agent_requests::terminals`).
    async fn terminal_request(self: Arc<Self>, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "terminal/create" => {
                let (mut create, cwd) = Create::parse(&params)?;
                let cwd = cwd.map(|c| self.local_paths(json!({"path": c}))["path"].as_str().map(PathBuf::from));
                let workdir = self.workdir.clone();
                let (pin, data_dir) = (self.workdir_pin, self.data_dir());
                let cwd = match cwd {
                    Some(Some(cwd)) => cwd,
                    Some(None) => return Err(RpcError::invalid_params("terminal/create: cwd must be a path")),
                    None => workdir.clone(),
                };
                create.cwd = tokio::task::spawn_blocking(move || {
                    let sandbox = Sandbox::new(&workdir, pin, &data_dir)?;
                    sandbox.directory(&cwd)
                })
                .await
                .map_err(|e| RpcError::internal(format!("terminal/create: {e}")))?
                .map_err(|refusal| match refusal {
                    SandboxRefusal::Invalid(message) => RpcError::invalid_params(message),
                    SandboxRefusal::Io(message) => RpcError::new(-32002, message),
                })?;
                self.watch_terminals();
                let weak = Arc::downgrade(&self);
                let journal: Journal = Arc::new(move |event| {
                    let weak = weak.clone();
                    Box::pin(async move {
                        if let Some(execution) = weak.upgrade() {
                            execution.append(event).await;
                        }
                    })
                });
                self.terminals.create(create, &self.agent.env, &self.id, self.remote_terminals.as_ref(), journal)
            }
            "terminal/output" => self.terminals.output(&params),
            "terminal/wait_for_exit" => self.terminals.wait_for_exit(&params).await,
            "terminal/kill" => self.terminals.kill(&params),
            "terminal/release" => self.terminals.release(&params),
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// Kills the agent's terminals once the execution is gone (stopped, exited, crashed).
    fn watch_terminals(&self) {
        if self.terminals_watched.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut phase = self.life.subscribe();
        let terminals = self.terminals.clone();
        tokio::spawn(async move {
            let _ = phase.wait_for(|p| matches!(p, super::life::Phase::Gone(_))).await;
            terminals.kill_all();
        });
    }
}

impl AgentHandler for Execution {
    fn notification(self: Arc<Self>, method: String, params: Params, seq: u64) -> BoxFuture<()> {
        Box::pin(async move {
            match method.as_str() {
                "session/update" => self.on_update(params, seq).await,
                other => tracing::debug!(method = other, "ignoring a notification from the agent"),
            }
        })
    }

    fn flush(self: Arc<Self>) -> BoxFuture<()> {
        Box::pin(async move { self.flush_writes().await })
    }

    fn unreadable(self: Arc<Self>, what: String) -> BoxFuture<()> {
        Box::pin(async move {
            tracing::warn!(session_id = %self.session_id, "{what}");
            self.flush_writes().await;
            self.append(SessionEvent::Error { message: what }).await;
        })
    }

    fn unmatched_response(self: Arc<Self>, result: Result<Value, RpcError>, done: Option<LineDone>) -> BoxFuture<()> {
        Box::pin(async move {
            // This server sends no request to a reattached agent before its first prompt, so
            // an answer nobody waits for is the previous server's prompt: the turn's end.
            let waiter = self.life.take_answer_slot();
            match waiter {
                Some(waiter) => {
                    let _ = waiter.send((result, done));
                }
                None => tracing::debug!(session_id = %self.session_id, "ignored an answer to an unknown request"),
            }
        })
    }

    fn request(self: Arc<Self>, method: String, params: Value) -> BoxFuture<Result<Value, RpcError>> {
        Box::pin(async move {
            match method.as_str() {
                "session/request_permission" => self.on_permission(params).await,
                "fs/read_text_file" => {
                    agent_fs::read_text_file(self.fs_workdir(), &self.data_dir(), &self.local_paths(params)).await
                }
                "fs/write_text_file" => {
                    agent_fs::write_text_file(self.fs_workdir(), &self.data_dir(), &self.local_paths(params)).await
                }
                terminal if terminal.starts_with("terminal/") && self.offers_terminals => {
                    self.terminal_request(terminal, params).await
                }
                other => Err(RpcError::method_not_found(other)),
            }
        })
    }
}

impl RestoreHooks for Execution {
    fn before_restore(&self, method: RestoreMethod) {
        tracing::debug!(session_id = %self.session_id, method = method.acp_method(), "restoring; replay will not be stored");
        self.suppress_history.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::ResumeContext;

    #[test]
    fn the_history_goes_into_one_prompt_and_only_when_asked() {
        let mut context = ResumeContext::default();
        assert!(!context.take(), "an agent that restored its session gets no history");
        context.ask();
        assert!(context.take(), "the first prompt after the switch carries the history");
        assert!(!context.take(), "the next one does not");
        context.ask();
        assert!(!context.take(), "asking again after the injection injects nothing twice");
    }
}
