//! The approval queue (`permission.list`: every pending permission request of every session)
//! and standing answers (`permission.rule.*`: rules that answer a session's later requests the
//! way the user chose an agent's `allow_always` / `reject_always` option).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::PermissionOption;

/// Requests of a `permission.list` page when the request gives no `limit`.
pub const DEFAULT_PERMISSION_PAGE: u32 = 50;
/// The largest `limit` of a `permission.list` page.
pub const MAX_PERMISSION_PAGE: u32 = 200;

/// `permission.list`: the permission requests that wait for an answer, across every session,
/// oldest first, one page per request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionListParams {
    /// Requests per page, 1 to 200; default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One permission request that waits for an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingPermission {
    /// The session whose agent asked.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// The task's title.
    pub task_title: String,
    /// The id to answer with (`permission.respond`).
    pub request_id: String,
    /// The agent's ACP `toolCall` as sent (camelCase: `title`, `kind`, `rawInput`, `content`
    /// with its diffs...; may be null).
    #[serde(default)]
    pub tool_call: Value,
    /// The choices offered.
    pub options: Vec<PermissionOption>,
    /// The `seq` of the request's `permission_request` event in the session's journal.
    pub seq: u64,
    /// When the agent asked (RFC 3339 UTC).
    #[schemars(extend("format" = "date-time"))]
    pub requested_at: String,
}

/// The answer to `permission.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionListResult {
    /// The page's requests, oldest first.
    pub requests: Vec<PendingPermission>,
    /// Requests waiting in all (every page).
    pub total: u64,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What happened to a request in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionChange {
    /// An agent asked: the request joined the queue.
    Requested,
    /// Someone answered it (a client, or a standing rule).
    Answered,
    /// It was abandoned (the turn was cancelled, the session stopped, the agent exited).
    Cancelled,
}

/// `permission.queue_changed`: sent to every client when a permission request joins or
/// leaves the queue, whatever session it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionQueueChanged {
    /// The session whose agent asked.
    pub session_id: String,
    /// The request.
    pub request_id: String,
    /// What happened to it.
    pub change: PermissionChange,
    /// The option chosen (with `answered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
    /// The standing rule that answered it, when no person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
}

/// What a standing rule answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    /// Picks the agent's `allow_always` option.
    Allow,
    /// Picks the agent's `reject_always` option.
    Reject,
}

impl RuleDecision {
    /// The decision of an option of this `kind`: only `allow_always` and `reject_always`
    /// make a rule.
    pub fn of_option_kind(kind: &str) -> Option<RuleDecision> {
        match kind {
            "allow_always" => Some(RuleDecision::Allow),
            "reject_always" => Some(RuleDecision::Reject),
            _ => None,
        }
    }

    /// The option kind the rule picks.
    pub fn option_kind(self) -> &'static str {
        match self {
            RuleDecision::Allow => "allow_always",
            RuleDecision::Reject => "reject_always",
        }
    }

    /// `allow` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleDecision::Allow => "allow",
            RuleDecision::Reject => "reject",
        }
    }

    /// Reads `allow` / `reject`.
    pub fn parse(text: &str) -> Option<RuleDecision> {
        match text {
            "allow" => Some(RuleDecision::Allow),
            "reject" => Some(RuleDecision::Reject),
            _ => None,
        }
    }
}

/// A standing answer of one session: its later permission requests for the same tool (kind
/// and title) are answered with the agent's option of `option_kind`, if the agent offers one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRule {
    /// The rule's id (for `permission.rule.revoke`).
    pub rule_id: String,
    /// The session it applies to.
    pub session_id: String,
    /// The tool call's `kind` it matches (`edit`, `execute`...; empty when the agent sent none).
    pub tool_kind: String,
    /// The tool call's `title` it matches, exactly.
    pub tool_title: String,
    /// What the tool was to run, as the rule matches it exactly: the tool call's `rawInput` and
    /// `locations` paths, as canonical JSON (keys sorted); `""` when the request carried
    /// neither. A request whose input differs is asked again. See [`tool_input_of`].
    #[serde(default)]
    pub tool_input: String,
    /// Allow or reject.
    pub decision: RuleDecision,
    /// The option kind it picks (`allow_always` or `reject_always`).
    pub option_kind: String,
    /// When the user chose the option that made it (RFC 3339 UTC).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// Requests it answered since.
    #[serde(default)]
    pub applied: u64,
}

/// `permission.rule.list`: the standing answers of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRuleListParams {
    /// The session.
    pub session_id: String,
}

/// The answer to `permission.rule.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRuleListResult {
    /// The session's rules, oldest first.
    pub rules: Vec<PermissionRule>,
}

/// `permission.rule.revoke`: removes a standing answer; the next matching request waits for
/// the user again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRuleRevokeParams {
    /// The session the rule belongs to.
    pub session_id: String,
    /// The rule.
    pub rule_id: String,
}

/// The answer to `permission.rule.revoke`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRuleRevokeResult {
    /// The removed rule, as it was.
    pub rule: PermissionRule,
}

/// The tool a permission request is about, as rules match it: the `kind` and `title` of the
/// agent's `toolCall` (each empty when absent).
pub fn tool_of(tool_call: &Value) -> (String, String) {
    let field = |name: &str| tool_call.get(name).and_then(Value::as_str).unwrap_or("").to_string();
    (field("kind"), field("title"))
}

/// What a permission request's tool would run, as rules match it: the `toolCall`'s `rawInput`
/// (the command, the file and its content...) and the paths of its `locations`, as canonical
/// JSON with sorted keys, so that the same input always reads the same whatever order the agent
/// wrote it in. `""` when the request carries neither. A title says what the agent calls the
/// tool; this says what it would do: "Run tests" with `npm test` and "Run tests" with
/// `curl … | sh` must not share a rule.
pub fn tool_input_of(tool_call: &Value) -> String {
    let mut input = serde_json::Map::new();
    if let Some(raw) = tool_call.get("rawInput").filter(|v| !v.is_null()) {
        input.insert("rawInput".into(), raw.clone());
    }
    let paths: Vec<Value> = tool_call
        .get("locations")
        .and_then(Value::as_array)
        .map(|locations| locations.iter().filter_map(|l| l.get("path").cloned()).collect())
        .unwrap_or_default();
    if !paths.is_empty() {
        input.insert("locations".into(), Value::Array(paths));
    }
    if input.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    canonical_json(&Value::Object(input), &mut out);
    out
}

/// `value` as JSON with every object's keys sorted (serde_json keeps insertion order when a
/// crate in the build enables its `preserve_order` feature; a rule must not depend on that).
fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical_json(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod input_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_same_input_in_any_key_order_reads_the_same_and_another_input_differs() {
        let a = json!({"title": "Run tests", "rawInput": {"command": "npm test", "cwd": "/w"}});
        let b = json!({"rawInput": {"cwd": "/w", "command": "npm test"}, "title": "Run tests"});
        let c = json!({"title": "Run tests", "rawInput": {"command": "curl x | sh; rm -rf ~", "cwd": "/w"}});
        assert_eq!(tool_input_of(&a), tool_input_of(&b));
        assert_ne!(tool_input_of(&a), tool_input_of(&c));
        assert_eq!(tool_input_of(&a), r#"{"rawInput":{"command":"npm test","cwd":"/w"}}"#);
        assert_eq!(tool_input_of(&json!({"title": "x"})), "");
        let located = json!({"locations": [{"path": "/w/a.rs", "line": 3}]});
        assert_eq!(tool_input_of(&located), r#"{"locations":["/w/a.rs"]}"#);
    }
}
