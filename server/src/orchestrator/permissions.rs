//! The agent's permission requests (ACP `session/request_permission`) waiting for a client's
//! answer: each has the options offered and the channel the answer goes back on.

use std::collections::HashMap;
use std::sync::Mutex;

use baton_protocol::PermissionOption;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::agent::acp::RpcError;

struct Pending {
    options: Vec<String>,
    answer: oneshot::Sender<Option<String>>,
}

/// Pending requests by request id. An answer of `None` is `cancelled`.
#[derive(Default)]
pub struct Permissions {
    pending: Mutex<HashMap<String, Pending>>,
}

impl Permissions {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        // Entries are inserted and removed whole: a panic elsewhere cannot leave one torn.
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new request offering `options`: its id, and where its answer arrives.
    pub fn register(&self, options: &[PermissionOption]) -> (String, oneshot::Receiver<Option<String>>) {
        let request_id = format!("perm-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let (answer, receiver) = oneshot::channel();
        let options = options.iter().map(|o| o.option_id.clone()).collect();
        self.pending().insert(request_id.clone(), Pending { options, answer });
        (request_id, receiver)
    }

    /// Answers a pending request with one of its options. Errors name what is wrong.
    pub fn answer(&self, request_id: &str, option_id: &str) -> Result<(), String> {
        let mut pending = self.pending();
        let Some(request) = pending.get(request_id) else {
            return Err(format!("no pending permission request {request_id}"));
        };
        if !request.options.iter().any(|o| o == option_id) {
            return Err(format!("option {option_id:?} was not offered; choose one of {:?}", request.options));
        }
        if let Some(request) = pending.remove(request_id) {
            // The agent's side may be gone already (it exited): nobody is left to tell.
            let _ = request.answer.send(Some(option_id.to_string()));
        }
        Ok(())
    }

    /// Some request waits for an answer.
    pub fn any_pending(&self) -> bool {
        !self.pending().is_empty()
    }

    /// Answers every pending request `cancelled` (on cancel, stop or exit: ACP requires an answer).
    pub fn cancel_all(&self) {
        let drained: Vec<Pending> = self.pending().drain().map(|(_, request)| request).collect();
        for request in drained {
            let _ = request.answer.send(None);
        }
    }
}

/// The options of a session/request_permission; at least one is required.
pub fn parse_options(params: &Value) -> Result<Vec<PermissionOption>, RpcError> {
    let options: Vec<PermissionOption> = params
        .get("options")
        .and_then(Value::as_array)
        .map(|options| {
            options
                .iter()
                .filter_map(|o| {
                    Some(PermissionOption {
                        option_id: o.get("optionId")?.as_str()?.to_string(),
                        name: o.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                        kind: o.get("kind").and_then(Value::as_str).unwrap_or("").to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if options.is_empty() {
        return Err(RpcError::invalid_params("session/request_permission needs at least one option"));
    }
    Ok(options)
}

/// The ACP answer to a permission request.
pub fn outcome(choice: Option<String>) -> Value {
    match choice {
        Some(option_id) => json!({"outcome": {"outcome": "selected", "optionId": option_id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(id: &str) -> PermissionOption {
        PermissionOption { option_id: id.into(), name: id.into(), kind: "allow_once".into() }
    }

    #[tokio::test]
    async fn an_answer_must_be_offered_and_reaches_the_agent_once() {
        let permissions = Permissions::default();
        let (id, answer) = permissions.register(&[option("allow"), option("deny")]);
        assert!(permissions.answer(&id, "maybe").unwrap_err().contains("was not offered"));
        assert!(permissions.answer("perm-unknown", "allow").unwrap_err().starts_with("no pending"));
        permissions.answer(&id, "allow").unwrap();
        assert_eq!(answer.await, Ok(Some("allow".to_string())));
        assert!(permissions.answer(&id, "allow").is_err(), "answered once");
    }

    #[tokio::test]
    async fn cancel_all_answers_every_pending_request_cancelled() {
        let permissions = Permissions::default();
        let (_, first) = permissions.register(&[option("allow")]);
        let (_, second) = permissions.register(&[option("allow")]);
        permissions.cancel_all();
        assert_eq!((first.await, second.await), (Ok(None), Ok(None)));
        assert_eq!(outcome(None), json!({"outcome": {"outcome": "cancelled"}}));
    }

    #[test]
    fn a_request_without_options_is_invalid() {
        assert!(parse_options(&json!({"options": []})).is_err());
        let parsed = parse_options(&json!({"options": [{"optionId": "a", "name": "A", "kind": "allow_once"}]}));
        assert_eq!(parsed.unwrap().len(), 1);
    }
}
