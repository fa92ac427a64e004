//! ResumeTaskSession's launch (docs/RESUME.md, 'The launch, step by step'), one step a
//! function: validate, buildResumeRequest, LaunchAgent (through the agent's [`Runtime`], one
//! path for every runtime) + validateAndLockResume, persistResumeState; then
//! startAgentProcessOnResume (resume.rs) runs in the background.

pub(in crate::orchestrator) mod exit_watch;
pub(in crate::orchestrator) mod hosted;
pub mod reconcile;
pub mod restore_ladder;
pub mod resume;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::{ErrorPayload, SessionResumeResult, SessionState};

use crate::agent::acp::{AcpConnection, StreamOptions};
use crate::agent::docker::DockerRuntime;
use crate::agent::registry::AgentSpec;
use crate::agent::runtime::{self, LaunchSpec, Launched, Placement, Runtime, SpawnError, Standalone};
use crate::agent::ssh::SshRuntime;
use crate::agent_runtime::AgentRuntime;
use crate::orchestrator::agent_requests::sandbox::WorkdirPin;
use crate::orchestrator::agent_requests::terminals::RemotePlace;
use crate::orchestrator::execution::{Execution, Phase};
use crate::orchestrator::{worktree, ApiResult, Orchestrator};
use crate::session_status::Live;
use crate::store::{ExecutorRecord, SessionRecord, Transition};
use restore_ladder::{LadderOutcome, NewReason, RestoreMethod};
use resume::{build_resume_request, ResumeRequest};

/// A session that passed validation, and where its agent will run.
struct LaunchTarget {
    session: SessionRecord,
    executor: Option<ExecutorRecord>,
    agent: AgentSpec,
    workdir: PathBuf,
    /// Which directory `workdir` is, taken before the agent starts (see `WorkdirPin`).
    workdir_pin: Option<WorkdirPin>,
}

/// What validateAndLockResume found or did.
enum Locked {
    /// Another execution holds the session's slot.
    AlreadyAttached,
    Launched(Arc<Execution>),
}

impl Orchestrator {
    /// ResumeTaskSession's steps, each named as in docs/RESUME.md's glossary: validate, build
    /// the resume request, LaunchAgent (through the agent's runtime, the same path for every
    /// runtime) + validateAndLockResume, persistResumeState, then startAgentProcessOnResume in
    /// the background.
    pub(crate) async fn launch(
        self: &Arc<Self>,
        session_id: &str,
        intent: LaunchIntent,
    ) -> ApiResult<SessionResumeResult> {
        // The agent of the previous run may be on its way back: no second one meanwhile.
        self.wait_recovered(session_id).await?;
        let task_id = self.store.get_session(session_id).await?.0.task_id;
        let _task = self.lock_task(&task_id).await;
        self.launch_locked(session_id, intent).await
    }

