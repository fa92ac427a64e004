//! A `baton` app run against a real `batond`: the app with its real runner over a real
//! WebSocket, as the event loop runs it, drawn on a 100x30 `TestBackend` (the terminal is the
//! only thing replaced). Each wait is for what the screen shows, bounded. What differs from run
//! to run is normalised for snapshots: ages and countdowns ("5s"), the temporary directory,
//! session ids; status-bar messages expire on a timer, so they are hidden first.
//!
//! The server is started by the testkit (which builds `batond` when it is not built yet).

use std::path::Path;
use std::time::{Duration, Instant};

use baton_protocol::{Client, ClientEvent, ClientOptions, Notifications, SessionListParams};
use baton_testkit::{Server, ServerBuilder};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::launcher::LaunchOptions;
use baton_tui::runner::{Delivery, Runner};
use baton_tui::ui::{self, ViewContext};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;

pub const WAIT: Duration = Duration::from_secs(30);
/// The URL the screens show: the real one has an ephemeral port.
pub const SHOWN_URL: &str = "ws://127.0.0.1:7777/ws";

/// batond on `data_dir` at `listen` (`127.0.0.1:0`, or the address of the server it replaces).
pub fn start_server(data_dir: &Path, listen: &str) -> Server {
    ServerBuilder::new(data_dir).listen(listen).args(["--handshake-timeout-secs", "5"]).start_blocking()
}

/// The app with its real runner and notifications, as `event_loop` runs them, drawn on a
/// `TestBackend` instead of a terminal.
pub struct Tui {
    pub app: App,
    runner: Runner,
    deliveries: mpsc::UnboundedReceiver<Delivery>,
    notifications: Option<Notifications>,
    terminal: Terminal<TestBackend>,
    /// Replaced in snapshots: (what, by).
    pub redactions: Vec<(String, String)>,
}

// Lives for one wake-up at a time: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Woken {
    Delivery(Delivery),
    Event(Option<ClientEvent>),
    Tick,
    TimedOut,
}

impl Tui {
    /// The TUI on its own `data_dir`, connected to the server of `server_data_dir` with its token.
    pub async fn connect(url: &str, data_dir: &Path, server_data_dir: &Path) -> Tui {
        let (tx, deliveries) = mpsc::unbounded_channel();
        let launch = LaunchOptions {
            url: url.to_string(),
            client: ClientOptions::for_data_dir(server_data_dir),
            data_dir: data_dir.to_path_buf(),
            batond: None,
            no_spawn: true,
            startup_bound: baton_tui::launcher::STARTUP_BOUND,
        };
        let mut tui = Tui {
            app: App::new(SHOWN_URL, None),
            runner: Runner::new(launch, tx),
            deliveries,
            notifications: None,
            terminal: Terminal::new(TestBackend::new(100, 30)).expect("test terminal"),
            redactions: vec![
                (data_dir.display().to_string(), "[DATA]".into()),
                // Whether message.add has answered yet when a chunk arrives is a race: the
                // prompt's title drops its "sending…" either way.
                ("· sending… ".into(), "─".repeat(11)),
            ],
        };
        let (client, notifications) =
            Client::connect_with(url, ClientOptions::for_data_dir(server_data_dir)).await.expect("connect");
        tui.attach(client, notifications);
        tui
    }

    fn attach(&mut self, client: Client, notifications: Notifications) {
        if self.notifications.is_some() {
            client.close();
            return;
        }
        let epoch = self.runner.attach(client);
        self.notifications = Some(notifications);
        self.app.on_connected(epoch);
    }

    fn on_woken(&mut self, woken: Woken) {
        match woken {
            Woken::Delivery(Delivery::Outcome(outcome)) => self.app.on_outcome(*outcome),
            Woken::Delivery(Delivery::Connected(client, notifications)) => self.attach(client, notifications),
            Woken::Delivery(Delivery::ConnectFailed(error)) => self.app.on_connect_failed(&error, Instant::now()),
            Woken::Delivery(Delivery::ServerStarted(result)) => self.app.on_server_started(result),
            Woken::Delivery(Delivery::ServerStopped(result)) => self.app.on_server_stopped(result),
            Woken::Event(Some(ClientEvent::Closed) | None) => {
                self.notifications = None;
                self.runner.detach();
                self.app.on_disconnected("the server closed the connection", Instant::now());
            }
            Woken::Event(Some(event)) => self.app.on_client_event(event),
            Woken::Tick => self.app.on_tick(Instant::now()),
            Woken::TimedOut => {}
        }
    }

