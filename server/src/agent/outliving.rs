//! The runtimes whose agents outlive batond, as configured for a data dir: the local agent host,
//! each Docker daemon an agent is configured for, each remote agent host reached over ssh.
//! Startup recovers their agents; `batond status` lists them and `batond stop --agents` ends
//! them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::docker::DockerRuntime;
use super::host::client::AgentHost;
use super::registry::{AgentSpec, Registry};
use super::runtime::Runtime;
use super::ssh::{SshConfig, SshRuntime};
use crate::agent_runtime::AgentRuntime;

/// One runtime whose agents outlive batond, and how a message names where they run.
#[derive(Clone)]
pub struct Outliving {
    pub runtime: Arc<dyn Runtime>,
    /// "the agent host", "Docker (the local daemon)", "ssh host box".
    pub place: String,
    /// Which agents it runs.
    key: Key,
}

/// What tells the agents of one runtime apart.
#[derive(Clone, PartialEq)]
enum Key {
    Host,
    Docker(Option<String>),
    Ssh(SshConfig),
}

impl Outliving {
    /// Whether the agent `spec` runs in this runtime (`default_runtime` for an entry that
    /// names none).
    pub fn serves(&self, spec: &AgentSpec, default_runtime: AgentRuntime) -> bool {
        let key = match (spec.runtime.unwrap_or(default_runtime), &spec.docker, &spec.ssh) {
            (AgentRuntime::Docker, Some(docker), _) => Key::Docker(docker.docker_host.clone()),
            (AgentRuntime::Ssh, _, Some(ssh)) => Key::Ssh(ssh.clone()),
            _ => Key::Host,
        };
        key == self.key
    }
}

/// The runtimes whose agents outlive batond: `host` first, then one per distinct Docker daemon
/// and one per distinct `ssh` table of the agents configured in `registry` (`ssh`: with
/// `remote`, or where agents of this data dir may still run ([`SshRuntime::may_have_agents`]),
/// since asking a remote machine costs a connection that starts a host there). Also
/// returns what could not be set up, for the user.
pub fn outliving_runtimes(
    registry: &Registry,
    host: Arc<AgentHost>,
    data_dir: &Path,
    batond: &Path,
    grace: Duration,
    default_runtime: AgentRuntime,
    remote: bool,
) -> (Vec<Outliving>, Vec<String>) {
    let mut found = vec![Outliving { runtime: host, place: "the agent host".into(), key: Key::Host }];
    let mut problems = Vec::new();
    let batond = PathBuf::from(batond);
    let mut daemons = Vec::new();
    let mut remotes = Vec::new();
    for spec in registry.specs() {
        let runtime = spec.runtime.unwrap_or(default_runtime);
        if let (AgentRuntime::Docker, Some(docker)) = (runtime, spec.docker.clone()) {
            if daemons.contains(&docker.docker_host) {
                continue;
            }
            daemons.push(docker.docker_host.clone());
            let place = match &docker.docker_host {
                Some(host) => format!("Docker (the daemon at {host})"),
                None => "Docker (the local daemon)".to_string(),
            };
            let key = Key::Docker(docker.docker_host.clone());
            match DockerRuntime::new(docker, data_dir, batond.clone(), grace) {
                Ok(runtime) => found.push(Outliving { runtime: Arc::new(Arc::new(runtime)), place, key }),
                Err(e) => problems.push(format!("{place}: {e}")),
            }
        }
        if let (AgentRuntime::Ssh, Some(ssh)) = (runtime, spec.ssh.clone()) {
            if remotes.contains(&ssh) {
                continue;
            }
            remotes.push(ssh.clone());
            let place = format!("ssh host {}", ssh.host);
            let key = Key::Ssh(ssh.clone());
            match SshRuntime::new(ssh, data_dir, batond.clone(), grace) {
                Ok(runtime) if remote || runtime.may_have_agents() => {
                    found.push(Outliving { runtime: Arc::new(runtime), place, key })
                }
                Ok(_) => {}
                Err(e) if remote => problems.push(format!("{place}: {e}")),
                Err(_) => {}
            }
        }
    }
    (found, problems)
}
