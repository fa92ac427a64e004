//! Command-line options of `baton`.

use std::path::PathBuf;

use clap::Parser;

pub const DEFAULT_SERVER: &str = "ws://127.0.0.1:7777/ws";

/// The terminal client for Baton: lists agent sessions, resumes the one you open and streams
/// what its agent does.
#[derive(Debug, Parser)]
#[command(name = "baton", version)]
pub struct Args {
    /// WebSocket URL of the server. When nobody answers at a loopback address, baton starts a
    /// server there that keeps running after baton exits.
    #[arg(long, env = "BATON_SERVER", default_value = DEFAULT_SERVER)]
    pub server: String,

    /// Where baton writes its log (baton-tui.log), also given to a server baton starts
    /// [default: the platform data dir + /baton, as for batond].
    #[arg(long, env = "BATON_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Token sent to the server. Every server asks for one, loopback included: without this
    /// option, for a loopback server, baton reads the token file of its data dir
    /// (DATA_DIR/token, written by the batond it starts); give it for any other server.
    #[arg(long, env = "BATON_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// For a wss:// server: the SHA-256 fingerprint of its certificate (printed by batond at
    /// start and by `batond status`); that certificate and no other is accepted. The way to
    /// reach a server with a self-signed certificate (`batond --tls self-signed`).
    #[arg(long, env = "BATON_FINGERPRINT")]
    pub fingerprint: Option<String>,

    /// For a wss:// server without --fingerprint: a PEM file of CA certificates to trust
    /// besides the usual web roots (a private CA that issued the server's certificate).
    #[arg(long, env = "BATON_CA_CERT")]
    pub ca_cert: Option<PathBuf>,

    /// Never start a server; keep retrying the connection instead.
    #[arg(long)]
    pub no_spawn: bool,

    /// The batond executable to start [default: next to baton, else on PATH].
    #[arg(long)]
    pub batond: Option<PathBuf>,

    /// Milliseconds between ticks of the event loop (flash expiry, list refresh, clocks).
    /// Hidden: tests set it long to show that input does not wait for a tick.
    #[arg(long, hide = true, default_value_t = 250)]
    pub tick_ms: u64,

    /// What a session you are not looking at does when it starts needing you (a permission
    /// request, its turn is over, it needs resuming, it failed): `notify` raises a desktop
    /// notification through the terminal (OSC 9 and OSC 777, through tmux too) and rings the
    /// bell, `bell` only rings it, `off` does nothing.
    /// [default: tui.toml's `alerts`, else notify]
    #[arg(long, env = "BATON_ALERTS", value_enum)]
    pub alerts: Option<crate::alerts::AlertMode>,

    /// Start with the mouse on: the wheel scrolls the pane under the pointer, a click opens a
    /// session. Off by default so that the terminal selects text as usual; `m` toggles it.
    #[arg(long)]
    pub mouse: bool,

    /// The keys, colours and defaults file [default: the platform config dir +
    /// /baton/tui.toml; a missing default file means the defaults].
    #[arg(long, env = "BATON_CONFIG")]
    pub config: Option<PathBuf>,

    /// Start with the default keys and colours, whatever tui.toml says.
    #[arg(long)]
    pub no_config: bool,

    /// Print the defaults as a tui.toml (every action with its keys) and exit.
    #[arg(long)]
    pub print_config: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test in this binary that touches BATON_SERVER, so setting it races nothing.
    #[test]
    fn the_server_comes_from_the_flag_then_the_environment_then_the_default() {
        std::env::remove_var("BATON_SERVER");
        let parse = |args: &[&str]| Args::try_parse_from(args).map(|a| a.server);
        assert_eq!(parse(&["baton"]).ok().as_deref(), Some(DEFAULT_SERVER));
        std::env::set_var("BATON_SERVER", "ws://10.0.0.5:7777/ws");
        assert_eq!(parse(&["baton"]).ok().as_deref(), Some("ws://10.0.0.5:7777/ws"));
        assert_eq!(parse(&["baton", "--server", "ws://127.0.0.1:9/ws"]).ok().as_deref(), Some("ws://127.0.0.1:9/ws"));
        std::env::remove_var("BATON_SERVER");
    }
}
