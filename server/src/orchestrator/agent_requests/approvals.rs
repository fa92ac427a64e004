//! The approval queue: every pending permission request across sessions, answered
//! from any client; a second answer is refused with what the first one chose.

use std::collections::HashMap;

use baton_protocol::*;
use serde_json::json;

use crate::orchestrator::agent_requests::permissions::{Asked, Refusal};
use crate::orchestrator::{ApiResult, Orchestrator};
use crate::store::ToolMatch;

/// A page cursor of `permission.list`: the request time and id of the last request sent (the
/// order of the queue). `|` separates them: neither ever contains it.
fn encode_cursor(asked: &Asked) -> String {
    format!("{}|{}", asked.requested_at, asked.request_id)
}

fn decode_cursor(cursor: &str) -> ApiResult<(String, String)> {
    let invalid = || ErrorPayload::validation("cursor is not one this server handed out (pass next_cursor back as is)");
    let (requested_at, request_id) = cursor.split_once('|').ok_or_else(invalid)?;
    validate_id("cursor", request_id).map_err(|_| invalid())?;
    Ok((requested_at.to_string(), request_id.to_string()))
}

/// The words of an answer already given, for the error a second answer gets.
fn already_answered(request_id: &str, choice: Option<&str>) -> ErrorPayload {
    let message = match choice {
        Some(option_id) => format!("permission request {request_id} was already answered: {option_id:?} was chosen"),
        None => format!(
            "permission request {request_id} was already answered: it was abandoned (the turn was cancelled, \
             the session stopped or its agent exited)"
        ),
    };
    ErrorPayload::conflict(message).with_details(json!({"request_id": request_id, "option_id": choice}))
}

impl Orchestrator {
    /// `permission.list`: the pending requests of every session, oldest first.
    pub async fn permission_list(&self, params: PermissionListParams) -> ApiResult<PermissionListResult> {
        let after = params.cursor.as_deref().map(decode_cursor).transpose()?;
        let limit = params.limit.unwrap_or(DEFAULT_PERMISSION_PAGE).clamp(1, MAX_PERMISSION_PAGE) as usize;
        let executions: Vec<_> = self.executions.lock().map(|map| map.values().cloned().collect()).unwrap_or_default();
        let mut queue: Vec<(String, Asked)> = executions
            .iter()
            .flat_map(|execution| {
                let session_id = execution.session_id().to_string();
                execution.pending_permissions().into_iter().map(move |asked| (session_id.clone(), asked))
            })
            .collect();
        queue.sort_by(|(_, a), (_, b)| (&a.requested_at, &a.request_id).cmp(&(&b.requested_at, &b.request_id)));
        let total = queue.len() as u64;
        let start = match &after {
            Some(key) => queue.partition_point(|(_, a)| (&a.requested_at, &a.request_id) <= (&key.0, &key.1)),
            None => 0,
        };
        let page: Vec<(String, Asked)> = queue.into_iter().skip(start).take(limit + 1).collect();
        let next_cursor = (page.len() > limit).then(|| encode_cursor(&page[limit - 1].1));
        let mut tasks: HashMap<String, (String, String)> = HashMap::new();
        let mut requests = Vec::with_capacity(limit);
        for (session_id, asked) in page.into_iter().take(limit) {
            if !tasks.contains_key(&session_id) {
                // A session deleted since its agent asked has nothing left to show.
                let Ok((session, _)) = self.store.get_session(&session_id).await else { continue };
                tasks.insert(session_id.clone(), (session.task_id, session.task_title));
            }
            let (task_id, task_title) = tasks.get(&session_id).cloned().unwrap_or_default();
            requests.push(PendingPermission {
                session_id,
                task_id,
                task_title,
                request_id: asked.request_id,
                tool_call: asked.tool_call,
                options: asked.options,
                seq: asked.seq,
                requested_at: asked.requested_at,
            });
        }
        Ok(PermissionListResult { requests, total, next_cursor })
    }

    /// `permission.respond`: answers a pending request. An answer to a request answered
    /// before (by another client, a standing rule, or abandoned) is a `CONFLICT` that says
    /// what was chosen. Choosing an `allow_always` / `reject_always` option records a standing
    /// rule first, so that the agent's next request already finds it.
    pub async fn permission_respond(&self, params: PermissionRespondParams) -> ApiResult<PermissionRespondResult> {
        self.store.get_session(&params.session_id).await?;
        let refused = match self.execution(&params.session_id) {
            Some(execution) => match execution.claim_permission(&params.request_id, &params.option_id) {
                Ok(claimed) => {
                    self.keep_standing_answer(&params.session_id, &claimed.asked, &claimed.option).await;
                    claimed.deliver();
                    return Ok(PermissionRespondResult { request_id: params.request_id });
                }
                Err(refusal) => refusal,
            },
            None => Refusal::Unknown(params.request_id.clone()),
        };
        match refused {
            Refusal::AlreadyAnswered(choice) => Err(already_answered(&params.request_id, choice.as_deref())),
            Refusal::NotOffered { option_id, offered } => Err(ErrorPayload::validation(format!(
                "option {option_id:?} was not offered; choose one of {offered:?}"
            ))),
            // Not this execution's: the journal knows whether an earlier one answered it.
            Refusal::Unknown(request_id) => {
                match self.store.permission_resolution(&params.session_id, &request_id).await? {
                    Some(choice) => Err(already_answered(&request_id, choice.as_deref())),
                    None => Err(ErrorPayload::not_found(format!("no pending permission request {request_id}"))),
                }
            }
        }
    }

    /// Records the rule an `allow_always` / `reject_always` choice makes; other choices make
    /// none. A failure is logged: the answer itself still goes to the agent.
    async fn keep_standing_answer(&self, session_id: &str, asked: &Asked, option: &PermissionOption) {
        let Some(decision) = RuleDecision::of_option_kind(&option.kind) else { return };
        match self.store.put_rule(session_id, ToolMatch::of(&asked.tool_call), decision).await {
            Ok(rule) => tracing::info!(session_id, rule_id = %rule.rule_id, "standing answer recorded"),
            Err(e) => tracing::error!(session_id, "cannot record the standing answer: {e}"),
        }
    }

    /// `permission.rule.list`.
    pub async fn permission_rules(&self, session_id: &str) -> ApiResult<PermissionRuleListResult> {
        self.store.get_session(session_id).await?;
        let rules = self.store.rules(session_id).await?;
        Ok(PermissionRuleListResult { rules })
    }

    /// `permission.rule.revoke`.
    pub async fn revoke_permission_rule(
        &self,
        params: PermissionRuleRevokeParams,
    ) -> ApiResult<PermissionRuleRevokeResult> {
        self.store.get_session(&params.session_id).await?;
        let rule = self.store.revoke_rule(&params.session_id, &params.rule_id).await?;
        Ok(PermissionRuleRevokeResult { rule })
    }
}
