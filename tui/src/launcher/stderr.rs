//! What a `batond` we start writes to stderr. Each launch writes its own file, so that two
//! `baton`s starting a server at once do not write over each other's (one batond's "listening"
//! line was once quoted as the other's reason to fail). The file of a server that runs, or that
//! failed, is then renamed to `DATA_DIR/batond.stderr`; that of a batond that only found another
//! one in its place is removed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

/// What `batond` writes to stderr, in its data dir: the output of the last server started.
pub const STDERR_FILE: &str = "batond.stderr";
/// Lines of batond's stderr quoted when it exits before answering.
const QUOTE_LINES: usize = 8;
/// The most of batond's stderr read at a time (what it said last, or first).
const READ_AT_MOST: u64 = 16 * 1024;

/// One launch's stderr file, `DATA_DIR/batond.stderr.PID-N` until [`LaunchStderr::keep`] or
/// [`LaunchStderr::discard`].
pub struct LaunchStderr {
    path: PathBuf,
    final_path: PathBuf,
}

impl LaunchStderr {
    /// Creates this launch's file and returns it with the handle the server writes to.
    pub fn create(data_dir: &Path) -> Result<(LaunchStderr, File)> {
        // The pid keeps two baton processes apart, the counter two launches of one.
        static LAUNCHES: AtomicU32 = AtomicU32::new(0);
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let path = data_dir.join(format!("{STDERR_FILE}.{}-{n}", std::process::id()));
        let file = File::create(&path).with_context(|| format!("could not create {}", path.display()))?;
        Ok((LaunchStderr { path, final_path: data_dir.join(STDERR_FILE) }, file))
    }

    /// What the server said last; see [`quote`].
    pub fn quote(&self) -> Option<String> {
        quote(&self.path)
    }

    /// The server said it is upgrading its database before it answers
    /// ([`baton_protocol::UPGRADING_DATABASE`]).
    pub fn says_upgrading(&self) -> bool {
        says_upgrading(&self.path)
    }

    /// Where the output is kept: `batond.stderr` (also while the server runs and writes to it).
    pub fn final_path(&self) -> &Path {
        &self.final_path
    }

    /// Keeps the output as `batond.stderr`. A failure leaves it under its launch name, which
    /// is logged: the output is still there to read.
    pub fn keep(self) {
        if let Err(error) = std::fs::rename(&self.path, &self.final_path) {
            tracing::warn!("could not rename {} to {}: {error}", self.path.display(), self.final_path.display());
        }
    }

    /// The server only found another in its place: its output says nothing worth keeping.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The server exited because another batond holds the data dir (it is starting or running), or
/// something holds the port: someone else is starting a server there.
pub fn someone_else_serves(said: &str) -> bool {
    said.contains("another batond is already using")
        || (said.contains("cannot listen on") && said.contains("Address already in use"))
}

/// The output at `path` says the server is upgrading its database: a line of batond's log
/// with its words for it. Only the start of the file is read: the line comes before the server
/// answers.
pub fn says_upgrading(path: &Path) -> bool {
    let Ok(file) = File::open(path) else { return false };
    let mut bytes = Vec::new();
    if file.take(READ_AT_MOST).read_to_end(&mut bytes).is_err() {
        return false;
    }
    String::from_utf8_lossy(&bytes)
        .lines()
        .any(|line| log_level(line).is_some() && line.contains(baton_protocol::UPGRADING_DATABASE))
}

/// What a server that would not start said: from its last ERROR line to the end (an error chain
/// may span lines, a TOML parse error does) but no further log line, else the last line that is
/// not a log line of another level (a panic); at most a few lines. INFO lines are never quoted:
/// they say what went right. Only the end of the file is read: a server that ran for days may
/// have written a lot.
pub fn quote(path: &Path) -> Option<String> {
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(READ_AT_MOST))).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let start = lines
        .iter()
        .rposition(|line| log_level(line) == Some("ERROR"))
        .or_else(|| lines.iter().rposition(|line| log_level(line).is_none()))?;
    let continued = lines[start + 1..].iter().take_while(|line| log_level(line).is_none());
    let mut quoted: Vec<String> =
        std::iter::once(&lines[start]).chain(continued).take(QUOTE_LINES).map(|l| l.to_string()).collect();
    let first = quoted.first_mut()?;
    *first = without_log_prefix(first);
    Some(quoted.join("\n"))
}

