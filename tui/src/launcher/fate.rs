//! What became of a local server we lost, read from its data dir: `batond` writes
//! `DATA_DIR/batond.url` when it starts listening and removes it on a clean shutdown, so a file
//! left behind means a crash (kill -9, out of memory); and it holds `DATA_DIR/batond.lock`
//! (flock) for as long as it runs, shutting down included.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::server_url::ServerAddr;

/// Written by batond at start with the URL it listens on (and a newline), removed when it stops
/// cleanly.
pub const URL_FILE: &str = "batond.url";
/// Held (flock) by the batond serving the data dir.
const LOCK_FILE: &str = "batond.lock";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// `batond.url` names our server: it did not shut down cleanly, or is still shutting down.
    Ours,
    /// No `batond.url`: the server of this data dir was stopped on purpose (or never ran).
    Stopped,
    /// `batond.url` names another URL: our data dir serves another server, not the one lost.
    Elsewhere(String),
}

/// Reads `data_dir/batond.url` against the URL we connect to.
pub fn fate(data_dir: &Path, url: &str) -> Fate {
    match std::fs::read_to_string(data_dir.join(URL_FILE)) {
        Ok(written) if same_server(written.trim(), url) => Fate::Ours,
        Ok(written) if !written.trim().is_empty() => Fate::Elsewhere(written.trim().to_string()),
        // Empty: batond had not finished writing it; nothing names another server.
        Ok(_) => Fate::Ours,
        Err(_) => Fate::Stopped,
    }
}

/// The same URL, or the same address and path spelled differently (`localhost` for
/// `127.0.0.1`): batond writes the address it bound, which is the one we asked it to listen on.
fn same_server(written: &str, url: &str) -> bool {
    if written == url {
        return true;
    }
    let path = |u: &str| u.split_once("://").and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_string()));
    match (ServerAddr::from_url(written), ServerAddr::from_url(url)) {
        (Ok(a), Ok(b)) => a.listen_arg() == b.listen_arg() && path(written) == path(url),
        _ => false,
    }
}

/// A batond runs on `data_dir` (serving, or shutting down and stopping its agents).
///
/// Found by taking its lock shared, without waiting, and letting it go at once. A batond starting
/// at that very instant would find the lock taken and exit as "already in use"; the launcher
/// that started it then connects to whoever serves, so the cost is a retry, not a failure.
pub fn data_dir_in_use(data_dir: &Path) -> bool {
    let Ok(file) = File::open(data_dir.join(LOCK_FILE)) else {
        // No lock file: no batond ever ran here.
        return false;
    };
    // SAFETY: flock on a descriptor we own, released by LOCK_UN (and when `file` is closed).
    unsafe {
        if libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 {
            return true;
        }
        libc::flock(file.as_raw_fd(), libc::LOCK_UN);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "ws://127.0.0.1:7777/ws";

    #[test]
    fn the_url_file_says_whether_the_lost_server_was_ours_and_crashed() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(fate(dir.path(), URL), Fate::Stopped);
        // batond ends the file with a newline.
        std::fs::write(dir.path().join(URL_FILE), format!("{URL}\n")).expect("write");
        assert_eq!(fate(dir.path(), URL), Fate::Ours);
        assert_eq!(fate(dir.path(), "ws://localhost:7777/ws"), Fate::Ours);
        assert_eq!(fate(dir.path(), "ws://127.0.0.1:7778/ws"), Fate::Elsewhere(URL.to_string()));
        assert_eq!(fate(dir.path(), "ws://127.0.0.1:7777"), Fate::Elsewhere(URL.to_string()));
    }

    #[test]
    fn a_held_lock_means_a_batond_runs_there() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(!data_dir_in_use(dir.path()));
        let held = File::create(dir.path().join(LOCK_FILE)).expect("lock file");
        assert!(!data_dir_in_use(dir.path()));
        // SAFETY: flock on a descriptor this test owns.
        unsafe {
            assert_eq!(libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB), 0);
        }
        assert!(data_dir_in_use(dir.path()));
        drop(held);
        assert!(!data_dir_in_use(dir.path()));
    }
}
