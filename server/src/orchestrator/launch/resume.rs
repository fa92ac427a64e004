//! ResumeTaskSession → Executor.ResumeSession → StartAgentProcess (see docs/RESUME.md, 'The
//! launch, step by step'; the names are in its 'Glossary').
//!
//! One launch path serves every way an agent gets attached to a session: `task.create` with
//! start, `task.session.start`, `task.session.resume`, and the lazy resume of `message.add`.
//! Here: the resume request (buildResumeRequest, dispatchInitialPrompt), spawning the agent, and
//! what runs after the launch answered (initialize, the restore ladder, the first state); the
//! launch's own steps are in launch.rs.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::{SessionEvent, SessionResumeResult, SessionState, TaskState};

use super::{fork_status_message, new_turn_id, ForkFrom, LaunchIntent};
use crate::agent::acp::outgoing::{self, Outgoing, SessionPlace};
use crate::agent::acp::{AcpConnection, CallError};
use crate::agent::auth;
use crate::agent::translate::{parse_capabilities, AgentCapabilities};
use crate::orchestrator::execution::{Execution, Phase};
use crate::orchestrator::launch::restore_ladder::{self, LadderOutcome, NewReason, RestoreFailure, RestoreMethod};
use crate::orchestrator::{store_logged, ApiResult, Orchestrator};
use crate::session_status::Live;
use crate::store::{ExecutorRecord, ExecutorStatus, SessionRecord, Transition};

/// buildResumeRequest's output: what to restore and whether to prompt automatically.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeRequest {
    /// The saved ACP session id to restore (the resume token).
    pub resume_token: Option<String>,
    /// The prompt dispatchInitialPrompt sends; empty means boot idle.
    pub task_description: String,
    /// The session state before STARTING was written (the captured previous state, see
    /// docs/RESUME.md, 'Glossary').
    pub previous_state: SessionState,
    pub fresh: bool,
    /// A fork's first launch: where its agent gets the conversation from.
    pub fork: Option<ForkFrom>,
    /// Launched for a user message (`LaunchIntent::ForPrompt`): once ready, the session stays
    /// STARTING until that message moves it to RUNNING, instead of saying for a moment that
    /// it waits for input (that its turn is over) before the turn ran.
    pub prompt_follows: bool,
}

/// buildResumeRequest (see docs/RESUME.md, 'Cases A, B, C'):
/// - case A: a resume token → restore it, do not auto-prompt;
/// - case B: no token, the session was WAITING_FOR_INPUT → boot idle;
/// - case C: otherwise the task description stays and is sent as the first prompt.
///
/// A prompt that already reached the agent once is never re-sent by itself (docs/RESUME.md,
/// 'Rules Baton holds to'), so case C only prompts a session whose conversation is empty.
pub fn build_resume_request(
    session: &SessionRecord,
    executor: Option<&ExecutorRecord>,
    intent: &LaunchIntent,
    conversation_started: bool,
) -> ResumeRequest {
    let fresh = matches!(intent, LaunchIntent::Resume { fresh: true, .. });
    let token = if fresh { None } else { executor.and_then(|e| e.resume_token.clone()).filter(|t| !t.is_empty()) };
    let initial_prompt = match intent {
        LaunchIntent::Start { prompt: Some(prompt) } => prompt.clone(),
        LaunchIntent::ForPrompt | LaunchIntent::Fork(_) => String::new(),
        _ => session.task_description.clone(),
    };
    // Case A (a token) and case B (no token, WAITING_FOR_INPUT) boot idle; case C prompts,
    // unless that prompt already reached an agent once.
    let case_c = token.is_none() && session.state != SessionState::WaitingForInput;
    let task_description = if case_c && !conversation_started { initial_prompt } else { String::new() };
    let fork = match intent {
        LaunchIntent::Fork(from) => Some(from.clone()),
        _ => None,
    };
    let token = if fork.is_some() { None } else { token };
    let prompt_follows = *intent == LaunchIntent::ForPrompt;
    ResumeRequest { resume_token: token, task_description, previous_state: session.state, fresh, fork, prompt_follows }
}

