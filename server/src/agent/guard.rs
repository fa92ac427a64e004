//! The guard of a standalone agent: `batond agent-guard --parent PID -- COMMAND ARGS...`.
//!
//! The kernel's parent-death signal reaches only a direct child, and a process that starts a
//! session of its own, clears its environment and ignores SIGTERM escapes every other way of
//! finding it once its parent is gone (it is re-parented to init). So batond does not start a
//! standalone agent itself: it starts this guard, a small process that starts the agent and
//! stays its ancestor:
//!
//! - The guard is a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): every process of the agent's
//!   tree whose parent dies is re-parented to the guard, never to init, whatever session or
//!   process group it moved to. The tree is therefore exactly the guard's descendants.
//! - batond's death reaches the guard as SIGUSR1 (its parent-death signal). The guard then kills
//!   every descendant with SIGKILL and exits: nothing of the agent keeps working after batond
//!   dies, including after `kill -9`.
//! - When the agent exits, the guard kills what it left behind and exits with the agent's own
//!   status (its code, or the same signal), so batond sees the agent's exit as before.
//! - SIGTERM, SIGINT and SIGHUP sent to the guard are passed on to the agent (batond's stop
//!   signals the whole process group, the agent included).
//!
//! The guard costs batond no descriptor: it shares the agent's pipes until the agent runs, then
//! keeps only stderr (for its own error messages) open. See docs/RUNTIMES.md, "Standalone".

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use super::runtime::proc_ppid;

/// The parent-death signal batond gives the guard.
pub const PARENT_DEATH_SIGNAL: i32 = libc::SIGUSR1;

/// How often the guard checks that batond is still its parent even without a signal (the
/// parent-death signal fires when the *thread* that started the guard ends, which is checked
/// against the parent's pid; the poll covers a signal lost to that race).
const PARENT_POLL: Duration = Duration::from_secs(2);

/// `batond agent-guard`.
#[derive(clap::Args, Debug)]
pub struct GuardArgs {
    /// The pid of the batond that started the guard: when it is no longer the parent, the
    /// agent's tree is killed.
    #[arg(long, required_unless_present = "lifeline")]
    pub parent: Option<u32>,
    /// Stdin is the lifeline instead of a parent (a command an agent in a container or on
    /// another host asked batond to run there, started through `docker exec -i` or `ssh`): its
    /// first line is a JSON object of environment variables for the command (kept off command
    /// lines, where `ps` shows them), and its end (batond closed it, or the `docker`/`ssh`
    /// client that carried it died) kills the command's tree. The command's own stdin is
    /// /dev/null; its stdout and stderr are the guard's.
    #[arg(long)]
    pub lifeline: bool,
    /// The directory the command runs in.
    #[arg(long)]
    pub cwd: Option<std::path::PathBuf>,
    /// The agent's command line.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// Set once the lifeline ended (see [`GuardArgs::lifeline`]).
static LIFELINE_CUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reads the lifeline's first line (the command's environment), then watches it end on a
/// thread of its own, which tells the guard's loop with [`PARENT_DEATH_SIGNAL`] (blocked in
/// every thread: the loop's `sigtimedwait` takes it).
fn read_lifeline() -> Result<Vec<(String, String)>, String> {
    use std::io::{BufRead, Read};
    let mut stdin = std::io::BufReader::new(std::io::stdin());
    let mut first = String::new();
    stdin.read_line(&mut first).map_err(|e| format!("cannot read the environment line: {e}"))?;
    let env: std::collections::BTreeMap<String, String> = match first.trim() {
        "" => Default::default(),
        line => serde_json::from_str(line).map_err(|e| format!("the environment line is not a JSON object: {e}"))?,
    };
    std::thread::spawn(move || {
        let mut sink = [0u8; 512];
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        LIFELINE_CUT.store(true, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: kill(2) on this process.
        unsafe {
            libc::kill(libc::getpid(), PARENT_DEATH_SIGNAL);
        }
    });
    Ok(env.into_iter().filter(|(name, _)| !name.is_empty() && !name.contains('=')).collect())
}

/// Whether the guard's reason to live is gone: its parent (batond) or its lifeline.
fn abandoned(args: &GuardArgs) -> bool {
    match args.parent {
        Some(parent) if !args.lifeline => parent_gone(parent),
        _ => LIFELINE_CUT.load(std::sync::atomic::Ordering::SeqCst),
    }
}

fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in signals {
            libc::sigaddset(&mut set, *signal);
        }
        set
    }
}

