//! What the benchmarks share: a real `batond` on a loopback port and waiting for its events.
//! Each bench uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use baton_protocol::*;
pub use baton_testkit::Server;
use baton_testkit::ServerBuilder;

pub const WAIT: Duration = Duration::from_secs(300);

/// Starts batond on an ephemeral loopback port with `args` added. BATON_BENCH_BATOND runs
/// another build of batond (to compare builds with the same benchmarks).
pub async fn start(data_dir: &Path, args: &[&str]) -> Server {
    let batond = std::env::var_os("BATON_BENCH_BATOND").unwrap_or_else(|| env!("CARGO_BIN_EXE_batond").into());
    ServerBuilder::new(data_dir).batond(batond).args(args).log("warn").start().await
}

/// CPU time (user and system) a process has used so far.
pub fn cpu_time(pid: u32) -> Duration {
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| {
        let fields: Vec<u64> =
            stat.rsplit_once(')')?.1.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
        Some(fields.iter().sum::<u64>())
    });
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks.unwrap_or(0) * 1_000_000 / per_second)
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