/// dispatchInitialPrompt's three-way switch.
#[derive(Debug, Clone, PartialEq)]
pub enum InitialDispatch {
    /// Send the task description as the first prompt.
    Prompt(String),
    /// Boot idle; inject the recorded history into the next user prompt.
    IdleWithHistoryInjection,
    /// Boot idle, no context.
    Idle,
}

pub fn dispatch_initial_prompt(task_description: &str, should_inject_resume_context: bool) -> InitialDispatch {
    if !task_description.trim().is_empty() {
        InitialDispatch::Prompt(task_description.to_string())
    } else if should_inject_resume_context {
        InitialDispatch::IdleWithHistoryInjection
    } else {
        InitialDispatch::Idle
    }
}

impl Orchestrator {
    /// ResumeTaskSession: validates, then launches (or returns the agent already there).
    /// `retry_failed` lets a FAILED session be launched again (its cause fixed).
    pub async fn resume(
        self: &Arc<Self>,
        session_id: &str,
        fresh: bool,
        retry_failed: bool,
    ) -> ApiResult<SessionResumeResult> {
        self.launch(session_id, LaunchIntent::Resume { fresh, retry_failed }).await
    }

    /// ResumeTaskSession's failure: session and task FAILED, only for a launch that could not
    /// even start the agent process (docs/RESUME.md, 'Rules Baton holds to').
    pub(in crate::orchestrator) async fn fail_session(&self, session: &SessionRecord, message: &str) {
        tracing::warn!(session_id = %session.id, "{message}");
        store_logged(
            &session.id,
            "the event",
            self.store.append(&session.id, SessionEvent::Error { message: message.to_string() }).await,
        );
        let transition = Transition {
            session_id: session.id.clone(),
            from: vec![session.state],
            to: SessionState::Failed,
            task_state: Some(TaskState::Failed),
            agent: Live::None,
            last_error: Some(Some(message.to_string())),
        };
        store_logged(&session.id, "the state change", self.store.transition(transition).await);
    }

    /// StartAgentProcess: initialize, restore or create the ACP session, then
    /// dispatchInitialPrompt; runs in the background after `launch` answered.
    pub(in crate::orchestrator) async fn start_agent_process(
        self: Arc<Self>,
        execution: Arc<Execution>,
        request: ResumeRequest,
    ) {
        tokio::spawn(self.clone().watch_exit(execution.clone()));
        match self.initialize_and_restore(&execution, &request).await {
            Ok(outcome) => self.finish_start(&execution, &request, outcome).await,
            Err(failure) => self.abort_start(&execution, &request, failure).await,
        }
    }

