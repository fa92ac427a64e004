//! Full-text search over the folded message view (`message.search`): the FTS5 index
//! `messages_fts` (migration 0120), kept in step with `messages` by triggers in the same write.
//!
//! Hits come newest entry first (by row id, which grows with every entry), so a page's cursor is
//! the row id of its last hit: the next page holds only older rows, and entries written while
//! a client pages never show up twice.

use baton_protocol::{MessageKind, SearchHit, SnippetPart};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use super::{StoreError, StoreResult};

/// Words (tokens) of the snippet around the match.
const SNIPPET_TOKENS: usize = 16;

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
    let terms: Vec<String> = query_words(text)
        .filter_map(|(word, prefix)| {
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

/// The words of what a user typed, each with whether it ends in `*` (a prefix), without it.
fn query_words(text: &str) -> impl Iterator<Item = (&str, bool)> {
    text.split_whitespace().map(|word| match word.strip_suffix('*') {
        Some(stem) => (stem.trim_end_matches('*'), true),
        None => (word, false),
    })
}

/// A word of text as the index's tokenizer (`unicode61 remove_diacritics 2`) sees it: letters
/// and digits, lower case, without diacritics.
fn fold_token(token: &str) -> String {
    if token.is_ascii() {
        return token.to_ascii_lowercase();
    }
    token.nfd().filter(|c| !is_combining_mark(*c)).flat_map(char::to_lowercase).collect()
}

/// Whether `token` (of the text) is `word` (of the query, folded), or starts with it for a
/// prefix. A token of ASCII is compared as it stands (no copy: most text is ASCII).
fn token_matches(token: &str, word: &str, prefix: bool) -> bool {
    if token.is_ascii() {
        let (token, word) = (token.as_bytes(), word.as_bytes());
        match prefix {
            true => token.get(..word.len()).is_some_and(|start| start.eq_ignore_ascii_case(word)),
            false => token.eq_ignore_ascii_case(word),
        }
    } else {
        let folded = fold_token(token);
        if prefix {
            folded.starts_with(word)
        } else {
            folded == word
        }
    }
}

/// The tokens of `text`: the byte range of each run of letters and digits (and the marks that
/// combine with them).
fn tokens(text: &str) -> Vec<(usize, usize)> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        // A combining mark belongs to the letter before it (`e` and U+0301 are one `é`).
        match (start, c.is_alphanumeric() || (start.is_some() && is_combining_mark(c))) {
            (None, true) => start = Some(at),
            (Some(from), false) => {
                tokens.push((from, at));
                start = None;
            }
            _ => {}
        }
    }
    tokens
}

/// One word of a query as phrases of tokens (`foo-bar` is the phrase `foo bar`, as the index
/// reads it); the last token of a prefix word matches as a prefix.
struct Phrase {
    tokens: Vec<String>,
    prefix: bool,
}

fn phrases(query: &str) -> Vec<Phrase> {
    query_words(query)
        .filter_map(|(word, prefix)| {
            let tokens: Vec<String> = tokens(word).into_iter().map(|(from, to)| fold_token(&word[from..to])).collect();
            (!tokens.is_empty()).then_some(Phrase { tokens, prefix })
        })
        .collect()
}

