//! Standing answers (`permission_rules`, migration 0150) and the journal's record of how a
//! permission request was answered.

use baton_protocol::{now_timestamp, PermissionRule, RuleDecision};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{Store, StoreError, StoreResult};

/// What a rule matches of a permission request: the tool's kind and title, and its input
/// (`baton_protocol::tool_input_of`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolMatch {
    pub kind: String,
    pub title: String,
    pub input: String,
}

impl ToolMatch {
    /// The match of an agent's `toolCall`.
    pub fn of(tool_call: &serde_json::Value) -> ToolMatch {
        let (kind, title) = baton_protocol::tool_of(tool_call);
        ToolMatch { kind, title, input: baton_protocol::tool_input_of(tool_call) }
    }
}

const RULE_COLUMNS: &str =
    "id, session_id, tool_kind, tool_title, decision, option_kind, created_at, applied, tool_input";

fn rule_from_row(row: &Row<'_>) -> rusqlite::Result<PermissionRule> {
    let decision: String = row.get(4)?;
    let decision = RuleDecision::parse(&decision).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            4,
            rusqlite::types::Type::Text,
            format!("unknown decision {decision:?} in permission_rules").into(),
        )
    })?;
    Ok(PermissionRule {
        rule_id: row.get(0)?,
        session_id: row.get(1)?,
        tool_kind: row.get(2)?,
        tool_title: row.get(3)?,
        decision,
        option_kind: row.get(5)?,
        created_at: row.get(6)?,
        applied: row.get::<_, i64>(7)?.max(0) as u64,
        tool_input: row.get(8)?,
    })
}

fn rules_in(conn: &Connection, session_id: &str) -> StoreResult<Vec<PermissionRule>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {RULE_COLUMNS} FROM permission_rules WHERE session_id = ?1 ORDER BY created_at, id"
    ))?;
    let rows = statement.query_map([session_id], rule_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn rule_in(conn: &Connection, session_id: &str, rule_id: &str) -> StoreResult<PermissionRule> {
    conn.prepare_cached(&format!("SELECT {RULE_COLUMNS} FROM permission_rules WHERE session_id = ?1 AND id = ?2"))?
        .query_row([session_id, rule_id], rule_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("rule {rule_id} of session {session_id}")))
}

/// The option chosen for a permission request, from the session's newest
/// `permission_resolved` of it, through their partial index (migration 260).
pub(super) const PERMISSION_RESOLVED: &str = "SELECT json_extract(payload, '$.option_id') FROM session_events
     WHERE session_id = ?1 AND kind = 'permission_resolved'
       AND json_extract(payload, '$.request_id') = ?2
     ORDER BY seq DESC LIMIT 1";

impl Store {
    /// Records (or replaces) the session's rule for a tool and its input, and returns it.
    pub async fn put_rule(
        &self,
        session_id: &str,
        tool: ToolMatch,
        decision: RuleDecision,
    ) -> StoreResult<PermissionRule> {
        let ToolMatch { kind: tool_kind, title: tool_title, input: tool_input } = tool;
        let session_id = session_id.to_string();
        self.write(move |conn, _| {
            let rule_id = format!("rule-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            conn.execute(
                "INSERT INTO permission_rules
                     (id, session_id, tool_kind, tool_title, decision, option_kind, created_at, tool_input)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (session_id, tool_kind, tool_title, tool_input) DO UPDATE SET
                     id = excluded.id, decision = excluded.decision, option_kind = excluded.option_kind,
                     created_at = excluded.created_at, applied = 0",
                params![
                    rule_id,
                    session_id,
                    tool_kind,
                    tool_title,
                    decision.as_str(),
                    decision.option_kind(),
                    now_timestamp(),
                    tool_input
                ],
            )?;
            rule_in(conn, &session_id, &rule_id)
        })
        .await
    }

    /// The session's rules, oldest first.
    pub async fn rules(&self, session_id: &str) -> StoreResult<Vec<PermissionRule>> {
        let session_id = session_id.to_string();
        self.read(move |conn| rules_in(conn, &session_id)).await
    }

    /// The session's rule for a tool and exactly this input, if there is one.
    pub async fn rule_for(&self, session_id: &str, tool: ToolMatch) -> StoreResult<Option<PermissionRule>> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT {RULE_COLUMNS} FROM permission_rules
                     WHERE session_id = ?1 AND tool_kind = ?2 AND tool_title = ?3 AND tool_input = ?4"
                ))?
                .query_row([&session_id, &tool.kind, &tool.title, &tool.input], rule_from_row)
                .optional()?)
        })
        .await
    }

    /// Counts one request answered by the rule.
    pub async fn rule_applied(&self, rule_id: &str) -> StoreResult<()> {
        let rule_id = rule_id.to_string();
        self.write(move |conn, _| {
            conn.execute("UPDATE permission_rules SET applied = applied + 1 WHERE id = ?1", [rule_id])?;
            Ok(())
        })
        .await
    }

    /// Removes a rule of the session and returns it as it was.
    pub async fn revoke_rule(&self, session_id: &str, rule_id: &str) -> StoreResult<PermissionRule> {
        let (session_id, rule_id) = (session_id.to_string(), rule_id.to_string());
        self.write(move |conn, _| {
            let rule = rule_in(conn, &session_id, &rule_id)?;
            conn.execute("DELETE FROM permission_rules WHERE id = ?1", [&rule_id])?;
            Ok(rule)
        })
        .await
    }

    /// How the journal says a permission request ended: `Some(Some(option))` answered,
    /// `Some(None)` abandoned, `None` when it holds no end for it.
    pub async fn permission_resolution(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> StoreResult<Option<Option<String>>> {
        let (session_id, request_id) = (session_id.to_string(), request_id.to_string());
        self.read(move |conn| {
            let found: Option<Option<String>> = conn
                .prepare_cached(PERMISSION_RESOLVED)?
                .query_row([&session_id, &request_id], |r| r.get(0))
                .optional()?;
            Ok(found)
        })
        .await
    }
}
