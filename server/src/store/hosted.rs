//! Records of the `hosted` runtime: where an agent runs in the agent host, and how far its
//! output was journaled.

use baton_protocol::{now_timestamp, SessionEvent, SessionState};
use rusqlite::params;

use super::journal::{append_event, Append};
use super::ExecutorStatus;
use super::{PendingWrite, Store, StoreResult};
use crate::agent_runtime::AgentRuntime;

/// Where a session's hosted agent runs.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedRecord {
    pub session_id: String,
    pub execution_id: String,
    pub agent_id: String,
    pub agentctl_pid: Option<u32>,
    pub agentctl_port: Option<u16>,
    /// Last output line of the agent whose update is journaled.
    pub host_seq: u64,
    pub state: SessionState,
    pub turn_open: bool,
    pub resume_token: Option<String>,
}

impl Store {
    /// Records that `execution_id` now owns the session's agent, run by the agent host.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_hosted_launch(
        &self,
        session_id: &str,
        execution_id: &str,
        pid: u32,
        pid_start_time: Option<u64>,
        agentctl_url: &str,
        agentctl_port: u16,
        agentctl_pid: u32,
        agent_id: &str,
    ) -> StoreResult<()> {
        let (session_id, execution_id, url, agent_id) =
            (session_id.to_string(), execution_id.to_string(), agentctl_url.to_string(), agent_id.to_string());
        self.write(move |conn, _| {
            conn.execute(
                "INSERT INTO executors_running (session_id, agent_execution_id, runtime, pid, pid_start_time, status,
                     updated_at, agentctl_url, agentctl_port, agentctl_pid, host_agent_id, host_seq)
                 VALUES (?1, ?2, ?10, ?3, ?4, ?11, ?5, ?6, ?7, ?8, ?9, 0)
                 ON CONFLICT(session_id) DO UPDATE SET agent_execution_id = ?2, runtime = ?10, pid = ?3,
                     pid_start_time = ?4, status = ?11, updated_at = ?5, agentctl_url = ?6,
                     agentctl_port = ?7, agentctl_pid = ?8, host_agent_id = ?9, host_seq = 0",
                params![
                    session_id,
                    execution_id,
                    pid,
                    pid_start_time.map(|t| t as i64),
                    now_timestamp(),
                    url,
                    agentctl_port,
                    agentctl_pid,
                    agent_id,
                    AgentRuntime::Hosted.as_str(),
                    ExecutorStatus::Starting.as_str()
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Queues an agent update of a hosted agent, and in the same write moves the session's
    /// output cursor to `seq`: after a restart the update is neither lost nor applied twice.
    pub fn submit_append_hosted(
        &self,
        session_id: &str,
        event: SessionEvent,
        seq: u64,
    ) -> StoreResult<PendingWrite<u64>> {
        self.submit_job(Append { session_id: session_id.to_string(), event, host_seq: Some(seq) })
    }

    /// Hosted agents that were ready when the previous server stopped, in sessions that are
    /// still active: the candidates for reattaching.
    pub async fn hosted_executors(&self) -> StoreResult<Vec<HostedRecord>> {
        self.read(|conn| {
            let mut stmt = conn.prepare(
                "SELECT e.session_id, e.agent_execution_id, e.host_agent_id, e.agentctl_pid, e.agentctl_port,
                        e.host_seq, s.state, s.turn_open, e.resume_token
                 FROM executors_running e JOIN task_sessions s ON s.id = e.session_id
                 WHERE e.runtime = ?1 AND e.status = ?2 AND e.host_agent_id IS NOT NULL
                   AND e.agent_execution_id IS NOT NULL",
            )?;
            let rows = stmt.query_map(params![AgentRuntime::Hosted.as_str(), ExecutorStatus::Ready.as_str()], |r| {
                let state: String = r.get(6)?;
                Ok((
                    HostedRecord {
                        session_id: r.get(0)?,
                        execution_id: r.get(1)?,
                        agent_id: r.get(2)?,
                        agentctl_pid: r.get::<_, Option<i64>>(3)?.map(|p| p as u32),
                        agentctl_port: r.get::<_, Option<i64>>(4)?.map(|p| p as u16),
                        host_seq: r.get::<_, i64>(5)?.max(0) as u64,
                        state: SessionState::Created,
                        turn_open: r.get::<_, i64>(7)? != 0,
                        resume_token: r.get(8)?,
                    },
                    state,
                ))
            })?;
            let mut records = Vec::new();
            for row in rows {
                let (mut record, state) = row?;
                let Some(state) = SessionState::parse(&state) else { continue };
                if state.is_active() {
                    record.state = state;
                    records.push(record);
                }
            }
            Ok(records)
        })
        .await
    }
}

impl Store {
    /// A hosted session kept by startup reconciliation whose agent could not be reattached
    /// after all: reconciled like the others (open turn closed as interrupted, record stopped).
    pub async fn reconcile_unattached(&self, session_id: &str, interrupted: Vec<SessionEvent>) -> StoreResult<()> {
        let session_id = session_id.to_string();
        self.write(move |conn, outbox| {
            let open: bool = conn
                .query_row("SELECT turn_open FROM task_sessions WHERE id = ?1", [&session_id], |r| r.get::<_, i64>(0))
                .map(|v| v != 0)
                .unwrap_or(false);
            if open {
                for event in interrupted {
                    append_event(conn, outbox, &session_id, event)?;
                }
            }
            conn.execute(
                "UPDATE executors_running SET pid = NULL, pid_start_time = NULL, status = ?3, updated_at = ?1
                 WHERE session_id = ?2",
                params![now_timestamp(), session_id, ExecutorStatus::Stopped.as_str()],
            )?;
            Ok(())
        })
        .await
    }
}
