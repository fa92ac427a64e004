//! Exclusive lock files: one server per data dir, one agent host per data dir.

use std::path::Path;

use anyhow::Context;

/// Takes an exclusive `flock` on `path` (created if missing) without waiting: Some(file) holds
/// the lock until the file is closed or the process dies (even by SIGKILL); None when another
/// process holds it.
pub fn try_lock(path: &Path) -> anyhow::Result<Option<std::fs::File>> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // SAFETY: flock on a file descriptor we own.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    Ok(locked.then_some(file))
}