    /// [`Self::launch`] for a caller that holds the task's lock already.
    pub(crate) async fn launch_locked(
        self: &Arc<Self>,
        session_id: &str,
        intent: LaunchIntent,
    ) -> ApiResult<SessionResumeResult> {
        let retry_failed = matches!(intent, LaunchIntent::Resume { retry_failed: true, .. });
        let target = self.validate_launch(session_id, retry_failed).await?;
        let conversation_started = self.store.has_user_messages(session_id).await?;
        let request = build_resume_request(&target.session, target.executor.as_ref(), &intent, conversation_started);
        let execution_id = format!("exec-{}", uuid::Uuid::new_v4().simple());
        // A second request for a live (or starting) session returns it, never kills it.
        if self.execution(session_id).is_some() {
            return self.already_launched(session_id).await;
        }
        let launched = match self.launch_agent(&target, &execution_id, &request).await {
            Ok(launched) => launched,
            // Its command is missing...: the session fails.
            Err(SpawnError::Refused(message)) => {
                self.fail_session(&target.session, &message).await;
                return Err(ErrorPayload::unavailable_until_changed(message));
            }
            Err(SpawnError::Transient(message)) => {
                let message = format!("{message}; this is temporary: the session stays resumable, try again");
                self.keep_launch_error(session_id, &message).await;
                return Err(ErrorPayload::unavailable(message));
            }
            // Out of descriptors lasts until agents stop or the limit is raised: not "temporary".
            Err(SpawnError::NoDescriptors(message)) => {
                let message = format!("{message}; the session stays resumable");
                self.keep_launch_error(session_id, &message).await;
                return Err(ErrorPayload::unavailable(message));
            }
            // The runtime is not the session's fault: its state stays, try again later; the
            // error stays on the session until a launch succeeds.
            Err(SpawnError::Unavailable(message)) => {
                let message = format!("{message}; the session stays resumable");
                self.keep_launch_error(session_id, &message).await;
                return Err(ErrorPayload::unavailable(message));
            }
            // The runtime's settings: the session waits for them to be fixed.
            Err(SpawnError::Config(message)) => {
                let message = format!("{message}; the session stays resumable once that is fixed");
                self.keep_launch_error(session_id, &message).await;
                return Err(ErrorPayload::unavailable_until_changed(message));
            }
        };
        let placement = (launched.placement.clone(), launched.start_time);
        let execution = match self.validate_and_lock_resume(&target, execution_id, launched)? {
            Locked::AlreadyAttached => return self.already_launched(session_id).await,
            Locked::Launched(execution) => execution,
        };
        self.persist_resume_state(&execution, &request, placement).await?;
        let this = self.clone();
        tokio::spawn(async move { this.start_agent_process(execution, request).await });
        Ok(SessionResumeResult { session_id: session_id.to_string(), state: SessionState::Starting, launched: true })
    }

    /// A launch that failed without failing the session: its `last_error` says why (what a
    /// client shows next to the session), and the log too.
    async fn keep_launch_error(&self, session_id: &str, message: &str) {
        tracing::warn!(session_id, "{message}");
        if let Err(e) = self.store.set_last_error(session_id, Some(message.to_string())).await {
            tracing::error!(session_id, "cannot record the launch error: {e}");
        }
    }

    /// The answer to a launch of a session whose agent is already there.
    async fn already_launched(&self, session_id: &str) -> ApiResult<SessionResumeResult> {
        let state = self.store.get_session(session_id).await?.0.state;
        Ok(SessionResumeResult { session_id: session_id.to_string(), state, launched: false })
    }

    /// Validate: the server takes launches, the session is not finished, its agent is
    /// configured and its working directory (or worktree) exists. An agent that died a moment
    /// ago may still be attached while its exit is recorded: that is waited for (bounded)
    /// instead of answering "already running" for a dead agent.
    async fn validate_launch(&self, session_id: &str, retry_failed: bool) -> ApiResult<LaunchTarget> {
        if self.is_shutting_down() {
            return Err(ErrorPayload::unavailable("the server is shutting down"));
        }
        let (session, executor) = self.store.get_session(session_id).await?;
        if session.state == SessionState::Failed && !retry_failed {
            return Err(ErrorPayload::conflict(
                "session is FAILED; once what failed it is fixed, resume it with retry_failed: true \
                 (or start a new session of the task)",
            ));
        }
        if session.state.is_terminal() && !(retry_failed && session.state == SessionState::Failed) {
            return Err(ErrorPayload::conflict(format!(
                "session is {}; a finished session cannot be resumed (start a new session of the task)",
                session.state
            )));
        }
        let agent = self.registry.get(&session.agent).cloned().ok_or_else(|| {
            ErrorPayload::validation(format!("agent {:?} is not configured on this server", session.agent))
        })?;
        let workdir =
            PathBuf::from(executor.as_ref().and_then(|e| e.worktree_path.clone()).unwrap_or(session.workdir.clone()));
        if !workdir.is_dir() {
            let what = if executor.as_ref().is_some_and(|e| e.worktree_path.is_some()) {
                "worktree"
            } else {
                "working directory"
            };
            return Err(ErrorPayload::validation(format!(
                "the session's {what} {} no longer exists",
                workdir.display()
            )));
        }
        // Checked again at every launch: a component replaced by a symlink since the task was
        // created must not lead the agent into the data dir.
        let workdir = worktree::launch_dir(&self.data_dir, &workdir).map_err(|message| {
            tracing::warn!(session_id, "{message}");
            ErrorPayload::validation(message)
        })?;
        // Pinned before the agent starts: whatever the path leads to later, its file requests
        // stay in this directory.
        let workdir_pin = WorkdirPin::of(&workdir).ok();
        if let Some(existing) = self.execution(session_id) {
            if existing.process().has_exited() || (existing.is_ready() && !existing.is_alive()) {
                let gone = existing.wait_phase(|p| matches!(p, Phase::Gone(_)));
                if tokio::time::timeout(Duration::from_secs(10), gone).await.is_err() {
                    tracing::warn!(session_id, "a dead agent is still attached after 10 s");
                }
            }
        }
        Ok(LaunchTarget { session, executor, agent, workdir, workdir_pin })
    }

