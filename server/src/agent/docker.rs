//! The `docker` runtime: one container per agent launch, whose main process is an agent host
//! (`batond agentctl`), reached through `docker exec -i CONTAINER batond agentctl --stdio` — the
//! same protocol, spool and reattachment as `hosted`, in a box. The batond binary is mounted
//! read-only at its own path (so `{batond}` in agent command lines works inside too), as is the
//! session's working directory. Containers are labelled as Baton's, with the data dir's identity
//! and the agent's id, so a restarted server finds its own (and only its own) again.
//! See docs/RUNTIMES.md.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::{oneshot, watch};

use super::host::client::{AgentHost, HostedAgent};
use super::host::memory::KILLED_FOR_MEMORY;
use super::runtime::{LaunchSpec, Launched, ProcessHandle, RunningAgent, Runtime, RuntimeError, SpawnError};

/// Where the agent host inside a container keeps its state (a tmpfs of the container).
const AGENTCTL_DIR: &str = "/baton-agentctl";
/// Label marking a container as Baton's.
pub const LABEL_MANAGED: &str = "io.baton.managed";
/// Label naming the data dir (its identity, see [`data_dir_identity`]) a container belongs to.
pub const LABEL_DATA_DIR: &str = "io.baton.data-dir";
/// Label naming the agent (the execution id) a container runs.
pub const LABEL_AGENT: &str = "io.baton.agent-id";
/// Bound on one `docker` command (a remote daemon may be slow, not silent forever).
const DOCKER_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on the agent host inside a new container answering.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// An agent's `docker` settings from agents.toml.
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerConfig {
    /// The image to run; never pulled by batond.
    pub image: String,
    /// Any value Docker accepts for `DOCKER_HOST` (`ssh://user@host` for a remote daemon).
    #[serde(default)]
    pub docker_host: Option<String>,
    /// `--cpus`.
    #[serde(default)]
    pub cpus: Option<String>,
    /// `--memory`.
    #[serde(default)]
    pub memory: Option<String>,
    /// `--network` (Docker's default when absent; `none` cuts the agent off).
    #[serde(default)]
    pub network: Option<String>,
    /// Extra bind mounts, `SOURCE:TARGET` or `SOURCE:TARGET:ro` (absolute paths; `{data_dir}`
    /// is expanded, and a mount that would reach the data dir is refused at launch).
    #[serde(default)]
    pub mounts: Vec<String>,
}

/// One bind mount of [`DockerConfig::mounts`], read.
#[derive(Debug, Clone, PartialEq)]
pub struct BindMount {
    pub source: PathBuf,
    pub target: PathBuf,
    pub readonly: bool,
}

impl BindMount {
    /// Reads `SOURCE:TARGET[:ro|:rw]`. A path holding `:` cannot be told apart from the
    /// separator and is refused, as are relative paths and line breaks.
    pub fn parse(text: &str) -> Result<BindMount, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let (source, target, readonly) = match parts.as_slice() {
            [source, target] => (*source, *target, false),
            [source, target, "ro"] => (*source, *target, true),
            [source, target, "rw"] => (*source, *target, false),
            _ => {
                return Err(format!(
                    "mount {text:?}: expected SOURCE:TARGET or SOURCE:TARGET:ro, with no ':' inside a path"
                ))
            }
        };
        for path in [source, target] {
            check_path(path).map_err(|e| format!("mount {text:?}: {e}"))?;
        }
        Ok(BindMount { source: source.into(), target: target.into(), readonly })
    }
}

/// A path given to Docker: absolute, one line.
fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} is not an absolute path"));
    }
    if path.contains(['\n', '\r', '\0']) {
        return Err(format!("{path:?} holds a line break"));
    }
    Ok(())
}

impl DockerConfig {
    /// What agents.toml may not say: a value Docker would read as an option of its own, a
    /// mount it cannot read unambiguously.
    pub fn check(&self) -> Result<(), String> {
        if self.image.trim().is_empty() {
            return Err("needs an image".into());
        }
        let values = [
            ("image", Some(&self.image)),
            ("docker_host", self.docker_host.as_ref()),
            ("cpus", self.cpus.as_ref()),
            ("memory", self.memory.as_ref()),
            ("network", self.network.as_ref()),
        ];
        for (name, value) in values {
            if let Some(value) = value.filter(|v| v.starts_with('-')) {
                return Err(format!("{name} {value:?} must not start with '-'"));
            }
        }
        for mount in &self.mounts {
            BindMount::parse(mount)?;
        }
        if let Some(memory) = &self.memory {
            memory_bytes(memory).map_err(|e| format!("memory {e}"))?;
        }
        Ok(())
    }
}

