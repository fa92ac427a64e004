//! The real `baton` in a tmux pane of fixed size: keys go in with `send-keys`, the screen is
//! read with `capture-pane` and polled with a bound until it shows what a test waits for.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const WAIT: Duration = Duration::from_secs(30);

/// A tmux server on its own socket (no user config), killed when dropped.
pub struct Tmux {
    pub socket: PathBuf,
}

impl Tmux {
    /// Whether tmux runs here (without it the tests say so and do nothing).
    pub fn available() -> bool {
        let ok = Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("skipped: needs tmux");
        }
        ok
    }

    /// Runs `command` in a detached session `baton` of `width` x `height`.
    pub fn start(dir: &Path, width: u16, height: u16, command: &str) -> Tmux {
        let tmux = Tmux { socket: dir.join("tmux.sock") };
        let (width, height) = (width.to_string(), height.to_string());
        tmux.run(&["-f", "/dev/null", "new-session", "-d", "-s", "baton", "-x", &width, "-y", &height, command]);
        tmux
    }

    pub fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output().expect("run tmux");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "baton"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "baton", "-l", text]);
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "baton"])
    }

    /// Polls the screen until `ready` holds; panics with the last screen after `WAIT`.
    pub fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen was:\n{screen}");
            }
            // tmux has no "screen changed" event to wait on; polling is bounded by WAIT.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(text, |screen| screen.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}
