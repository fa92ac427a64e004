//! The `ssh` runtime: agents run on another machine, children of an agent host there
//! (`batond agentctl`), reached through the system's `ssh` client as
//! `ssh HOST BATOND agentctl --stdio --data-dir DIR`: the same protocol, spool and reattachment
//! as `hosted`, one connection per `ssh` process. The remote host outlives the connection and
//! this server; a lost connection is replaced by a new `ssh` and the stream carried on (see
//! `host::stream`). The system client is used rather than an SSH library so that the user's
//! ~/.ssh/config (aliases, keys, ProxyJump, ControlMaster) and known_hosts apply as they do for
//! the user's own `ssh`. See docs/RUNTIMES.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::docker::data_dir_identity;
use super::host::client::AgentHost;
use super::runtime::{LaunchSpec, Launched, RunningAgent, Runtime, RuntimeError, SpawnError};

/// Options given to every `ssh` before the user's: it never prompts (a server has nobody to
/// answer).
const FORCED_OPTIONS: [&str; 2] = ["-o", "BatchMode=yes"];
/// Options given after the user's (ssh keeps the first value it is given, so the user's win):
/// a dead network is noticed in about 30 s instead of TCP's hours, and a connection attempt
/// is bounded.
const DEFAULT_OPTIONS: [&str; 6] =
    ["-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=15"];

/// An agent's `ssh` settings from agents.toml.
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshConfig {
    /// Anything `ssh` accepts as its destination: an alias of ~/.ssh/config, `user@host`.
    #[serde(alias = "ssh_host")]
    pub host: String,
    /// The remote batond (default: `batond` on the remote PATH).
    #[serde(default)]
    pub batond: Option<String>,
    /// The remote agent host's data dir (default: `.local/share/baton-remote/<data dir id>`
    /// under the remote user's home).
    #[serde(default)]
    pub data_dir: Option<String>,
    /// Local path prefix → remote path prefix for working directories (the longest matching
    /// prefix applies; without one the remote path is the local one).
    #[serde(default)]
    pub workdir: BTreeMap<PathBuf, PathBuf>,
    /// Extra arguments for `ssh`, before the destination (`["-F", "/path/ssh_config"]`).
    #[serde(default)]
    pub ssh_args: Vec<String>,
}

impl SshConfig {
    /// Where a local working directory is on the remote machine (the longest matching prefix
    /// of `workdir` applies; without one the remote path is the local one).
    pub fn remote_path(&self, local: &Path) -> PathBuf {
        let mapping = self
            .workdir
            .iter()
            .filter(|(from, _)| local.starts_with(from))
            .max_by_key(|(from, _)| from.components().count());
        match mapping {
            // Joining an empty rest would add a trailing '/'.
            Some((from, to)) => match local.strip_prefix(from) {
                Ok(rest) if !rest.as_os_str().is_empty() => to.join(rest),
                _ => to.clone(),
            },
            None => local.to_path_buf(),
        }
    }

    /// What is wrong with the settings, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.host.trim().is_empty() {
            return Err("needs a host".into());
        }
        // It would be read as an option of ssh.
        if self.host.starts_with('-') {
            return Err(format!("host {:?} must not start with '-'", self.host));
        }
        for (name, value) in [("batond", &self.batond), ("data_dir", &self.data_dir)] {
            if let Some(value) = value {
                remote_word(value).map_err(|e| format!("{name} {e}"))?;
            }
        }
        Ok(())
    }
}

/// One word of the remote command line, quoted for the remote shell. A leading `~` or `~/`
/// stays unquoted, so that the remote shell expands it to the remote user's home (this
/// machine's home means nothing there); `~user` is refused, as is what cannot be quoted.
fn remote_word(word: &str) -> Result<String, String> {
    let quote = |text: &str| shlex::try_quote(text).map(|q| q.into_owned()).map_err(|e| format!("{word:?}: {e}"));
    if word == "~" {
        return Ok("~".into());
    }
    if let Some(rest) = word.strip_prefix("~/") {
        return if rest.is_empty() { Ok("~/".into()) } else { Ok(format!("~/{}", quote(rest)?)) };
    }
    if word.starts_with('~') {
        return Err(format!(
            "{word:?}: only ~/ (the remote user's home) is understood at the start of a path; give an absolute \
             path, ~/path, or a path relative to the remote home"
        ));
    }
    quote(word)
}