/// The level of a tracing line (`2025-06-02T14:03:11.512Z ERROR batond: …`), `None` for any other
/// line (a panic, the continuation of a multi-line error).
fn log_level(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    let time = words.next()?;
    let level = words.next()?;
    let is_time = time.starts_with(|c: char| c.is_ascii_digit()) && time.contains('T');
    let is_level = matches!(level, "ERROR" | "WARN" | "INFO" | "DEBUG" | "TRACE");
    (is_time && is_level).then_some(level)
}

/// `2025-06-02T14:03:11.512Z ERROR batond: cannot listen…` → `cannot listen…`: the time, level
/// and target of a tracing line say nothing the user needs.
fn without_log_prefix(line: &str) -> String {
    let Some((_, message)) = line.split_once(" ERROR ") else {
        return line.trim().to_string();
    };
    let message = message.trim();
    match message.split_once(": ") {
        Some((target, rest))
            if !target.is_empty() && target.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':') =>
        {
            rest.to_string()
        }
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(text: &str) -> Option<String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(STDERR_FILE);
        std::fs::write(&path, text).expect("write");
        quote(&path)
    }

    #[test]
    fn the_quote_starts_at_the_last_error_and_drops_the_log_prefix() {
        let lines = "2026-01-01T00:00:00Z  INFO batond: starting\n\
                     2026-01-01T00:00:00Z ERROR batond: old failure\n\
                     2026-01-01T00:00:01Z ERROR batond: invalid agents.toml: TOML parse error at line 1\n  |\n1 | [[agent\n";
        assert_eq!(quoted(lines).as_deref(), Some("invalid agents.toml: TOML parse error at line 1\n  |\n1 | [[agent"));
        assert_eq!(
            quoted("thread 'main' panicked at src/main.rs:1:1\n").as_deref(),
            Some("thread 'main' panicked at src/main.rs:1:1")
        );
        assert_eq!(quoted(""), None);
    }

    #[test]
    fn only_a_log_line_of_batond_says_it_is_upgrading() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(STDERR_FILE);
        assert!(!says_upgrading(&path), "no output yet");
        std::fs::write(&path, "2026-01-01T00:00:00Z  INFO batond: starting\n").expect("write");
        assert!(!says_upgrading(&path));
        std::fs::write(&path, "some tool printed: upgrading the database\n").expect("write");
        assert!(!says_upgrading(&path), "not a line of the log");
        std::fs::write(
            &path,
            "2026-01-01T00:00:00Z  INFO batond: starting\n\
             2026-01-01T00:00:00Z  WARN baton_server::store::migrate: upgrading the database: 1 change(s) to apply first\n",
        )
        .expect("write");
        assert!(says_upgrading(&path));
    }

    /// The failure of the acceptance round: the other server's "listening" line was quoted.
    #[test]
    fn info_lines_are_never_quoted() {
        let other = "2026-01-01T00:00:00Z  INFO batond: batond listening url=ws://127.0.0.1:7777/ws\n";
        assert_eq!(quoted(other), None);
        let error_then_info = "2026-01-01T00:00:00Z ERROR batond: cannot listen on 127.0.0.1:7777: Address already in use (os error 98)\n\
                               2026-01-01T00:00:00Z  INFO batond: batond listening url=ws://127.0.0.1:7777/ws\n";
        assert_eq!(
            quoted(error_then_info).as_deref(),
            Some("cannot listen on 127.0.0.1:7777: Address already in use (os error 98)")
        );
    }

    #[test]
    fn another_server_in_the_data_dir_or_on_the_port_is_someone_else_starting() {
        assert!(someone_else_serves("another batond is already using /tmp/x (it listens on ws://127.0.0.1:7/ws)"));
        assert!(someone_else_serves("cannot listen on 127.0.0.1:7777: Address already in use (os error 98)"));
        assert!(!someone_else_serves("agents.toml is invalid: TOML parse error at line 2"));
    }

    #[test]
    fn each_launch_writes_its_own_file_and_keeps_it_as_batond_stderr() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (first, _) = LaunchStderr::create(dir.path()).expect("first");
        let (second, _) = LaunchStderr::create(dir.path()).expect("second");
        assert_ne!(first.path, second.path);
        std::fs::write(&first.path, "2026-01-01T00:00:00Z ERROR batond: boom\n").expect("write");
        first.keep();
        second.discard();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        assert_eq!(names, vec![STDERR_FILE.to_string()]);
    }
}
