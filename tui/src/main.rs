use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use baton_protocol::ClientOptions;
use clap::Parser;

use baton_tui::app::App;
use baton_tui::cli::Args;
use baton_tui::launcher::{connect_or_launch, LaunchOptions};
use baton_tui::server_url::ServerAddr;
use baton_tui::{event_loop, logging, terminal};

/// Errors are printed as one readable chain on stderr (after the terminal is restored), not as
/// a Debug dump with a backtrace.
fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_config {
        print!("{}", baton_tui::config::default_file());
        return ExitCode::SUCCESS;
    }
    // Read before anything else: a bad file is said on the plain terminal.
    let config = match read_config(&args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("baton: {message}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("baton: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("baton: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tui.toml`, or the defaults (`--no-config`, no file). A bad file is an error naming its
/// line; at a terminal the user may start with the defaults instead.
fn read_config(args: &Args) -> std::result::Result<baton_tui::config::Config, String> {
    use baton_tui::config::{default_path, load, Config, Theme};
    let defaults = || Config { theme: Theme::from_env(), ..Config::default() };
    if args.no_config {
        return Ok(defaults());
    }
    let (path, named) = match &args.config {
        Some(path) => (path.clone(), true),
        None => match default_path() {
            Some(path) => (path, false),
            None => return Ok(defaults()),
        },
    };
    match load(&path, named) {
        Ok(config) => Ok(config),
        Err(error) => {
            use std::io::{BufRead, IsTerminal, Write};
            let fix = "fix it, or start with the defaults: baton --no-config";
            if !std::io::stdin().is_terminal() {
                return Err(format!("{error}\n{fix}"));
            }
            eprint!("baton: {error}\nStart with the default keys and colours this time? [y/N] ");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().lock().read_line(&mut answer);
            if answer.trim().eq_ignore_ascii_case("y") {
                Ok(defaults())
            } else {
                Err(fix.to_string())
            }
        }
    }
}

async fn run(args: Args, config: baton_tui::config::Config) -> Result<()> {
    let addr = ServerAddr::from_url(&args.server).map_err(anyhow::Error::msg)?;
    // Resolved here, not left to batond's default: a server we start again must get the same.
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => default_data_dir()?,
    };
    let _log_guard = logging::init(&data_dir)?;
    tracing::info!(server = %args.server, "baton starting");

    // Without --token / BATON_TOKEN, a local server's token file in the data dir is used (read
    // at each connect: a server this baton starts writes it on its first start).
    let token_file = (args.token.is_none() && addr.is_loopback()).then(|| baton_protocol::token_file(&data_dir));
    let token_given = args.token.is_some() || token_file.as_deref().is_some_and(std::path::Path::exists);
    let client_options = ClientOptions {
        token: args.token.clone(),
        token_file,
        fingerprint: args.fingerprint.clone(),
        ca_file: args.ca_cert.clone(),
        ..ClientOptions::default()
    };
    let launch = LaunchOptions {
        url: args.server.clone(),
        client: client_options,
        data_dir,
        batond: args.batond.clone(),
        no_spawn: args.no_spawn,
        startup_bound: baton_tui::launcher::STARTUP_BOUND,
    };
    // Before the screen is taken over, so that a server that cannot be started is reported as
    // a plain error on the terminal.
    let startup = connect_or_launch(&launch).await?;

    // A client's working directory means nothing to a remote server.
    let local_workdir =
        addr.is_loopback().then(|| std::env::current_dir().ok()).flatten().map(|dir| dir.display().to_string());
    let mut app = App::new(args.server.clone(), local_workdir);
    app.set_clipboard(baton_tui::app::ClipboardSupport::from_env());
    app.set_config(config);
    if let Some(alerts) = args.alerts {
        app.set_alerts(alerts);
    }
    if args.mouse {
        app.set_mouse(true);
    }
    app.set_token_given(token_given);
    // For `O` (the web page's address): the token given, else the local server's, which a
    // server started just now has written by this point.
    let page_token = match (&args.token, &launch.client.token_file) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(file)) => baton_protocol::read_token(file).unwrap_or_else(|e| {
            tracing::warn!("{e}");
            None
        }),
        (None, None) => None,
    };
    app.set_page_token(page_token);
    // A lost server is started again only if it crashed serving our data dir (see launcher/).
    app.set_may_start_server(launch.may_start_server());
    // What the screen showed at the last quit (the open session, folded thoughts).
    let state_file = launch.data_dir.join("tui-state.json");
    if let Some(state) = std::fs::read(&state_file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()) {
        app.restore_view_state(state);
    }
    tracing::info!(connected = startup.connection.is_ok(), started_server = startup.started_server, "startup done");

    let mut tui = terminal::enter().context("could not set up the terminal")?;
    let tick = Duration::from_millis(args.tick_ms.max(1));
    let result = event_loop::run(&mut tui, &mut app, launch, startup.connection, tick).await;
    terminal::restore();
    match serde_json::to_vec(&app.view_state()) {
        Ok(bytes) => {
            if let Err(error) = std::fs::write(&state_file, bytes) {
                tracing::warn!("could not keep the screen's state in {}: {error}", state_file.display());
            }
        }
        Err(error) => tracing::warn!("could not keep the screen's state: {error}"),
    }
    if let Err(error) = &result {
        tracing::error!("baton failed: {error:#}");
    }
    result
}

fn default_data_dir() -> Result<PathBuf> {
    dirs::data_dir().map(|dir| dir.join("baton")).context("no data directory on this platform; pass --data-dir")
}