    /// The session's agent log: what its agents wrote to stderr, whatever runtime ran them.
    pub(in crate::orchestrator) fn agent_log(&self, session_id: &str) -> PathBuf {
        self.data_dir.join("agent-logs").join(format!("{session_id}.log"))
    }

    /// The runtime an agent runs in.
    pub(in crate::orchestrator) fn runtime_of(&self, agent: &AgentSpec) -> Result<Arc<dyn Runtime>, String> {
        Ok(match agent.runtime.unwrap_or(self.default_runtime) {
            AgentRuntime::Hosted => self.host.clone(),
            AgentRuntime::Standalone => Arc::new(Standalone::guarded(self.host.batond())),
            AgentRuntime::Docker => {
                let config = agent.docker.clone().ok_or_else(|| {
                    format!("agent {} runs in docker but has no [agents.{}.docker] image", agent.name, agent.name)
                })?;
                let runtime =
                    DockerRuntime::new(config, &self.data_dir, self.host.batond().to_path_buf(), self.host.grace())?;
                Arc::new(Arc::new(runtime))
            }
            AgentRuntime::Ssh => {
                let config = agent.ssh.clone().ok_or_else(|| {
                    format!("agent {} runs over ssh but has no [agents.{}.ssh] host", agent.name, agent.name)
                })?;
                Arc::new(SshRuntime::new(config, &self.data_dir, self.host.batond().to_path_buf(), self.host.grace())?)
            }
        })
    }

    /// LaunchAgent: the agent is started by its runtime before the slot is taken (that may be
    /// a network call); if another launch wins the slot meanwhile, this agent is let go.
    async fn launch_agent(
        &self,
        target: &LaunchTarget,
        execution_id: &str,
        request: &ResumeRequest,
    ) -> Result<Launched, SpawnError> {
        let agent = &target.agent;
        let (command, args) = agent.command_line(request.resume_token.as_deref());
        let mut env = agent.launch_env();
        // Marks every process of the agent's tree, so that none outlives its session.
        env.insert(runtime::TREE_MARKER_ENV.to_string(), execution_id.to_string());
        let spec = LaunchSpec { command: command.clone(), args, env, cwd: target.workdir.clone() };
        // The agent's whole stderr, one file per session (launches appended), named in errors.
        let log = self.agent_log(&target.session.id);
        let runtime = self.runtime_of(agent).map_err(SpawnError::Config)?;
        let launched = runtime.spawn(execution_id, &spec, Some(log)).await.map_err(|e| match e {
            SpawnError::Refused(e) => {
                SpawnError::Refused(format!("could not start agent {} ({command}): {e}", agent.name))
            }
            SpawnError::Transient(e) => {
                SpawnError::Transient(format!("could not start agent {} ({command}): {e}", agent.name))
            }
            SpawnError::NoDescriptors(e) => {
                SpawnError::NoDescriptors(format!("could not start agent {} ({command}): {e}", agent.name))
            }
            SpawnError::Unavailable(e) => SpawnError::Unavailable(format!(
                "could not run agent {} in the {} runtime: {e}",
                agent.name,
                runtime.name()
            )),
            SpawnError::Config(e) => {
                SpawnError::Config(format!("could not run agent {} in the {} runtime: {e}", agent.name, runtime.name()))
            }
        })?;
        tracing::info!(session_id = %target.session.id, agent = %agent.name, pid = launched.pid,
            runtime = runtime.name(), "agent launched");
        Ok(launched)
    }

