//! Paging a session's export (`session.export`, `batond export`) over the store's reads.
//!
//! A page holds whole entries (Markdown) or lines (JSONL) up to its byte budget; an entry
//! larger than a whole page is cut at a character boundary and continued on the next page.
//! The cursor `SEQ:OFFSET` says where the next page starts: the entry (or event) with the
//! smallest seq at or after `SEQ`, `OFFSET` bytes into its text. Each folded entry has its own
//! seq (the event that created it; one event creates at most one entry), so the cursor names
//! one entry.

use baton_protocol::{ErrorPayload, ExportFormat};
use rusqlite::Connection;

use super::{file_name, markdown_entry, markdown_header, ExportHeader};
use crate::store::{self, Store, StoreError};

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

/// One page of the export of `session_id`, read on one of the store's reader connections.
pub async fn export_page_from(
    store: &Store,
    session_id: &str,
    format: ExportFormat,
    thoughts: bool,
    cursor: Option<String>,
    budget: usize,
) -> Result<ExportPage, ExportError> {
    let session_id = session_id.to_string();
    let page =
        store.read(move |conn| Ok(export_page(conn, &session_id, format, thoughts, cursor.as_deref(), budget))).await?;
    page
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
    let session = store::exported_session(conn, session_id)?;
    let mut page = Pager { content: String::new(), budget, next: None };
    if start == 0 && skip == 0 && format == ExportFormat::Markdown {
        let header = ExportHeader {
            session_id,
            task_id: &session.task_id,
            task_title: &session.task_title,
            agent: &session.agent,
            workdir: &session.workdir,
            created_at: &session.created_at,
            state: &session.state,
        };
        page.content.push_str(&markdown_header(&header));
    }
    let mut first = true;
    match format {
        ExportFormat::Markdown => store::visit_exported_messages(conn, session_id, start, thoughts, |message| {
            let text = markdown_entry(&message, thoughts);
            let offset = if std::mem::take(&mut first) { skip } else { 0 };
            page.add(message.seq, &text, offset)
        })?,
        ExportFormat::Jsonl => store::visit_exported_events(conn, session_id, start, thoughts, |record| {
            let mut line = serde_json::to_string(&record).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            line.push('\n');
            let offset = if std::mem::take(&mut first) { skip } else { 0 };
            page.add(record.seq, &line, offset)
        })?,
    }
    Ok(ExportPage {
        content: page.content,
        next_cursor: page.next,
        file_name: file_name(&session.task_title, session_id, format),
    })
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
