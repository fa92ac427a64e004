//! The server's side of the agent host, and the `hosted` runtime: starting the host, spawning
//! and attaching agents (whose stream is relayed by [`super::stream`]).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::connection::{CallError, Connection, HOST_TIMEOUT};
use super::protocol::{Reply, Request, SpawnAgent};
use super::stream::attach_on;
pub use super::stream::{HostedAgent, LogTo, Redial};
use super::{read_info, HostAgent, HostInfo};
use crate::agent::runtime::{
    process_start_time, LaunchSpec, Launched, RunningAgent, Runtime, RuntimeError, SpawnError,
};

/// How long a stream over a command is reconnected before its agent is given up.
pub const REDIAL_PATIENCE: Duration = Duration::from_secs(60);

/// Starts and talks to the data dir's agent host.
pub struct AgentHost {
    data_dir: PathBuf,
    batond: PathBuf,
    grace: Duration,
    /// Serialises starting the host.
    starting: tokio::sync::Mutex<()>,
    /// How a connection reaches the host.
    access: Access,
    /// How an attached agent's lost connection is replaced (hosts behind a command).
    redial: Option<Redial>,
}

/// How the server reaches an agent host.
#[derive(Debug, Clone)]
pub enum Access {
    /// The data dir's host on this machine, over loopback TCP (`agentctl.json`).
    Local,
    /// A command that serves the protocol on its stdin/stdout (`batond agentctl --stdio`, run
    /// directly, by `docker exec -i` or by `ssh`): one process per connection.
    Command { program: PathBuf, args: Vec<String> },
}

