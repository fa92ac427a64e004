//! Startup and shutdown of `batond`: data dir, store, startup reconciliation, agents, gateway.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use crate::agent::host::client::AgentHost;
use crate::agent::outliving::{outliving_runtimes, Outliving};
use crate::agent::registry::{Placeholders, Registry};
use crate::agent::runtime::Runtime;
use crate::agent_runtime::AgentRuntime;
use crate::gateway::{ConnectionLimits, Gateway, SecurityPolicy};
use crate::hub::Hub;
use crate::notify::NotifyCommand;
use crate::orchestrator::launch::reconcile;
use crate::orchestrator::{Hosting, Orchestrator, Timeouts};
use crate::store::HostedRecord;
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Agent config file; defaults to `<data_dir>/agents.toml`.
    pub agents_config: Option<PathBuf>,
    pub token: Option<String>,
    /// Accept connections without a token (`--no-token`; loopback only).
    pub no_token: bool,
    pub allowed_origins: Vec<String>,
    pub timeouts: Timeouts,
    /// The runtime of agents whose config does not name one.
    pub default_runtime: AgentRuntime,
    /// How long an idle agent host (no agent, no server) stays up.
    pub agentctl_grace: Duration,
    /// Requests in flight per connection, and the rate of connections from other machines.
    pub limits: ConnectionLimits,
    /// Interval of the WebSocket pings to every connection.
    pub ping_interval: Duration,
    /// Run when a session starts needing the user (`--notify-command`).
    pub notify_command: Option<NotifyCommand>,
    /// HTTPS and WSS with this certificate (`--tls`, `--tls-cert`/`--tls-key`, or `[tls]` in
    /// the config file); plain HTTP and WS when none.
    pub tls: Option<crate::tls::TlsSource>,
    /// `--insecure-no-tls`: no warning for listening beyond loopback without TLS (a TLS proxy
    /// in front does it).
    pub insecure_no_tls: bool,
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

/// Writes a new random token to `DATA_DIR/token`, readable by its owner only. Called with the
/// data dir locked; the file appears whole (written aside, then renamed) so that a client
/// reading it meanwhile never sees it half written.
fn generate_token_file(data_dir: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join(TOKEN_FILE);
    let aside = data_dir.join(format!("{TOKEN_FILE}.{}", std::process::id()));
    // Two v4 UUIDs: 244 random bits from the operating system's generator.
    let token = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&aside)
        .and_then(|mut file| file.write_all(format!("{token}\n").as_bytes()).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&aside, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&aside);
        bail!("cannot write the token file {}: {e}", path.display());
    }
    tracing::info!(path = %path.display(), "generated the token clients must present");
    Ok(token)
}

/// The token clients must present: `--token` / `BATON_TOKEN`, else `DATA_DIR/token` (generated
/// on the first start); none only with `--no-token`, which only a loopback listener accepts.
fn resolve_token(config: &ServerConfig) -> anyhow::Result<Option<String>> {
    match &config.token {
        Some(token) if token.trim().is_empty() => bail!("the token must not be empty"),
        Some(token) => Ok(Some(token.clone())),
        None if config.no_token => {
            if !config.listen.ip().is_loopback() {
                bail!(
                    "--no-token is refused when listening on {} (not loopback): clients there must present the token in {}",
                    config.listen,
                    config.data_dir.join(TOKEN_FILE).display()
                );
            }
            tracing::warn!(
                "--no-token: connections need no token, so any user of this machine can drive the agents with your files"
            );
            Ok(None)
        }
        None => match read_token_file(&config.data_dir)? {
            Some(token) => Ok(Some(token)),
            None => generate_token_file(&config.data_dir).map(Some),
        },
    }
}

/// Creates the data dir readable by its owner only (0700), or makes an existing one so: the
/// directory and everything in it lose group and other permissions (worktrees excepted: they
/// are the user's checkouts; and the token file, which is refused instead). A path that is not
/// a directory is named as such. Returns how many entries had to change, for a log line.
pub fn private_data_dir(data_dir: &Path) -> anyhow::Result<usize> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if data_dir.exists() && !data_dir.is_dir() {
        // Named as such, not "cannot create … File exists".
        bail!("the data dir {} is not a directory", data_dir.display());
    }
    if !data_dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)
            .with_context(|| format!("cannot create the data dir {}", data_dir.display()))?;
        return Ok(0);
    }
    fn fix(path: &Path, fixed: &mut usize) -> std::io::Result<()> {
        let metadata = std::fs::symlink_metadata(path)?;
        if metadata.file_type().is_symlink() {
            return Ok(());
        }
        let mode = metadata.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7700))?;
            *fixed += 1;
        }
        Ok(())
    }
    let mut fixed = 0;
    fix(data_dir, &mut fixed).with_context(|| format!("cannot make {} private", data_dir.display()))?;
    let mut pending = vec![data_dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if dir == data_dir && entry.file_name() == "worktrees" {
                fix(&path, &mut fixed).ok();
                continue;
            }
            if dir == data_dir && entry.file_name() == TOKEN_FILE {
                // A token others could read may be known to them already: it is refused (see
                // read_token_file), not quietly made private.
                continue;
            }
            if fix(&path, &mut fixed).is_err() {
                tracing::warn!(path = %path.display(), "cannot make this entry of the data dir private");
            }
            if kind.is_dir() {
                pending.push(path);
            }
        }
    }
    Ok(fixed)
}

