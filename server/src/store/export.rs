//! Reading a session's transcript out page by page (`session.export`, `batond export`). Works
//! on any connection, so `batond export` can read the database file read-only while a server
//! runs on it, or when none does.
//!
//! A page holds whole entries (Markdown) or lines (JSONL) up to its byte budget; an entry
//! larger than a whole page is cut at a character boundary and continued on the next page.
//! The cursor `SEQ:OFFSET` says where the next page starts: the entry (or event) with the
//! smallest seq at or after `SEQ`, `OFFSET` bytes into its text. Each folded entry has its own
//! seq (the event that created it; one event creates at most one entry), so the cursor names
//! one entry.

use baton_protocol::{ErrorPayload, EventRecord, ExportFormat};
use rusqlite::{params, Connection, OptionalExtension};

use super::journal::{bounded_json, message_from_row, PARTS_UPDATED_AT};
use super::StoreError;
use crate::export::{file_name, markdown_entry, markdown_header, ExportHeader};

/// One page of an export.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportPage {
    pub content: String,
    pub next_cursor: Option<String>,
    pub file_name: String,
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    BadCursor(String),
}

impl From<rusqlite::Error> for ExportError {
    fn from(error: rusqlite::Error) -> Self {
        ExportError::Store(StoreError::Sqlite(error))
    }
}

impl ExportError {
    /// The error a client gets.
    pub fn payload(self) -> ErrorPayload {
        match self {
            ExportError::Store(error) => error.into(),
            ExportError::BadCursor(message) => ErrorPayload::validation(message),
        }
    }
}

fn parse_cursor(cursor: Option<&str>) -> Result<(u64, usize), ExportError> {
    let Some(cursor) = cursor else { return Ok((0, 0)) };
    let bad = || ExportError::BadCursor(format!("cursor {cursor:?} is not one a session.export page gave"));
    let (seq, offset) = cursor.split_once(':').ok_or_else(bad)?;
    let seq = seq.parse::<u64>().map_err(|_| bad())?;
    let offset = offset.parse::<usize>().map_err(|_| bad())?;
    if seq > i64::MAX as u64 {
        return Err(bad());
    }
    Ok((seq, offset))
}

/// A page of the export of `session_id`: at most `budget` bytes of content (more only never:
/// an entry that does not fit a page of its own is cut).
pub fn export_page(
    conn: &Connection,
    session_id: &str,
    format: ExportFormat,
    thoughts: bool,
    cursor: Option<&str>,
    budget: usize,
) -> Result<ExportPage, ExportError> {
    let budget = budget.max(16);
    let (start, skip) = parse_cursor(cursor)?;
    // The columns every schema version has: an old database file can still be exported.
    let header = conn
        .query_row(
            "SELECT s.task_id, t.title, s.agent, t.workdir, s.created_at, s.state
             FROM task_sessions s JOIN tasks t ON t.id = s.task_id WHERE s.id = ?1",
            [session_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                ))
            },
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
    let (task_id, title, agent, workdir, created_at, state) = header;
    let mut page = Pager { content: String::new(), budget, next: None };
    if start == 0 && skip == 0 && format == ExportFormat::Markdown {
        let header = ExportHeader {
            session_id,
            task_id: &task_id,
            task_title: &title,
            agent: &agent,
            workdir: &workdir,
            created_at: &created_at,
            state: &state,
        };
        page.content.push_str(&markdown_header(&header));
    }
    let mut first = true;
    match format {
        ExportFormat::Markdown => {
            let sql = format!(
                "SELECT seq, kind,
                        text || COALESCE((SELECT group_concat(p.text, '' ORDER BY p.seq) FROM message_parts p WHERE p.message_row = messages.id), ''),
                        message_id, tool_call_id, status, data, created_at,
                        CASE WHEN closed = 0 THEN {PARTS_UPDATED_AT} ELSE updated_at END FROM messages
                 WHERE session_id = ?1 AND seq >= ?2 AND (?3 OR kind != 'thought') ORDER BY seq, id"
            );
            let mut statement = conn.prepare(&sql)?;
            let mut rows = statement.query(params![session_id, start as i64, thoughts])?;
            while let Some(row) = rows.next()? {
                let message = message_from_row(row)?;
                let text = markdown_entry(&message, thoughts);
                let offset = if std::mem::take(&mut first) { skip } else { 0 };
                if !page.add(message.seq, &text, offset)? {
                    break;
                }
            }
        }
        ExportFormat::Jsonl => {
            let mut statement = conn.prepare(
                "SELECT seq, payload, created_at FROM session_events
                 WHERE session_id = ?1 AND seq >= ?2 AND (?3 OR kind != 'thought_chunk') ORDER BY seq",
            )?;
            let mut rows = statement.query(params![session_id, start as i64, thoughts])?;
            while let Some(row) = rows.next()? {
                let seq = row.get::<_, i64>(0)? as u64;
                let payload: String = row.get(1)?;
                let event = bounded_json(&payload).map_err(|e| StoreError::Corrupt(format!("event {seq}: {e}")))?;
                let record = EventRecord { session_id: session_id.to_string(), seq, event, created_at: row.get(2)? };
                let mut line = serde_json::to_string(&record).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                line.push('\n');
                let offset = if std::mem::take(&mut first) { skip } else { 0 };
                if !page.add(seq, &line, offset)? {
                    break;
                }
            }
        }
    }
    Ok(ExportPage { content: page.content, next_cursor: page.next, file_name: file_name(&title, session_id, format) })
}

struct Pager {
    content: String,
    budget: usize,
    next: Option<String>,
}

impl Pager {
    /// Adds `text` of the entry `seq` from byte `offset`; false when the page is full (the
    /// cursor then says where the next one starts).
    fn add(&mut self, seq: u64, text: &str, offset: usize) -> Result<bool, ExportError> {
        let rest = text.get(offset..).ok_or_else(|| {
            ExportError::BadCursor(format!("the cursor's offset {offset} does not fit entry {seq} (did it change?)"))
        })?;
        if self.content.len() + rest.len() <= self.budget {
            self.content.push_str(rest);
            return Ok(true);
        }
        if !self.content.is_empty() && rest.len() <= self.budget {
            self.next = Some(format!("{seq}:{offset}"));
            return Ok(false);
        }
        // Larger than what is left of the page: as much as fits, cut at a character boundary.
        let room = self.budget - self.content.len();
        let mut cut = room;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut == 0 && self.content.is_empty() {
            // Only possible with a budget below four bytes, which `export_page` rules out.
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        self.content.push_str(&rest[..cut]);
        self.next = Some(format!("{seq}:{}", offset + cut));
        Ok(false)
    }
}