pub struct SshRuntime {
    config: SshConfig,
    /// A file of the local data dir that exists while agents of this data dir may run on the
    /// host ([`SshRuntime::may_have_agents`]).
    marker: PathBuf,
    /// This server's batond: an agent command naming it runs the remote batond instead.
    local_batond: PathBuf,
    remote_batond: String,
    remote_dir: String,
    grace: Duration,
}

impl SshRuntime {
    pub fn new(
        config: SshConfig,
        data_dir: &Path,
        local_batond: PathBuf,
        grace: Duration,
    ) -> Result<SshRuntime, String> {
        config.check()?;
        let identity = data_dir_identity(data_dir)
            .map_err(|e| format!("cannot read or write {}: {e}", data_dir.join("runtime-id").display()))?;
        let remote_dir = config.data_dir.clone().unwrap_or_else(|| format!(".local/share/baton-remote/{identity}"));
        let remote_batond = config.batond.clone().unwrap_or_else(|| "batond".into());
        let marker = data_dir.join(SSH_HOSTS_DIR).join(marker_name(&config, &remote_dir));
        Ok(SshRuntime { config, marker, local_batond, remote_batond, remote_dir, grace })
    }

    /// Whether agents of this data dir may run on the host: one was started there and no start
    /// since found none left. A start asks such a host for its agents even when no session has
    /// one on record (an agent whose session is gone is ended then); it leaves the other hosts
    /// alone, since asking means an ssh connection, which starts an agent host there.
    pub fn may_have_agents(&self) -> bool {
        self.marker.exists()
    }

