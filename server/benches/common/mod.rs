//! What the benchmarks share: a real `batond` on a loopback port and waiting for its events.
//! Each bench uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use baton_protocol::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const WAIT: Duration = Duration::from_secs(300);

pub struct Server {
    pub child: Child,
    /// The WebSocket URL with the server's token (from its data dir) in the query.
    pub url: String,
    pub pid: u32,
}

/// Starts batond on an ephemeral loopback port with `args` added. BATON_BENCH_BATOND runs
/// another build of batond (to compare builds with the same benchmarks).
pub async fn start(data_dir: &Path, args: &[&str]) -> Server {
    let batond = std::env::var_os("BATON_BENCH_BATOND").unwrap_or_else(|| env!("CARGO_BIN_EXE_batond").into());
    let mut child = Command::new(batond)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("BATON_LOG", "warn")
        .env_remove("BATON_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn batond");
    let pid = child.id().expect("pid");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line()).await.expect("listen line").expect("read").expect("line");
    let url = line.rsplit(' ').next().expect("url").to_string();
    let url = match read_token(&token_file(data_dir)).expect("read the token file") {
        Some(token) => format!("{url}?token={token}"),
        None => url,
    };
    Server { child, url, pid }
}

pub async fn wait_event(notes: &mut Notifications, pick: impl Fn(&Notification) -> bool) {
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(n) if pick(n) => Some(()),
            _ => None,
        })
        .await
        .expect("event");
}

pub fn is_turn_end(n: &Notification, session_id: &str) -> bool {
    matches!(n, Notification::Event(EventRecord { session_id: s, event: SessionEvent::TurnCompleted { .. }, .. }) if s == session_id)
}

pub fn is_waiting(n: &Notification, session_id: &str) -> bool {
    matches!(n, Notification::StateChanged(c) if c.session_id == session_id && c.state == SessionState::WaitingForInput)
}
