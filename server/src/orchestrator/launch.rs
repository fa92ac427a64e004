//! ResumeTaskSession's launch (seed, "Resume Execution"), one step a function: validate,
//! buildResumeRequest, validateAndLockResume + LaunchAgent, persistResumeState; then
//! startAgentProcessOnResume (resume.rs) runs in the background.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::{ErrorPayload, SessionResumeResult, SessionState};

use super::execution::{Execution, Phase};
use super::resume::{build_resume_request, LaunchIntent, ResumeRequest};
use super::{store_error, worktree, ApiResult, Orchestrator};
use crate::agent::acp::HostedOptions;
use crate::agent::host::client::{HostedAgent, SpawnError};
use crate::agent::host::HostInfo;
use crate::agent::registry::{AgentRuntime, AgentSpec};
use crate::agent::runtime;
use crate::session_status::Live;
use crate::store::{ExecutorRecord, SessionRecord, Transition};

/// A session that passed validation, and where its agent will run.
struct LaunchTarget {
    session: SessionRecord,
    executor: Option<ExecutorRecord>,
    agent: AgentSpec,
    workdir: PathBuf,
    /// The agent runs in the agent host.
    hosted: bool,
}

/// What validateAndLockResume found or did.
enum Locked {
    /// Another execution holds the session's slot.
    AlreadyAttached,
    /// The agent could not be started (the session fails with this message).
    Failed(String),
    /// The agent could not be started for now (descriptors, memory or processes exhausted):
    /// the session is left as it was, resumable.
    Transient(String),
    Launched(Arc<Execution>),
}

impl Orchestrator {
    /// ResumeTaskSession's steps, each named after its section of the seed: validate, build
    /// the resume request, validateAndLockResume + LaunchAgent, persistResumeState, then
    /// startAgentProcessOnResume in the background.
    pub(crate) async fn launch(
        self: &Arc<Self>,
        session_id: &str,
        intent: LaunchIntent,
    ) -> ApiResult<SessionResumeResult> {
        let target = self.validate_launch(session_id).await?;
        let conversation_started = self.store.has_user_messages(session_id).await.map_err(store_error)?;
        let request = build_resume_request(&target.session, target.executor.as_ref(), &intent, conversation_started);
        let execution_id = format!("exec-{}", uuid::Uuid::new_v4().simple());
        let prepared = self.prepare_hosted_agent(&target, &execution_id, &request).await?;
        let host_record = prepared.as_ref().map(|p| (p.host.clone(), p.agent_id.clone(), p.start_time));
        let execution = match self.validate_and_lock_resume(&target, execution_id, &request, prepared)? {
            // A second request for a live (or starting) session returns it, never kills it.
            Locked::AlreadyAttached => {
                let state = self.store.get_session(session_id).await.map_err(store_error)?.0.state;
                return Ok(SessionResumeResult { session_id: session_id.to_string(), state, launched: false });
            }
            Locked::Failed(message) => {
                self.fail_session(&target.session, &message).await;
                return Err(ErrorPayload::unavailable(message));
            }
            Locked::Transient(message) => {
                tracing::warn!(session_id, "{message}; the session stays resumable");
                return Err(ErrorPayload::unavailable(format!(
                    "{message}; this is temporary: the session stays resumable, try again"
                )));
            }
            Locked::Launched(execution) => execution,
        };
        self.persist_resume_state(&execution, &request, host_record).await?;
        let this = self.clone();
        tokio::spawn(async move { this.start_agent_process(execution, request).await });
        Ok(SessionResumeResult { session_id: session_id.to_string(), state: SessionState::Starting, launched: true })
    }

