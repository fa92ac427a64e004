//! Startup and shutdown of `batond`: data dir, store, startup reconciliation, agents, gateway.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use crate::agent::registry::{Placeholders, Registry};
use crate::agent::runtime;
use crate::gateway::{Gateway, SecurityPolicy};
use crate::hub::Hub;
use crate::orchestrator::{Orchestrator, Timeouts};
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
}

/// The platform data dir for Baton (e.g. `~/.local/share/baton`).
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("baton")
}

/// Holds an exclusive lock on the data dir for the life of the server: two servers on one
/// database would fight over sessions and agents.
struct DataDirLock {
    _file: std::fs::File,
}

fn lock_data_dir(data_dir: &Path) -> anyhow::Result<DataDirLock> {
    use std::os::unix::io::AsRawFd;
    let path = data_dir.join("batond.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // SAFETY: flock on a file descriptor we own; released when the file is closed (or the
    // process dies, even by SIGKILL).
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if !locked {
        let url = std::fs::read_to_string(data_dir.join("batond.url")).unwrap_or_default();
        let at = if url.trim().is_empty() { String::new() } else { format!(" (it listens on {})", url.trim()) };
        bail!("another batond is already using {}{at}", data_dir.display());
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

pub async fn run(config: ServerConfig) -> anyhow::Result<()> {
    if !config.listen.ip().is_loopback() && config.token.is_none() {
        bail!("listening on {} (not loopback) requires a token: pass --token or set BATON_TOKEN", config.listen);
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create {}", config.data_dir.display()))?;
    let _lock = lock_data_dir(&config.data_dir)?;

    let hub = Hub::new();
    let store = Store::open(&config.data_dir.join("baton.db"), hub.clone()).context("cannot open the database")?;

    // Reconcile before accepting connections (DESIGN.md §5): close turns a crash left open and
    // make sure no agent of the previous run is still alive. Nothing is launched here.
    let leftovers = store.reconcile_after_restart().await.context("startup reconciliation failed")?;
    for leftover in leftovers {
        if runtime::kill_leftover(leftover.pid, leftover.start_time) {
            tracing::warn!(session_id = %leftover.session_id, pid = leftover.pid, "killed an agent left over by a previous run");
        }
    }

    let batond = std::env::current_exe().context("cannot find the batond executable")?;
    let placeholders = Placeholders { batond, data_dir: config.data_dir.clone() };
    let agents_config = config.agents_config.clone().unwrap_or_else(|| config.data_dir.join("agents.toml"));
    let registry = Registry::load(&agents_config, &placeholders)?;
    let orchestrator = Orchestrator::new(store.clone(), registry, &config.data_dir, config.timeouts.clone());

    let listener =
        TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
    let address = listener.local_addr()?;
    let url = format!("ws://{address}/ws");
    std::fs::write(config.data_dir.join("batond.url"), format!("{url}\n")).ok();
    tracing::info!(%url, data_dir = %config.data_dir.display(), "batond listening");
    // The first line on stdout says where to connect (scripts and tests read it).
    println!("batond listening on {url}");
    std::io::stdout().flush().ok();

    let security = SecurityPolicy { token: config.token.clone(), allowed_origins: config.allowed_origins.clone() };
    let gateway = Arc::new(Gateway { orchestrator: orchestrator.clone(), hub, security });
    gateway.serve(listener, shutdown_signal()).await;

    tracing::info!("shutting down: stopping agents");
    orchestrator.shutdown().await;
    store.close();
    let _ = std::fs::remove_file(config.data_dir.join("batond.url"));
    Ok(())
}