/// The bound on the spool's tmpfs, in bytes: a quarter of the container's memory limit (at
/// least 8 MiB), 256 MiB without one.
pub fn spool_bound(memory: Option<&str>) -> u64 {
    const MIB: u64 = 1024 * 1024;
    match memory.and_then(|m| memory_bytes(m).ok()) {
        Some(limit) => (limit / 4).max(8 * MIB),
        None => 256 * MIB,
    }
}

/// A size as Docker reads `--memory`: a number with an optional unit, `b`, `k`, `m`, `g` (also
/// `kb`, `mib`...), in any case, powers of 1024. Read by hand: one number and a unit.
pub fn memory_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{text:?}: expected a size such as 512m or 4g"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("{text:?}: expected a size such as 512m or 4g")),
    };
    Ok((number * (1u64 << shift) as f64) as u64)
}

/// One `--mount` value. Docker reads it as a CSV record: every field is quoted (a quote
/// doubled), so a `,` or `=` in a path stays part of the path.
fn mount_arg(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(key, value)| {
            let field = if value.is_empty() { key.to_string() } else { format!("{key}={value}") };
            format!("\"{}\"", field.replace('"', "\"\""))
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn bind_arg(source: &Path, target: &Path, readonly: bool) -> String {
    let (source, target) = (source.to_string_lossy(), target.to_string_lossy());
    let mut fields = vec![("type", "bind"), ("source", source.as_ref()), ("target", target.as_ref())];
    if readonly {
        fields.push(("readonly", ""));
    }
    mount_arg(&fields)
}

/// The data dir's identity for container labels: a random id kept in `DATA_DIR/runtime-id`
/// (a path would change with a move, and two machines may share one).
pub fn data_dir_identity(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("runtime-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let tmp = data_dir.join(format!("runtime-id.{}", std::process::id()));
    std::fs::write(&tmp, &id)?;
    std::fs::rename(&tmp, &path)?;
    Ok(id)
}

pub struct DockerRuntime {
    config: DockerConfig,
    identity: String,
    batond: PathBuf,
    grace: Duration,
    /// The data dir, symlinks resolved: never reachable from a container.
    data_dir: PathBuf,
}

/// Why a `docker` command failed. None of them is the agent's fault: a session whose
/// container could not be run stays resumable.
#[derive(Debug)]
enum DockerError {
    /// The daemon cannot be reached or used.
    Daemon(String),
    /// The agent's `docker` settings do not work on the daemon (no such image, a mount whose
    /// source is missing, a network that is gone, a value Docker refuses).
    Config(String),
    /// The container is not there (removed).
    Gone(String),
    /// The daemon failed on its side.
    Failed(String),
}

impl DockerRuntime {
    pub fn new(
        config: DockerConfig,
        data_dir: &Path,
        batond: PathBuf,
        grace: Duration,
    ) -> Result<DockerRuntime, String> {
        let identity = data_dir_identity(data_dir)
            .map_err(|e| format!("cannot read or write {}: {e}", data_dir.join("runtime-id").display()))?;
        let data_dir = data_dir.canonicalize().unwrap_or_else(|_| data_dir.to_path_buf());
        Ok(DockerRuntime { config, identity, batond, grace, data_dir })
    }

    /// The container of an agent: recognisable, and unique per data dir.
    pub fn container(&self, agent_id: &str) -> String {
        format!("baton-{}-{agent_id}", self.identity)
    }

    fn host_args(&self) -> Vec<String> {
        match &self.config.docker_host {
            Some(host) => vec!["-H".into(), host.clone()],
            None => Vec::new(),
        }
    }

    /// Runs `docker ARGS` and returns its stdout.
    async fn docker(&self, args: &[String]) -> Result<String, DockerError> {
        let mut command = tokio::process::Command::new("docker");
        command.args(self.host_args()).args(args).stdin(Stdio::null()).kill_on_drop(true);
        crate::umask::for_user(command.as_std_mut());
        let output = match tokio::time::timeout(DOCKER_TIMEOUT, command.output()).await {
            Err(_) => return Err(DockerError::Daemon(format!("docker {} did not finish in time", args[0]))),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DockerError::Daemon("the docker command is not installed (install Docker's CLI)".into()))
            }
            Ok(Err(e)) => return Err(DockerError::Daemon(format!("cannot run docker: {e}"))),
            Ok(Ok(output)) => output,
        };
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).trim().to_string());
        }
        Err(self.explain(String::from_utf8_lossy(&output.stderr).trim()))
    }

    /// What a failed `docker` command means, and what to do about it.
    fn explain(&self, stderr: &str) -> DockerError {
        let daemon = self.config.docker_host.as_deref().unwrap_or("the default socket");
        let said = |needles: &[&str]| needles.iter().any(|n| stderr.contains(n));
        if stderr.contains("permission denied") && stderr.contains("docker") && stderr.contains("sock") {
            DockerError::Daemon(format!(
                "permission denied on the Docker socket ({daemon}): add the user running batond to the docker group, \
                 or point docker_host at a daemon it may use ({stderr})"
            ))
        } else if said(&["Cannot connect to the Docker daemon", "error during connect"]) {
            DockerError::Daemon(format!(
                "no Docker daemon answers at {daemon}: start dockerd or set docker_host ({stderr})"
            ))
        } else if said(&["No such image", "Unable to find image", "pull access denied"]) {
            DockerError::Config(format!(
                "image {} is not on the Docker daemon: build or load it there (batond never pulls), then resume the \
                 session ({stderr})",
                self.config.image
            ))
        } else if said(&["No such container"]) {
            DockerError::Gone(format!("the container is gone ({stderr})"))
        } else if said(&[
            "invalid reference format",
            "invalid mount config",
            "bind source path does not exist",
            "invalid argument",
            "invalid value",
            "invalid memory",
            "Invalid",
            "network",
            "unknown flag",
            "Minimum memory limit",
            "range of CPUs",
        ]) {
            DockerError::Config(format!(
                "the agent's docker settings (image, mounts, network, cpus, memory in agents.toml) do not work on \
                 the Docker daemon at {daemon}: fix them, then resume the session ({stderr})"
            ))
        } else {
            DockerError::Failed(format!("the Docker daemon at {daemon} could not run the agent's container ({stderr})"))
        }
    }

    /// The agent host inside the container, through `docker exec -i`.
    fn host(&self, container: &str) -> AgentHost {
        let mut args = self.host_args();
        args.extend(["exec".into(), "-i".into(), container.into(), self.batond.display().to_string()]);
        args.extend(["agentctl", "--stdio", "--data-dir", AGENTCTL_DIR].map(String::from));
        // A container removed or stopped takes its agent host with it: no reconnecting then.
        let daemon = self.config.docker_host.as_deref().unwrap_or("the local Docker daemon");
        AgentHost::via_command("docker".into(), args)
            .gone_when(|said| said.contains("No such container") || said.contains("is not running"))
            .named(format!("its container {container} (on {daemon})"))
    }

    /// Starts the container of `agent_id`, its agent host as main process.
    async fn run_container(&self, agent_id: &str, spec: &LaunchSpec) -> Result<String, DockerError> {
        let container = self.container(agent_id);
        let batond = self.batond.display().to_string();
        let cwd = spec.cwd.display().to_string();
        let mut args: Vec<String> =
            ["run", "--detach", "--pull", "never", "--name", &container].map(String::from).to_vec();
        for (label, value) in
            [(LABEL_MANAGED, "true"), (LABEL_DATA_DIR, self.identity.as_str()), (LABEL_AGENT, agent_id)]
        {
            args.extend(["--label".into(), format!("{label}={value}")]);
        }
        args.extend(self.mounts(spec).map_err(DockerError::Config)?);
        args.extend(["--workdir".into(), cwd]);
        // The spool lives on this tmpfs, whose pages count against the container's memory:
        // bounded, so that output piling up while batond is away cannot get the container
        // killed for memory.
        let spool = spool_bound(self.config.memory.as_deref());
        args.extend(["--tmpfs".into(), format!("{AGENTCTL_DIR}:mode=0700,size={spool}")]);
        for (flag, value) in
            [("--cpus", &self.config.cpus), ("--memory", &self.config.memory), ("--network", &self.config.network)]
        {
            if let Some(value) = value {
                args.extend([flag.to_string(), value.clone()]);
            }
        }
        args.extend(["--entrypoint".into(), batond, self.config.image.clone()]);
        let grace = self.grace.as_millis().to_string();
        args.extend(["agentctl", "--data-dir", AGENTCTL_DIR, "--grace-ms", &grace].map(String::from));
        if let Err(e) = self.docker(&args).await {
            // `docker run` creates the container before starting it: one that could not start
            // (a missing network, a mount Docker refused) is left behind otherwise. (A name
            // already in use is another container's, not this launch's.)
            let taken =
                matches!(&e, DockerError::Failed(said) | DockerError::Config(said) if said.contains("already in use"));
            if !taken {
                let _ = self.docker(&["rm".into(), "--force".into(), container]).await;
            }
            return Err(e);
        }
        Ok(container)
    }

    /// The `--mount` arguments of a launch: batond's binary (read-only), the working directory
    /// and the configured mounts. batond's data dir (its token, database, agents config) is
    /// never reachable: a mount whose source lies in it or holds it is refused, and where the
    /// working directory holds it (an agent started from `$HOME`), an empty tmpfs hides it.
    fn mounts(&self, spec: &LaunchSpec) -> Result<Vec<String>, String> {
        let mut args = Vec::new();
        for path in [&self.batond, &spec.cwd] {
            check_path(&path.to_string_lossy())?;
        }
        args.extend(["--mount".into(), bind_arg(&self.batond, &self.batond, true)]);
        args.extend(["--mount".into(), bind_arg(&spec.cwd, &spec.cwd, false)]);
        let reaches_data_dir = |source: &Path| {
            let real = source.canonicalize().unwrap_or_else(|_| source.to_path_buf());
            real.starts_with(&self.data_dir) || self.data_dir.starts_with(&real)
        };
        for mount in &self.config.mounts {
            let mount = BindMount::parse(mount)?;
            if reaches_data_dir(&mount.source) {
                return Err(format!(
                    "the mount {} would let the container reach batond's data dir {}; mount a directory \
                     outside it",
                    mount.source.display(),
                    self.data_dir.display()
                ));
            }
            args.extend(["--mount".into(), bind_arg(&mount.source, &mount.target, mount.readonly)]);
        }
        let cwd = spec.cwd.canonicalize().unwrap_or_else(|_| spec.cwd.clone());
        if self.data_dir.starts_with(&cwd) {
            // The same path inside: the working directory is mounted at its own path.
            let hidden = spec.cwd.join(self.data_dir.strip_prefix(&cwd).unwrap_or(Path::new("")));
            let hidden = hidden.to_string_lossy();
            args.extend(["--mount".into(), mount_arg(&[("type", "tmpfs"), ("destination", hidden.as_ref())])]);
        }
        Ok(args)
    }

    /// Waits until the agent host in `container` answers.
    async fn ready(&self, container: &str) -> Result<AgentHost, String> {
        let host = self.host(container);
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            match host.existing_or_error().await {
                Ok(_) => return Ok(host),
                // Polled: the container gives no signal when its main process is listening.
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(e) => return Err(format!("the agent host in container {container} did not answer: {e}")),
            }
        }
    }

    /// The agent of `container`, its end told in Docker's terms when the container is what
    /// ended it (killed for memory, stopped, removed, its daemon out of reach), and the
    /// container removed once the agent ended for good (not when only the connection to it was
    /// lost: the agent is then still there to be reattached).
    fn watched(self: &Arc<Self>, container: String, agent: HostedAgent) -> HostedAgent {
        let inner = agent.handle.clone();
        let (exit_tx, exit_rx) = watch::channel(None);
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let killer = inner.clone();
        tokio::spawn(async move {
            // Dropped without asking (the server let go of the agent): it stays in its container.
            if kill_rx.await.is_ok() {
                killer.kill().await;
            }
        });
        let agent_id = agent.agent_id.clone();
        let this = self.clone();
        tokio::spawn(async move {
            let mut exit = inner.wait().await;
            let state = if exit.cause.is_some() || exit.signal == Some(libc::SIGKILL) {
                let state = tokio::time::timeout(INSPECT_TIMEOUT, this.state(&container)).await;
                Some(state.unwrap_or_else(|_| Err(DockerError::Daemon("docker inspect did not answer".into()))))
            } else {
                None
            };
            if let Some(cause) = state.as_ref().and_then(|state| this.ended_by(&container, state)) {
                exit.cause = Some(cause);
            } else if exit.cause.as_deref().is_some_and(|c| c.starts_with(KILLED_FOR_MEMORY)) {
                // The agent host saw its container's limit kill the agent: said in the
                // configuration's words.
                exit.cause = Some(this.killed_for_memory(&container));
            }
            exit_tx.send_replace(Some(exit));
            let daemon_away = matches!(state, Some(Err(DockerError::Daemon(_))));
            let still_there = daemon_away
                || this
                    .host(&container)
                    .agents()
                    .await
                    .is_ok_and(|agents| agents.iter().any(|a| a.agent_id == agent_id && a.running));
            if !still_there {
                let _ = this.docker(&["rm".into(), "--force".into(), container]).await;
            }
        });
        HostedAgent { handle: ProcessHandle::from_parts(agent.pid, exit_rx, kill_tx), ..agent }
    }

    /// "was killed for memory (limit 128m) in its container …".
    fn killed_for_memory(&self, container: &str) -> String {
        let limit = self.config.memory.as_deref().map(|m| format!(" (limit {m})")).unwrap_or_default();
        format!("{KILLED_FOR_MEMORY}{limit} in its container {container}")
    }

    /// What `docker inspect` says of a container's state.
    async fn state(&self, container: &str) -> Result<ContainerState, DockerError> {
        let args = ["inspect", "--type", "container", "--format", "{{json .State}}", container].map(String::from);
        let out = self.docker(&args).await?;
        serde_json::from_str(&out).map_err(|e| DockerError::Failed(format!("docker inspect said {out:?}: {e}")))
    }

    /// How the container ended its agent, read after "The agent " (None: the container is not
    /// what ended it).
    fn ended_by(&self, container: &str, state: &Result<ContainerState, DockerError>) -> Option<String> {
        let daemon = self.config.docker_host.as_deref().unwrap_or("the local Docker daemon");
        match state {
            Ok(state) if state.oom_killed => Some(self.killed_for_memory(container)),
            Ok(state) if state.running => None,
            Ok(state) => Some(format!(
                "was lost: its container {container} stopped (exit code {}{}): it was killed or stopped \
                 (docker kill, docker stop), or its Docker daemon ({daemon}) was restarted without live-restore",
                state.exit_code,
                if state.error.is_empty() { String::new() } else { format!(", {}", state.error) },
            )),
            Err(DockerError::Gone(_)) => Some(format!("was lost: its container {container} was removed")),
            Err(DockerError::Daemon(e)) => {
                Some(format!("was lost: its Docker daemon cannot be reached ({e}); the container may still run there"))
            }
            Err(_) => None,
        }
    }
}

