//! Startup and shutdown of `batond`: data dir, store, startup reconciliation, agents, gateway.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use crate::agent::host::client::AgentHost;
use crate::agent::registry::{AgentRuntime, Placeholders, Registry};
use crate::agent::runtime;
use crate::gateway::{ConnectionLimits, Gateway, SecurityPolicy};
use crate::hub::Hub;
use crate::orchestrator::{Hosting, Orchestrator, Timeouts};
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Agent config file; defaults to `<data_dir>/agents.toml`.
    pub agents_config: Option<PathBuf>,
    pub token: Option<String>,
    pub allowed_origins: Vec<String>,
    pub timeouts: Timeouts,
    /// The runtime of agents whose config does not name one.
    pub default_runtime: AgentRuntime,
    /// How long an idle agent host (no agent, no server) stays up.
    pub agentctl_grace: Duration,
    /// Requests in flight per connection, and the rate of connections from other machines.
    pub limits: ConnectionLimits,
}

/// The platform data dir for Baton (e.g. `~/.local/share/baton`).
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("baton")
}

/// The lock file of the data dir: locked by the running server, which writes its pid in it.
pub const LOCK_FILE: &str = "batond.lock";

/// Holds an exclusive lock on the data dir for the life of the server: two servers on one
/// database would fight over sessions and agents.
struct DataDirLock {
    _file: std::fs::File,
}

