//! The `hosted` runtime on the orchestrator's side: launching an agent in the agent host, and
//! RecoverInstances, which reattaches the agents the host kept running across a restart.

use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::acp::{CallError, StreamOptions};
use crate::agent::outliving::Outliving;
use crate::agent::runtime::RuntimeError;
use crate::orchestrator::agent_requests::sandbox::WorkdirPin;
use crate::orchestrator::launch::reconcile;
use crate::orchestrator::Orchestrator;
use crate::store::HostedRecord;

/// What RecoverInstances did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovered {
    /// Sessions whose agent was reattached.
    pub attached: Vec<String>,
    /// Their agents' ids in the host.
    pub agent_ids: Vec<String>,
}

impl Orchestrator {
    /// RecoverInstances: reattaches the hosted agents of `records` that the host still has
    /// (running, or exited with output the journal does not have yet). A reattached agent keeps
    /// its ACP session: no initialize, no resume, no replay; its output continues after the
    /// last line that was journaled, and a turn that was open ends with the previous server's
    /// prompt answer. Returns the sessions it attached; the others follow the lazy resume path.
    pub async fn recover_hosted(self: &Arc<Self>, records: Vec<HostedRecord>) -> Recovered {
        let mut recovered = Recovered::default();
        for record in records {
            let session_id = record.session_id.clone();
            match self.reattach(&record).await {
                Ok(()) => {
                    tracing::info!(%session_id, agent_id = %record.agent_id, "reattached a hosted agent");
                    recovered.attached.push(session_id);
                    recovered.agent_ids.push(record.agent_id.clone());
                }
                Err(e) => tracing::warn!(%session_id, "cannot reattach the hosted agent: {e}"),
            }
        }
        recovered
    }

    /// RecoverInstances for one runtime whose agents live elsewhere (a Docker daemon, an ssh
    /// host), in the background once the server listens: its agents are listed, those of
    /// `records` reattached, the others' sessions reconciled (they resume lazily), and agents
    /// no session owns released. Every session of `records` (marked with
    /// [`Orchestrator::begin_recovery`]) is told the end of it, with why it failed.
    pub async fn recover_remote(self: Arc<Self>, outliving: Outliving, records: Vec<HostedRecord>) {
        let place = outliving.place.clone();
        let listed = outliving.runtime.list().await;
        let agents = match listed {
            Ok(agents) => agents,
            Err(e) => {
                tracing::warn!(%place, "cannot list the runtime's agents: {e}");
                let why = match &e {
                    RuntimeError::Unreachable(_) => "cannot be reached",
                    RuntimeError::Config(_) => "cannot be used as configured",
                    RuntimeError::Gone(_) | RuntimeError::Other(_) => "did not answer",
                };
                for record in records {
                    reconcile::unattached(&self.store, &record.session_id).await;
                    let error = format!(
                        "Could not reconnect to the agent after the server restarted: {place} {why} ({e}). \
                         Resuming starts a new agent; the old one, if it still runs there, is ended by the next \
                         server start that reaches it."
                    );
                    self.end_recovery(&record.session_id, Some(error)).await;
                }
                return;
            }
        };
        let (found, missing): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|r| agents.iter().any(|a| a.agent_id == r.agent_id));
        for record in missing {
            reconcile::unattached(&self.store, &record.session_id).await;
            self.end_recovery(&record.session_id, None).await;
        }
        for record in found {
            let session_id = record.session_id.clone();
            let error = if self.is_shutting_down() {
                Some("the server shut down while reconnecting to the agent".to_string())
            } else {
                self.reattach(&record).await.err()
            };
            match &error {
                None => tracing::info!(%session_id, agent_id = %record.agent_id, %place, "reattached an agent"),
                Some(e) => {
                    tracing::warn!(%session_id, %place, "cannot reattach the agent: {e}");
                    reconcile::unattached(&self.store, &session_id).await;
                }
            }
            let error = error.map(|e| format!("Could not reconnect to the agent in {place}: {e}"));
            self.end_recovery(&session_id, error).await;
        }
        // Agents (and containers) no session owns any more are let go.
        let mut left = 0;
        for agent in agents {
            if self.execution_of_agent(&agent.agent_id) {
                left += 1;
                continue;
            }
            if let Err(e) = outliving.runtime.release(&agent.agent_id).await {
                tracing::warn!(agent_id = %agent.agent_id, %place, "cannot release an agent: {e}");
                left += 1;
            } else {
                tracing::info!(agent_id = %agent.agent_id, %place, "ended an agent no session owns");
            }
        }
        if left == 0 {
            outliving.runtime.no_agents_left();
        }
    }

    /// Whether an attached execution runs the agent `agent_id` (its id in its runtime).
    fn execution_of_agent(&self, agent_id: &str) -> bool {
        self.executions.lock().is_ok_and(|map| map.values().any(|e| e.id() == agent_id))
    }

    async fn reattach(self: &Arc<Self>, record: &HostedRecord) -> Result<(), String> {
        let (session, executor) = self.store.get_session(&record.session_id).await.map_err(|e| e.to_string())?;
        let agent = self
            .registry
            .get(&session.agent)
            .cloned()
            .ok_or_else(|| format!("agent {:?} is no longer configured", session.agent))?;
        let workdir =
            PathBuf::from(executor.as_ref().and_then(|e| e.worktree_path.clone()).unwrap_or(session.workdir.clone()));
        // The agent outlived the previous server: its working directory is pinned as it is now.
        let workdir_pin = WorkdirPin::of(&workdir).ok();
        let log = self.agent_log(&record.session_id);
        let launched =
            self.runtime_of(&agent)?.reattach(&record.agent_id, Some(log)).await.map_err(|e| e.to_string())?;
        let options = StreamOptions {
            // Above any id the previous server used (ids count up from its own base).
            id_base: chrono::Utc::now().timestamp_millis().saturating_mul(1000),
            skip_notifications_through: record.host_seq,
        };
        let mut interrupted = None;
        let execution = self.connect_execution(
            record.execution_id.clone(),
            record.session_id.clone(),
            agent,
            (workdir, workdir_pin),
            launched,
            options,
            |execution| {
                if let Some(token) = record.resume_token.clone() {
                    execution.set_acp_session_id(token);
                }
                // The reattached agent is past its replay: what it sends now is live.
                execution.end_replay();
                interrupted = execution.reattached(record.turn_open);
            },
        );
        if let Ok(mut executions) = self.executions.lock() {
            executions.insert(record.session_id.clone(), execution.clone());
        }
        if let Some(answer) = interrupted {
            let this = self.clone();
            let turn_execution = execution.clone();
            let turn = tokio::spawn(async move {
                let mut answer = answer;
                // An agent that ends without answering leaves the turn to the exit watcher.
                let drained = async {
                    match turn_execution.acp() {
                        Some(acp) => {
                            acp.wait_drained(std::time::Duration::MAX).await;
                        }
                        None => std::future::pending().await,
                    }
                };
                let answered = tokio::select! {
                    biased;
                    answered = &mut answer => answered.ok(),
                    () = drained => answer.try_recv().ok(),
                };
                if let Some((result, done)) = answered {
                    this.finish_turn(&turn_execution, result.map_err(CallError::Rpc)).await;
                    drop(done);
                }
            });
            execution.hold_answer_task(turn);
        }
        tokio::spawn(self.clone().watch_exit(execution));
        Ok(())
    }
}