    async fn initialize_and_restore(
        &self,
        execution: &Arc<Execution>,
        request: &ResumeRequest,
    ) -> Result<LadderOutcome, StartFailure> {
        let acp = execution.acp().ok_or_else(|| StartFailure::retryable("agent connection missing"))?;
        let timeout = self.timeouts.handshake;
        let Outgoing { method, params } = outgoing::initialize(execution.offers_terminals());
        let init = acp
            .request(method, params, Some(timeout))
            .await
            .map_err(|e| StartFailure::retryable(format!("initialize failed: {e}")))?;
        let caps = parse_capabilities(&init);
        let agent = execution.agent();
        let methods = auth::parse_auth_methods(&init);
        execution.set_auth_methods(methods.clone());
        let env_is_set = |var: &str| {
            agent.env.get(var).is_some_and(|v| !v.is_empty()) || std::env::var_os(var).is_some_and(|v| !v.is_empty())
        };
        let chosen = auth::choose_method(&methods, agent.auth_method.as_deref(), env_is_set);
        if let Some(refusal) = chosen
            .as_deref()
            .and_then(|method| auth::interactive_refusal(&agent.name, &agent.command, &methods, method))
        {
            return Err(StartFailure::needs_auth(refusal));
        }
        if let Some(method) = &chosen {
            authenticate(&acp, method, timeout, agent, &methods).await?;
        }
        let place = self.session_place(execution, caps).await;
        let token = request.resume_token.as_deref();
        let ladder = || async {
            match &request.fork {
                Some(from) => restore_ladder::fork(&acp, caps, from.source_token(), &place, timeout).await,
                None => {
                    restore_ladder::run(
                        &acp,
                        caps,
                        // Restored natively when the agent says it can (loadSession, resume),
                        // unless its entry opts out.
                        agent.native_session_resume && (caps.load_session || caps.resume_session),
                        agent.restore_with,
                        token,
                        &place,
                        timeout,
                        execution.as_ref(),
                    )
                    .await
                }
            }
        };
        let mut outcome = ladder().await;
        if needs_auth(&outcome) {
            // Authenticated and still refused: the agent may have wanted it again (a -32000 is
            // retried once after authenticating); without a usable method, say what to set.
            let Some(method) = &chosen else {
                return Err(StartFailure::needs_auth(auth::explain_missing(
                    &agent.name,
                    &agent.command,
                    &methods,
                    None,
                )));
            };
            authenticate(&acp, method, timeout, agent, &methods).await?;
            outcome = ladder().await;
            if needs_auth(&outcome) {
                return Err(StartFailure::needs_auth(auth::explain_missing(
                    &agent.name,
                    &agent.command,
                    &methods,
                    Some(method),
                )));
            }
        }
        outcome.map_err(|e| StartFailure::retryable(format!("could not open an agent session: {e}")))
    }

    /// Where the agent session opens: the agent's working directory and the MCP servers of its
    /// agents.toml entry and of its task (those the agent takes; the journal says which were
    /// left out, and why, when some were).
    async fn session_place(&self, execution: &Execution, caps: AgentCapabilities) -> SessionPlace {
        let session_id = execution.session_id();
        let mut configs = execution.agent().mcp_servers.clone();
        match self.store.task_mcp_servers(session_id).await {
            Ok(task_servers) => {
                // A task's server replaces the agent's server of the same name.
                configs.retain(|c| !task_servers.iter().any(|t| t.name() == c.name()));
                configs.extend(task_servers);
            }
            Err(e) => {
                let line = format!("The task's MCP servers could not be read ({e}): the agent starts without them.");
                store_logged(
                    session_id,
                    "a status line",
                    self.store.append(session_id, SessionEvent::status(line)).await,
                );
            }
        }
        let (mcp_servers, left_out) = crate::agent::mcp::for_agent(&configs, caps);
        if !left_out.is_empty() {
            let line = format!("{}.", left_out.join("; "));
            store_logged(session_id, "a status line", self.store.append(session_id, SessionEvent::status(line)).await);
        }
        SessionPlace { cwd: execution.agent_workdir().to_string_lossy().into_owned(), mcp_servers }
    }

