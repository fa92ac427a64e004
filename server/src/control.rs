//! `batond stop` and `batond status`: find the server of a data dir by its lock file (which
//! holds its pid), stop it gracefully, and end the agent host's agents when asked.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::agent::host::client::AgentHost;
use crate::agent::host::HostInfo;
use crate::agent::outliving::{outliving_runtimes, Outliving};
use crate::agent::registry::{Placeholders, Registry};
use crate::agent::runtime::{RunningAgent, RuntimeError};
use crate::agent_runtime::AgentRuntime;
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

fn batond() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("batond"))
}

fn host(data_dir: &Path) -> AgentHost {
    AgentHost::new(data_dir.to_path_buf(), batond(), Duration::from_secs(60))
}

/// The other runtimes whose agents outlive batond (Docker daemons, ssh hosts), as the agents
/// config (`agents_config`, else DATA_DIR/agents.toml) names them, each with what it lists;
/// and what could not be looked at. Asked all at once: an unreachable host costs its timeout
/// once, not once per host.
async fn other_runtimes(
    data_dir: &Path,
    agents_config: Option<&Path>,
) -> (Vec<(Outliving, Result<Vec<RunningAgent>, RuntimeError>)>, Vec<String>) {
    let config = agents_config.map(Path::to_path_buf).unwrap_or_else(|| data_dir.join("agents.toml"));
    let placeholders = Placeholders { batond: batond(), data_dir: data_dir.to_path_buf() };
    let registry = match Registry::load(&config, &placeholders) {
        Ok(registry) => registry,
        Err(e) => {
            return (Vec::new(), vec![format!("cannot read {} to find Docker and ssh agents: {e}", config.display())])
        }
    };
    let host = std::sync::Arc::new(host(data_dir));
    let grace = Duration::from_secs(60);
    // The default runtime only decides for entries that name none: those are never Docker or
    // ssh ones, which need their table.
    let (runtimes, problems) =
        outliving_runtimes(&registry, host, data_dir, &batond(), grace, AgentRuntime::Standalone, true);
    let others: Vec<Outliving> = runtimes.into_iter().skip(1).collect();
    let listed = futures_util::future::join_all(others.iter().map(|o| o.runtime.list())).await;
    (others.into_iter().zip(listed).collect(), problems)
}

/// Stops the server with SIGTERM (it stops its standalone agents; sessions resume on the next
/// start) and waits until its lock is free. With `agents`, the agents of every runtime that
/// outlives it are ended too: the agent host's, each Docker daemon's and each ssh host's that
/// the agents config names. Returns what happened, for the user: what was ended, what keeps
/// running, and what could not be reached (its agents left running there) and why.
pub async fn stop(
    data_dir: &Path,
    agents_config: Option<&Path>,
    agents: bool,
    timeout: Duration,
) -> anyhow::Result<String> {
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
    let (others, problems) = other_runtimes(data_dir, agents_config).await;
    for problem in problems {
        let _ = writeln!(report, "{problem}");
    }
    for (outliving, listed) in others {
        let place = &outliving.place;
        let listed = match listed {
            Ok(listed) => listed,
            Err(e) => {
                let _ = writeln!(
                    report,
                    "cannot reach {place}, so its agents (if any) are left running there: {e}{}",
                    if agents { "; `batond stop --agents` ends them once it answers" } else { "" }
                );
                continue;
            }
        };
        let running = listed.iter().filter(|a| a.running).count();
        if !agents {
            if running > 0 {
                let _ =
                    writeln!(report, "{running} agent(s) keep running in {place}; `batond stop --agents` ends them");
            }
            continue;
        }
        let mut left = Vec::new();
        let mut ended = 0;
        for agent in &listed {
            match outliving.runtime.release(&agent.agent_id).await {
                Ok(()) => ended += usize::from(agent.running),
                Err(e) => left.push(format!("{} ({e})", agent.agent_id)),
            }
        }
        if left.is_empty() {
            outliving.runtime.no_agents_left();
        }
        if ended > 0 || !left.is_empty() {
            let _ = writeln!(report, "ended {ended} agent(s) in {place}");
        }
        if !left.is_empty() {
            let _ = writeln!(report, "could not end, so left running in {place}: {}", left.join(", "));
        }
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

/// What runs on `data_dir`: the server (pid, url), the agent host with its agents, and the
/// agents of each Docker daemon and ssh host the agents config names.
pub async fn status(data_dir: &Path, agents_config: Option<&Path>) -> anyhow::Result<String> {
    let mut report = String::new();
    match running_server(data_dir)? {
        Some(server) => {
            let url = server.url.as_deref().unwrap_or("address unknown");
            let _ = writeln!(report, "batond: running, pid {}, {url}", server.pid);
            if let Some(line) = crate::limits::status_line(server.pid) {
                let _ = writeln!(report, "{line}");
            }
            let served = std::fs::read_to_string(data_dir.join(crate::tls::FINGERPRINT_FILE)).unwrap_or_default();
            if !served.trim().is_empty() {
                let _ = writeln!(report, "TLS certificate SHA-256 fingerprint: {}", served.trim());
            }
            let webhooks = std::fs::read_to_string(data_dir.join(crate::webhook::STATUS_FILE)).unwrap_or_default();
            report.push_str(&webhooks);
        }
        None => {
            let _ = writeln!(report, "batond: not running on {}", data_dir.display());
            if let Some(fingerprint) = crate::tls::self_signed_fingerprint(data_dir) {
                let _ = writeln!(report, "self-signed TLS certificate SHA-256 fingerprint: {fingerprint}");
            }
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
    let (others, problems) = other_runtimes(data_dir, agents_config).await;
    for problem in problems {
        let _ = writeln!(report, "{problem}");
    }
    for (outliving, listed) in others {
        match listed {
            Ok(agents) => {
                let _ = writeln!(report, "{}: {} agent(s)", outliving.place, agents.len());
                for agent in agents {
                    let state = if agent.running { "running" } else { "exited" };
                    match agent.pid {
                        0 => writeln!(report, "  {} {state}", agent.agent_id),
                        pid => writeln!(report, "  {} pid {pid} {state}", agent.agent_id),
                    }
                    .ok();
                }
            }
            Err(e) => {
                let _ = writeln!(report, "{}: cannot be reached: {e}", outliving.place);
            }
        }
    }
    Ok(report.trim_end().to_string())
}
