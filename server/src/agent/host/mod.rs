//! The agent host (`batond agentctl`) and the `hosted` runtime.
//!
//! The host is a small detached process, one per data dir, that owns agent processes for the
//! server and keeps them running when `batond` exits or crashes. It listens on a loopback port;
//! `DATA_DIR/agentctl.json` (mode 0600) tells the server where and with which token. The wire
//! format is the main protocol's envelope (`{"id","type","action","payload"}`), one JSON object
//! per line over TCP.
//!
//! Each agent's stdout lines get a sequence number and are appended to a spool file
//! (`DATA_DIR/agentctl/AGENT_ID.spool`) and to a bounded in-memory ring, until the server
//! acknowledges them. A server that attaches to an agent receives every line after the last one
//! it acknowledged, then the live stream, then `agent.exited`. See docs/HOSTED.md.
//!
//! The frames are typed in [`protocol`]. Requests (server → host):
//! - `hello {token}` first, on every connection → `{pid}`
//! - `agent.spawn {agent_id, command, args, env, cwd}` → `{pid, start_time}`
//! - `agent.attach {agent_id}` → `{pid, start_time, acked, last_seq}`; then notifications
//!   `agent.output {seq, line}`, `agent.stderr {seq, line}` (numbered apart, the latest lines
//!   only) and finally `agent.exited {code, signal, stderr_tail}`
//! - `agent.kill {agent_id}` → `{code, signal}` once the agent's process group is gone
//! - `agent.release {agent_id}` → `{}` (forgets an exited agent and its spool)
//! - `agent.list {}` → `{agents: [{agent_id, pid, start_time, running, last_seq, acked}]}`
//!
//! Notifications (server → host): `agent.write {agent_id, line, n}` (a line for the agent's
//! stdin, from the connection attached to it; `n` numbers it, and a line whose number was
//! written already is dropped: after a reconnection the server sends again what the lost
//! connection may have swallowed) and `agent.ack {agent_id, seq}`.

pub mod agentctl;
pub mod client;
mod connection;
pub mod memory;
pub mod protocol;
mod spool;
mod stream;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where the running host listens and how to prove we are its server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub url: String,
    pub port: u16,
    pub pid: u32,
    /// Start time of the host process (tells it apart from a later process with its pid).
    #[serde(default)]
    pub start_time: Option<u64>,
    pub token: String,
}

pub fn info_path(data_dir: &Path) -> PathBuf {
    data_dir.join("agentctl.json")
}

pub fn spool_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("agentctl")
}

/// Reads `agentctl.json`; None when missing or unreadable.
pub fn read_info(data_dir: &Path) -> Option<HostInfo> {
    let text = std::fs::read_to_string(info_path(data_dir)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes `agentctl.json` readable by its owner only, atomically (a reader never sees half).
pub fn write_info(data_dir: &Path, info: &HostInfo) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = data_dir.join(format!("agentctl.json.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(serde_json::to_string_pretty(info).map_err(std::io::Error::other)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, info_path(data_dir))
}

/// Longest protocol line either side accepts (an agent line of up to 16 MiB, JSON-escaped).
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Agent ids name spool files: the protocol's id rule (letters, digits, '-' and '_' only).
pub fn valid_agent_id(id: &str) -> bool {
    baton_protocol::validate_id("agent_id", id).is_ok()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostAgent {
    pub agent_id: String,
    pub pid: u32,
    #[serde(default)]
    pub start_time: Option<u64>,
    pub running: bool,
    pub last_seq: u64,
    pub acked: u64,
    /// The number of the last input line written to the agent (`agent.write`'s `n`); absent
    /// from a host that does not number them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
}

impl From<HostAgent> for super::runtime::RunningAgent {
    fn from(agent: HostAgent) -> Self {
        super::runtime::RunningAgent { agent_id: agent.agent_id, pid: agent.pid, running: agent.running }
    }
}