    async fn finish_start(
        self: &Arc<Self>,
        execution: &Arc<Execution>,
        request: &ResumeRequest,
        outcome: LadderOutcome,
    ) {
        let session_id = execution.session_id().to_string();
        let acp_session = match &outcome {
            LadderOutcome::Restored { session_id, .. } | LadderOutcome::New { session_id, .. } => session_id.clone(),
            LadderOutcome::Preserved { failure, detail } => {
                let message = format!("Could not restore the agent's session ({}): {detail}", failure.describe());
                let failure = if failure.is_transient() {
                    StartFailure::retryable(message)
                } else {
                    StartFailure { detail: message, kind: StartFailureKind::RestoreImpossible }
                };
                return self.abort_start(execution, request, failure).await;
            }
        };
        execution.set_acp_session_id(acp_session.clone());
        // storeResumeToken, first of three: the ACP session was created or restored.
        store_logged(
            &session_id,
            "the resume token",
            self.store.store_resume_token(&session_id, execution.id(), Some(acp_session.clone())).await,
        );
        if let Some(message) = self.restore_status_message(request, &outcome, execution) {
            store_logged(&session_id, "the event", self.store.append(&session_id, SessionEvent::status(message)).await);
        }
        // The user's mode and options, set again before any prompt reaches the agent.
        if let LadderOutcome::Restored { answer, .. } | LadderOutcome::New { answer, .. } = &outcome {
            self.open_with_options(execution, &acp_session, answer).await;
        }
        // The conversation is never silently lost: whenever the agent restored nothing (it cannot
        // restore, the restore was proven impossible, or a fresh start was asked for), the
        // recorded history goes into the next prompt. An agent that restored its session has it.
        let restored_nothing = matches!(outcome, LadderOutcome::New { .. });
        let should_inject = restored_nothing && execution.history_enabled() && self.history.has_history(&session_id);
        store_logged(
            &session_id,
            "the executor status",
            self.store.set_executor_status(&session_id, execution.id(), ExecutorStatus::Ready).await,
        );
        match dispatch_initial_prompt(&request.task_description, should_inject) {
            InitialDispatch::Prompt(prompt) => {
                execution.checked(execution.life().ready());
                if self.send_prompt(execution, &prompt, SessionState::Starting, &new_turn_id()).await.is_err() {
                    tracing::warn!(%session_id, "the initial prompt could not be sent");
                }
            }
            dispatch => {
                if dispatch == InitialDispatch::IdleWithHistoryInjection {
                    execution.inject_history_into_next_prompt();
                }
                if request.prompt_follows {
                    // The message that asked for this agent takes the session from STARTING to
                    // RUNNING (`send_prompt`), or back to WAITING_FOR_INPUT when it cannot.
                    execution.checked(execution.life().ready());
                    return;
                }
                // startAgentProcessOnResume's callback: an idle agent means WAITING_FOR_INPUT and
                // the task back in REVIEW, whatever the state captured before STARTING was (see
                // docs/RESUME.md, 'Rules Baton holds to').
                let transition = Transition {
                    session_id: session_id.clone(),
                    from: vec![SessionState::Starting],
                    to: SessionState::WaitingForInput,
                    task_state: Some(TaskState::Review),
                    agent: Live::Running,
                    last_error: None,
                };
                execution.checked(execution.life().becoming_ready());
                store_logged(&session_id, "the state change", self.store.transition(transition).await);
                // storeResumeToken, second of three: the session's status changed.
                if let Some(token) = execution.acp_session_id() {
                    store_logged(
                        &session_id,
                        "the resume token",
                        self.store.store_resume_token(&session_id, execution.id(), Some(token)).await,
                    );
                }
                execution.checked(execution.life().ready());
            }
        }
    }

    fn restore_status_message(
        &self,
        request: &ResumeRequest,
        outcome: &LadderOutcome,
        execution: &Execution,
    ) -> Option<String> {
        let returning = request.previous_state != SessionState::Created;
        let injects = execution.history_enabled() && self.history.has_history(execution.session_id());
        if let Some(from) = &request.fork {
            return Some(fork_status_message(from, outcome, injects));
        }
        match outcome {
            LadderOutcome::Restored { method: RestoreMethod::Resume, .. } => {
                Some("Session resumed: the agent restored its context.".into())
            }
            LadderOutcome::Restored { method: RestoreMethod::Load, .. } => {
                Some("Session resumed: the agent reloaded the conversation (its replay is not shown again).".into())
            }
            LadderOutcome::New { reason: NewReason::FellBack { failure, detail }, .. } => Some(format!(
                "The previous conversation could not be restored by the agent ({}: {detail}). A new agent session \
                 was started; {}",
                failure.describe(),
                if injects {
                    "the conversation so far will be included with your next message."
                } else {
                    "send a message to continue."
                }
            )),
            LadderOutcome::New { reason: NewReason::NothingToRestore, .. } if request.fresh => Some(if injects {
                "Started over: a fresh agent session, as requested; the conversation so far will be included with \
                 your next message."
                    .into()
            } else {
                "Started over: a fresh agent session without the previous conversation, as requested.".into()
            }),
            LadderOutcome::New { reason: NewReason::NothingToRestore, .. } if returning => Some(if injects {
                "Agent restarted. It cannot restore sessions itself: the conversation so far will be included with your next message.".into()
            } else if execution.history_enabled() {
                "Agent restarted. It cannot restore sessions itself; there is no conversation to carry over yet.".into()
            } else {
                "Agent restarted without the previous conversation: this agent cannot restore sessions.".into()
            }),
            _ => None,
        }
    }