/// Bound on asking the daemon how a container ended.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The part of `docker inspect`'s `.State` that says how a container ended.
#[derive(Debug, serde::Deserialize)]
struct ContainerState {
    #[serde(rename = "Running", default)]
    running: bool,
    #[serde(rename = "OOMKilled", default)]
    oom_killed: bool,
    #[serde(rename = "ExitCode", default)]
    exit_code: i64,
    #[serde(rename = "Error", default)]
    error: String,
}

impl From<DockerError> for SpawnError {
    fn from(error: DockerError) -> SpawnError {
        match error {
            DockerError::Daemon(e) | DockerError::Failed(e) | DockerError::Gone(e) => SpawnError::Unavailable(e),
            DockerError::Config(e) => SpawnError::Config(e),
        }
    }
}

impl From<DockerError> for RuntimeError {
    fn from(error: DockerError) -> RuntimeError {
        match error {
            DockerError::Daemon(e) => RuntimeError::Unreachable(e),
            DockerError::Config(e) => RuntimeError::Config(e),
            DockerError::Gone(e) => RuntimeError::Gone(e),
            DockerError::Failed(e) => RuntimeError::Other(e),
        }
    }
}

impl Runtime for Arc<DockerRuntime> {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn spawn<'a>(
        &'a self,
        agent_id: &'a str,
        spec: &'a LaunchSpec,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>> {
        Box::pin(async move {
            let container = self.run_container(agent_id, spec).await?;
            let started = async {
                let host = self.ready(&container).await.map_err(SpawnError::Unavailable)?;
                host.spawn(agent_id, spec, log).await
            };
            match started.await {
                Ok(agent) => Ok(self.watched(container, agent).launched()),
                Err(e) => {
                    // Nothing runs in it: it goes.
                    let _ = self.docker(&["rm".into(), "--force".into(), container]).await;
                    Err(e)
                }
            }
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, RuntimeError>> {
        Box::pin(async move {
            let args: Vec<String> = vec![
                "ps".into(),
                "--all".into(),
                "--filter".into(),
                format!("label={LABEL_MANAGED}=true"),
                "--filter".into(),
                format!("label={LABEL_DATA_DIR}={}", self.identity),
                "--format".into(),
                format!("{{{{.Label \"{LABEL_AGENT}\"}}}}\t{{{{.State}}}}"),
            ];
            let out = self.docker(&args).await?;
            Ok(out
                .lines()
                .filter_map(|line| line.split_once('\t'))
                .map(|(agent_id, state)| RunningAgent {
                    agent_id: agent_id.to_string(),
                    pid: 0,
                    running: state == "running",
                })
                .collect())
        })
    }

    fn reattach<'a>(
        &'a self,
        agent_id: &'a str,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, RuntimeError>> {
        Box::pin(async move {
            let container = self.container(agent_id);
            let agent = match self.host(&container).reattach_agent(agent_id, log).await {
                Ok(agent) => agent,
                // What `docker exec` said: the container gone or stopped, the daemon away...
                Err(e) => {
                    let said = e.rsplit_once("said: ").map(|(_, said)| said).unwrap_or(&e);
                    return Err(match self.explain(said) {
                        DockerError::Failed(_) if said.contains("is not running") => {
                            RuntimeError::Gone(format!("container {container} is not running ({said})"))
                        }
                        DockerError::Failed(_) => RuntimeError::Other(e),
                        other => other.into(),
                    });
                }
            };
            Ok(self.watched(container, agent).launched())
        })
    }

    /// `docker exec -i CONTAINER BATOND GUARD_ARGS`: the batond binary is mounted at its own
    /// path in every agent container.
    fn guarded_command(&self, agent_id: &str, guard_args: &[String]) -> Option<Result<(String, Vec<String>), String>> {
        let mut args = self.host_args();
        args.extend(["exec".into(), "-i".into(), self.container(agent_id), self.batond.display().to_string()]);
        args.extend(guard_args.iter().cloned());
        Some(Ok(("docker".into(), args)))
    }

    fn release<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            match self.docker(&["rm".into(), "--force".into(), self.container(agent_id)]).await {
                Ok(_) | Err(DockerError::Gone(_)) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> DockerRuntime {
        let config =
            DockerConfig { image: "img:1".into(), docker_host: Some("ssh://u@h".into()), ..Default::default() };
        DockerRuntime {
            config,
            identity: "id".into(),
            batond: "/b".into(),
            grace: Duration::ZERO,
            data_dir: "/home/u/.local/share/baton".into(),
        }
    }

    fn spec(cwd: &str) -> LaunchSpec {
        LaunchSpec { command: "a".into(), args: vec![], env: Default::default(), cwd: cwd.into() }
    }

    #[test]
    fn mounts_are_csv_quoted_so_a_comma_or_colon_stays_in_the_path() {
        assert_eq!(
            bind_arg(Path::new("/w/a,b:c"), Path::new("/w/a,b:c"), true),
            r#""type=bind","source=/w/a,b:c","target=/w/a,b:c","readonly""#
        );
        assert_eq!(mount_arg(&[("source", r#"/x"y"#)]), r#""source=/x""y""#);
    }

    #[test]
    fn a_mount_with_a_colon_in_a_path_or_a_relative_path_is_refused() {
        assert!(BindMount::parse("/a:/b:ro").is_ok_and(|m| m.readonly));
        assert!(BindMount::parse("/a:/b").is_ok_and(|m| !m.readonly));
        for bad in ["/a:b:/c", "/a:/b:/c", "a:/b", "/a", "/a:/b\n:ro"] {
            assert!(BindMount::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_spool_tmpfs_is_a_quarter_of_the_memory_limit() {
        assert_eq!(memory_bytes("128m"), Ok(128 << 20));
        assert_eq!(memory_bytes("4G"), Ok(4 << 30));
        assert_eq!(memory_bytes("1.5g"), Ok(3 << 29));
        assert_eq!(memory_bytes("1048576"), Ok(1 << 20));
        assert_eq!(memory_bytes("512MiB"), Ok(512 << 20));
        assert!(memory_bytes("lots").is_err() && memory_bytes("12x").is_err());
        assert_eq!(spool_bound(Some("128m")), 32 << 20);
        assert_eq!(spool_bound(Some("16m")), 8 << 20, "at least 8 MiB");
        assert_eq!(spool_bound(None), 256 << 20);
        let config = DockerConfig { image: "i".into(), memory: Some("huge".into()), ..Default::default() };
        assert!(config.check().unwrap_err().starts_with("memory \"huge\""));
    }

    #[test]
    fn docker_values_that_look_like_options_are_refused() {
        let ok = DockerConfig { image: "img".into(), ..Default::default() };
        assert!(ok.check().is_ok());
        for config in [
            DockerConfig { image: "--privileged".into(), ..ok.clone() },
            DockerConfig { network: Some("--privileged".into()), ..ok.clone() },
            DockerConfig { memory: Some("-v/:/h".into()), ..ok.clone() },
            DockerConfig { docker_host: Some("-H".into()), ..ok.clone() },
            DockerConfig { cpus: Some("-1".into()), ..ok.clone() },
            DockerConfig { mounts: vec!["/a:/b:/c".into()], ..ok.clone() },
        ] {
            assert!(config.check().is_err(), "{config:?}");
        }
    }

    #[test]
    fn the_data_dir_is_hidden_under_a_workdir_that_holds_it_and_refused_as_a_mount() {
        let runtime = runtime();
        let args = runtime.mounts(&spec("/home/u")).unwrap().join(" ");
        assert!(args.contains(r#""type=tmpfs","destination=/home/u/.local/share/baton""#), "{args}");
        let args = runtime.mounts(&spec("/srv/project")).unwrap().join(" ");
        assert!(!args.contains("tmpfs"), "{args}");
        for mount in ["/home/u:/h", "/home/u/.local/share/baton/agent-logs:/logs", "/:/host:ro"] {
            let mut runtime = super::tests::runtime();
            runtime.config.mounts = vec![mount.into()];
            let error = runtime.mounts(&spec("/srv/project")).unwrap_err();
            assert!(error.contains("would let the container reach batond's data dir"), "{error}");
        }
    }

    fn said(error: DockerError) -> (bool, String) {
        match error {
            DockerError::Daemon(e) => (true, e),
            DockerError::Config(e) | DockerError::Gone(e) | DockerError::Failed(e) => (false, e),
        }
    }

    /// Docker's own words for each failure (as its CLI prints them) are turned into what to do.
    #[test]
    fn each_docker_failure_says_what_to_do() {
        let runtime = runtime();
        let (daemon, text) = said(runtime.explain(
            "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock",
        ));
        assert!(daemon && text.contains("add the user running batond to the docker group"), "{text}");
        let (daemon, text) =
            said(runtime.explain("Cannot connect to the Docker daemon at unix:///x.sock. Is it running?"));
        assert!(daemon && text.contains("no Docker daemon answers at ssh://u@h: start dockerd"), "{text}");
        let (daemon, text) = said(runtime.explain("docker: Error response from daemon: No such image: img:1."));
        assert!(!daemon && text.contains("image img:1 is not on the Docker daemon"), "{text}");
        let (daemon, text) = said(runtime.explain("docker: invalid reference format."));
        assert!(!daemon && text.contains("invalid reference format"), "{text}");
    }
}
