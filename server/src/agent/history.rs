//! Conversation history for agents that cannot restore their own context (see docs/RESUME.md,
//! 'History injection'). Recorded as JSONL at `{data_dir}/sessions/{session_id}.jsonl` and
//! injected once into the first prompt after a fresh start.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest user/agent message kept in the injected context, in characters.
pub const MESSAGE_LIMIT: usize = 2000;
/// Longest tool result kept in the injected context, in characters.
pub const TOOL_RESULT_LIMIT: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    UserMessage,
    AgentMessage,
    ToolCall,
    ToolResult,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub timestamp: String,
    #[serde(rename = "type")]
    pub entry_type: EntryType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_status: Option<String>,
    pub session_id: String,
}

impl HistoryEntry {
    pub fn new(session_id: &str, entry_type: EntryType, content: impl Into<String>) -> Self {
        let role = match entry_type {
            EntryType::UserMessage => Some("user".to_string()),
            EntryType::AgentMessage => Some("assistant".to_string()),
            _ => None,
        };
        HistoryEntry {
            timestamp: baton_protocol::now_timestamp(),
            entry_type,
            role,
            content: content.into(),
            tool_name: None,
            tool_call_id: None,
            tool_status: None,
            session_id: session_id.to_string(),
        }
    }

    pub fn tool(
        session_id: &str,
        entry_type: EntryType,
        name: &str,
        id: &str,
        status: Option<&str>,
        content: impl Into<String>,
    ) -> Self {
        let mut entry = Self::new(session_id, entry_type, content);
        entry.tool_name = Some(name.to_string());
        entry.tool_call_id = Some(id.to_string());
        entry.tool_status = status.map(str::to_owned);
        entry
    }
}

/// The history files of all sessions.
#[derive(Debug, Clone)]
pub struct HistoryStore {
    dir: PathBuf,
}

impl HistoryStore {
    pub fn new(data_dir: &Path) -> Self {
        HistoryStore { dir: data_dir.join("sessions") }
    }

    /// The session's history file. Ids are validated at the protocol boundary; here every
    /// character but ASCII letters, digits, `-` and `_` becomes `_` as well, so no id can name
    /// a file outside `sessions/` (no `/`, no `..`, no NUL).
    pub fn path(&self, session_id: &str) -> PathBuf {
        let name: String = session_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .collect();
        self.dir.join(format!("{name}.jsonl"))
    }

    pub fn append(&self, entry: &HistoryEntry) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        // Conversations are for their owner only: the directory 0700, the files 0600.
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir)?;
        let mut line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut file =
            std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(self.path(&entry.session_id))?;
        file.write_all(line.as_bytes())
    }

    /// Deletes the session's history file and any set aside by older versions (task deletion).
    pub fn remove(&self, session_id: &str) -> std::io::Result<()> {
        let path = self.path(session_id);
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            return Ok(());
        };
        let aside_prefix = format!("{name}.before-");
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let file_name = file_name.to_string_lossy();
            if file_name == name || file_name.starts_with(&aside_prefix) {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }

    /// Starts `target`'s history as a copy of `source`'s (a fork): every readable entry,
    /// re-labelled with the target session. No history is no copy.
    pub fn copy(&self, source: &str, target: &str) -> std::io::Result<()> {
        for mut entry in self.read(source) {
            entry.session_id = target.to_string();
            self.append(&entry)?;
        }
        Ok(())
    }

    /// HasHistory: the file exists and is not empty.
    pub fn has_history(&self, session_id: &str) -> bool {
        std::fs::metadata(self.path(session_id)).map(|m| m.len() > 0).unwrap_or(false)
    }

    /// Every readable entry; malformed lines are skipped, a missing file is no history.
    pub fn read(&self, session_id: &str) -> Vec<HistoryEntry> {
        let Ok(bytes) = std::fs::read(self.path(session_id)) else {
            return Vec::new();
        };
        let (entries, skipped) = parse_history(&bytes);
        if skipped > 0 {
            tracing::warn!(session_id, skipped, "skipped malformed history lines");
        }
        entries
    }

    /// GenerateResumeContext: the prompt wrapped with the recorded history, or the prompt
    /// unchanged when there is nothing to inject.
    pub fn generate_resume_context(&self, session_id: &str, prompt: &str) -> String {
        render_resume_context(&self.read(session_id), prompt)
    }
}

/// Decodes a history file: one JSON entry per line. Blank lines are ignored; lines that are
/// not an entry (malformed JSON, invalid UTF-8, wrong fields) are skipped and counted.
pub fn parse_history(bytes: &[u8]) -> (Vec<HistoryEntry>, usize) {
    let mut skipped = 0;
    let entries = bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| match serde_json::from_slice(line) {
            Ok(entry) => Some(entry),
            Err(_) => {
                skipped += 1;
                None
            }
        })
        .collect();
    (entries, skipped)
}

/// Cuts `text` to at most `limit` characters (never inside a character), marking the cut.
pub fn truncate_chars(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((byte, _)) => format!("{}... [truncated]", &text[..byte]),
        None => text.to_string(),
    }
}