    /// Notes that an agent of this data dir runs on the host (see [`Self::may_have_agents`]).
    fn remember_host(&self) {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let Some(dir) = self.marker.parent() else { return };
        let made = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).and_then(|()| {
            let mut file =
                std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&self.marker)?;
            std::io::Write::write_all(&mut file, format!("{}\n{}\n", self.config.host, self.remote_dir).as_bytes())
        });
        if let Err(e) = made {
            tracing::warn!(host = %self.config.host, "cannot note that agents run there ({}): {e}", self.marker.display());
        }
    }

    /// The `ssh` arguments that reach the remote agent host.
    pub fn ssh_args(&self) -> Result<Vec<String>, String> {
        let grace = self.grace.as_millis().to_string();
        let remote = ["agentctl", "--stdio", "--data-dir", &self.remote_dir, "--grace-ms", &grace];
        self.remote_batond_args(remote.into_iter())
    }

    /// The `ssh` arguments that run the remote batond with `batond_args` there.
    fn remote_batond_args<'a>(&'a self, batond_args: impl Iterator<Item = &'a str>) -> Result<Vec<String>, String> {
        let remote = std::iter::once(self.remote_batond.as_str()).chain(batond_args);
        // ssh hands the remote shell one string: each word is quoted for it (a leading `~/`
        // left for it to expand).
        let words = remote.map(remote_word).collect::<Result<Vec<_>, _>>();
        let command = words.map_err(|e| format!("cannot quote the remote command: {e}"))?.join(" ");
        let mut args: Vec<String> = FORCED_OPTIONS.iter().map(|s| s.to_string()).collect();
        args.extend(self.config.ssh_args.iter().cloned());
        args.extend(DEFAULT_OPTIONS.iter().map(|s| s.to_string()));
        args.extend([self.config.host.clone(), command]);
        Ok(args)
    }

    fn host(&self) -> Result<AgentHost, String> {
        let what = format!("the agent host on {} (over ssh)", self.config.host);
        Ok(AgentHost::via_command("ssh".into(), self.ssh_args()?).named(what))
    }

    /// Where a local working directory is on the remote machine.
    pub fn remote_path(&self, local: &Path) -> PathBuf {
        self.config.remote_path(local)
    }

    /// The launch as the remote host runs it.
    fn remote_spec(&self, spec: &LaunchSpec) -> LaunchSpec {
        let mut remote = spec.clone();
        remote.cwd = self.remote_path(&spec.cwd);
        if Path::new(&spec.command) == self.local_batond {
            remote.command = self.remote_batond.clone();
        }
        remote
    }

    /// What a failed `ssh` (or what ran behind it) means, and what to do about it.
    pub fn explain(&self, error: &str) -> String {
        self.classify(error).message().to_string()
    }

    /// [`Self::explain`], with what kind of failure it is: the host out of reach, or a setting
    /// (of ssh, of the remote machine) to fix.
    pub fn classify(&self, error: &str) -> RuntimeError {
        let host = &self.config.host;
        let batond = &self.remote_batond;
        let said = |needles: &[&str]| needles.iter().any(|n| error.contains(n));
        if error.starts_with("cannot run ssh") {
            RuntimeError::Config(format!("the ssh command cannot be run here: install OpenSSH's client ({error})"))
        } else if said(&["Permission denied", "Too many authentication failures"]) {
            RuntimeError::Config(format!(
                "ssh to {host} was refused: batond runs ssh with BatchMode (no password or passphrase is asked), so \
                 set up a key for {host} (ssh-copy-id; IdentityFile in ~/.ssh/config; an ssh-agent for a key with a \
                 passphrase) ({error})"
            ))
        } else if said(&["Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED"]) {
            RuntimeError::Config(format!(
                "the host key of {host} is not known or has changed: run `ssh {host}` once to check and accept it \
                 ({error})"
            ))
        } else if said(&[
            "Could not resolve hostname",
            "Connection refused",
            "Connection timed out",
            "timed out",
            "No route to host",
            "Network is unreachable",
            "kex_exchange_identification",
            "Connection closed by",
        ]) {
            RuntimeError::Unreachable(format!(
                "cannot reach {host} over ssh: check the host name, the network, and that sshd runs there ({error})"
            ))
        } else if said(&["unexpected argument '--stdio'", "unrecognized subcommand 'agentctl'"]) {
            RuntimeError::Config(format!(
                "the batond on {host} ({batond}) is too old to serve agents over ssh: upgrade it ({error})"
            ))
        } else if said(&["not found", "No such file or directory"]) && error.contains(batond.as_str()) {
            RuntimeError::Config(format!(
                "batond is not found on {host} ({batond}): install it there, or set batond = \"/path/to/batond\" in \
                 the agent's [agents.NAME.ssh] table ({error})"
            ))
        } else {
            RuntimeError::Other(format!("ssh to {host}: {error}"))
        }
    }
}