    /// An execution over a launched agent, connected to it. `options` differ for a reattached
    /// agent; `before_attach` runs before the first line is read.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::orchestrator) fn connect_execution(
        &self,
        execution_id: String,
        session_id: String,
        agent: AgentSpec,
        workdir: (PathBuf, Option<WorkdirPin>),
        launched: Launched,
        options: StreamOptions,
        before_attach: impl FnOnce(&Arc<Execution>),
    ) -> Arc<Execution> {
        let runtime = self.runtime_of(&agent).ok();
        let agent_workdir = runtime.as_ref().map(|runtime| runtime.agent_path(&workdir.0));
        // Terminals run where the agent runs: here, or through its runtime where it is.
        let local =
            matches!(agent.runtime.unwrap_or(self.default_runtime), AgentRuntime::Hosted | AgentRuntime::Standalone);
        let remote = match (&launched.placement, runtime) {
            (Placement::Host { agent_id, .. }, Some(runtime)) if !local => {
                Some(RemotePlace { runtime, agent_id: agent_id.clone() })
            }
            _ => None,
        };
        let execution = Execution::new(
            execution_id,
            session_id,
            agent,
            workdir,
            launched.handle.clone(),
            self.store.clone(),
            self.history.clone(),
        );
        let execution = match agent_workdir {
            Some(path) => execution.seeing_workdir_at(path),
            None => execution,
        };
        let execution = match remote {
            Some(place) => execution.offering_remote_terminals(place),
            None if local => execution.offering_terminals(),
            None => execution,
        };
        // Its lines outlive this server: acknowledged as they take effect, frozen at shutdown.
        let execution = Arc::new(if launched.transport.is_durable() { execution.in_agent_host() } else { execution });
        before_attach(&execution);
        execution.attach(AcpConnection::connect(launched.transport, execution.clone(), options, launched.handle));
        execution
    }

    /// validateAndLockResume: one execution per session, however many requests race; an agent
    /// launched for a slot another launch took is stopped.
    fn validate_and_lock_resume(
        &self,
        target: &LaunchTarget,
        execution_id: String,
        launched: Launched,
    ) -> ApiResult<Locked> {
        let mut executions = self.executions.lock().map_err(|_| ErrorPayload::internal("execution table poisoned"))?;
        if executions.contains_key(&target.session.id) {
            drop(executions);
            let unused = launched.handle;
            tokio::spawn(async move {
                unused.kill().await;
            });
            return Ok(Locked::AlreadyAttached);
        }
        let execution = self.connect_execution(
            execution_id,
            target.session.id.clone(),
            target.agent.clone(),
            (target.workdir.clone(), target.workdir_pin),
            launched,
            StreamOptions::default(),
            |_| {},
        );
        executions.insert(target.session.id.clone(), execution.clone());
        Ok(Locked::Launched(execution))
    }

    /// persistResumeState: the launch is recorded and the session moves to STARTING,
    /// compare-and-set against the state captured by buildResumeRequest. When either fails the
    /// launch is rolled back: the agent is stopped and detached, the session left as it was.
    async fn persist_resume_state(
        &self,
        execution: &Arc<Execution>,
        request: &ResumeRequest,
        (placement, start_time): (Placement, Option<u64>),
    ) -> ApiResult<()> {
        let session_id = execution.session_id();
        let pid = execution.process().pid();
        let recorded = match placement {
            Placement::Host { url, port, pid: host_pid, agent_id } => {
                self.store
                    .record_hosted_launch(session_id, execution.id(), pid, start_time, &url, port, host_pid, &agent_id)
                    .await
            }
            Placement::Child => self.store.record_launch(session_id, execution.id(), Some(pid), start_time).await,
        };
        let transition = Transition {
            session_id: session_id.to_string(),
            from: vec![request.previous_state],
            to: SessionState::Starting,
            task_state: None,
            agent: Live::Starting,
            last_error: Some(None),
        };
        let persisted = match recorded {
            Ok(()) => self.store.transition(transition).await.map_err(ErrorPayload::from),
            Err(e) => Err(e.into()),
        };
        if matches!(persisted, Ok(Some(_))) {
            return Ok(());
        }
        execution.stop_life("the session changed while starting");
        self.detach(execution);
        execution.process().kill().await;
        Err(persisted
            .err()
            .unwrap_or_else(|| ErrorPayload::busy("the session changed state while its agent was starting; try again")))
    }
}

