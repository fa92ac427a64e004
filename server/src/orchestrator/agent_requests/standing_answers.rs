//! Standing answers: a permission request matching one of its session's rules
//! (recorded when the user chose an `allow_always` / `reject_always` option, see
//! `approvals.rs`) is answered by batond with the agent's option of the rule's kind. Without a
//! rule, or when the agent offers no option of that kind, the user decides: batond never
//! answers on a guess.

use baton_protocol::{tool_of, PermissionOption, RuleDecision, SessionEvent};
use serde_json::Value;

use crate::orchestrator::agent_requests::permissions;
use crate::store::{Store, ToolMatch};

/// A request answered by a rule.
pub struct Applied {
    pub request_id: String,
    pub option_id: String,
    pub rule_id: String,
}

/// The transcript's line for a request a rule answered.
fn applied_message(
    decision: RuleDecision,
    tool_kind: &str,
    tool_title: &str,
    option: &PermissionOption,
    created_at: &str,
) -> String {
    let verb = match decision {
        RuleDecision::Allow => "Allowed",
        RuleDecision::Reject => "Rejected",
    };
    let kind = if tool_kind.is_empty() { String::new() } else { format!("{tool_kind} ") };
    format!(
        "{verb} by your standing rule: {kind}{tool_title:?} → {:?} ({}, set {created_at}).",
        option.name, option.kind
    )
}

/// Answers the request with the session's rule for its tool, if one applies: journals the
/// request, the rule's line and the answer (in one write), and counts the rule's use.
pub async fn apply(
    store: &Store,
    session_id: &str,
    tool_call: &Value,
    options: &[PermissionOption],
) -> Option<Applied> {
    let (tool_kind, tool_title) = tool_of(tool_call);
    let rule = match store.rule_for(session_id, ToolMatch::of(tool_call)).await {
        Ok(rule) => rule?,
        Err(e) => {
            tracing::error!(session_id, "cannot read the standing answers, asking the user: {e}");
            return None;
        }
    };
    let option = options.iter().find(|o| o.kind == rule.option_kind)?;
    let request_id = permissions::new_request_id();
    let events = vec![
        SessionEvent::PermissionRequest {
            request_id: request_id.clone(),
            tool_call: tool_call.clone(),
            options: options.to_vec(),
        },
        SessionEvent::status(applied_message(rule.decision, &tool_kind, &tool_title, option, &rule.created_at)),
        SessionEvent::PermissionResolved { request_id: request_id.clone(), option_id: Some(option.option_id.clone()) },
    ];
    if let Err(e) = store.append_events(session_id, events).await {
        tracing::error!(session_id, "cannot journal a standing answer: {e}");
    }
    if let Err(e) = store.rule_applied(&rule.rule_id).await {
        tracing::error!(session_id, "cannot count a standing answer: {e}");
    }
    tracing::info!(session_id, rule_id = %rule.rule_id, %request_id, "answered by a standing rule");
    Some(Applied { request_id, option_id: option.option_id.clone(), rule_id: rule.rule_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transcript_line_names_the_rule_the_tool_and_the_answer() {
        let option =
            PermissionOption { option_id: "aa".into(), name: "Always allow".into(), kind: "allow_always".into() };
        assert_eq!(
            applied_message(RuleDecision::Allow, "edit", "Write file", &option, "2025-06-02T15:12:41.305Z"),
            "Allowed by your standing rule: edit \"Write file\" → \"Always allow\" (allow_always, set 2025-06-02T15:12:41.305Z)."
        );
        let reject = PermissionOption { option_id: "rr".into(), name: "Never".into(), kind: "reject_always".into() };
        assert!(applied_message(RuleDecision::Reject, "", "rm", &reject, "t")
            .starts_with("Rejected by your standing rule: \"rm\""));
    }
}