    /// A launch that failed after the process started: the agent is stopped, the session goes
    /// back to the state captured before STARTING and stays resumable; the token is kept.
    async fn abort_start(&self, execution: &Arc<Execution>, request: &ResumeRequest, failure: StartFailure) {
        let StartFailure { detail, kind } = failure;
        let session_id = execution.session_id().to_string();
        if matches!(execution.phase(), Phase::Gone(_)) {
            // `stop` took the execution and ended the session: there is nothing to go back to,
            // and "can be resumed again" would be false.
            tracing::info!(%session_id, "agent start ended by a stop: {detail}");
            execution.process().kill().await;
            return;
        }
        // An agent whose output ended is exiting: its exit (and stderr) says why.
        let output_ended = execution.acp().is_some_and(|acp| acp.is_closed());
        let exit = match execution.process().exit_info() {
            Some(exit) => Some(exit),
            None if output_ended => execution.process().wait_for(Duration::from_secs(2)).await,
            None => None,
        };
        let detail = match (execution.abandon_reason(), exit) {
            (Some(reason), _) => reason,
            (None, Some(exit)) => format!("{detail} (the agent {exit})"),
            (None, None) => detail,
        };
        tracing::warn!(%session_id, "agent start failed: {detail}");
        execution.checked(execution.life().begin_stopping());
        execution.process().kill().await;
        store_logged(
            &session_id,
            "the executor status",
            self.store.set_executor_status(&session_id, execution.id(), ExecutorStatus::Failed).await,
        );
        let status = match kind {
            StartFailureKind::Retryable => format!("{detail}. Nothing was lost: the session can be resumed again."),
            StartFailureKind::NeedsAuth => format!("{detail}. Nothing was lost."),
            StartFailureKind::RestoreImpossible => format!(
                "{detail}. This is not a passing failure: resuming again will not restore it. Nothing was lost: \
                 start over fresh with the conversation so far included (`task.session.resume` with \
                 `fresh: true`; R in the terminal client, \"Start fresh\" on the web page)."
            ),
        };
        store_logged(
            &session_id,
            "the event",
            self.store.append(&session_id, SessionEvent::Error { message: status }).await,
        );
        let back_to = request.previous_state;
        let transition = Transition {
            session_id: session_id.clone(),
            from: vec![SessionState::Starting],
            to: back_to,
            task_state: None,
            agent: Live::None,
            last_error: Some(Some(detail.clone())),
        };
        store_logged(&session_id, "the state change", self.store.transition(transition).await);
        self.detach(execution);
        execution.checked(execution.life().gone(detail));
    }
}

/// Why an agent could not be started, and so what the user can do about it.
#[derive(Debug)]
struct StartFailure {
    detail: String,
    kind: StartFailureKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum StartFailureKind {
    /// Trying again may work (the process went away, a timeout...).
    Retryable,
    /// The agent wants authentication Baton cannot give it: the detail says what to set.
    NeedsAuth,
    /// The agent answered that it cannot restore the session; only a fresh start helps.
    RestoreImpossible,
}

impl StartFailure {
    fn retryable(detail: impl Into<String>) -> Self {
        StartFailure { detail: detail.into(), kind: StartFailureKind::Retryable }
    }

