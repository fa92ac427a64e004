//! The agents Baton knows how to run, by name. Clients pick an agent by name only; the command
//! line comes from here (built-ins plus the user's config file), never from a client.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_protocol::AgentInfo;
use serde::Deserialize;

use crate::agent_runtime::AgentRuntime;

/// How to run one agent and what it can restore.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub name: String,
    pub display_name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The agent may restore its own context from a resume token (ACP session/resume or
    /// load): it does when this is set and its `initialize` advertises one of them. False: the
    /// conversation is always injected instead.
    pub native_session_resume: bool,
    /// Record history and inject it into the first prompt when the agent restored nothing
    /// (on by default; an entry may opt out).
    pub history_context_injection: bool,
    /// The ACP auth method to `authenticate` with; None: one whose env var is set.
    pub auth_method: Option<String>,
    /// A CLI flag that receives the resume token at launch (agents that resume that way).
    pub resume_flag: Option<String>,
    /// Where the agent process runs; None: the server's default (`--agent-runtime`).
    pub runtime: Option<AgentRuntime>,
    /// The `docker` runtime's settings (`[agents.NAME.docker]`).
    pub docker: Option<super::docker::DockerConfig>,
    /// The `ssh` runtime's settings (`[agents.NAME.ssh]`).
    pub ssh: Option<super::ssh::SshConfig>,
    /// The mode to set on every new session of this agent the user chose none for.
    pub default_mode: Option<String>,
    /// Configuration option values (`[agents.NAME.config]`, option id = value) to set on
    /// every session of this agent the user chose none for.
    pub config: BTreeMap<String, baton_protocol::OptionValue>,
    /// MCP servers every session of this agent gets (`[[agents.NAME.mcp_servers]]`).
    pub mcp_servers: Vec<baton_protocol::McpServerConfig>,
    /// Which ACP request restores a session when the agent advertises both (`restore_with`).
    pub restore_with: RestoreWith,
}

/// The restore request preferred when the agent advertises both `session/resume` and
/// `session/load` (`restore_with` in agents.toml); the other one is tried when the preferred
/// one answers "method not found".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RestoreWith {
    /// `session/resume`: the agent restores its context without replaying the conversation
    /// (Baton already holds the transcript).
    #[default]
    Resume,
    /// `session/load`: the agent replays the conversation as it restores it (the replay is not
    /// journaled a second time).
    Load,
}

impl AgentSpec {
    fn builtin(name: &str, display: &str, command: &str, args: &[&str], native: bool) -> Self {
        AgentSpec {
            name: name.into(),
            display_name: display.into(),
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
            native_session_resume: native,
            history_context_injection: true,
            auth_method: None,
            resume_flag: None,
            runtime: None,
            docker: None,
            ssh: None,
            default_mode: None,
            config: BTreeMap::new(),
            mcp_servers: Vec::new(),
            restore_with: RestoreWith::Resume,
        }
    }

    /// The command line to launch, with the resume flag and token appended when the agent
    /// resumes through its CLI.
    pub fn command_line(&self, resume_token: Option<&str>) -> (String, Vec<String>) {
        let mut args = self.args.clone();
        if let (Some(flag), Some(token)) = (&self.resume_flag, resume_token) {
            args.push(flag.clone());
            args.push(token.to_string());
        }
        (self.command.clone(), args)
    }

    /// The agent's environment: its entry's `env`, plus `NO_COLOR=1` unless the entry sets
    /// `NO_COLOR` itself. Nobody reads an agent's stderr on a terminal: colour codes would
    /// only end up in its log file and in error messages.
    pub fn launch_env(&self) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        env.entry("NO_COLOR".to_string()).or_insert_with(|| "1".to_string());
        env
    }

    pub fn is_installed(&self) -> bool {
        find_executable(&self.command).is_some()
    }

    pub fn info(&self) -> AgentInfo {
        AgentInfo {
            name: self.name.clone(),
            display_name: self.display_name.clone(),
            native_session_resume: self.native_session_resume,
            history_context_injection: self.history_context_injection,
            installed: self.is_installed(),
            mcp_servers: self.mcp_servers.iter().map(baton_protocol::McpServerConfig::info).collect(),
        }
    }
}