fn lock_data_dir(data_dir: &Path) -> anyhow::Result<DataDirLock> {
    let Some(mut file) = crate::lockfile::try_lock(&data_dir.join(LOCK_FILE))? else {
        let url = std::fs::read_to_string(data_dir.join("batond.url")).unwrap_or_default();
        let at = if url.trim().is_empty() { String::new() } else { format!(" (it listens on {})", url.trim()) };
        bail!("another batond is already using {}{at}", data_dir.display());
    };
    // The pid in the lock file tells `batond stop` and `batond status` which process holds it.
    {
        use std::io::{Seek, Write};
        file.set_len(0).context("cannot write the lock file")?;
        file.rewind().context("cannot write the lock file")?;
        writeln!(file, "{}", std::process::id()).context("cannot write the lock file")?;
    }
    Ok(DataDirLock { _file: file })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// The file in the data dir that may hold the token clients must present.
pub const TOKEN_FILE: &str = "token";

/// The token in `DATA_DIR/token`, when that file exists. Only its owner may read it (mode 0600
/// or stricter): a token anyone on the machine can read protects nothing, so a file open to
/// group or others stops the server with an error that says how to fix it.
pub fn read_token_file(data_dir: &Path) -> anyhow::Result<Option<String>> {
    use std::os::unix::fs::PermissionsExt;
    let path = data_dir.join(TOKEN_FILE);
    let metadata = match std::fs::metadata(&path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot read the token file {}: {e}", path.display()),
    };
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "the token file {} is open to group or others (mode {mode:03o}); make it private with: chmod 600 {}",
            path.display(),
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("cannot read the token file {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    Ok(Some(token.to_string()))
}

/// The token clients must present: `--token` / `BATON_TOKEN`, else `DATA_DIR/token`, else none.
fn resolve_token(config: &ServerConfig) -> anyhow::Result<Option<String>> {
    match &config.token {
        Some(token) if token.trim().is_empty() => bail!("the token must not be empty"),
        Some(token) => Ok(Some(token.clone())),
        None => read_token_file(&config.data_dir),
    }
}

/// Creates the data dir when missing; a path that exists but is not a directory is named as
/// such (not "cannot create … File exists").
pub fn ensure_data_dir(data_dir: &Path) -> anyhow::Result<()> {
    if data_dir.exists() && !data_dir.is_dir() {
        bail!("the data dir {} is not a directory", data_dir.display());
    }
    std::fs::create_dir_all(data_dir).with_context(|| format!("cannot create the data dir {}", data_dir.display()))
}

pub async fn run(config: ServerConfig) -> anyhow::Result<()> {
    ensure_data_dir(&config.data_dir)?;
    if let Some(path) = &config.agents_config {
        // A file named on the command line must exist; only the default one is optional.
        if !path.is_file() {
            bail!("the agents config file {} does not exist (or is not a file)", path.display());
        }
    }
    let token = resolve_token(&config)?;
    if !config.listen.ip().is_loopback() && token.is_none() {
        bail!(
            "listening on {} (not loopback) requires a token: pass --token, set BATON_TOKEN or write it to {} (mode 0600)",
            config.listen,
            config.data_dir.join(TOKEN_FILE).display()
        );
    }
    let _lock = lock_data_dir(&config.data_dir)?;

    let hub = Hub::new();
    let store = Store::open(&config.data_dir.join("baton.db"), hub.clone()).context("cannot open the database")?;

    let batond = std::env::current_exe().context("cannot find the batond executable")?;
    let host = Arc::new(AgentHost::new(config.data_dir.clone(), batond.clone(), config.agentctl_grace));

    // RecoverInstances, first half: the hosted agents the agent host still has are kept out of
    // the reconciliation below and reattached after it.
    let hosted = store.hosted_executors().await.context("cannot read the hosted agents")?;
    let mut host_agents = Vec::new();
    let host_info = if hosted.is_empty() { None } else { host.existing().await };
    if let Some(info) = &host_info {
        match host.list(info).await {
            Ok(agents) => host_agents = agents,
            Err(e) => tracing::warn!("cannot list the agent host's agents: {e}"),
        }
    }
    let reattach: Vec<_> =
        hosted.into_iter().filter(|r| host_agents.iter().any(|a| a.agent_id == r.agent_id)).collect();
    let keep: Vec<String> = reattach.iter().map(|r| r.session_id.clone()).collect();

    // Reconcile before accepting connections (DESIGN.md §5): close turns a crash left open and
    // make sure no agent of the previous run is still alive. Nothing is launched here.
    let leftovers = store.reconcile_after_restart_keeping(keep).await.context("startup reconciliation failed")?;
    for leftover in leftovers {
        let killed = runtime::kill_leftover(leftover.pid, leftover.start_time, leftover.execution_id.as_deref());
        if killed > 0 {
            tracing::warn!(session_id = %leftover.session_id, pid = leftover.pid, killed, "killed an agent's processes left over by a previous run");
        }
    }

    let placeholders = Placeholders { batond, data_dir: config.data_dir.clone() };
    let agents_config = config.agents_config.clone().unwrap_or_else(|| config.data_dir.join("agents.toml"));
    let registry = Registry::load(&agents_config, &placeholders)?;
    let hosting = Hosting { host: host.clone(), default_runtime: config.default_runtime };
    let orchestrator = Orchestrator::new(store.clone(), registry, &config.data_dir, config.timeouts.clone(), hosting);

    // RecoverInstances, second half: reattach; what cannot be reattached is reconciled now and
    // resumes lazily like any agent of a previous run.
    if let Some(info) = &host_info {
        let wanted: Vec<String> = reattach.iter().map(|r| r.session_id.clone()).collect();
        let recovered = orchestrator.recover_hosted(reattach, info).await;
        for session_id in wanted.iter().filter(|s| !recovered.attached.contains(s)) {
            if let Err(e) = store.reconcile_unattached(session_id).await {
                tracing::error!(%session_id, "cannot reconcile the session: {e}");
            }
        }
        // Agents of the host that no session owns any more are let go.
        for agent in host_agents {
            if !recovered.agent_ids.contains(&agent.agent_id) {
                if let Err(e) = host.release(info, &agent.agent_id).await {
                    tracing::warn!(agent_id = %agent.agent_id, "cannot release an agent of the host: {e}");
                }
            }
        }
    }

    let listener =
        TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
    let address = listener.local_addr()?;
    let url = format!("ws://{address}/ws");
    std::fs::write(config.data_dir.join("batond.url"), format!("{url}\n")).ok();
    tracing::info!(%url, data_dir = %config.data_dir.display(), "batond listening");
    // The first line on stdout says where to connect (scripts and tests read it).
    println!("batond listening on {url}");
    std::io::stdout().flush().ok();

    let security = SecurityPolicy { token, allowed_origins: config.allowed_origins.clone() };
    let gateway = Arc::new(Gateway { orchestrator: orchestrator.clone(), hub, security, limits: config.limits });
    gateway.serve(listener, shutdown_signal()).await;

    tracing::info!("shutting down: stopping agents");
    orchestrator.shutdown().await;
    store.close();
    let _ = std::fs::remove_file(config.data_dir.join("batond.url"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_token_file_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_token_file(dir.path()).unwrap().is_none(), "no file, no token");
        let path = dir.path().join(TOKEN_FILE);
        std::fs::write(&path, "s3cret\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660, 0o666] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let error = read_token_file(dir.path()).unwrap_err().to_string();
            assert!(error.contains("chmod 600") && error.contains(&format!("{mode:03o}")), "{error}");
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(read_token_file(dir.path()).unwrap().as_deref(), Some("s3cret"));
        }
        std::fs::write(&path, " \n").unwrap();
        assert!(read_token_file(dir.path()).unwrap_err().to_string().contains("empty"));
    }
}