    fn needs_auth(detail: String) -> Self {
        StartFailure { detail, kind: StartFailureKind::NeedsAuth }
    }
}

/// The agent refused with -32000 "Authentication required" (a new session or a restore).
fn needs_auth(outcome: &Result<LadderOutcome, CallError>) -> bool {
    match outcome {
        Err(CallError::Rpc(e)) => e.code == -32000,
        Ok(LadderOutcome::Preserved { failure, .. }) => *failure == RestoreFailure::Auth,
        _ => false,
    }
}

async fn authenticate(
    acp: &AcpConnection,
    method: &str,
    timeout: Duration,
    agent: &crate::agent::registry::AgentSpec,
    methods: &[auth::AuthMethod],
) -> Result<(), StartFailure> {
    let Outgoing { method: name, params } = outgoing::authenticate(method);
    match acp.request(name, params, Some(timeout)).await {
        Ok(_) => Ok(()),
        Err(CallError::Rpc(e)) => {
            let explanation = auth::explain_missing(&agent.name, &agent.command, methods, Some(method));
            Err(StartFailure::needs_auth(format!("{explanation} (authenticate answered: {e})")))
        }
        Err(e) => Err(StartFailure::retryable(format!("authenticate failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures::{executor, session};

    #[test]
    fn prompt_decision_case_a_token_restores_without_prompt() {
        for state in [SessionState::WaitingForInput, SessionState::Running, SessionState::Starting] {
            let r = build_resume_request(
                &session(state),
                Some(&executor(Some("tok"))),
                &LaunchIntent::Resume { fresh: false, retry_failed: false },
                false,
            );
            assert_eq!(r.resume_token.as_deref(), Some("tok"));
            assert_eq!(r.task_description, "", "case A never auto-prompts ({state})");
            assert_eq!(r.previous_state, state);
        }
    }

    #[test]
    fn prompt_decision_case_b_waiting_session_boots_idle() {
        let r = build_resume_request(
            &session(SessionState::WaitingForInput),
            Some(&executor(None)),
            &LaunchIntent::Resume { fresh: false, retry_failed: false },
            false,
        );
        assert_eq!((r.resume_token, r.task_description.as_str()), (None, ""));
        let fresh = build_resume_request(
            &session(SessionState::WaitingForInput),
            Some(&executor(Some("tok"))),
            &LaunchIntent::Resume { fresh: true, retry_failed: false },
            true,
        );
        assert_eq!(
            (fresh.resume_token, fresh.task_description.as_str(), fresh.fresh),
            (None, "", true),
            "fresh drops the token"
        );
    }

    #[test]
    fn prompt_decision_case_c_description_is_sent() {
        let r =
            build_resume_request(&session(SessionState::Created), None, &LaunchIntent::Start { prompt: None }, false);
        assert_eq!(r.task_description, "d");
        let custom = build_resume_request(
            &session(SessionState::Created),
            None,
            &LaunchIntent::Start { prompt: Some("go".into()) },
            false,
        );
        assert_eq!(custom.task_description, "go");
        let starting = build_resume_request(
            &session(SessionState::Starting),
            Some(&executor(None)),
            &LaunchIntent::Resume { fresh: false, retry_failed: false },
            false,
        );
        assert_eq!(starting.task_description, "d", "a start that never delivered its prompt delivers it");
    }

    #[test]
    fn prompt_decision_never_resends_a_delivered_prompt() {
        let r = build_resume_request(
            &session(SessionState::Running),
            Some(&executor(None)),
            &LaunchIntent::Resume { fresh: false, retry_failed: false },
            true,
        );
        assert_eq!(r.task_description, "");
        let for_prompt = build_resume_request(&session(SessionState::Created), None, &LaunchIntent::ForPrompt, false);
        assert_eq!(for_prompt.task_description, "", "a user message follows");
    }

    #[test]
    fn three_way_switch() {
        assert_eq!(dispatch_initial_prompt("fix it", true), InitialDispatch::Prompt("fix it".into()));
        assert_eq!(dispatch_initial_prompt("", true), InitialDispatch::IdleWithHistoryInjection);
        assert_eq!(dispatch_initial_prompt("  ", false), InitialDispatch::Idle);
    }
}