impl Runtime for SshRuntime {
    fn name(&self) -> &'static str {
        "ssh"
    }

    fn spawn<'a>(
        &'a self,
        agent_id: &'a str,
        spec: &'a LaunchSpec,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>> {
        // The remote host relays the agent's stderr, which goes to `log` on this machine.
        Box::pin(async move {
            let host = self.host().map_err(SpawnError::Config)?;
            // Noted before the launch: an agent started there must be found again even if this
            // server dies before the launch is answered.
            self.remember_host();
            match host.spawn(agent_id, &self.remote_spec(spec), log).await {
                Ok(agent) => Ok(agent.launched()),
                Err(SpawnError::Unavailable(e)) => Err(match self.classify(&e) {
                    RuntimeError::Config(e) => SpawnError::Config(e),
                    other => SpawnError::Unavailable(other.message().to_string()),
                }),
                Err(other) => Err(other),
            }
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, RuntimeError>> {
        Box::pin(async move {
            // The connection starts a host when none runs there (a rebooted machine): it has no
            // agents then, and the sessions resume.
            let agents = self.host().map_err(RuntimeError::Config)?.agents().await.map_err(|e| self.classify(&e))?;
            Ok(agents.into_iter().map(RunningAgent::from).collect())
        })
    }

    fn reattach<'a>(
        &'a self,
        agent_id: &'a str,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, RuntimeError>> {
        Box::pin(async move {
            let host = self.host().map_err(RuntimeError::Config)?;
            let agent = host.reattach_agent(agent_id, log).await.map_err(|e| self.classify(&e))?;
            Ok(agent.launched())
        })
    }

    fn agent_path(&self, local: &Path) -> PathBuf {
        self.remote_path(local)
    }

    /// `ssh HOST REMOTE_BATOND GUARD_ARGS`, each word quoted for the remote shell.
    fn guarded_command(&self, _agent_id: &str, guard_args: &[String]) -> Option<Result<(String, Vec<String>), String>> {
        Some(self.remote_batond_args(guard_args.iter().map(String::as_str)).map(|args| ("ssh".to_string(), args)))
    }

    fn release<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            let host = self.host().map_err(RuntimeError::Config)?;
            host.release_agent(agent_id).await.map_err(|e| self.classify(&e))
        })
    }

    fn no_agents_left(&self) {
        match std::fs::remove_file(&self.marker) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(host = %self.config.host, "cannot remove {}: {e}", self.marker.display()),
        }
    }
}

/// The local data dir's folder of [`SshRuntime::may_have_agents`] markers.
pub const SSH_HOSTS_DIR: &str = "ssh-hosts";