/// GenerateResumeContext's format (docs/RESUME.md, 'History injection').
pub fn render_resume_context(entries: &[HistoryEntry], prompt: &str) -> String {
    let mut history = String::new();
    for entry in entries {
        let tool = entry.tool_name.as_deref().unwrap_or("unknown");
        match entry.entry_type {
            EntryType::UserMessage => {
                history.push_str(&format!("\n[USER]: {}\n", truncate_chars(&entry.content, MESSAGE_LIMIT)))
            }
            EntryType::AgentMessage => {
                history.push_str(&format!("\n[ASSISTANT]: {}\n", truncate_chars(&entry.content, MESSAGE_LIMIT)))
            }
            EntryType::ToolCall => history.push_str(&format!("\n[TOOL CALL: {tool}]\n")),
            EntryType::ToolResult => history
                .push_str(&format!("\n[TOOL RESULT: {tool}] {}\n", truncate_chars(&entry.content, TOOL_RESULT_LIMIT))),
        }
    }
    if history.trim().is_empty() {
        return prompt.to_string();
    }
    format!(
        "RESUME CONTEXT FOR CONTINUING TASK\n\n\
         === EXECUTION HISTORY ===\n\
         The following is a summary of the previous conversation in this session:\n\
         {history}\n\
         === CURRENT REQUEST ===\n\
         {prompt}\n\n\
         === INSTRUCTIONS ===\n\
         You are continuing work on the above task. This is a continuation of a previous session. \
         Please continue from where the previous execution left off, taking into account all the context \
         provided above. Do not repeat work that was already completed. Build on the existing progress.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        let text = "é".repeat(2001);
        let cut = truncate_chars(&text, MESSAGE_LIMIT);
        assert_eq!(cut, format!("{}... [truncated]", "é".repeat(2000)));
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(
            truncate_chars(&"a".repeat(500), TOOL_RESULT_LIMIT),
            "a".repeat(500),
            "exactly at the limit is kept whole"
        );
    }

    #[test]
    fn resume_context_has_the_documented_format() {
        let entries = vec![
            HistoryEntry::new("s", EntryType::UserMessage, "remember pineapple"),
            HistoryEntry::new("s", EntryType::AgentMessage, "OK"),
            HistoryEntry::tool("s", EntryType::ToolCall, "Read file", "t1", Some("pending"), ""),
            HistoryEntry::tool("s", EntryType::ToolResult, "Read file", "t1", Some("completed"), "x".repeat(600)),
        ];
        let text = render_resume_context(&entries, "what now?");
        let expected_history = format!(
            "\n[USER]: remember pineapple\n\n[ASSISTANT]: OK\n\n[TOOL CALL: Read file]\n\n[TOOL RESULT: Read file] {}... [truncated]\n",
            "x".repeat(500)
        );
        assert!(text.starts_with("RESUME CONTEXT FOR CONTINUING TASK\n"));
        assert!(text.contains(&expected_history), "{text}");
        let order = [
            "=== EXECUTION HISTORY ===",
            "=== CURRENT REQUEST ===\nwhat now?",
            "=== INSTRUCTIONS ===",
            "Do not repeat work that was already completed.",
        ];
        let positions: Vec<usize> =
            order.iter().map(|s| text.find(s).unwrap_or_else(|| panic!("missing {s}"))).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "sections out of order");
    }

    #[test]
    fn no_history_leaves_the_prompt_alone() {
        assert_eq!(render_resume_context(&[], "hi"), "hi");
    }

    #[test]
    fn files_round_trip_and_skip_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path());
        assert!(!store.has_history("a/b"));
        store.append(&HistoryEntry::new("a/b", EntryType::UserMessage, "hi")).unwrap();
        std::fs::write(store.path("a/b"), format!("{}not json\n", std::fs::read_to_string(store.path("a/b")).unwrap()))
            .unwrap();
        store.append(&HistoryEntry::new("a/b", EntryType::AgentMessage, "yo")).unwrap();
        assert!(store.path("a/b").ends_with("sessions/a_b.jsonl"));
        let entries = store.read("a/b");
        assert_eq!(entries.iter().map(|e| e.content.as_str()).collect::<Vec<_>>(), vec!["hi", "yo"]);
        assert!(store.has_history("a/b"));
    }

    #[test]
    fn one_bad_line_does_not_hide_the_others() {
        let good = serde_json::to_string(&HistoryEntry::new("s", EntryType::UserMessage, "kept")).unwrap();
        // Invalid UTF-8 used to make the whole file unreadable (no history at all).
        let mut bytes = format!("{good}\n").into_bytes();
        bytes.extend_from_slice(b"\xff\xfe{\"broken\n\n   \n[1,2]\n");
        bytes.extend_from_slice(format!("{good}\r\n").as_bytes());
        let (entries, skipped) = parse_history(&bytes);
        assert_eq!(entries.len(), 2);
        assert_eq!(skipped, 2);
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path());
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        std::fs::write(store.path("s"), &bytes).unwrap();
        assert_eq!(store.read("s").len(), 2);
    }

    #[test]
    fn no_session_id_names_a_file_outside_the_sessions_dir() {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path());
        for id in ["../../etc/passwd", "..", "a/../../b", "x\0y", "/abs", "..\\..\\win"] {
            let path = store.path(id);
            assert_eq!(path.parent(), Some(dir.path().join("sessions").as_path()), "{id:?} -> {}", path.display());
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.contains('/') && !name.starts_with(".."), "{id:?} -> {name}");
        }
    }
}
