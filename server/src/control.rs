//! `batond stop` and `batond status`: find the server of a data dir by its lock file (which
//! holds its pid), stop it gracefully, and end the agent host's agents when asked.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::agent::host::client::AgentHost;
use crate::agent::host::HostInfo;
use crate::server::LOCK_FILE;

/// The batond holding the data dir's lock, if one does.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningServer {
    pub pid: u32,
    pub url: Option<String>,
}

/// Whether a server holds the lock of `data_dir`, and its pid (from the lock file).
pub fn running_server(data_dir: &Path) -> anyhow::Result<Option<RunningServer>> {
    let path = data_dir.join(LOCK_FILE);
    if !path.exists() {
        return Ok(None);
    }
    // Taking the lock for a moment tells a live server from a file left behind.
    if crate::lockfile::try_lock(&path)?.is_some() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let Ok(pid) = text.trim().parse::<u32>() else {
        bail!("a batond holds {} but did not write its pid there (an older version?)", path.display());
    };
    let url = std::fs::read_to_string(data_dir.join("batond.url")).ok().map(|u| u.trim().to_string());
    Ok(Some(RunningServer { pid, url: url.filter(|u| !u.is_empty()) }))
}

fn host(data_dir: &Path) -> AgentHost {
    let batond = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("batond"));
    AgentHost::new(data_dir.to_path_buf(), batond, Duration::from_secs(60))
}

/// Stops the server with SIGTERM (it stops its standalone agents; sessions resume on the next
/// start) and waits until its lock is free. With `agents`, the agent host's agents are ended
/// too. Returns what happened, for the user.
pub async fn stop(data_dir: &Path, agents: bool, timeout: Duration) -> anyhow::Result<String> {
    let mut report = String::new();
    match running_server(data_dir)? {
        None => {
            let _ = writeln!(report, "no batond is running on {}", data_dir.display());
        }
        Some(server) => {
            // SAFETY: kill(2) with a pid read from the lock file that a live server holds.
            if unsafe { libc::kill(server.pid as i32, libc::SIGTERM) } != 0 {
                bail!("cannot signal batond (pid {}): {}", server.pid, std::io::Error::last_os_error());
            }
            if !wait_stopped(data_dir, server.pid, timeout).await? {
                bail!("batond (pid {}) did not stop within {} s", server.pid, timeout.as_secs());
            }
            let _ = writeln!(report, "batond (pid {}) stopped", server.pid);
        }
    }
    let host = host(data_dir);
    match host.existing().await {
        Some(info) if agents => {
            let ended = end_hosted_agents(&host, &info).await?;
            let _ =
                writeln!(report, "ended {ended} hosted agent(s); the agent host (pid {}) exits when idle", info.pid);
        }
        Some(info) => {
            let running = host.list(&info).await.map(|a| a.iter().filter(|a| a.running).count()).unwrap_or(0);
            if running > 0 {
                let _ = writeln!(
                    report,
                    "{running} hosted agent(s) keep running in the agent host (pid {}); `batond stop --agents` ends them",
                    info.pid
                );
            }
        }
        None => {}
    }
    Ok(report.trim_end().to_string())
}

/// The server's lock is free again and its process gone (it releases the lock a moment before
/// it exits), waiting at most `timeout`. Neither has an event to wait on from another process,
/// so this polls, bounded.
async fn wait_stopped(data_dir: &Path, pid: u32, timeout: Duration) -> anyhow::Result<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if running_server(data_dir)?.is_none() && !process_alive(pid) {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `pid` still runs (a zombie does not).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        // No /proc: signal 0 tells whether the process exists.
        // SAFETY: kill(2) with signal 0 sends nothing.
        Err(_) if !Path::new("/proc/self").exists() => unsafe { libc::kill(pid as i32, 0) == 0 },
        Err(_) => false,
    }
}

/// Kills and forgets every agent of the host; returns how many were running.
async fn end_hosted_agents(host: &AgentHost, info: &HostInfo) -> anyhow::Result<usize> {
    let agents = host.list(info).await.map_err(anyhow::Error::msg).context("cannot list the hosted agents")?;
    let running = agents.iter().filter(|a| a.running).count();
    for agent in agents {
        host.release(info, &agent.agent_id)
            .await
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("cannot end hosted agent {}", agent.agent_id))?;
    }
    Ok(running)
}

/// What runs on `data_dir`: the server (pid, url) and the agent host with its agents.
pub async fn status(data_dir: &Path) -> anyhow::Result<String> {
    let mut report = String::new();
    match running_server(data_dir)? {
        Some(server) => {
            let url = server.url.as_deref().unwrap_or("address unknown");
            let _ = writeln!(report, "batond: running, pid {}, {url}", server.pid);
        }
        None => {
            let _ = writeln!(report, "batond: not running on {}", data_dir.display());
        }
    }
    let host = host(data_dir);
    match host.existing().await {
        Some(info) => {
            let agents = host.list(&info).await.map_err(anyhow::Error::msg)?;
            let _ = writeln!(report, "agent host: running, pid {}, {} agent(s)", info.pid, agents.len());
            for agent in agents {
                let state = if agent.running { "running" } else { "exited" };
                let _ = writeln!(report, "  {} pid {} {state}", agent.agent_id, agent.pid);
            }
        }
        None => {
            let _ = writeln!(report, "agent host: not running");
        }
    }
    Ok(report.trim_end().to_string())
}
