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

use super::host::client::{AgentHost, HostedAgent};
use super::runtime::{LaunchSpec, Launched, RunningAgent, Runtime, SpawnError};

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
    /// Extra `--volume` values (`SOURCE:TARGET[:ro]`).
    #[serde(default)]
    pub mounts: Vec<String>,
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
}

/// Why a `docker` command failed.
enum DockerError {
    /// The daemon cannot be reached or used: nothing to do with the agent.
    Daemon(String),
    /// The daemon answered with a refusal (no such image...).
    Refused(String),
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
        Ok(DockerRuntime { config, identity, batond, grace })
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
        if stderr.contains("permission denied") && stderr.contains("docker") && stderr.contains("sock") {
            DockerError::Daemon(format!(
                "permission denied on the Docker socket ({daemon}): add the user running batond to the docker group, \
                 or point docker_host at a daemon it may use ({stderr})"
            ))
        } else if stderr.contains("Cannot connect to the Docker daemon") || stderr.contains("error during connect") {
            DockerError::Daemon(format!(
                "no Docker daemon answers at {daemon}: start dockerd or set docker_host ({stderr})"
            ))
        } else if stderr.contains("No such image")
            || stderr.contains("Unable to find image")
            || stderr.contains("pull access denied")
        {
            DockerError::Refused(format!(
                "image {} is not on the Docker daemon: build or load it there (batond never pulls) ({stderr})",
                self.config.image
            ))
        } else {
            DockerError::Refused(stderr.to_string())
        }
    }

    /// The agent host inside the container, through `docker exec -i`.
    fn host(&self, container: &str) -> AgentHost {
        let mut args = self.host_args();
        args.extend(["exec".into(), "-i".into(), container.into(), self.batond.display().to_string()]);
        args.extend(["agentctl", "--stdio", "--data-dir", AGENTCTL_DIR].map(String::from));
        // A container removed or stopped takes its agent host with it: no reconnecting then.
        AgentHost::via_command("docker".into(), args)
            .gone_when(|said| said.contains("No such container") || said.contains("is not running"))
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
        args.extend(["--volume".into(), format!("{batond}:{batond}:ro")]);
        args.extend(["--volume".into(), format!("{cwd}:{cwd}"), "--workdir".into(), cwd.clone()]);
        for mount in &self.config.mounts {
            args.extend(["--volume".into(), mount.clone()]);
        }
        args.extend(["--tmpfs".into(), format!("{AGENTCTL_DIR}:mode=0700")]);
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
        self.docker(&args).await?;
        Ok(container)
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

    /// Removes the container once its agent ended for good (not when only the connection to
    /// it was lost: the agent is then still there to be reattached).
    fn remove_when_done(self: &Arc<Self>, container: String, agent: &HostedAgent) {
        let handle = agent.handle.clone();
        let agent_id = agent.agent_id.clone();
        let this = self.clone();
        tokio::spawn(async move {
            handle.wait().await;
            let still_there = this
                .host(&container)
                .agents()
                .await
                .is_ok_and(|agents| agents.iter().any(|a| a.agent_id == agent_id && a.running));
            if !still_there {
                let _ = this.docker(&["rm".into(), "--force".into(), container]).await;
            }
        });
    }
}

impl From<DockerError> for SpawnError {
    fn from(error: DockerError) -> SpawnError {
        match error {
            DockerError::Daemon(e) => SpawnError::Unavailable(e),
            DockerError::Refused(e) => SpawnError::Refused(e),
        }
    }
}

fn message(error: DockerError) -> String {
    match error {
        DockerError::Daemon(e) | DockerError::Refused(e) => e,
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
        _log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>> {
        Box::pin(async move {
            let container = self.run_container(agent_id, spec).await?;
            let started = async {
                let host = self.ready(&container).await.map_err(SpawnError::Unavailable)?;
                host.spawn(agent_id, spec).await
            };
            match started.await {
                Ok(agent) => {
                    self.remove_when_done(container, &agent);
                    Ok(agent.launched())
                }
                Err(e) => {
                    // Nothing runs in it: it goes.
                    let _ = self.docker(&["rm".into(), "--force".into(), container]).await;
                    Err(e)
                }
            }
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, String>> {
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
            let out = self.docker(&args).await.map_err(message)?;
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

    fn reattach<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<Launched, String>> {
        Box::pin(async move {
            let container = self.container(agent_id);
            let agent = self.host(&container).reattach_agent(agent_id).await?;
            self.remove_when_done(container, &agent);
            Ok(agent.launched())
        })
    }

    fn release<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.docker(&["rm".into(), "--force".into(), self.container(agent_id)]).await.map(|_| ()).map_err(message)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> DockerRuntime {
        let config =
            DockerConfig { image: "img:1".into(), docker_host: Some("ssh://u@h".into()), ..Default::default() };
        DockerRuntime { config, identity: "id".into(), batond: "/b".into(), grace: Duration::ZERO }
    }

    fn said(error: DockerError) -> (bool, String) {
        match error {
            DockerError::Daemon(e) => (true, e),
            DockerError::Refused(e) => (false, e),
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
