//! Whether the kernel killed an agent for memory: the agent host's memory cgroup (a container's,
//! a systemd unit's) counts the processes its limit killed (`oom_kill` in cgroup v2's
//! `memory.events`, v1's `memory.oom_control`). An agent that ends by SIGKILL while that count
//! grew was killed for memory; its exit says so, with the limit, instead of "signal 9".
//! Read from /proc and /sys by hand: two small text files, no crate reads them.

use std::path::PathBuf;

/// The memory cgroup of this process: where its `oom_kill` count and its limit are read.
#[derive(Debug, Clone)]
pub struct MemoryCgroup {
    /// `memory.events` (v2) or `memory.oom_control` (v1).
    events: PathBuf,
    /// `memory.max` (v2) or `memory.limit_in_bytes` (v1).
    limit: PathBuf,
}

impl MemoryCgroup {
    /// This process's memory cgroup, if the machine has one it can read.
    pub fn own() -> Option<MemoryCgroup> {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        for line in cgroups.lines() {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let path = path.trim_start_matches('/');
            let (root, events, limit) = if controllers.is_empty() {
                ("/sys/fs/cgroup", "memory.events", "memory.max")
            } else if controllers.split(',').any(|c| c == "memory") {
                ("/sys/fs/cgroup/memory", "memory.oom_control", "memory.limit_in_bytes")
            } else {
                continue;
            };
            // Inside a container the cgroup is mounted at the root, whatever path it has outside.
            for dir in [PathBuf::from(root).join(path), PathBuf::from(root)] {
                if dir.join(events).is_file() {
                    return Some(MemoryCgroup { events: dir.join(events), limit: dir.join(limit) });
                }
            }
        }
        None
    }

    /// How many processes its limit has killed so far.
    pub fn oom_kills(&self) -> Option<u64> {
        let text = std::fs::read_to_string(&self.events).ok()?;
        text.lines().find_map(|line| line.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok())
    }

    /// Its limit in bytes (None: unlimited, or unreadable).
    pub fn limit(&self) -> Option<u64> {
        let text = std::fs::read_to_string(&self.limit).ok()?;
        // v1 says "no limit" with a huge number, v2 with "max".
        text.trim().parse().ok().filter(|bytes| *bytes < 1 << 60)
    }

    /// What an agent's exit says when the count grew since `before`: "was killed for memory
    /// (the memory limit of its cgroup, 128 MiB, was reached)".
    pub fn killed_for_memory(&self, before: Option<u64>) -> Option<String> {
        let (before, now) = (before?, self.oom_kills()?);
        if now <= before {
            return None;
        }
        Some(match self.limit() {
            Some(bytes) => format!(
                "was killed for memory (the memory limit of its cgroup, {} MiB, was reached)",
                bytes / (1024 * 1024)
            ),
            None => "was killed for memory (the kernel ran out of it)".to_string(),
        })
    }
}

/// The words that start an exit's cause when the agent was killed for memory.
pub const KILLED_FOR_MEMORY: &str = "was killed for memory";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_read_from_either_version_and_a_grown_count_is_a_memory_kill() {
        let dir = tempfile::tempdir().unwrap();
        let v2 = MemoryCgroup { events: dir.path().join("memory.events"), limit: dir.path().join("memory.max") };
        std::fs::write(&v2.events, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n").unwrap();
        std::fs::write(&v2.limit, "134217728\n").unwrap();
        assert_eq!(v2.oom_kills(), Some(1));
        assert_eq!(v2.killed_for_memory(Some(1)), None, "nothing killed since");
        let said = v2.killed_for_memory(Some(0)).unwrap();
        assert_eq!(said, "was killed for memory (the memory limit of its cgroup, 128 MiB, was reached)");
        std::fs::write(&v2.limit, "max\n").unwrap();
        assert_eq!(v2.killed_for_memory(Some(0)).unwrap(), "was killed for memory (the kernel ran out of it)");
        let v1 = MemoryCgroup { events: dir.path().join("oom_control"), limit: dir.path().join("limit") };
        std::fs::write(&v1.events, "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n").unwrap();
        std::fs::write(&v1.limit, "9223372036854771712\n").unwrap();
        assert_eq!((v1.oom_kills(), v1.limit()), (Some(4), None));
        assert_eq!(v1.killed_for_memory(None), None, "no count before: nothing is claimed");
    }
}
