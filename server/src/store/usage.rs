//! Usage per finished turn (`turn_usage`), and its sums per session and over all sessions.
//! Columns an agent did not report stay NULL; SQL's SUM over only NULLs is NULL, so a sum of
//! nothing reported reads as unknown, never as 0.

use baton_protocol::{now_timestamp, Cost, SessionUsage, TurnUsage, UsageSummary};
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

use super::{Store, StoreResult};

/// Token counts from a prompt's answer (ACP `PromptResponse.usage`); each may be missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportedTokens {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cached_read: Option<u64>,
    pub cached_write: Option<u64>,
    pub thought: Option<u64>,
    pub total: Option<u64>,
}

impl ReportedTokens {
    /// Reads `usage` from a `session/prompt` result; None when the agent sent none. Lenient:
    /// a field that is not a non-negative integer counts as not reported.
    pub fn from_prompt_result(result: &Value) -> Option<ReportedTokens> {
        let usage = result.get("usage").filter(|u| u.is_object())?;
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        let tokens = ReportedTokens {
            input: field("inputTokens"),
            output: field("outputTokens"),
            cached_read: field("cachedReadTokens"),
            cached_write: field("cachedWriteTokens"),
            thought: field("thoughtTokens"),
            total: field("totalTokens"),
        };
        (tokens != ReportedTokens::default()).then_some(tokens)
    }
}

/// Newest turns returned per session.
const MAX_TURNS: i64 = 500;

const SUM_COLUMNS: &str =
    "COALESCE(SUM(input_tokens IS NOT NULL OR output_tokens IS NOT NULL OR total_tokens IS NOT NULL), 0),
     COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cached_read_tokens), SUM(cached_write_tokens),
     SUM(thought_tokens), SUM(total_tokens), COUNT(DISTINCT session_id)";

fn opt_u64(row: &Row<'_>, at: usize) -> rusqlite::Result<Option<u64>> {
    Ok(row.get::<_, Option<i64>>(at)?.map(|v| v.max(0) as u64))
}

fn summary_from_row(row: &Row<'_>) -> rusqlite::Result<UsageSummary> {
    let reported = row.get::<_, i64>(0)?.max(0) as u64;
    let turns = row.get::<_, i64>(1)?.max(0) as u64;
    Ok(UsageSummary {
        turns_reported: reported,
        turns_unreported: turns.saturating_sub(reported),
        input_tokens: opt_u64(row, 2)?,
        output_tokens: opt_u64(row, 3)?,
        cached_read_tokens: opt_u64(row, 4)?,
        cached_write_tokens: opt_u64(row, 5)?,
        thought_tokens: opt_u64(row, 6)?,
        total_tokens: opt_u64(row, 7)?,
        cost: Vec::new(),
        sessions: row.get::<_, i64>(8)?.max(0) as u64,
    })
}