/// Creates `baton.db` owner-only before SQLite opens it (SQLite gives its WAL and shared-memory
/// files the database's mode), and says so when an existing file is empty: the server then
/// starts with no tasks, which must not go unnoticed.
fn prepare_database_file(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.len() == 0 => {
            tracing::warn!(path = %path.display(), "the database file is empty (0 bytes): starting with no tasks");
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
        }
        Err(e) => bail!("cannot read {}: {e}", path.display()),
    }
    Ok(())
}

pub async fn run(config: ServerConfig) -> anyhow::Result<()> {
    private_data_dir(&config.data_dir)?;
    if let Some(path) = &config.agents_config {
        // A file named on the command line must exist; only the default one is optional.
        if !path.is_file() {
            bail!("the agents config file {} does not exist (or is not a file)", path.display());
        }
    }
    let agents_config = config.agents_config.clone().unwrap_or_else(|| config.data_dir.join("agents.toml"));
    let settings = crate::settings::Settings::load(&agents_config)?;
    let _lock = lock_data_dir(&config.data_dir)?;
    // After the lock: only one server generates the token of a data dir.
    let token = resolve_token(&config)?;
    // Before anything starts: a certificate that cannot be used stops the server at once.
    let tls = match config.tls.as_ref().or(settings.tls.as_ref().filter(|_| !config.insecure_no_tls)) {
        Some(source) => Some(crate::tls::ServerTls::load(source, &config.data_dir, config.listen)?),
        None => None,
    };

    let hub = Hub::new();
    let database = config.data_dir.join("baton.db");
    prepare_database_file(&database)?;
    let store = Store::open(&database, hub.clone()).context("cannot open the database")?;

    let batond = std::env::current_exe().context("cannot find the batond executable")?;
    let host = Arc::new(AgentHost::new(config.data_dir.clone(), batond.clone(), config.agentctl_grace));

    let placeholders = Placeholders { batond: batond.clone(), data_dir: config.data_dir.clone() };
    let registry = Registry::load(&agents_config, &placeholders)?;

    // RecoverInstances, first half: the agents of the runtimes that outlive the server. The
    // local agent host answers at once: its agents are listed now, kept out of the
    // reconciliation below and reattached after it. A Docker daemon or an ssh host may be slow
    // or out of reach: their sessions are kept too and recovered in the background once the
    // server listens, one task per daemon or host (they report `agent_reconnecting` meanwhile).
    let hosted = store.hosted_executors().await.context("cannot read the hosted agents")?;
    // Remote agent hosts are asked only when any agent may be left there: asking means an ssh
    // connection, which starts a host there if none runs.
    let (runtimes, problems) = outliving_runtimes(
        &registry,
        host.clone(),
        &config.data_dir,
        &batond,
        config.agentctl_grace,
        config.default_runtime,
        !hosted.is_empty(),
    );
    for problem in problems {
        tracing::warn!("cannot look for agents there: {problem}");
    }
    // Each record goes to the runtime its agent is configured with (the local host when none
    // of the others: a hosted agent, or one no longer configured).
    let mut remote: Vec<(Outliving, Vec<HostedRecord>)> =
        runtimes.iter().skip(1).cloned().map(|runtime| (runtime, Vec::new())).collect();
    let mut local = Vec::new();
    for record in hosted {
        let agent = match store.get_session(&record.session_id).await {
            Ok((session, _)) => session.agent,
            Err(_) => String::new(),
        };
        let spec = registry.get(&agent);
        match spec.and_then(|spec| remote.iter_mut().find(|(runtime, _)| runtime.serves(spec, config.default_runtime)))
        {
            Some((_, records)) => records.push(record),
            None => local.push(record),
        }
    }
    let kept_agents = match Runtime::list(host.as_ref()).await {
        Ok(agents) => agents,
        Err(e) => {
            tracing::warn!(runtime = "hosted", "cannot list the runtime's agents: {e}");
            Vec::new()
        }
    };
    let reattach: Vec<_> = local.into_iter().filter(|r| kept_agents.iter().any(|a| a.agent_id == r.agent_id)).collect();
    let pending: Vec<String> =
        remote.iter().flat_map(|(_, records)| records.iter().map(|r| r.session_id.clone())).collect();
    let keep: Vec<String> = reattach.iter().map(|r| r.session_id.clone()).chain(pending.iter().cloned()).collect();

    // Reconcile before accepting connections (docs/RESUME.md, 'Startup'): close turns a crash
    // left open and make sure no agent of the previous run is still alive. Nothing is launched
    // here.
    reconcile::at_startup(&store, keep).await.context("startup reconciliation failed")?;

    let hosting = Hosting { host: host.clone(), default_runtime: config.default_runtime };
    let orchestrator = Orchestrator::new(store.clone(), registry, &config.data_dir, config.timeouts.clone(), hosting);

    // RecoverInstances, second half: reattach the local host's agents; what cannot be
    // reattached is reconciled now and resumes lazily like any agent of a previous run.
    let wanted: Vec<String> = reattach.iter().map(|r| r.session_id.clone()).collect();
    let recovered = orchestrator.recover_hosted(reattach).await;
    for session_id in wanted.iter().filter(|s| !recovered.attached.contains(s)) {
        reconcile::unattached(&store, session_id).await;
    }
    // Agents that no session owns any more are let go.
    for agent in kept_agents {
        if !recovered.agent_ids.contains(&agent.agent_id) {
            if let Err(e) = Runtime::release(host.as_ref(), &agent.agent_id).await {
                tracing::warn!(agent_id = %agent.agent_id, runtime = "hosted", "cannot release an agent: {e}");
            }
        }
    }
    // The others in the background, after the listener opened (below).
    orchestrator.begin_recovery(pending);

    if let Some(notify) = config.notify_command.clone() {
        crate::notify::spawn(&hub, notify);
    }
    let _ = std::fs::remove_file(config.data_dir.join(crate::webhook::STATUS_FILE));
    if !settings.webhooks.is_empty() {
        crate::webhook::spawn(&hub, settings.webhooks.clone(), &config.data_dir);
    }
    let push = match crate::push::Vapid::load_or_create(&config.data_dir) {
        Ok(vapid) => {
            let push = crate::push::Push::new(vapid);
            crate::push::spawn(&hub, push.clone(), orchestrator.clone());
            Some(push)
        }
        Err(e) => {
            tracing::error!("Web Push is off: {e:#}");
            None
        }
    };
    // What each session needs from the user after the restart (resume, failed...).
    match orchestrator.settle_attention().await {
        Ok(changed) => tracing::debug!(changed, "settled what sessions need from the user"),
        Err(e) => tracing::error!("cannot record what sessions need from the user: {e}"),
    }
    // Messages queued before the restart go on (or wait, when the restart cut a turn short).
    orchestrator.resume_queues().await;

    let listener =
        TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
    let address = listener.local_addr()?;
    let (ws, http) = if tls.is_some() { ("wss", "https") } else { ("ws", "http") };
    let url = format!("{ws}://{address}/ws");
    std::fs::write(config.data_dir.join("batond.url"), format!("{url}\n")).ok();
    let fingerprint_file = config.data_dir.join(crate::tls::FINGERPRINT_FILE);
    match &tls {
        Some(tls) => {
            std::fs::write(&fingerprint_file, format!("{}\n", tls.fingerprint)).ok();
        }
        None => {
            let _ = std::fs::remove_file(&fingerprint_file);
        }
    }
    tracing::info!(%url, data_dir = %config.data_dir.display(), "batond listening");
    if tls.is_none() && !address.ip().is_loopback() && !config.insecure_no_tls {
        tracing::warn!(
            "listening on {address} without TLS: the token and everything clients see and send cross the network \
             in the clear. Use --tls self-signed (or --tls-cert and --tls-key), or --insecure-no-tls when a TLS \
             proxy of your own is in front"
        );
    }
    let devices =
        crate::gateway::devices::Devices::load(store.clone()).await.context("cannot read the paired devices")?;
    let security = SecurityPolicy { token: token.clone(), allowed_origins: config.allowed_origins.clone() };
    let gateway = Arc::new(
        Gateway::new(orchestrator.clone(), hub, security, config.limits, config.ping_interval, devices)
            .with_tls(tls.clone())
            .with_push(push),
    );
    // The first line on stdout says where to connect (scripts and tests read it); the second
    // gives the page's address with a one-time login code, which the page exchanges for the
    // token on its first load (the token itself never goes in an address a browser keeps).
    // Both in one write: a reader that stops after the first line must not make the second fail.
    // With TLS, a third line gives the certificate's fingerprint, to pin or to compare.
    let page = match gateway.issue_login_code() {
        Some(code) => format!("{http}://{address}/?login={code}"),
        None => format!("{http}://{address}/"),
    };
    let certificate = match &tls {
        Some(tls) => format!("TLS certificate SHA-256 fingerprint: {}\n", tls.fingerprint),
        None => String::new(),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "batond listening on {url}\nweb page: {page}\n{certificate}").and_then(|()| stdout.flush());
    drop(stdout);

    for (runtime, records) in remote {
        tokio::spawn(orchestrator.clone().recover_remote(runtime, records));
    }

    gateway.serve(listener, shutdown_signal()).await;

    tracing::info!("shutting down: stopping agents");
    orchestrator.shutdown().await;
    store.close();
    let _ = std::fs::remove_file(config.data_dir.join("batond.url"));
    let _ = std::fs::remove_file(&fingerprint_file);
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
