//! Waits for the agents batond starts as its own children, without a descriptor per agent.
//!
//! tokio's `Child::wait` holds a pidfd for every child it waits for: with a thousand agents
//! that is a thousand descriptors of the ulimit that only say "this process may end". Here one
//! thread waits for `SIGCHLD` (one self-pipe for the whole server) and then asks each child it
//! was given whether it ended (`waitpid` with `WNOHANG`, through std's `Child::try_wait`). It
//! reaps only the children handed to it, so the other processes batond runs through tokio (git,
//! docker, ssh) are left to tokio.
//!
//! Written by hand: no crate waits for many children without a descriptor or a thread each.

use std::collections::BTreeMap;
use std::io;
use std::process::{Child, ExitStatus};
use std::sync::{Mutex, OnceLock};

use tokio::sync::oneshot;

/// A child being waited for and where its end is told.
struct Waiting {
    child: Child,
    done: oneshot::Sender<io::Result<ExitStatus>>,
}

/// The children handed over, by pid, until they are reaped.
static CHILDREN: Mutex<BTreeMap<u32, Waiting>> = Mutex::new(BTreeMap::new());

/// Reaps every handed-over child that ended and tells its end.
fn reap() {
    let Ok(mut children) = CHILDREN.lock() else { return };
    let mut ended = Vec::new();
    for (pid, waiting) in children.iter_mut() {
        match waiting.child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => ended.push((*pid, Ok(status))),
            Err(e) => ended.push((*pid, Err(e))),
        }
    }
    for (pid, result) in ended {
        if let Some(waiting) = children.remove(&pid) {
            let _ = waiting.done.send(result);
        }
    }
}

/// Starts the thread that reaps on each SIGCHLD, once; the error when it cannot be.
fn started() -> io::Result<()> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        let mut signals = signal_hook::iterator::Signals::new([libc::SIGCHLD])
            .map_err(|e| format!("cannot watch for the agents' exits (SIGCHLD): {e}"))?;
        std::thread::Builder::new()
            .name("baton-reaper".into())
            .spawn(move || {
                // Signals of one kind arrive merged: each wake-up asks every child.
                for _ in signals.forever() {
                    reap();
                }
            })
            .map(drop)
            .map_err(|e| format!("cannot start the thread that waits for the agents: {e}"))
    });
    started.clone().map_err(io::Error::other)
}

/// The end of one child handed to the reaper. Dropping it before the child ended kills the
/// child (as tokio's `kill_on_drop`); the reaper still reaps it.
pub struct Exit {
    pid: u32,
    ended: Option<oneshot::Receiver<io::Result<ExitStatus>>>,
    status: Option<ExitStatus>,
}

/// Hands `child` to the reaper. Its pipes are the caller's: take them before.
pub fn watch(mut child: Child) -> io::Result<Exit> {
    if let Err(e) = started() {
        // Nothing could wait for it: it is not left running unwatched.
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    let pid = child.id();
    let (done, ended) = oneshot::channel();
    CHILDREN.lock().map_err(|_| io::Error::other("the agents' reaper failed"))?.insert(pid, Waiting { child, done });
    // A child that ended before it was in the map had its SIGCHLD handled without it: asked now.
    reap();
    Ok(Exit { pid, ended: Some(ended), status: None })
}

impl Exit {
    /// Waits for the child's end; cancel-safe, and asked again it gives the same status.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(ended) = self.ended.as_mut() else {
            return Err(io::Error::other("the agent's exit could not be read"));
        };
        let result = ended.await.unwrap_or_else(|_| Err(io::Error::other("the agents' reaper is gone")));
        self.ended = None;
        if let Ok(status) = &result {
            self.status = Some(*status);
        }
        result
    }
}

impl Drop for Exit {
    fn drop(&mut self) {
        if self.ended.is_none() {
            return;
        }
        let Ok(mut children) = CHILDREN.lock() else { return };
        // Still in the map means not reaped: the pid is still this child's.
        if let Some(waiting) = children.get_mut(&self.pid) {
            let _ = waiting.child.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        command
    }

    /// The processes this process holds a pidfd of (their pid, from /proc/self/fdinfo).
    fn pidfd_targets() -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
        entries
            .filter_map(|e| {
                let entry = e.ok()?;
                std::fs::read_link(entry.path()).ok()?.to_string_lossy().contains("pidfd").then_some(())?;
                let info =
                    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", entry.file_name().to_str()?)).ok()?;
                info.lines().find_map(|l| l.strip_prefix("Pid:")).and_then(|p| p.trim().parse().ok())
            })
            .collect()
    }

    #[tokio::test]
    async fn a_childs_end_is_told_with_its_status_whenever_it_ends() {
        // Ends at once: often before it is handed over, so its SIGCHLD found nothing to reap.
        let mut quick = watch(sh("exit 3").spawn().expect("sh")).expect("watched");
        // Ends only once its stdin closes, after it was handed over.
        let mut later = sh("read line; exit 5").stdin(Stdio::piped()).spawn().expect("sh");
        let stdin = later.stdin.take();
        let mut later = watch(later).expect("watched");
        // Still running, among others: told of nothing.
        let mut running = watch(sh("sleep 60").spawn().expect("sh")).expect("watched");
        let bound = Duration::from_secs(30);
        let status = tokio::time::timeout(bound, quick.wait()).await.expect("told").expect("status");
        assert_eq!(status.code(), Some(3));
        assert_eq!(quick.wait().await.expect("asked again").code(), Some(3), "the same status when asked again");
        drop(stdin);
        let status = tokio::time::timeout(bound, later.wait()).await.expect("told").expect("status");
        assert_eq!(status.code(), Some(5));
        assert!(
            tokio::time::timeout(Duration::from_millis(1), running.wait()).await.is_err(),
            "a running child is not said to have ended"
        );
    }

    #[tokio::test]
    async fn waiting_for_children_takes_no_process_descriptor() {
        let children: Vec<Child> = (0..5).map(|_| sh("sleep 60").spawn().expect("sh")).collect();
        let pids: Vec<u32> = children.iter().map(Child::id).collect();
        let watched: Vec<Exit> = children.into_iter().map(|c| watch(c).expect("watched")).collect();
        let held = pidfd_targets();
        assert!(pids.iter().all(|pid| !held.contains(pid)), "no pidfd of a watched child: {held:?} {pids:?}");
        drop(watched);
    }

    #[tokio::test]
    async fn a_child_whose_wait_is_dropped_is_killed_and_reaped() {
        let child = sh("sleep 60").spawn().expect("sh");
        let pid = child.id();
        drop(watch(child).expect("watched"));
        // Killed by the drop, then reaped: its /proc entry goes (a zombie would keep it). There is
        // no event for "reaped", so the entry is looked at every 10 ms, within a bound.
        let gone = tokio::time::timeout(Duration::from_secs(30), async {
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(gone.is_ok(), "the dropped child {pid} was killed and reaped");
    }
}
