//! batond's files are its user's alone: the server runs with the file mode creation mask 077,
//! so that everything it creates in the data dir (logs, agent logs, the lock, the URL file, the
//! runtime id, files of libraries it uses such as the daily log) is private from the first
//! moment, not made private by the next start. What batond creates for the user instead (an
//! agent's file writes in its working directory) and the programs it starts (agents, git, the
//! notify command) keep the mask the user started batond with.

use std::sync::OnceLock;

/// The mask batond was started with.
static USER_MASK: OnceLock<libc::mode_t> = OnceLock::new();

/// Sets the mask 077 for this process, remembering the user's. Called once, at the start of the
/// server, before it creates anything.
pub fn make_private() {
    // SAFETY: umask only swaps the process's mask; it cannot fail.
    let user = unsafe { libc::umask(0o077) };
    let _ = USER_MASK.set(user);
}

/// The mode a file batond created for the user must be given afterwards (the kernel applied
/// batond's private mask when creating it): 0666 under the user's mask. None when this process
/// kept the user's mask, which the kernel applied already.
pub fn user_file_mode() -> Option<u32> {
    USER_MASK.get().map(|mask| 0o666 & !*mask)
}

/// Makes `command` start its program with the user's mask, not batond's private one (nothing to
/// do in a process that kept the user's).
pub fn for_user(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    let Some(&mask) = USER_MASK.get() else { return command };
    // SAFETY: umask is async-signal-safe and touches nothing shared with the parent.
    unsafe {
        command.pre_exec(move || {
            libc::umask(mask);
            Ok(())
        })
    }
}
