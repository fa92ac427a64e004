//! Full-text search over the folded message view (`message.search`): the FTS5 index
//! `messages_fts` (migration 0120), kept in step with `messages` by triggers in the same write.
//!
//! Hits come newest entry first (by row id, which grows with every entry), so a page's cursor is
//! the row id of its last hit: the next page holds only older rows, and entries written while
//! a client pages never show up twice.

use baton_protocol::{MessageKind, SearchHit, SnippetPart};
use rusqlite::{params, Connection};

use super::{StoreError, StoreResult};

/// Marks the start and end of a match in the snippet SQLite writes (control characters no
/// entry's text shows; any that one holds are dropped from the snippet).
const MATCH_START: char = '\u{1}';
const MATCH_END: char = '\u{2}';

/// Words of the snippet around the match.
const SNIPPET_TOKENS: i32 = 16;

/// A page of hits.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    pub next_cursor: Option<String>,
}

/// The FTS5 query of what a user typed: every word quoted (so `-`, `:`, `"`, `AND`... are text,
/// never syntax), all of them required; a word ending in `*` is a prefix. None when nothing
/// is left to search for.
pub fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter_map(|word| {
            let (word, prefix) = match word.strip_suffix('*') {
                Some(stem) => (stem.trim_end_matches('*'), true),
                None => (word, false),
            };
            // A word of punctuation only would make an empty phrase, which matches nothing.
            if !word.chars().any(char::is_alphanumeric) {
                return None;
            }
            let quoted = format!("\"{}\"", word.replace('"', "\"\""));
            Some(if prefix { format!("{quoted}*") } else { quoted })
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// Splits SQLite's snippet at the match markers.
fn snippet_parts(snippet: &str) -> Vec<SnippetPart> {
    let mut parts: Vec<SnippetPart> = Vec::new();
    let mut matched = false;
    let mut text = String::new();
    let mut flush = |text: &mut String, matched: bool| {
        if !text.is_empty() {
            parts.push(SnippetPart { text: std::mem::take(text), matched });
        }
    };
    for c in snippet.chars() {
        match c {
            MATCH_START => {
                flush(&mut text, matched);
                matched = true;
            }
            MATCH_END => {
                flush(&mut text, matched);
                matched = false;
            }
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => text.push(c),
        }
    }
    flush(&mut text, matched);
    parts
}

fn parse_cursor(cursor: Option<&str>) -> StoreResult<i64> {
    match cursor {
        None => Ok(i64::MAX),
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|row| *row > 0)
            .ok_or_else(|| StoreError::Invalid(format!("cursor {text:?} is not one a message.search page gave"))),
    }
}

/// One page of the hits of `query` (already checked to have something to search for).
pub fn search_page(
    conn: &Connection,
    query: &str,
    session_id: Option<&str>,
    limit: usize,
    cursor: Option<&str>,
) -> StoreResult<SearchPage> {
    let before = parse_cursor(cursor)?;
    let Some(fts) = fts_query(query) else {
        return Err(StoreError::Invalid(format!("the query {query:?} has no word to search for")));
    };
    let mut statement = conn.prepare_cached(
        "SELECT m.id, m.session_id, s.task_id, t.title, m.seq, m.kind, m.created_at,
                snippet(messages_fts, 0, char(1), char(2), '…', ?5)
         FROM messages_fts
         JOIN messages m ON m.id = messages_fts.rowid
         JOIN task_sessions s ON s.id = m.session_id
         JOIN tasks t ON t.id = s.task_id
         WHERE messages_fts MATCH ?1 AND messages_fts.rowid < ?2 AND (?3 IS NULL OR m.session_id = ?3)
         ORDER BY messages_fts.rowid DESC
         LIMIT ?4",
    )?;
    let rows = statement.query_map(params![fts, before, session_id, limit as i64 + 1, SNIPPET_TOKENS], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, String>(5)?,
            r.get::<_, String>(6)?,
            r.get::<_, String>(7)?,
        ))
    })?;
    let mut hits = Vec::new();
    let mut last_row = None;
    let mut more = false;
    for row in rows {
        let (row_id, session_id, task_id, task_title, seq, kind, created_at, snippet) = row?;
        if hits.len() == limit {
            more = true;
            break;
        }
        let Some(kind) = MessageKind::parse(&kind) else {
            return Err(StoreError::Corrupt(format!("message {row_id} has the unknown kind {kind:?}")));
        };
        last_row = Some(row_id);
        hits.push(SearchHit {
            session_id,
            task_id,
            task_title,
            seq: seq as u64,
            kind,
            snippet: snippet_parts(&snippet),
            created_at,
        });
    }
    let next_cursor = if more { last_row.map(|row| row.to_string()) } else { None };
    Ok(SearchPage { hits, next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_user_types_is_words_never_syntax() {
        assert_eq!(fts_query("flaky login").as_deref(), Some("\"flaky\" \"login\""));
        assert_eq!(fts_query("  log*  ").as_deref(), Some("\"log\"*"));
        assert_eq!(fts_query("a\"b NOT -c").as_deref(), Some("\"a\"\"b\" \"NOT\" \"-c\""));
        assert_eq!(fts_query(" - * \"\" "), None);
    }

    /// A database from before the index: the migration indexes the entries it already has, and
    /// the triggers keep it in step with every later insert, change and delete.
    #[test]
    fn the_migration_indexes_existing_entries_and_the_triggers_keep_in_step() {
        use crate::store::{apply_migrations, MIGRATIONS};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut conn = Connection::open(dir.path().join("baton.db")).expect("open");
        let before: Vec<_> = MIGRATIONS.iter().filter(|m| m.version < 120).map(|m| m.version).collect();
        let older: Vec<crate::store::migrate::Migration> = MIGRATIONS
            .iter()
            .filter(|m| before.contains(&m.version))
            .map(|m| crate::store::migrate::Migration { version: m.version, name: m.name, sql: m.sql })
            .collect();
        apply_migrations(&mut conn, &older).expect("older migrations");
        conn.execute_batch(
            "INSERT INTO tasks (id, title, description, state, agent, workdir, created_at, updated_at)
                 VALUES ('task1', 'Zoo', '', 'TODO', 'mock', '/tmp', 't', 't');
             INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at)
                 VALUES ('s1', 'task1', 'mock', 'WAITING_FOR_INPUT', 't', 't');
             INSERT INTO messages (session_id, seq, kind, text, created_at, updated_at)
                 VALUES ('s1', 1, 'user', 'Where is the quokka?', 't', 't'),
                        ('s1', 2, 'agent', 'The quokka is on Rottnest.', 't', 't');",
        )
        .expect("rows of the old schema");
        apply_migrations(&mut conn, MIGRATIONS).expect("the search migration");
        let seqs = |conn: &Connection, query: &str| -> Vec<u64> {
            search_page(conn, query, None, 50, None).expect("search").hits.iter().map(|h| h.seq).collect()
        };
        assert_eq!(seqs(&conn, "QUOKKA"), vec![2, 1], "both old entries are found, newest first");
        assert_eq!(seqs(&conn, "rottnest quokka"), vec![2]);

        conn.execute("UPDATE messages SET text = 'A wallaby, not a quokka.' WHERE seq = 1", []).expect("update");
        assert_eq!(seqs(&conn, "wallaby"), vec![1]);
        assert_eq!(seqs(&conn, "where"), Vec::<u64>::new(), "the old text is gone from the index");
        conn.execute(
            "INSERT INTO messages (session_id, seq, kind, text, created_at, updated_at) VALUES ('s1', 3, 'agent', 'wallabies', 't', 't')",
            [],
        )
        .expect("insert");
        assert_eq!(seqs(&conn, "wallab*"), vec![3, 1]);
        conn.execute("DELETE FROM messages WHERE session_id = 's1'", []).expect("delete");
        assert_eq!(seqs(&conn, "quokka"), Vec::<u64>::new());
        let integrity: rusqlite::Result<usize> =
            conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)", []);
        assert!(integrity.is_ok(), "the index matches its content: {integrity:?}");
    }

    #[test]
    fn a_snippet_is_cut_into_marked_parts() {
        let parts = snippet_parts("…the \u{1}quokka\u{2} sat\u{7}");
        assert_eq!(
            parts,
            vec![
                SnippetPart { text: "…the ".into(), matched: false },
                SnippetPart { text: "quokka".into(), matched: true },
                SnippetPart { text: " sat".into(), matched: false },
            ]
        );
    }
}
