//! Memory given back after a large piece of work. A turn whose answer is megabytes long costs
//! far more than its size while it is saved: SQLite's full-text index builds its entries for the
//! joined message in memory (600,000 distinct words: about 110 MB), and a `message.list` that
//! returns it serialises it once more. Both free what they used, but glibc's allocator keeps the
//! freed small blocks in its heaps, so batond's resident memory stayed at the peak (about 7 times
//! the answer) until it exited. `malloc_trim` hands the free pages back to the system.
//!
//! Written by hand: it is one call into the C library (SQLite allocates with it, not with Rust's
//! allocator, so an allocator crate would not reach those blocks), made only after work that
//! large, and at most once a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Work that used at least this many bytes is followed by a trim.
pub const LARGE: usize = 1 << 20;

/// The shortest time between two trims (each walks the allocator's heaps: milliseconds).
const SPACING: Duration = Duration::from_secs(1);

static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// After work that allocated `bytes` and freed them: hands the free memory back to the system
/// when the work was large ([`LARGE`]) and no trim ran in the last second.
pub fn give_back_after(bytes: usize, what: &str) {
    if bytes < LARGE {
        return;
    }
    {
        let Ok(mut last) = LAST.lock() else { return };
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < SPACING) {
            return;
        }
        *last = Some(now);
    }
    trim(bytes, what);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim(bytes: usize, what: &str) {
    let started = Instant::now();
    // SAFETY: malloc_trim only returns free memory of the allocator's heaps to the system; it
    // touches no block in use and is safe to call from any thread at any time.
    let released = unsafe { libc::malloc_trim(0) };
    tracing::debug!(bytes, what, released = released == 1, took = ?started.elapsed(), "gave memory back");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim(_bytes: usize, _what: &str) {}

/// Most malloc arenas glibc keeps (`M_ARENA_MAX`), unless `MALLOC_ARENA_MAX` says otherwise.
/// glibc gives each thread that meets contention an arena of its own, up to eight per core, and
/// each arena keeps what it freed: batond's runtime and SQLite threads held tens of MB of freed
/// memory apart after a large turn. Four arenas keep the contention low on the runtime's
/// workers and let a trim reach most of what was freed.
const ARENAS: libc::c_int = 4;

/// Bounds glibc's malloc arenas ([`ARENAS`]); called first thing in `main`, before other threads
/// start, so that every thread shares them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: mallopt only sets one of the allocator's parameters; no thread runs yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}
