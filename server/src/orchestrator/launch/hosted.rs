//! The `hosted` runtime on the orchestrator's side: launching an agent in the agent host, and
//! RecoverInstances, which reattaches the agents the host kept running across a restart.

use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::acp::{CallError, StreamOptions};
use crate::orchestrator::agent_requests::sandbox::WorkdirPin;
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
        let launched = self.runtime_of(&agent)?.reattach(&record.agent_id, Some(log)).await?;
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