fn host_alive(info: &HostInfo) -> bool {
    match (process_start_time(info.pid), info.start_time) {
        (Some(now), Some(recorded)) => now == recorded,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl AgentHost {
    pub fn new(data_dir: PathBuf, batond: PathBuf, grace: Duration) -> AgentHost {
        AgentHost {
            data_dir,
            batond,
            grace,
            starting: tokio::sync::Mutex::new(()),
            access: Access::Local,
            redial: None,
        }
    }

    /// A host reached through a command that serves the protocol on its standard streams. An
    /// attached agent whose connection is lost is reached again by running the command again,
    /// for up to [`REDIAL_PATIENCE`].
    pub fn via_command(program: PathBuf, args: Vec<String>) -> AgentHost {
        let what = format!("the agent host reached through {}", program.display());
        let redial =
            Redial { program: program.clone(), args: args.clone(), patience: REDIAL_PATIENCE, gone: |_| false, what };
        AgentHost {
            data_dir: PathBuf::new(),
            batond: program.clone(),
            grace: Duration::ZERO,
            starting: tokio::sync::Mutex::new(()),
            access: Access::Command { program, args },
            redial: Some(redial),
        }
    }

    /// Reconnection gives up at once when the command's failure means the host is gone for
    /// good (`gone` reads what the command said).
    pub fn gone_when(mut self, gone: fn(&str) -> bool) -> AgentHost {
        if let Some(redial) = self.redial.as_mut() {
            redial.gone = gone;
        }
        self
    }

    /// How messages name the host (an agent lost with it says which).
    pub fn named(mut self, what: String) -> AgentHost {
        if let Some(redial) = self.redial.as_mut() {
            redial.what = what;
        }
        self
    }

    /// A connection to the host (`info` is where a local host listens).
    async fn connect(&self, info: &HostInfo) -> Result<Connection, String> {
        match &self.access {
            Access::Local => Connection::open(info).await,
            Access::Command { program, args } => Connection::spawn(program, args).await,
        }
    }

    /// What the command's host says of itself: its pid (the command starts it when needed).
    async fn command_host(&self) -> Result<HostInfo, String> {
        self.command_connection().await.map(|(info, _)| info)
    }

    /// A connection through the command, and the host as its hello described it: one
    /// connection where a host on this machine takes two (each is an `ssh` or `docker exec`).
    async fn command_connection(&self) -> Result<(HostInfo, Connection), String> {
        let Access::Command { program, args } = &self.access else {
            return Err("not a command".into());
        };
        let connection = Connection::spawn(program, args).await?;
        let command: Vec<String> = std::iter::once(program.display().to_string()).chain(args.iter().cloned()).collect();
        let info = HostInfo {
            url: format!("stdio:{}", command.join(" ")),
            port: 0,
            pid: connection.host_pid,
            start_time: None,
            token: String::new(),
        };
        Ok((info, connection))
    }

    /// A connection to the running host (None: no host runs, for a host on this machine).
    async fn connection_to_existing(&self) -> Result<Option<(HostInfo, Connection)>, String> {
        if matches!(self.access, Access::Command { .. }) {
            return self.command_connection().await.map(Some);
        }
        let Some(info) = self.existing().await else { return Ok(None) };
        let connection = self.connect(&info).await?;
        Ok(Some((info, connection)))
    }

    /// The agents of the running host (none when no host runs).
    pub async fn agents(&self) -> Result<Vec<HostAgent>, String> {
        let Some((_, mut connection)) = self.connection_to_existing().await? else { return Ok(Vec::new()) };
        match connection.call(Request::List {}).await? {
            Reply::Agents { agents } => Ok(agents),
            _ => Err("the agent host sent no agent list".into()),
        }
    }

    /// Attaches to an agent of the running host; its stderr goes on into `log`.
    pub async fn reattach_agent(&self, agent_id: &str, log: Option<PathBuf>) -> Result<HostedAgent, String> {
        let (info, connection) = self.connection_to_existing().await?.ok_or("the agent host is gone")?;
        attach_on(connection, info, agent_id, self.redial.clone(), reattached(log)).await
    }

    /// Kills and forgets an agent of the running host, if one runs.
    pub async fn release_agent(&self, agent_id: &str) -> Result<(), String> {
        let Some((_, mut connection)) = self.connection_to_existing().await? else { return Ok(()) };
        connection.call(Request::Release { agent_id: agent_id.to_string() }).await.map(|_| ())
    }

    /// The running host of the data dir, if one answers with its token.
    pub async fn existing(&self) -> Option<HostInfo> {
        if matches!(self.access, Access::Command { .. }) {
            return self.command_host().await.ok();
        }
        let info = read_info(&self.data_dir)?;
        if !host_alive(&info) {
            return None;
        }
        Connection::open(&info).await.ok().map(|_| info)
    }

    /// The running host, or why there is none to be reached.
    pub async fn existing_or_error(&self) -> Result<HostInfo, String> {
        match self.access {
            Access::Command { .. } => self.command_host().await,
            Access::Local => self.existing().await.ok_or_else(|| "no agent host runs".to_string()),
        }
    }

    /// The batond binary the host runs.
    pub fn batond(&self) -> &std::path::Path {
        &self.batond
    }

    /// How long an idle host stays up.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// The running host, started first when there is none.
    pub async fn ensure(&self) -> Result<HostInfo, String> {
        if matches!(self.access, Access::Command { .. }) {
            return self.command_host().await;
        }
        let _starting = self.starting.lock().await;
        if let Some(info) = self.existing().await {
            return Ok(info);
        }
        self.start().await
    }

    async fn start(&self) -> Result<HostInfo, String> {
        let logs = self.data_dir.join("logs");
        let _ = std::fs::create_dir_all(&logs);
        use std::os::unix::fs::OpenOptionsExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .mode(0o600)
            .append(true)
            .open(logs.join("agentctl.log"))
            .map_err(|e| format!("cannot open the agent host log: {e}"))?;
        let mut command = tokio::process::Command::new(&self.batond);
        command
            .arg("agentctl")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--grace-ms")
            .arg(self.grace.as_millis().to_string())
            .env_remove("BATON_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        crate::umask::for_user(command.as_std_mut());
        // SAFETY: setsid is async-signal-safe. The host leads its own session and process
        // group: signals to the server's group and the server's death do not reach it.
        unsafe {
            command.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| format!("cannot start the agent host: {e}"))?;
        let stdout = child.stdout.take().ok_or("the agent host has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(HOST_TIMEOUT, lines.next_line()).await;
        // The child is not waited for here: tokio reaps it when it exits.
        drop(child);
        match first {
            Ok(Ok(Some(line))) if line.starts_with("agentctl listening on") => {}
            Ok(Ok(other)) => {
                return Err(format!(
                    "the agent host did not start ({}); see logs/agentctl.log",
                    other.unwrap_or_else(|| "it exited".into())
                ))
            }
            Ok(Err(e)) => return Err(format!("the agent host did not start: {e}")),
            Err(_) => return Err("the agent host did not start in time".into()),
        }
        let info = read_info(&self.data_dir).ok_or("the agent host wrote no agentctl.json")?;
        tracing::info!(url = %info.url, pid = info.pid, "agent host started");
        Ok(info)
    }

    /// The agents the host has (running or exited with output not yet released).
    pub async fn list(&self, info: &HostInfo) -> Result<Vec<HostAgent>, String> {
        let mut connection = self.connect(info).await?;
        match connection.call(Request::List {}).await? {
            Reply::Agents { agents } => Ok(agents),
            _ => Err("the agent host sent no agent list".into()),
        }
    }

    /// Kills and forgets an agent (one this server will not attach to again).
    pub async fn release(&self, info: &HostInfo, agent_id: &str) -> Result<(), String> {
        let mut connection = self.connect(info).await?;
        connection.call(Request::Release { agent_id: agent_id.to_string() }).await.map(|_| ())
    }

    /// Starts an agent in the host (starting the host if needed) and attaches to it; its
    /// stderr goes to `log`.
    pub async fn spawn(
        &self,
        agent_id: &str,
        spec: &LaunchSpec,
        log: Option<PathBuf>,
    ) -> Result<HostedAgent, SpawnError> {
        let request = Request::Spawn(SpawnAgent {
            agent_id: agent_id.to_string(),
            command: spec.command.clone(),
            args: spec.args.clone(),
            env: spec.env.clone(),
            cwd: spec.cwd.clone(),
        });
        // A host that was just exiting (idle) refuses the connection: start a new one, once.
        let mut attempts = 0;
        let (info, mut connection) = loop {
            attempts += 1;
            if matches!(self.access, Access::Command { .. }) {
                break self.command_connection().await.map_err(SpawnError::Unavailable)?;
            }
            let info = self.ensure().await.map_err(SpawnError::Unavailable)?;
            match self.connect(&info).await {
                Ok(connection) => break (info, connection),
                Err(e) if attempts >= 2 => return Err(SpawnError::Unavailable(e)),
                Err(e) => tracing::info!("the agent host went away ({e}); starting a new one"),
            }
        };
        match connection.ask(request).await {
            Ok(_) => {}
            Err(CallError::Refused(refusal)) => return Err(SpawnError::Refused(refusal)),
            Err(CallError::Lost(e)) => return Err(SpawnError::Unavailable(e)),
        }
        let log = log.map(|path| LogTo { path, what: format!("{} started by the agent host", spec.command) });
        attach_on(connection, info, agent_id, self.redial.clone(), log).await.map_err(SpawnError::Unavailable)
    }

    /// Attaches to an agent the host already runs; its output resumes after the last line
    /// this server acknowledged, and its stderr goes on into `log`.
    pub async fn attach(&self, info: &HostInfo, agent_id: &str, log: Option<PathBuf>) -> Result<HostedAgent, String> {
        let connection = self.connect(info).await?;
        attach_on(connection, info.clone(), agent_id, self.redial.clone(), reattached(log)).await
    }
}

/// Where a reattached agent's stderr goes.
fn reattached(log: Option<PathBuf>) -> Option<LogTo> {
    log.map(|path| LogTo { path, what: "reattached to the agent in the agent host".into() })
}

/// The `hosted` runtime: agents run in the agent host and outlive the server.
impl Runtime for AgentHost {
    fn name(&self) -> &'static str {
        "hosted"
    }

    fn spawn<'a>(
        &'a self,
        agent_id: &'a str,
        spec: &'a LaunchSpec,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>> {
        // The host relays the agent's stderr, which goes to `log`.
        Box::pin(async move { AgentHost::spawn(self, agent_id, spec, log).await.map(HostedAgent::launched) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, RuntimeError>> {
        Box::pin(async move {
            // No host running: it has no agents.
            let Some(info) = self.existing().await else { return Ok(Vec::new()) };
            let agents = AgentHost::list(self, &info).await.map_err(RuntimeError::Other)?;
            Ok(agents.into_iter().map(RunningAgent::from).collect())
        })
    }

    fn reattach<'a>(
        &'a self,
        agent_id: &'a str,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, RuntimeError>> {
        Box::pin(async move {
            let info = self.existing().await.ok_or(RuntimeError::Gone("the agent host is gone".into()))?;
            self.attach(&info, agent_id, log).await.map(HostedAgent::launched).map_err(RuntimeError::Other)
        })
    }

    fn release<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            let Some(info) = self.existing().await else { return Ok(()) };
            AgentHost::release(self, &info, agent_id).await.map_err(RuntimeError::Other)
        })
    }
}
