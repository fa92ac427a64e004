//! `batond`: the Baton server. `batond mock-agent` runs the built-in mock ACP agent.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use baton_server::agent::host::agentctl::{self, AgentctlArgs};
use baton_server::agent::mock::{self, MockAgentArgs};
use baton_server::agent_runtime::AgentRuntime;
use baton_server::control;
use baton_server::gateway::ConnectionLimits;
use baton_server::notify::NotifyCommand;
use baton_server::orchestrator::Timeouts;
use baton_server::server::{self, ServerConfig};
use baton_server::tls::TlsSource;
use clap::{Parser, Subcommand};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

#[derive(Parser, Debug)]
#[command(name = "batond", version, about = "Baton server: supervises AI coding-agent sessions that survive restarts")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on (IP:PORT, or HOST:PORT with a host name such as localhost).
    #[arg(long, default_value = "127.0.0.1:7777", value_parser = parse_listen)]
    listen: SocketAddr,
    /// Where the database, logs, history and worktrees live [default: platform data dir/baton].
    #[arg(long, env = "BATON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Agent config file (TOML) [default: DATA_DIR/agents.toml]; `stop` and `status` read it to
    /// find the Docker daemons and ssh hosts agents run on.
    #[arg(long, global = true)]
    agents_config: Option<PathBuf>,
    /// Token clients must present [default: DATA_DIR/token, generated on first start]. Prefer
    /// the file: a command line is visible to every user in `ps`.
    #[arg(long, env = "BATON_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Accept connections without a token (loopback only): any local user can then drive the
    /// agents, with your files.
    #[arg(long, conflicts_with = "token")]
    no_token: bool,
    /// A browser origin allowed besides the server's own (repeatable), e.g. https://baton.example.com.
    #[arg(long = "allow-origin")]
    allowed_origins: Vec<String>,
    /// Bound on each ACP handshake step (initialize, session/new, load, resume), in seconds.
    #[arg(long, default_value_t = 60)]
    handshake_timeout_secs: u64,
    /// How long a message waits for a resumed agent to be ready, in seconds.
    #[arg(long, default_value_t = 90)]
    ready_timeout_secs: u64,
    /// Runtime of agents whose config names none: `standalone` (a child of batond) or `hosted`
    /// (run by the agent host, `batond agentctl`, and reattached after a restart).
    #[arg(long, value_enum, default_value_t = AgentRuntime::Standalone)]
    agent_runtime: AgentRuntime,
    /// How long the agent host stays up with no agent running and no server connected, in ms.
    #[arg(long, default_value_t = 60_000)]
    agentctl_grace_ms: u64,
    /// How often each connection gets a WebSocket ping, in ms; one that answers nothing for two
    /// intervals is closed as dead.
    #[arg(long, default_value_t = baton_server::gateway::PING_INTERVAL.as_millis() as u64)]
    ping_interval_ms: u64,
    /// How long an agent has to end a turn after a cancel before it is stopped, in seconds.
    #[arg(long, default_value_t = 10)]
    cancel_grace_secs: u64,
    /// Requests a connection may have unanswered; beyond that batond stops reading it until
    /// answers go out (the client is slowed down, never refused).
    #[arg(long, default_value_t = ConnectionLimits::DEFAULT_MAX_IN_FLIGHT as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_in_flight: u32,
    /// Requests per second read from each connection of another machine (loopback clients are
    /// not paced); 0 turns it off. Over it, batond reads later instead of refusing.
    #[arg(long, default_value_t = ConnectionLimits::DEFAULT_REMOTE_RATE)]
    remote_rate_limit: f64,
    /// Connections that have not sent their request (and so shown no token) yet; beyond it the
    /// oldest of them is closed, so idle connections cannot use up batond's file descriptors.
    #[arg(long, default_value_t = ConnectionLimits::DEFAULT_MAX_UNAUTHENTICATED as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_unauthenticated: u32,
    /// How long a client may take no frame while frames wait for it, in ms; past it its
    /// connection is closed with code 1008 (what was not sent to it is dropped).
    #[arg(long, default_value_t = ConnectionLimits::DEFAULT_SLOW_CLIENT.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..))]
    slow_client_ms: u64,
    /// Shell command run when a session starts needing the user (a permission request, its turn
    /// is over, it needs resuming, it failed), with BATON_SESSION_ID, BATON_TASK_ID,
    /// BATON_TASK_TITLE, BATON_ATTENTION and BATON_MESSAGE in its environment. Once per change;
    /// one at a time per session.
    #[arg(long, env = "BATON_NOTIFY_COMMAND")]
    notify_command: Option<String>,
    /// How long the notify command may run before it is killed, in seconds.
    #[arg(long, default_value_t = 10)]
    notify_timeout_secs: u64,
    /// Serve HTTPS and WSS with a certificate made once and kept in the data dir
    /// (`self-signed`); its SHA-256 fingerprint is printed at start and by `batond status`.
    #[arg(long, value_enum, conflicts_with_all = ["tls_cert", "insecure_no_tls"])]
    tls: Option<TlsMode>,
    /// Serve HTTPS and WSS with this certificate (PEM, the chain with the server's first).
    #[arg(long, requires = "tls_key", conflicts_with = "insecure_no_tls")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Listen beyond loopback without TLS and without the warning (for a TLS proxy of your own
    /// in front); also ignores the config file's [tls].
    #[arg(long)]
    insecure_no_tls: bool,
}

