//! Processes seen from outside: alive or gone, memory.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use crate::WAIT;

/// Whether `pid` runs (a zombie is dead for our purposes).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().map(|rest| !rest.trim_start().starts_with('Z')).unwrap_or(false),
        Err(_) => false,
    }
}

/// Waits until `pid` is gone, bounded by WAIT; false if it is still alive.
pub async fn wait_process_gone(pid: u32) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if !process_alive(pid) {
            return true;
        }
        // Another process's death has no event to wait on; a short poll bounded by WAIT.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits for our own child to exit, bounded by `bound`; None if it still runs.
pub(crate) fn wait_child(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        // std offers no wait with a timeout; a short poll bounded by `bound`.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Resident memory of a process (`VmRSS:`, or `VmHWM:` for the peak), in KiB.
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} for {pid}"));
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("a number of KiB")
}