/// Finds `command` as an absolute/relative path or on PATH.
pub fn find_executable(command: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_executable =
        |p: &Path| p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if command.contains('/') {
        let path = PathBuf::from(command);
        return is_executable(&path).then_some(path);
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|dir| dir.join(command)).find(|p| is_executable(p))
}

/// One `[agents.NAME]` table of the config file. Every field is optional so that an entry can
/// override only part of a built-in agent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentOverride {
    display_name: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    native_session_resume: Option<bool>,
    history_context_injection: Option<bool>,
    auth_method: Option<String>,
    resume_flag: Option<String>,
    runtime: Option<AgentRuntime>,
    docker: Option<super::docker::DockerConfig>,
    ssh: Option<super::ssh::SshConfig>,
    default_mode: Option<String>,
    config: Option<BTreeMap<String, baton_protocol::OptionValue>>,
    mcp_servers: Option<Vec<baton_protocol::McpServerConfig>>,
    restore_with: Option<RestoreWith>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    agents: BTreeMap<String, AgentOverride>,
    /// The server's own table, read by [`crate::settings`].
    #[serde(default, rename = "tls")]
    _tls: Option<toml::Table>,
    /// The server's own table, read by [`crate::settings`].
    #[serde(default, rename = "notify")]
    _notify: Option<toml::Table>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot read agent config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("agent config {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Values substituted in commands and arguments of agents: `{batond}` (this server's binary)
/// and `{data_dir}`.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub batond: PathBuf,
    pub data_dir: PathBuf,
}

impl Placeholders {
    fn expand(&self, text: &str) -> String {
        text.replace("{batond}", &self.batond.to_string_lossy()).replace("{data_dir}", &self.data_dir.to_string_lossy())
    }
}

#[derive(Debug, Clone)]
pub struct Registry {
    agents: BTreeMap<String, AgentSpec>,
}

impl Registry {
    /// The built-in agents. Command lines are the agents' current ACP entry points; whether each
    /// restores natively follows what the agents do (docs/ACP.md, 'Real agents').
    pub fn builtin(placeholders: &Placeholders) -> Registry {
        let mut agents = vec![
            AgentSpec::builtin("claude-code", "Claude Code", "claude-agent-acp", &[], true),
            AgentSpec::builtin("codex", "Codex", "codex-acp", &[], true),
            AgentSpec::builtin("copilot", "GitHub Copilot", "copilot", &["--acp", "--stdio"], true),
            AgentSpec::builtin("auggie", "Auggie", "auggie", &["--acp"], true),
            AgentSpec::builtin("gemini", "Gemini CLI", "gemini", &["--acp"], false),
            AgentSpec::builtin("amp", "Amp", "amp-acp", &[], true),
            AgentSpec::builtin("opencode", "OpenCode", "opencode", &["acp"], true),
        ];
        let mock = |name: &str, display: &str, advertise: &str, native: bool, inject: bool| AgentSpec {
            name: name.into(),
            display_name: display.into(),
            command: "{batond}".into(),
            args: vec![
                "mock-agent".into(),
                "--state-dir".into(),
                "{data_dir}/mock-agent".into(),
                "--advertise".into(),
                advertise.into(),
            ],
            env: BTreeMap::new(),
            native_session_resume: native,
            history_context_injection: inject,
            auth_method: None,
            resume_flag: None,
            runtime: None,
            docker: None,
            ssh: None,
            default_mode: None,
            config: BTreeMap::new(),
            mcp_servers: Vec::new(),
            restore_with: RestoreWith::Resume,
        };
        agents.push(mock("mock", "Mock agent (resume + load)", "both", true, true));
        agents.push(mock("mock-load", "Mock agent (load only)", "load", true, true));
        agents.push(mock("mock-fresh", "Mock agent (history injection)", "none", false, true));
        agents.push(mock("mock-plain", "Mock agent (no restore)", "none", false, false));
        let mut registry = Registry { agents: agents.into_iter().map(|a| (a.name.clone(), a)).collect() };
        registry.expand(placeholders);
        registry
    }

    /// Built-ins with the config file's additions and overrides. A missing file is fine.
    pub fn load(config_path: &Path, placeholders: &Placeholders) -> Result<Registry, RegistryError> {
        let mut registry = Self::builtin(placeholders);
        let text = match std::fs::read_to_string(config_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(registry),
            Err(source) => return Err(RegistryError::Read { path: config_path.to_path_buf(), source }),
        };
        registry
            .apply_config(&text)
            .map_err(|message| RegistryError::Invalid { path: config_path.to_path_buf(), message })?;
        registry.expand(placeholders);
        Ok(registry)
    }

