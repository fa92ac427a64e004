//! Session files under `<state-dir>/sessions/`, so that a fresh mock process
//! can load or resume what an earlier (killed) one did.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct SessionFile {
    /// Only a fallback: load and resume normally bring their own cwd.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub history: Vec<Entry>,
    #[serde(default)]
    pub memory: Option<String>,
    /// The session this one was forked from (`session/fork`).
    #[serde(default)]
    pub forked_from: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Entry {
    pub role: Role,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Role {
    User,
    Agent,
}

pub(super) struct Store {
    dir: PathBuf,
    tmp_counter: AtomicU64,
}

impl Store {
    pub(super) fn open(state_dir: &Path) -> anyhow::Result<Store> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = state_dir.join("sessions");
        // Conversations, kept in batond's data dir by default: private like the rest of it.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create session directory {}: {e}", dir.display()))?;
        Ok(Store { dir, tmp_counter: AtomicU64::new(0) })
    }

    /// `Ok(None)` covers every "no such session", including ids that could
    /// not name a file of ours, so clients get the same -32002 for all.
    pub(super) fn load(&self, session_id: &str) -> Result<Option<SessionFile>, String> {
        let Some(path) = self.path(session_id) else {
            return Ok(None);
        };
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| format!("corrupt session file {}: {e}", path.display()))
    }

    /// Write-then-rename, so a process killed mid-save leaves either the old
    /// file or the new one, never a torn one.
    pub(super) fn save(&self, session_id: &str, file: &SessionFile) -> Result<(), String> {
        let path = self.path(session_id).ok_or_else(|| format!("invalid session id {session_id:?}"))?;
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(".{session_id}.{}.{n}.tmp", std::process::id()));
        let bytes = serde_json::to_vec(file).map_err(|e| e.to_string())?;
        let written = {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .and_then(|mut out| out.write_all(&bytes))
        };
        written.and_then(|()| std::fs::rename(&tmp, &path)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })
    }

    /// Session ids come from the client; anything that could escape the
    /// sessions directory is refused rather than sanitised.
    fn path(&self, session_id: &str) -> Option<PathBuf> {
        let valid = !session_id.is_empty()
            && session_id.len() <= 200
            && session_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        valid.then(|| self.dir.join(format!("{session_id}.json")))
    }
}
