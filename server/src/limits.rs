//! File descriptors. Every agent takes three of batond's (its stdio pipes; its end is waited for
//! without a descriptor and its log is open only while it writes), so the soft `RLIMIT_NOFILE`
//! of a stock login (1,024) would cap batond at a few hundred agents while the hard limit allows
//! far more: batond and the agent host raise their soft limit to the hard one at start, as many
//! servers do. `batond status` shows the figure and what is open; running out is said plainly
//! (it does not pass until agents stop or the limit is raised).

/// Descriptors one agent takes in batond: its stdin, stdout and stderr pipes (its log file
/// only while it writes to stderr; see `agent::runtime::AgentLog::rest`).
pub const DESCRIPTORS_PER_AGENT: u64 = 3;

/// The highest soft limit asked for: beyond it a descriptor table only costs memory.
const MOST: u64 = 1 << 20;

/// The descriptor limit after [`raise_descriptor_limit`]: what it was and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorLimit {
    pub before: u64,
    pub now: u64,
}

/// Raises this process's soft descriptor limit to its hard limit (at most 2^20).
pub fn raise_descriptor_limit() -> std::io::Result<DescriptorLimit> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before: u64 = limit.rlim_cur;
    let wanted = limit.rlim_max.min(MOST);
    if wanted <= before {
        return Ok(DescriptorLimit { before, now: before });
    }
    let raised = libc::rlimit { rlim_cur: wanted, rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(DescriptorLimit { before, now: wanted })
}

/// A process's open descriptors and its soft limit, from /proc.
pub fn of_process(pid: u32) -> Option<(u64, u64)> {
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    Some((open, soft_limit(&limits)?))
}

/// The soft "Max open files" of a /proc/PID/limits text.
fn soft_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

/// The `batond status` line of a running batond's descriptors.
pub fn status_line(pid: u32) -> Option<String> {
    let (open, limit) = of_process(pid)?;
    let room = limit.saturating_sub(open) / DESCRIPTORS_PER_AGENT;
    Some(format!("descriptors: {open} open of {limit} allowed (room for about {room} more agents)"))
}

/// What an agent start that found no descriptor left says: not "temporary", since it lasts
/// until agents stop or the limit is raised.
pub fn out_of_descriptors() -> String {
    let (open, limit) = of_process(std::process::id()).unwrap_or_default();
    format!(
        "batond is out of file descriptors ({open} open, its limit is {limit}, about {DESCRIPTORS_PER_AGENT} per agent): \
         stop agents it runs, or raise the limit (`ulimit -n` in the shell that starts batond, LimitNOFILE= for a \
         service) and restart it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_read_from_proc() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max open files            1024                 524288               files\n";
        assert_eq!(soft_limit(text), Some(1024));
        let (open, limit) = of_process(std::process::id()).expect("this process");
        assert!(open > 0 && limit >= open, "{open} of {limit}");
    }
}