/// The snippet of a hit: about [`SNIPPET_TOKENS`] words of its text around the matches, `…`
/// where cut, matches marked. The window holds as many of the query's words as it can (the
/// earliest such window). Written here rather than with FTS5's `snippet()`, which scores every
/// window against every match: a prefix that matches most words of a long answer (typing `c`
/// over a 30,000-word answer) took seconds per hit, where this is one pass over the text.
fn snippet(text: &str, query: &[Phrase]) -> Vec<SnippetPart> {
    let tokens = tokens(text);
    // Every match: first token, token after it, which phrase.
    let mut matches: Vec<(usize, usize, usize)> = Vec::new();
    // Matches do not overlap: the words a match covers are not looked at again.
    let mut at = 0;
    while at < tokens.len() {
        let found = query.iter().enumerate().find(|(_, phrase)| {
            let last = phrase.tokens.len().saturating_sub(1);
            !phrase.tokens.is_empty()
                && phrase.tokens.iter().enumerate().all(|(i, word)| {
                    tokens
                        .get(at + i)
                        .is_some_and(|&(from, to)| token_matches(&text[from..to], word, i == last && phrase.prefix))
                })
        });
        match found {
            Some((which, phrase)) => {
                matches.push((at, at + phrase.tokens.len(), which));
                at += phrase.tokens.len();
            }
            None => at += 1,
        }
    }
    // The window: starting a few words before a match, the one with the most of the query's
    // words in it.
    let context = SNIPPET_TOKENS / 4;
    let latest_start = tokens.len().saturating_sub(SNIPPET_TOKENS);
    let mut best = (0, 0usize);
    let mut seen = vec![false; query.len()];
    let mut last_start = None;
    for &(first, _, _) in &matches {
        let start = first.saturating_sub(context).min(latest_start);
        if last_start == Some(start) {
            continue;
        }
        last_start = Some(start);
        seen.iter_mut().for_each(|s| *s = false);
        let inside = matches[matches.partition_point(|m| m.0 < start)..].iter();
        inside.take_while(|m| m.1 <= start + SNIPPET_TOKENS).for_each(|m| seen[m.2] = true);
        let score = seen.iter().filter(|s| **s).count();
        if score > best.1 {
            best = (start, score);
            if score == query.len() {
                break;
            }
        }
    }
    let start = best.0;
    let end = (start + SNIPPET_TOKENS).min(tokens.len());
    // Whole words from the window's first token; the text's own start and end (punctuation
    // around the words) when the window reaches them.
    let from = if start == 0 { 0 } else { tokens.get(start).map_or(0, |t| t.0) };
    let to = if end == tokens.len() { text.len() } else { tokens.get(end - 1).map_or(text.len(), |t| t.1) };
    let mut parts: Vec<SnippetPart> = Vec::new();
    let mut push = |piece: &str, matched: bool| {
        // Control characters other than line breaks and tabs are not shown.
        let piece: String = piece.chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect();
        match parts.last_mut() {
            _ if piece.is_empty() => {}
            Some(last) if last.matched == matched => last.text.push_str(&piece),
            _ => parts.push(SnippetPart { text: piece, matched }),
        }
    };
    if from > 0 {
        push("…", false);
    }
    let mut at = from;
    for &(first, after, _) in matches[matches.partition_point(|m| m.0 < start)..].iter().take_while(|m| m.1 <= end) {
        let (match_from, match_to) = (tokens[first].0, tokens[after - 1].1);
        push(&text[at..match_from], false);
        push(&text[match_from..match_to], true);
        at = match_to;
    }
    push(&text[at..to], false);
    if to < text.len() {
        push("…", false);
    }
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

/// SQLite virtual machine steps between two looks at the clock while a search runs.
const STEPS_PER_CLOCK_CHECK: i32 = 1_000;

/// One page of the hits of `query` (already checked to have something to search for), given at
/// most `budget` of time: a query that needs more is interrupted and refused as `Invalid`, so
/// that it does not hold a reader, and the machine, from everyone else. SQLite looks at the
/// clock between the steps of its statement, and FTS5 reads the lists of a query's words in
/// one step: the cost of that step is bounded by the number of words and prefixes a query may
/// have (checked with the request), this bound covers the rows it then walks through.
pub fn search_page(
    conn: &Connection,
    query: &str,
    session_id: Option<&str>,
    limit: usize,
    cursor: Option<&str>,
    budget: Duration,
) -> StoreResult<SearchPage> {
    let deadline = Instant::now() + budget;
    conn.progress_handler(STEPS_PER_CLOCK_CHECK, Some(move || Instant::now() >= deadline));
    let page = run_search(conn, query, session_id, limit, cursor);
    // The connection goes back to the pool: later reads must not inherit the deadline.
    conn.progress_handler(STEPS_PER_CLOCK_CHECK, None::<fn() -> bool>);
    match page {
        Err(StoreError::Sqlite(e)) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) => {
            Err(StoreError::Invalid(format!(
                "the query needs more than {} ms to search; use fewer words or longer prefixes",
                budget.as_millis()
            )))
        }
        page => page,
    }
}