    /// Validate: the server takes launches, the session is not finished, its agent is
    /// configured and its working directory (or worktree) exists. An agent that died a moment
    /// ago may still be attached while its exit is recorded: that is waited for (bounded)
    /// instead of answering "already running" for a dead agent.
    async fn validate_launch(&self, session_id: &str) -> ApiResult<LaunchTarget> {
        if self.is_shutting_down() {
            return Err(ErrorPayload::unavailable("the server is shutting down"));
        }
        let (session, executor) = self.store.get_session(session_id).await.map_err(store_error)?;
        if session.state.is_terminal() {
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
        if let Some(existing) = self.execution(session_id) {
            if existing.process().has_exited() || (existing.is_ready() && !existing.is_alive()) {
                let gone = existing.wait_phase(|p| matches!(p, Phase::Gone(_)));
                if tokio::time::timeout(Duration::from_secs(10), gone).await.is_err() {
                    tracing::warn!(session_id, "a dead agent is still attached after 10 s");
                }
            }
        }
        let hosted = agent.runtime.unwrap_or(self.default_runtime) == AgentRuntime::Hosted;
        Ok(LaunchTarget { session, executor, agent, workdir, hosted })
    }

    /// A hosted agent is started in the agent host before the slot is taken (that is a
    /// network call); if another launch wins the slot meanwhile, this agent is let go.
    async fn prepare_hosted_agent(
        &self,
        target: &LaunchTarget,
        execution_id: &str,
        request: &ResumeRequest,
    ) -> ApiResult<Option<HostedAgent>> {
        if !target.hosted || self.execution(&target.session.id).is_some() {
            return Ok(None);
        }
        let token = request.resume_token.as_deref();
        match self.spawn_hosted(execution_id, &target.agent, &target.workdir, token).await {
            Ok(agent) => Ok(Some(agent)),
            // Like a standalone agent whose binary is missing: the session fails.
            Err(SpawnError::Refused(message)) => {
                self.fail_session(&target.session, &message).await;
                Err(ErrorPayload::unavailable(message))
            }
            // The host is not the session's fault: nothing changes, try again later.
            Err(SpawnError::Host(message)) => {
                tracing::warn!(session_id = %target.session.id, "{message}");
                Err(ErrorPayload::unavailable(message))
            }
        }
    }

    /// validateAndLockResume + LaunchAgent: one execution per session, however many requests
    /// race. The map lock is held only while the process is spawned; a hosted agent prepared
    /// for a slot another launch took is stopped.
    fn validate_and_lock_resume(
        &self,
        target: &LaunchTarget,
        execution_id: String,
        request: &ResumeRequest,
        mut prepared: Option<HostedAgent>,
    ) -> ApiResult<Locked> {
        let locked = {
            let mut executions =
                self.executions.lock().map_err(|_| ErrorPayload::internal("execution table poisoned"))?;
            if executions.contains_key(&target.session.id) {
                Locked::AlreadyAttached
            } else {
                let spawned = match prepared.take() {
                    Some(agent_process) => Ok(self.hosted_execution(
                        execution_id,
                        target.session.id.clone(),
                        target.agent.clone(),
                        target.workdir.clone(),
                        agent_process,
                        HostedOptions::default(),
                        |_| {},
                    )),
                    None if target.hosted => {
                        Err("the session's agent went away while a new one was starting; try again".into())
                    }
                    None => self.spawn_execution(
                        execution_id,
                        &target.session,
                        &target.agent,
                        target.workdir.clone(),
                        request,
                    ),
                };
                match spawned {
                    Ok(execution) => {
                        executions.insert(target.session.id.clone(), execution.clone());
                        Locked::Launched(execution)
                    }
                    Err(message) => match message.strip_prefix(super::resume::TRANSIENT_PREFIX) {
                        Some(message) => Locked::Transient(message.to_string()),
                        None => Locked::Failed(message),
                    },
                }
            }
        };
        if let Some(unused) = prepared {
            tokio::spawn(async move {
                unused.handle.kill().await;
                drop(unused);
            });
        }
        Ok(locked)
    }

    /// persistResumeState: the launch is recorded and the session moves to STARTING,
    /// compare-and-set against the state captured by buildResumeRequest. When either fails the
    /// launch is rolled back: the agent is stopped and detached, the session left as it was.
    async fn persist_resume_state(
        &self,
        execution: &Arc<Execution>,
        request: &ResumeRequest,
        host_record: Option<(HostInfo, String, Option<u64>)>,
    ) -> ApiResult<()> {
        let session_id = execution.session_id();
        let pid = execution.process().pid();
        let recorded = match host_record {
            Some((host, agent_id, start_time)) => {
                self.store
                    .record_hosted_launch(
                        session_id,
                        execution.id(),
                        pid,
                        start_time,
                        &host.url,
                        host.port,
                        host.pid,
                        &agent_id,
                    )
                    .await
            }
            None => {
                self.store.record_launch(session_id, execution.id(), Some(pid), runtime::process_start_time(pid)).await
            }
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
            Ok(()) => self.store.transition(transition).await.map_err(store_error),
            Err(e) => Err(store_error(e)),
        };
        if matches!(persisted, Ok(Some(_))) {
            return Ok(());
        }
        execution.stop_life("the session changed while starting");
        self.detach(execution);
        execution.process().kill().await;
        Err(persisted.err().unwrap_or_else(|| {
            ErrorPayload::conflict("the session changed state while its agent was starting; try again")
        }))
    }
}