/// `batond --tls`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum TlsMode {
    /// A certificate made once with the server's names, kept in the data dir (owner-only).
    SelfSigned,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the mock ACP agent on stdin/stdout (for tests and trying Baton without API keys).
    #[command(after_help = MOCK_PROMPTS)]
    MockAgent(MockAgentArgs),
    /// Print the JSON Schema of the wire protocol (every request, result, notification and event).
    Schema {
        /// Print TypeScript declarations generated from the schema instead (server/web/protocol.d.ts).
        #[arg(long)]
        typescript: bool,
    },
    /// Guard one standalone agent (started by batond): runs the command and kills its whole
    /// process tree when batond dies or the agent exits.
    #[command(hide = true)]
    AgentGuard(baton_server::agent::guard::GuardArgs),
    /// Run an ACP agent and append the exchange with it to a recording (secrets redacted), for
    /// `batond replay-agent`: `batond record-agent --out FILE -- AGENT ARGS...`.
    RecordAgent(baton_server::agent::replay::RecordArgs),
    /// Play an agent's side of a recording back on stdin/stdout, matching the client's messages
    /// by method and shape; the first message that does not match is named on stderr.
    ReplayAgent(baton_server::agent::replay::ReplayArgs),
    /// Run the agent host: owns hosted agents so that they outlive batond (started by batond).
    Agentctl(AgentctlArgs),
    /// Stop the batond of a data dir gracefully and wait until it is gone.
    Stop {
        /// The data dir of the server to stop [default: platform data dir/baton].
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Also end the hosted agents, which otherwise keep running in the agent host.
        #[arg(long)]
        agents: bool,
        /// How long to wait for the server to exit, in seconds.
        #[arg(long, default_value_t = 30)]
        timeout_secs: u64,
    },
    /// Print a session's transcript to stdout, as Markdown or JSON Lines (one journal event per
    /// line). Reads the database file read-only: works whether or not batond runs.
    Export {
        /// The session to export (its id, as `task.session.list` shows it).
        session_id: String,
        /// `md` (Markdown: messages, tool calls with input, results and diffs, permission
        /// decisions, times) or `jsonl` (every journal event, decodable back).
        #[arg(long, value_enum, default_value_t = ExportFormatArg::Md)]
        format: ExportFormatArg,
        /// Include the agent's thoughts.
        #[arg(long)]
        thoughts: bool,
        /// [default: platform data dir/baton]
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Pair a device (a phone): prints a QR code and the page's address with a one-time code
    /// that the device exchanges for a token of its own. Needs the server running.
    Pair {
        /// [default: platform data dir/baton]
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// The device's name, as `device.list` shows it.
        #[arg(long, default_value = "phone")]
        name: String,
        /// Give the device full rights; by default it may only watch and answer.
        #[arg(long)]
        full: bool,
        /// The host (or HOST:PORT) the device reaches the server by, e.g. this machine's LAN
        /// address when the server listens on 0.0.0.0.
        #[arg(long)]
        host: Option<String>,
        /// How long the code works, in minutes.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=60))]
        expires_mins: u32,
    },
    /// Say whether a batond runs on a data dir, and which agents the agent host runs.
    Status {
        /// [default: platform data dir/baton]
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
}

/// `batond export --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExportFormatArg {
    /// Markdown.
    #[value(alias = "markdown")]
    Md,
    /// JSON Lines: one journal event per line.
    Jsonl,
}