fn run_search(
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
                m.text
         FROM messages_fts
         JOIN messages m ON m.id = messages_fts.rowid
         JOIN task_sessions s ON s.id = m.session_id
         JOIN tasks t ON t.id = s.task_id
         WHERE messages_fts MATCH ?1 AND messages_fts.rowid < ?2 AND (?3 IS NULL OR m.session_id = ?3)
         ORDER BY messages_fts.rowid DESC
         LIMIT ?4",
    )?;
    let rows = statement.query_map(params![fts, before, session_id, limit as i64 + 1], |r| {
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
    let words = phrases(query);
    let mut hits = Vec::new();
    let mut last_row = None;
    let mut more = false;
    for row in rows {
        let (row_id, session_id, task_id, task_title, seq, kind, created_at, text) = row?;
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
            snippet: snippet(&text, &words),
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
            search_page(conn, query, None, 50, None, Duration::from_secs(60))
                .expect("search")
                .hits
                .iter()
                .map(|h| h.seq)
                .collect()
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

    /// A search that outlasts its budget is interrupted and refused, and the connection it ran
    /// on reads without a deadline afterwards.
    #[test]
    fn a_search_over_its_time_budget_is_refused_and_leaves_no_deadline_behind() {
        use crate::store::{apply_migrations, MIGRATIONS};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut conn = Connection::open(dir.path().join("baton.db")).expect("open");
        apply_migrations(&mut conn, MIGRATIONS).expect("migrations");
        conn.execute_batch(
            "INSERT INTO tasks (id, title, description, state, agent, workdir, created_at, updated_at)
                 VALUES ('task1', 'Zoo', '', 'TODO', 'mock', '/tmp', 't', 't');
             INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at)
                 VALUES ('s1', 'task1', 'mock', 'WAITING_FOR_INPUT', 't', 't');",
        )
        .expect("a session");
        let text: String = (0..200).map(|i| format!("word{i} ")).collect();
        for seq in 1..=2000 {
            conn.execute(
                "INSERT INTO messages (session_id, seq, kind, text, created_at, updated_at) VALUES ('s1', ?1, 'agent', ?2, 't', 't')",
                params![seq, text],
            )
            .expect("insert");
        }
        let refused = search_page(&conn, "w*", None, 200, None, Duration::ZERO).map(|page| page.hits.len());
        assert!(
            matches!(&refused, Err(StoreError::Invalid(message)) if message.contains("longer prefixes")),
            "{refused:?}"
        );
        let page = search_page(&conn, "w*", None, 200, None, Duration::from_secs(60)).expect("time enough");
        assert_eq!(page.hits.len(), 200);
        let count: i64 = conn.query_row("SELECT count(*) FROM messages", [], |r| r.get(0)).expect("a plain read");
        assert_eq!(count, 2000);
    }

    /// The snippet's pieces as text, matches in brackets.
    fn shown(text: &str, query: &str) -> String {
        snippet(text, &phrases(query))
            .iter()
            .map(|p| if p.matched { format!("[{}]", p.text) } else { p.text.clone() })
            .collect()
    }

    #[test]
    fn a_snippet_is_the_words_around_the_match_marked() {
        assert_eq!(shown("Plan ready.", "ready"), "Plan [ready].");
        // Case and diacritics as the index folds them; control characters are not shown.
        assert_eq!(shown("Un Café\u{7} noir", "cafe"), "Un [Café] noir");
        assert_eq!(shown("Un cafe\u{301} noir", "CAFÉ"), "Un [cafe\u{301}] noir");
        // A word with punctuation is a phrase of its tokens; a prefix matches the words it starts.
        assert_eq!(shown("see foo-bar, foo bar and foobar", "foo-bar"), "see [foo-bar], [foo bar] and foobar");
        assert_eq!(shown("log logs blog login", "log*"), "[log] [logs] blog [login]");
        assert_eq!(shown("LOGIN Logs lo", "Log*"), "[LOGIN] [Logs] lo");
        // Two words of the query over the same words of the text: one match, never two.
        assert_eq!(shown("a foo bar b", "foo-bar bar"), "a [foo bar] b");
        assert_eq!(shown("", "foo"), "");
        assert_eq!(shown("ça — été", "ete"), "ça — [été]");
        let long: String = (1..=1000).map(|i| format!("w{i} ")).collect();
        assert_eq!(
            shown(&long, "w500"),
            "…w496 w497 w498 w499 [w500] w501 w502 w503 w504 w505 w506 w507 w508 w509 w510 w511…"
        );
        assert_eq!(shown(&long, "w2"), "w1 [w2] w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16…");
        assert_eq!(
            shown(&long, "w999"),
            "…w985 w986 w987 w988 w989 w990 w991 w992 w993 w994 w995 w996 w997 w998 [w999] w1000 "
        );
        // The window with the most of the query's words wins over an earlier one.
        let both = format!("{long} apple {long} apple pear {long}");
        let shown_both = shown(&both, "pear apple");
        assert!(shown_both.contains("[apple] [pear]"), "{shown_both}");
        // Nothing this folding can mark (a ligature is not its letters here): the text's start.
        assert_eq!(shown("ﬁne words", "fine"), "ﬁne words");
    }

    /// Texts and queries of letters, digits, marks, punctuation and spaces from several scripts:
    /// a snippet never panics, and what it shows, without its `…`, is a piece of the text.
    #[test]
    fn any_text_and_query_give_a_piece_of_the_text() {
        const PIECES: &[&str] = &[
            "a", "B", "é", "e\u{301}", "ß", "ﬁ", "日本", "😀", "-", "'", ".", " ", "  ", "\n", "\u{7}", "7", "foo", "*",
        ];
        let mut state = 42u64;
        let mut next = |n: usize| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) as usize) % n
        };
        for _ in 0..3000 {
            let text: String = (0..next(60)).map(|_| PIECES[next(PIECES.len())]).collect();
            let query: String = (0..1 + next(6)).map(|_| PIECES[next(PIECES.len())]).collect();
            let parts = snippet(&text, &phrases(&query));
            let joined: String = parts.iter().map(|p| p.text.as_str()).collect();
            let inner = joined.strip_prefix('…').unwrap_or(&joined);
            let inner = inner.strip_suffix('…').unwrap_or(inner);
            let visible: String = text.chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect();
            assert!(visible.contains(inner), "{text:?} / {query:?} gave {joined:?}");
        }
    }

    /// A prefix that matches every word of a long answer costs one pass over it, not a pass per
    /// match (FTS5's `snippet()` took seconds on this).
    #[test]
    fn a_prefix_matching_every_word_of_a_long_answer_gives_its_first_words() {
        let answer: String = (1..=200_000).map(|i| format!("c{i} ")).collect();
        assert_eq!(
            shown(&answer, "c*"),
            "[c1] [c2] [c3] [c4] [c5] [c6] [c7] [c8] [c9] [c10] [c11] [c12] [c13] [c14] [c15] [c16]…"
        );
    }
}
