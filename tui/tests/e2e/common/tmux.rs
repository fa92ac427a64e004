//! The real `baton` in a tmux pane of fixed size: keys go in with `send-keys`, the screen is
//! read with `capture-pane` and polled with a bound until it shows what a test waits for.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use baton_protocol::TaskCreateParams;
use baton_testkit::{batond_path, Server, ServerBuilder};

pub const WAIT: Duration = Duration::from_secs(30);

/// Whether tmux runs here (without it a test says so and does nothing); `batond` is found (or
/// built) by the testkit, next to `baton`.
pub fn tools() -> bool {
    if !Tmux::available() {
        return false;
    }
    let batond = batond_path();
    let beside_baton = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("batond");
    assert!(batond.is_file() && beside_baton.is_file(), "no batond next to baton ({})", batond.display());
    true
}

/// `batond` on `data_dir` with one task of the mock agent per title, not started, working in
/// `workdir`, created in order (the last is the newest, on top of the list).
pub fn server_with_tasks(data_dir: &Path, workdir: &Path, titles: &[&str]) -> Server {
    let server = ServerBuilder::new(data_dir).start_blocking();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (client, _notifications) = server.client().await;
        for title in titles {
            let mut params = TaskCreateParams::new(*title, "", "mock");
            params.workdir = Some(workdir.display().to_string());
            params.start = false;
            client.request(params).await.expect("task.create");
        }
        client.close();
    });
    server
}

/// `baton` against `server` with extra `args`, its data dir `tui_dir` apart from the server's
/// (the token goes in the environment), never starting a server of its own.
pub fn baton_command(server: &Server, tui_dir: &Path, args: &str) -> String {
    let baton = env!("CARGO_BIN_EXE_baton");
    format!(
        "BATON_TOKEN='{}' '{baton}' --server '{}' --no-spawn --data-dir '{}' {args}",
        server.token.as_deref().unwrap_or_default(),
        server.url,
        tui_dir.display()
    )
}

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