/// `--listen`: an IP address and port, or a host name and port resolved now. Of the addresses
/// a name resolves to, a loopback one is preferred (`localhost` may also name `::1`).
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    if !text.contains(':') {
        return Err(format!("{text:?} has no port: expected HOST:PORT, e.g. localhost:7777"));
    }
    let addresses: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {text:?}: {e} (expected HOST:PORT, e.g. localhost:7777)"))?
        .collect();
    addresses
        .iter()
        .find(|a| a.ip().is_loopback() && a.is_ipv4())
        .or_else(|| addresses.iter().find(|a| a.ip().is_loopback()))
        .or_else(|| addresses.first())
        .copied()
        .ok_or_else(|| format!("{text:?} resolves to no address"))
}

const MOCK_PROMPTS: &str = "\
What the mock agent does with a prompt (its first line):
  remember X                        remembers X (kept across restarts in --state-dir)
  what did I ask you to remember?   answers from what it remembers
  /chunks N     streams N numbered chunks      /slow N     N chunks, 50 ms apart
  /tool         a tool call with updates       /plan       a three-step plan
  /edit         an edit tool call with a diff of src/lib.rs (reported, not written)
  /permission   asks permission first          /think      two thought chunks
  /write F T    writes T to file F (fs/*)      /read F     reads file F (fs/*)
  /hang         works until cancelled          /crash      exits mid-turn (code 3)
  /stubborn     works forever, ignores session/cancel
  /exit         answers, then exits            /error      fails the turn (-32603)
  /paced R N    N chunks at R per second, each t=<send time, µs since the epoch>
  /garbage      writes invalid lines, then answers
  /half-emoji   a chunk and a permission request cut mid-emoji (lone \\ud83d)
  /options      tells the mode and options (model, effort, verbose) it runs with
  anything else is echoed back";

fn init_logging(data_dir: &std::path::Path) -> anyhow::Result<tracing_appender::non_blocking::WorkerGuard> {
    let logs = data_dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    // Built, not `rolling::daily`, which panics when it cannot create its file (a read-only
    // data dir): that is an error to tell, with the path.
    let appender = tracing_appender::rolling::RollingFileAppender::builder()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("batond.log")
        .build(&logs)
        .with_context(|| format!("cannot write the log in {}", logs.display()))?;
    let (file_writer, guard) = tracing_appender::non_blocking(appender);
    let filter = || EnvFilter::try_from_env("BATON_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(std::io::stderr)
                .with_filter(filter()),
        )
        .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(file_writer).with_filter(filter()))
        .init();
    Ok(guard)
}

use tracing_subscriber::Layer;

fn main() -> anyhow::Result<()> {
    baton_server::memory::limit_arenas();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Schema { typescript }) => {
            if typescript {
                print!("{}", baton_protocol::protocol_typescript());
            } else {
                print!("{}", baton_protocol::protocol_schema_text());
            }
            return Ok(());
        }
        Some(Command::AgentGuard(args)) => baton_server::agent::guard::run(args),
        Some(Command::RecordAgent(args)) => std::process::exit(baton_server::agent::replay::record(args)?),
        Some(Command::ReplayAgent(args)) => std::process::exit(baton_server::agent::replay::replay(args)?),
        Some(Command::MockAgent(args)) => {
            // The mock speaks ACP on stdout: nothing else may write there.
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            return runtime.block_on(mock::run(args));
        }
        Some(Command::Agentctl(args)) => {
            // Its lock, spools and files in the data dir are private too; its agents keep the
            // user's mask.
            baton_server::umask::make_private();
            // Its agents' pipes count against its descriptor limit as batond's do.
            let descriptors = baton_server::limits::raise_descriptor_limit();
            // Logs go to stderr (batond points it at DATA_DIR/logs/agentctl.log).
            tracing_subscriber::fmt()
                .with_ansi(false)
                .with_writer(std::io::stderr)
                .with_env_filter(EnvFilter::try_from_env("BATON_LOG").unwrap_or_else(|_| EnvFilter::new("info")))
                .init();
            if let Err(e) = &descriptors {
                tracing::warn!("cannot raise the file descriptor limit: {e}");
            }
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            if let Err(e) = runtime.block_on(agentctl::run(args)) {
                tracing::error!("{e:#}");
                std::process::exit(1);
            }
            return Ok(());
        }
        Some(Command::Stop { data_dir, agents, timeout_secs }) => {
            let data_dir = data_dir.unwrap_or_else(server::default_data_dir);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let config = cli.agents_config.as_deref();
            let report =
                runtime.block_on(control::stop(&data_dir, config, agents, Duration::from_secs(timeout_secs)))?;
            println!("{report}");
            return Ok(());
        }
        Some(Command::Export { session_id, format, thoughts, data_dir }) => {
            let data_dir = data_dir.unwrap_or_else(server::default_data_dir);
            let format = match format {
                ExportFormatArg::Md => baton_protocol::ExportFormat::Markdown,
                ExportFormatArg::Jsonl => baton_protocol::ExportFormat::Jsonl,
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match baton_server::export::write_export(&data_dir, &session_id, format, thoughts, &mut out) {
                Ok(()) => return Ok(()),
                // A reader that stopped early (`| head`) is not an error.
                Err(e)
                    if e.downcast_ref::<std::io::Error>()
                        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
                {
                    return Ok(())
                }
                Err(e) => {
                    eprintln!("batond export: {e:#}");
                    std::process::exit(1);
                }
            }
        }
        Some(Command::Pair { data_dir, name, full, host, expires_mins }) => {
            let data_dir = data_dir.unwrap_or_else(server::default_data_dir);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let params =
                baton_protocol::DevicePairParams { name: Some(name), full, expires_in_secs: Some(expires_mins * 60) };
            match runtime.block_on(baton_server::pairing::pair(&data_dir, params, host.as_deref())) {
                Ok(text) => {
                    print!("{text}");
                    return Ok(());
                }
                Err(e) => {
                    eprintln!("batond pair: {e:#}");
                    std::process::exit(1);
                }
            }
        }
        Some(Command::Status { data_dir }) => {
            let data_dir = data_dir.unwrap_or_else(server::default_data_dir);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            println!("{}", runtime.block_on(control::status(&data_dir, cli.agents_config.as_deref()))?);
            return Ok(());
        }
        None => {}
    }
    let data_dir = cli.data_dir.unwrap_or_else(server::default_data_dir);
    // Before anything is created: the data dir, the logs and every file after them are private.
    baton_server::umask::make_private();
    let descriptors = baton_server::limits::raise_descriptor_limit();
    let fixed = server::private_data_dir(&data_dir)?;
    let _guard = init_logging(&data_dir)?;
    match descriptors {
        Ok(limit) if limit.now > limit.before => {
            tracing::info!(from = limit.before, to = limit.now, "raised the file descriptor limit to the hard limit")
        }
        Ok(limit) => tracing::info!(limit = limit.now, "file descriptor limit"),
        Err(e) => tracing::warn!("cannot raise the file descriptor limit: {e}"),
    }
    if fixed > 0 {
        tracing::warn!(
            data_dir = %data_dir.display(),
            "the data dir was open to other users: made {fixed} entries private (owner only)"
        );
    }
    let config = ServerConfig {
        listen: cli.listen,
        data_dir,
        agents_config: cli.agents_config,
        token: cli.token,
        no_token: cli.no_token,
        allowed_origins: cli.allowed_origins,
        timeouts: Timeouts {
            handshake: Duration::from_secs(cli.handshake_timeout_secs.max(1)),
            ready: Duration::from_secs(cli.ready_timeout_secs.max(1)),
            cancel_grace: Duration::from_secs(cli.cancel_grace_secs.max(1)),
        },
        default_runtime: cli.agent_runtime,
        agentctl_grace: Duration::from_millis(cli.agentctl_grace_ms),
        ping_interval: Duration::from_millis(cli.ping_interval_ms.max(1)),
        limits: ConnectionLimits {
            max_in_flight: cli.max_in_flight as usize,
            remote_rate: (cli.remote_rate_limit > 0.0).then_some(cli.remote_rate_limit),
            max_unauthenticated: cli.max_unauthenticated as usize,
            slow_client: Duration::from_millis(cli.slow_client_ms),
        },
        notify_command: cli
            .notify_command
            .filter(|c| !c.trim().is_empty())
            .map(|command| NotifyCommand { command, timeout: Duration::from_secs(cli.notify_timeout_secs.max(1)) }),
        tls: match (cli.tls, cli.tls_cert, cli.tls_key) {
            (Some(TlsMode::SelfSigned), _, _) => Some(TlsSource::SelfSigned),
            (None, Some(cert), Some(key)) => Some(TlsSource::Files { cert, key }),
            _ => None,
        },
        insecure_no_tls: cli.insecure_no_tls,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if let Err(e) = runtime.block_on(server::run(config)) {
        // One line, on stderr and in the log file.
        tracing::error!("{e:#}");
        drop(_guard);
        std::process::exit(1);
    }
    Ok(())
}