/// A marker's file name: the host, the ssh arguments that reach it (one alias may be two
/// machines with other `-p`/`-F`) and the remote data dir, hashed (a host may be any string ssh
/// takes, which need not be a good file name).
fn marker_name(config: &SshConfig, remote_dir: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for word in std::iter::once(&config.host).chain(&config.ssh_args).chain(std::iter::once(&remote_dir.to_string())) {
        hasher.update(word.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(config: SshConfig) -> SshRuntime {
        SshRuntime {
            config,
            marker: PathBuf::from("/nonexistent/ssh-hosts/marker"),
            local_batond: "/opt/local/batond".into(),
            remote_batond: "/srv/bin/batond".into(),
            remote_dir: ".local/share/baton-remote/abc".into(),
            grace: Duration::from_secs(60),
        }
    }

    #[test]
    fn ssh_never_prompts_and_the_remote_command_is_quoted_for_its_shell() {
        let config = SshConfig {
            host: "me@box".into(),
            ssh_args: vec!["-F".into(), "/tmp/ssh config".into(), "-o".into(), "ServerAliveInterval=2".into()],
            ..Default::default()
        };
        let mut runtime = runtime(config);
        runtime.remote_dir = "dir with space/$HOME".into();
        let args = runtime.ssh_args().unwrap();
        assert_eq!(&args[..2], ["-o", "BatchMode=yes"], "first: ssh keeps the first value of an option");
        assert_eq!(&args[2..6], ["-F", "/tmp/ssh config", "-o", "ServerAliveInterval=2"], "the user's, before ours");
        assert_eq!(args[args.len() - 2], "me@box");
        let command = args.last().unwrap();
        assert_eq!(
            shlex::split(command).unwrap(),
            ["/srv/bin/batond", "agentctl", "--stdio", "--data-dir", "dir with space/$HOME", "--grace-ms", "60000"],
            "{command}"
        );
        assert!(command.contains("'dir with space/$HOME'"), "not expanded by the remote shell: {command}");
    }

    #[test]
    fn a_leading_tilde_is_left_for_the_remote_shell_and_tilde_user_is_refused() {
        let mut runtime = runtime(SshConfig { host: "box".into(), ..Default::default() });
        runtime.remote_batond = "~/opt/my baton/batond".into();
        runtime.remote_dir = "~/.local/share/b".into();
        let args = runtime.ssh_args().unwrap();
        let command = args.last().unwrap();
        assert!(command.starts_with("~/'opt/my baton/batond' agentctl"), "{command}");
        assert!(command.contains("--data-dir ~/.local/share/b "), "{command}");
        let config = |batond: &str| SshConfig { host: "box".into(), batond: Some(batond.into()), ..Default::default() };
        assert!(config("~/bin/batond").check().is_ok());
        let error = config("~bob/bin/batond").check().unwrap_err();
        assert!(error.contains("only ~/ (the remote user's home) is understood"), "{error}");
        let data_dir = SshConfig { host: "box".into(), data_dir: Some("~root/x".into()), ..Default::default() };
        assert!(data_dir.check().unwrap_err().starts_with("data_dir "));
    }

    #[test]
    fn working_directories_map_by_their_longest_prefix_and_batond_is_the_remote_one() {
        let config = SshConfig {
            host: "box".into(),
            workdir: BTreeMap::from([
                ("/home/me".into(), "/srv/me".into()),
                ("/home/me/src/big".into(), "/data/big".into()),
            ]),
            ..Default::default()
        };
        let runtime = runtime(config);
        assert_eq!(runtime.remote_path(Path::new("/home/me/src/app")), Path::new("/srv/me/src/app"));
        assert_eq!(runtime.remote_path(Path::new("/home/me")).as_os_str(), "/srv/me", "no trailing '/'");
        assert_eq!(runtime.remote_path(Path::new("/home/me/src/big/x")), Path::new("/data/big/x"));
        assert_eq!(runtime.remote_path(Path::new("/home/meow")), Path::new("/home/meow"), "whole components only");
        assert_eq!(runtime.remote_path(Path::new("/tmp/w")), Path::new("/tmp/w"), "unmapped: the same path");
        let spec = LaunchSpec {
            command: "/opt/local/batond".into(),
            args: vec!["mock-agent".into()],
            env: BTreeMap::new(),
            cwd: "/home/me/w".into(),
        };
        let remote = runtime.remote_spec(&spec);
        assert_eq!((remote.command.as_str(), remote.cwd.as_path()), ("/srv/bin/batond", Path::new("/srv/me/w")));
        let other = LaunchSpec { command: "claude-agent-acp".into(), ..spec };
        assert_eq!(runtime.remote_spec(&other).command, "claude-agent-acp");
    }

    /// OpenSSH's and the shells' own words for each failure are turned into what to do.
    #[test]
    fn each_ssh_failure_says_what_to_do() {
        let runtime = runtime(SshConfig { host: "box".into(), ..Default::default() });
        let cases = [
            ("cannot run ssh: No such file or directory (os error 2)", "install OpenSSH's client"),
            (
                "the agent host closed the connection during hello; ssh said: me@box: Permission denied (publickey).",
                "set up a key for box",
            ),
            ("...; ssh said: Host key verification failed.", "run `ssh box` once"),
            ("...; ssh said: ssh: Could not resolve hostname box: Name or service not known", "cannot reach box"),
            ("...; ssh said: ssh: connect to host box port 22: Connection refused", "cannot reach box"),
            ("...; ssh said: sh: 1: /srv/bin/batond: not found", "batond is not found on box (/srv/bin/batond)"),
            ("...; ssh said: bash: line 1: /srv/bin/batond: No such file or directory", "install it there"),
            ("...; ssh said: error: unexpected argument '--stdio' found", "too old"),
        ];
        for (error, advice) in cases {
            let text = runtime.explain(error);
            assert!(text.contains(advice), "{error} → {text}");
        }
        assert!(SshConfig { host: "-oProxyCommand=x".into(), ..Default::default() }.check().is_err());
        assert!(SshConfig::default().check().is_err());
    }
}