    fn apply_config(&mut self, text: &str) -> Result<(), String> {
        let config: ConfigFile = toml::from_str(text).map_err(|e| e.to_string())?;
        for (name, o) in config.agents {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(format!("agent name {name:?}: use letters, digits, '-' and '_'"));
            }
            let spec = match self.agents.remove(&name) {
                Some(existing) => existing,
                None => {
                    let command =
                        o.command.clone().ok_or_else(|| format!("agent {name}: a new agent needs a command"))?;
                    // Restored natively if it advertises session/load or session/resume (known
                    // at its initialize); `native_session_resume = false` opts out.
                    AgentSpec::builtin(&name, &name, &command, &[], true)
                }
            };
            let spec = AgentSpec {
                display_name: o.display_name.unwrap_or(spec.display_name),
                command: o.command.unwrap_or(spec.command),
                args: o.args.unwrap_or(spec.args),
                env: o.env.unwrap_or(spec.env),
                native_session_resume: o.native_session_resume.unwrap_or(spec.native_session_resume),
                history_context_injection: o.history_context_injection.unwrap_or(spec.history_context_injection),
                auth_method: o.auth_method.or(spec.auth_method),
                resume_flag: o.resume_flag.or(spec.resume_flag),
                runtime: o.runtime.or(spec.runtime),
                docker: o.docker.or(spec.docker),
                ssh: o.ssh.or(spec.ssh),
                default_mode: o.default_mode.or(spec.default_mode),
                config: o.config.unwrap_or(spec.config),
                mcp_servers: o.mcp_servers.unwrap_or(spec.mcp_servers),
                restore_with: o.restore_with.unwrap_or(spec.restore_with),
                ..spec
            };
            baton_protocol::validate_mcp_servers(&spec.mcp_servers)
                .map_err(|e| format!("agent {name}: [[agents.{name}.mcp_servers]] {e}"))?;
            if let Some(mode) = &spec.default_mode {
                baton_protocol::validate_option_id("default_mode", mode)
                    .map_err(|e| format!("agent {name}: {}", e.message))?;
            }
            for (id, value) in &spec.config {
                baton_protocol::validate_option_id("an option id", id)
                    .map_err(|e| format!("agent {name}: [agents.{name}.config] {}", e.message))?;
                if let baton_protocol::OptionValue::Id(value) = value {
                    baton_protocol::validate_option_id(id, value)
                        .map_err(|e| format!("agent {name}: [agents.{name}.config] {}", e.message))?;
                }
            }
            if spec.command.trim().is_empty() {
                return Err(format!("agent {name}: empty command"));
            }
            if spec.runtime == Some(AgentRuntime::Docker)
                && spec.docker.as_ref().is_none_or(|d| d.image.trim().is_empty())
            {
                return Err(format!("agent {name}: runtime \"docker\" needs [agents.{name}.docker] with an image"));
            }
            if let Some(docker) = &spec.docker {
                // Placeholders stand for absolute paths: checked as one.
                let mut expanded = docker.clone();
                for mount in expanded.mounts.iter_mut() {
                    *mount = mount.replace("{data_dir}", "/data_dir").replace("{batond}", "/batond");
                }
                expanded.check().map_err(|e| format!("agent {name}: [agents.{name}.docker] {e}"))?;
            }
            if spec.runtime == Some(AgentRuntime::Ssh) && spec.ssh.is_none() {
                return Err(format!("agent {name}: runtime \"ssh\" needs [agents.{name}.ssh] with a host"));
            }
            if let Some(ssh) = &spec.ssh {
                ssh.check().map_err(|e| format!("agent {name}: [agents.{name}.ssh] {e}"))?;
            }
            self.agents.insert(name, spec);
        }
        Ok(())
    }

    fn expand(&mut self, placeholders: &Placeholders) {
        for spec in self.agents.values_mut() {
            spec.command = placeholders.expand(&spec.command);
            spec.args = spec.args.iter().map(|a| placeholders.expand(a)).collect();
            for value in spec.env.values_mut() {
                *value = placeholders.expand(value);
            }
            for server in spec.mcp_servers.iter_mut() {
                if let baton_protocol::McpServerConfig::Stdio { command, args, env, .. } = server {
                    *command = placeholders.expand(command);
                    for arg in args.iter_mut() {
                        *arg = placeholders.expand(arg);
                    }
                    for value in env.values_mut() {
                        *value = placeholders.expand(value);
                    }
                }
            }
            if let Some(docker) = spec.docker.as_mut() {
                for mount in docker.mounts.iter_mut() {
                    *mount = placeholders.expand(mount);
                }
            }
        }
    }

    /// Every agent's spec, by name.
    pub fn specs(&self) -> impl Iterator<Item = &AgentSpec> {
        self.agents.values()
    }

    pub fn get(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.get(name)
    }

    pub fn list(&self) -> Vec<AgentInfo> {
        self.agents.values().map(AgentSpec::info).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholders() -> Placeholders {
        Placeholders { batond: "/opt/batond".into(), data_dir: "/data".into() }
    }

    #[test]
    fn builtins_cover_the_real_agents_and_the_mocks() {
        let registry = Registry::builtin(&placeholders());
        for name in [
            "claude-code",
            "codex",
            "copilot",
            "auggie",
            "gemini",
            "amp",
            "opencode",
            "mock",
            "mock-load",
            "mock-fresh",
            "mock-plain",
        ] {
            assert!(registry.get(name).is_some(), "{name} missing");
        }
        let gemini = registry.get("gemini").unwrap();
        assert!(!gemini.native_session_resume, "gemini boots idle");
        let fresh = registry.get("mock-fresh").unwrap();
        assert!(fresh.history_context_injection && !fresh.native_session_resume);
        let mock = registry.get("mock").unwrap();
        assert_eq!(mock.command, "/opt/batond");
        assert!(mock.args.contains(&"/data/mock-agent".to_string()));
    }

    #[test]
    fn config_adds_and_overrides_agents() {
        let mut registry = Registry::builtin(&placeholders());
        registry
            .apply_config(
                r#"
                [agents.gemini]
                command = "/usr/local/bin/gemini"
                env = { GEMINI_API_KEY = "k" }

                [agents.my-agent]
                command = "{batond}"
                args = ["mock-agent", "--restore-error", "-32002"]
                native_session_resume = true
                runtime = "hosted"
                "#,
            )
            .unwrap();
        registry.expand(&placeholders());
        let gemini = registry.get("gemini").unwrap();
        assert_eq!(gemini.command, "/usr/local/bin/gemini");
        assert_eq!(gemini.args, vec!["--acp"], "unspecified fields keep the built-in value");
        assert_eq!(gemini.env.get("GEMINI_API_KEY").map(String::as_str), Some("k"));
        let mine = registry.get("my-agent").unwrap();
        assert_eq!(mine.command, "/opt/batond");
        assert!(mine.native_session_resume);
        assert_eq!(mine.runtime, Some(AgentRuntime::Hosted));
        assert_eq!(gemini.runtime, None, "the server's default");
    }

    #[test]
    fn bad_config_is_a_clear_error() {
        let mut registry = Registry::builtin(&placeholders());
        assert!(registry.apply_config("[agents.new]\nargs = []").unwrap_err().contains("needs a command"));
        assert!(registry.apply_config("[agents.x]\ncommand = \"a\"\nbogus = 1").is_err());
        assert!(registry.apply_config("[agents.\"a b\"]\ncommand = \"a\"").is_err());
        assert!(registry.apply_config("[agents.x]\ncommand = \"a\"\nruntime = \"docker\"").is_err());
        let no_table = registry.apply_config("[agents.x]\ncommand = \"a\"\nruntime = \"ssh\"").unwrap_err();
        assert!(no_table.contains("needs [agents.x.ssh] with a host"), "{no_table}");
        let no_host = registry.apply_config("[agents.x]\ncommand = \"a\"\n[agents.x.ssh]\nhost = \"\"").unwrap_err();
        assert!(no_host.contains("needs a host"), "{no_host}");
    }

    #[test]
    fn resume_flag_carries_the_token() {
        let mut spec = AgentSpec::builtin("x", "x", "x", &["-p"], false);
        spec.resume_flag = Some("--resume".into());
        assert_eq!(spec.command_line(Some("tok")).1, vec!["-p", "--resume", "tok"]);
        assert_eq!(spec.command_line(None).1, vec!["-p"]);
    }
}