/// Per currency, the sum of each session's latest cost (ACP reports cost as a session's
/// cumulative figure, so the latest one is the session's cost).
fn latest_costs(conn: &Connection, session_id: Option<&str>) -> StoreResult<Vec<Cost>> {
    let mut statement = conn.prepare(
        "SELECT cost_currency, SUM(cost_amount) FROM turn_usage u
         WHERE cost_amount IS NOT NULL AND cost_currency IS NOT NULL AND (?1 IS NULL OR session_id = ?1)
           AND turn_seq = (SELECT MAX(turn_seq) FROM turn_usage v
                           WHERE v.session_id = u.session_id AND v.cost_amount IS NOT NULL)
         GROUP BY cost_currency ORDER BY cost_currency",
    )?;
    let rows = statement.query_map([session_id], |r| Ok(Cost { currency: r.get(0)?, amount: r.get(1)? }))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn summary(conn: &Connection, session_id: Option<&str>) -> StoreResult<UsageSummary> {
    let mut summary = conn.query_row(
        &format!("SELECT {SUM_COLUMNS} FROM turn_usage WHERE ?1 IS NULL OR session_id = ?1"),
        [session_id],
        summary_from_row,
    )?;
    summary.cost = latest_costs(conn, session_id)?;
    if session_id.is_some() {
        summary.sessions = 1;
    }
    Ok(summary)
}

fn turn_from_row(row: &Row<'_>) -> rusqlite::Result<TurnUsage> {
    let cost = match (row.get::<_, Option<f64>>(8)?, row.get::<_, Option<String>>(9)?) {
        (Some(amount), Some(currency)) => Some(Cost { amount, currency }),
        _ => None,
    };
    Ok(TurnUsage {
        turn_seq: row.get::<_, i64>(0)?.max(0) as u64,
        turn_id: row.get(1)?,
        input_tokens: opt_u64(row, 2)?,
        output_tokens: opt_u64(row, 3)?,
        cached_read_tokens: opt_u64(row, 4)?,
        cached_write_tokens: opt_u64(row, 5)?,
        thought_tokens: opt_u64(row, 6)?,
        total_tokens: opt_u64(row, 7)?,
        cost,
        context_used: opt_u64(row, 10)?,
        context_size: opt_u64(row, 11)?,
        recorded_at: row.get(12)?,
    })
}

/// The seq of the session's newest `turn_started` (read through its partial index, migration
/// 0160, not by walking back over the turn's events).
pub(super) const TURN_STARTED: &str =
    "SELECT seq FROM session_events WHERE session_id = ?1 AND kind = 'turn_started' ORDER BY seq DESC LIMIT 1";

/// The payload of the session's newest `usage_update` after a seq, through the partial index of
/// `agent_update` events (migration 0160): named, because without statistics the planner takes
/// the primary key's range of the turn's events, which is the walk the index is there to avoid.
pub(super) const LAST_USAGE_UPDATE: &str = "SELECT payload FROM session_events INDEXED BY session_events_agent_update
     WHERE session_id = ?1 AND seq > ?2 AND kind = 'agent_update'
       AND json_extract(payload, '$.update_kind') = 'usage_update'
     ORDER BY seq DESC LIMIT 1";

/// The last `usage_update` the agent sent after `after_seq` (kept in the journal as an
/// `agent_update` event with the update as sent).
fn last_usage_update(conn: &Connection, session_id: &str, after_seq: i64) -> StoreResult<Option<Value>> {
    let payload: Option<String> =
        conn.query_row(LAST_USAGE_UPDATE, params![session_id, after_seq], |r| r.get(0)).optional()?;
    Ok(payload.and_then(|p| serde_json::from_str::<Value>(&p).ok()).and_then(|v| v.get("raw").cloned()))
}

impl Store {
    /// Records the usage of the session's current turn (the newest `turn_started`), before its
    /// `turn_completed` is journaled. `tokens` is what the prompt's answer reported; cost and
    /// context come from the turn's last `usage_update`, if any.
    pub async fn record_turn_usage(
        &self,
        session_id: &str,
        turn_id: Option<String>,
        tokens: Option<ReportedTokens>,
    ) -> StoreResult<()> {
        let session_id = session_id.to_string();
        self.write(move |conn, _| {
            let turn_seq: Option<i64> = conn.query_row(TURN_STARTED, [&session_id], |r| r.get(0)).optional()?;
            let Some(turn_seq) = turn_seq else {
                return Ok(());
            };
            let update = last_usage_update(conn, &session_id, turn_seq)?;
            let number = |key: &str| update.as_ref().and_then(|u| u.get(key)).and_then(Value::as_u64);
            let cost = update.as_ref().and_then(|u| u.get("cost"));
            let amount = cost.and_then(|c| c.get("amount")).and_then(Value::as_f64).filter(|a| a.is_finite());
            let currency = cost.and_then(|c| c.get("currency")).and_then(Value::as_str).map(str::to_owned);
            let (amount, currency) =
                if amount.is_some() && currency.is_some() { (amount, currency) } else { (None, None) };
            let t = tokens.unwrap_or_default();
            let int = |v: Option<u64>| v.map(|v| v.min(i64::MAX as u64) as i64);
            conn.execute(
                "INSERT OR REPLACE INTO turn_usage (session_id, turn_seq, turn_id, input_tokens, output_tokens,
                    cached_read_tokens, cached_write_tokens, thought_tokens, total_tokens, cost_amount, cost_currency,
                    context_used, context_size, recorded_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                params![
                    session_id,
                    turn_seq,
                    turn_id,
                    int(t.input),
                    int(t.output),
                    int(t.cached_read),
                    int(t.cached_write),
                    int(t.thought),
                    int(t.total),
                    amount,
                    currency,
                    int(number("used")),
                    int(number("size")),
                    now_timestamp()
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The session's usage (its turns and their sum) when asked for, and the total over every
    /// session.
    pub async fn usage(&self, session_id: Option<String>) -> StoreResult<(Option<SessionUsage>, UsageSummary)> {
        self.read(move |conn| {
            let session = match session_id {
                Some(id) => {
                    super::records::get_session(conn, &id)?;
                    let mut statement = conn.prepare(
                        "SELECT turn_seq, turn_id, input_tokens, output_tokens, cached_read_tokens, cached_write_tokens,
                                thought_tokens, total_tokens, cost_amount, cost_currency, context_used, context_size,
                                recorded_at
                         FROM turn_usage WHERE session_id = ?1 ORDER BY turn_seq DESC LIMIT ?2",
                    )?;
                    let rows = statement.query_map(params![id, MAX_TURNS], turn_from_row)?;
                    let mut turns = rows.collect::<Result<Vec<_>, _>>()?;
                    turns.reverse();
                    Some(SessionUsage { summary: summary(conn, Some(&id))?, session_id: id, turns })
                }
                None => None,
            };
            Ok((session, summary(conn, None)?))
        })
        .await
    }
}