/// Why an agent is being attached.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchIntent {
    /// `task.session.resume`; `fresh` drops the resume token; `retry_failed` launches a FAILED
    /// session again (the user fixed what failed it).
    Resume { fresh: bool, retry_failed: bool },
    /// First launch of a session; the prompt defaults to the task description.
    Start { prompt: Option<String> },
    /// ensureSessionRunning: a user message follows, so nothing is sent automatically.
    ForPrompt,
    /// First launch of a fork (`task.session.fork`): its conversation is the source's, so
    /// nothing is sent automatically.
    Fork(ForkFrom),
}

/// Where a fork's agent gets the conversation from.
#[derive(Debug, Clone, PartialEq)]
pub enum ForkFrom {
    /// The source's agent: `session/fork` copies `source_token` (the source's agent session)
    /// where the agent advertises it; otherwise the history is injected.
    SameAgent { source_token: Option<String> },
    /// Another agent than the source's (`agent` of `task.session.fork`): a new agent session,
    /// the history injected. `from` is the source's agent.
    OtherAgent { from: String },
}

impl ForkFrom {
    /// The agent session `session/fork` may copy.
    pub fn source_token(&self) -> Option<&str> {
        match self {
            ForkFrom::SameAgent { source_token } => source_token.as_deref(),
            ForkFrom::OtherAgent { .. } => None,
        }
    }
}

/// A new id for a turn (see `MessageAddResult::turn_id`).
pub(crate) fn new_turn_id() -> String {
    format!("turn-{}", uuid::Uuid::new_v4().simple())
}

/// The status line a fork's first start leaves in its transcript: how its agent got the
/// conversation.
pub(in crate::orchestrator) fn fork_status_message(from: &ForkFrom, outcome: &LadderOutcome, injects: bool) -> String {
    let carried = if injects {
        "the conversation so far will be included with your next message."
    } else {
        "there is no recorded conversation to carry over."
    };
    if let ForkFrom::OtherAgent { from } = from {
        return format!("Switched from {from}: a new agent session was started; {carried}");
    }
    match outcome {
        LadderOutcome::Restored { method: RestoreMethod::Fork, .. } => {
            "Fork ready: the agent copied the conversation of the source session (session/fork).".into()
        }
        LadderOutcome::New { reason: NewReason::FellBack { failure, detail }, .. } => format!(
            "The agent could not fork the source's session ({}: {detail}). A new agent session was started; {carried}",
            failure.describe()
        ),
        _ => format!("This agent cannot fork sessions, so a new agent session was started; {carried}"),
    }
}