/// Runs the guard; never returns.
pub fn run(args: GuardArgs) -> ! {
    let handled = [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP, PARENT_DEATH_SIGNAL];
    let set = signal_set(&handled);
    // SAFETY: prctl and sigprocmask change only this (single-threaded) process.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let env = if args.lifeline {
        match read_lifeline() {
            Ok(env) => env,
            Err(e) => {
                eprintln!("agent-guard: {e}");
                std::process::exit(2);
            }
        }
    } else {
        Vec::new()
    };
    if abandoned(&args) {
        // batond died before the signal could be caught: nothing was started.
        std::process::exit(1);
    }
    let (program, rest) = match args.command.split_first() {
        Some(split) => split,
        None => {
            eprintln!("agent-guard: no command");
            std::process::exit(2);
        }
    };
    let mut command = Command::new(program);
    command.args(rest).envs(env);
    if let Some(cwd) = &args.cwd {
        command.current_dir(cwd);
    }
    if args.lifeline {
        command.stdin(std::process::Stdio::null());
    }
    // SAFETY: sigprocmask and prctl are async-signal-safe and change only the new process.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            // The mask is inherited across exec: the agent gets the signals the guard waits for.
            let empty = signal_set(&[]);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let agent = match command.spawn() {
        Ok(child) => child.id() as i32,
        Err(e) => {
            eprintln!("cannot start {}: {e}", program.to_string_lossy());
            std::process::exit(if e.kind() == std::io::ErrorKind::PermissionDenied { 126 } else { 127 });
        }
    };
    if !args.lifeline {
        release_pipes();
    }
    loop {
        let signal = wait_signal(&set);
        match signal {
            Some(libc::SIGCHLD) => {
                if let Some(status) = reap(agent) {
                    kill_descendants();
                    exit_like(status);
                }
            }
            Some(libc::SIGTERM | libc::SIGINT | libc::SIGHUP) => {
                // SAFETY: kill(2) on the agent's pid, which the guard has not reaped.
                unsafe {
                    libc::kill(agent, signal.unwrap_or(libc::SIGTERM));
                }
            }
            // The parent-death signal, or a periodic check.
            _ => {
                if abandoned(&args) {
                    kill_descendants();
                    std::process::exit(1);
                }
            }
        }
    }
}

fn parent_gone(parent: u32) -> bool {
    // SAFETY: getppid has no preconditions.
    let now = unsafe { libc::getppid() };
    now as u32 != parent
}

/// stdin and stdout are the agent's: the guard's copies would keep them open after the agent
/// closed them. They become /dev/null.
fn release_pipes() {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        // SAFETY: dup2 onto the standard descriptors, which this process owns.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
        }
    }
}

/// Waits for one of the blocked signals, or the poll interval.
fn wait_signal(set: &libc::sigset_t) -> Option<i32> {
    let timeout = libc::timespec { tv_sec: PARENT_POLL.as_secs() as libc::time_t, tv_nsec: 0 };
    // SAFETY: sigtimedwait reads the set and writes no info (null).
    let signal = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) };
    (signal > 0).then_some(signal)
}

/// Reaps every child that ended; the agent's wait status once it is among them.
fn reap(agent: i32) -> Option<i32> {
    let mut agent_status = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return agent_status;
        }
        if pid == agent {
            agent_status = Some(status);
        }
    }
}

/// The guard's descendants: as a subreaper, every process of the agent's tree is one.
fn descendants() -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, proc_ppid(pid)?)))
        .collect();
    let mut found = vec![me];
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid) in &parents {
            if found.contains(ppid) && !found.contains(pid) {
                found.push(*pid);
                grew = true;
            }
        }
    }
    found.retain(|pid| *pid != me);
    found
}

/// Kills every descendant with SIGKILL and reaps them, until none is left (a process forked
/// meanwhile is found on the next round; its orphans come to the guard).
fn kill_descendants() {
    for _ in 0..50 {
        let members = descendants();
        if members.is_empty() {
            return;
        }
        for pid in &members {
            // SAFETY: kill(2) on a descendant's pid.
            unsafe {
                libc::kill(*pid as i32, libc::SIGKILL);
            }
        }
        // Killed processes vanish only once the signal is delivered and they are reaped.
        std::thread::sleep(Duration::from_millis(10));
        reap(-1);
    }
}

/// Exits as the agent did: with its code, or killed by the same signal.
fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: the default action for the signal, unblocked, then raised on this process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            let only = signal_set(&[signal]);
            libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            libc::raise(signal);
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(libc::WEXITSTATUS(status));
}