    fn draw(&mut self, ctx: &ViewContext) -> String {
        let app = &mut self.app;
        let mut metrics = Default::default();
        self.terminal.draw(|frame| metrics = ui::draw(frame, app, ctx)).expect("draw");
        app.set_frame_metrics(metrics);
        self.terminal.backend().to_string()
    }

    /// Runs the app (commands out, outcomes, notifications and ticks in) until the screen
    /// satisfies `ready`; panics with the last screen after `WAIT`.
    pub async fn wait_for(&mut self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            for command in self.app.take_commands() {
                self.runner.execute(command);
            }
            let screen = self.draw(&ViewContext::current());
            if ready(&screen) {
                return screen;
            }
            let woken = tokio::select! {
                Some(delivery) = self.deliveries.recv() => Woken::Delivery(delivery),
                event = next_event(&mut self.notifications) => Woken::Event(event),
                _ = tick.tick() => Woken::Tick,
                _ = tokio::time::sleep_until(deadline) => Woken::TimedOut,
            };
            if let Woken::TimedOut = woken {
                panic!("timed out waiting for {what}; the screen was:\n{screen}");
            }
            self.on_woken(woken);
        }
    }

    pub async fn wait_text(&mut self, text: &str) -> String {
        self.wait_for(text, |screen| screen.contains(text)).await
    }

    pub fn key(&mut self, code: KeyCode) {
        self.app.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
    }

    pub fn ctrl(&mut self, c: char) {
        self.app.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
    }

    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    /// The screen for a snapshot: the status-bar message hidden, what differs between runs
    /// replaced.
    pub fn snapshot(&mut self) -> String {
        self.app.handle_action(Action::Dismiss);
        let mut ctx = ViewContext::current();
        if let baton_tui::app::ConnectionState::Reconnecting { retry_at, .. } = self.app.connection() {
            // "reconnecting in 2s", whatever the backoff's jitter.
            ctx.instant = retry_at.checked_sub(Duration::from_millis(1500)).unwrap_or(ctx.instant);
        }
        let mut screen = self.draw(&ctx);
        for (what, by) in &self.redactions {
            screen = screen.replace(what.as_str(), by);
        }
        normalise_ages(&screen)
    }
}

async fn next_event(notifications: &mut Option<Notifications>) -> Option<ClientEvent> {
    match notifications {
        Some(notifications) => notifications.recv().await,
        None => std::future::pending().await,
    }
}

/// Ages in the session list (" 3s", "12s", " 1m" on a slow machine) and countdowns depend on
/// how fast the test ran: each becomes " ?s".
pub fn normalise_ages(screen: &str) -> String {
    // Ages are at most 3 wide ("{:>3}"): "12s", " 5m", and so is what replaces them.
    let chars: Vec<char> = screen.chars().collect();
    let mut out = chars.clone();
    for i in 2..chars.len() {
        let ends = chars.get(i + 1).is_none_or(|c| *c == ' ' || *c == '│' || *c == '"');
        let starts = chars[i - 2] == ' ' || chars[i - 2].is_ascii_digit();
        if "smhd".contains(chars[i]) && chars[i - 1].is_ascii_digit() && starts && ends {
            let before = if i >= 3 { chars[i - 3] } else { ' ' };
            if chars[i - 2] == ' ' || before == ' ' {
                out[i - 2] = ' ';
                out[i - 1] = '?';
                out[i] = 's';
            }
        }
    }
    out.into_iter().collect()
}

/// The ids of the server's sessions, to be replaced in snapshots.
pub async fn session_ids(url: &str, server_data_dir: &Path) -> Vec<String> {
    let (client, _notifications) =
        Client::connect_with(url, ClientOptions::for_data_dir(server_data_dir)).await.expect("connect");
    let list = client.request(SessionListParams::default()).await.expect("task.session.list");
    client.close();
    list.sessions.into_iter().map(|row| row.status.session_id).collect()
}

pub fn redact_sessions(tui: &mut Tui, ids: &[String]) {
    for (n, id) in ids.iter().enumerate() {
        let short = baton_tui::sessions::short_id(id).to_string();
        tui.redactions.push((short, format!("session{n}")));
    }
}
