//! The agent's permission requests (ACP `session/request_permission`) waiting for a client's
//! answer: each has the options offered and the channel the answer goes back on.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use baton_protocol::PermissionOption;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::agent::acp::RpcError;

/// Answered requests remembered per execution, so a late second answer is told what the first
/// one chose even before the journal holds it (the journal answers for older ones).
const REMEMBERED_ANSWERS: usize = 256;

/// A request as the approval queue shows it.
#[derive(Debug, Clone)]
pub struct Asked {
    pub request_id: String,
    /// The agent's ACP `toolCall`, as sent.
    pub tool_call: Value,
    pub options: Vec<PermissionOption>,
    /// Its `permission_request` event (0 until journaled).
    pub seq: u64,
    pub requested_at: String,
}

struct Pending {
    asked: Asked,
    answer: oneshot::Sender<Option<String>>,
}

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// No request of that id was ever pending here.
    Unknown(String),
    /// The option is not one the request offers.
    NotOffered { option_id: String, offered: Vec<String> },
    /// Answered already: the option chosen then (None: abandoned).
    AlreadyAnswered(Option<String>),
}

/// An answer taken for a request: the request leaves the queue at once (a second answer is
/// refused from now on), and the agent hears it when `deliver` is called.
pub struct Claimed {
    pub asked: Asked,
    pub option: PermissionOption,
    answer: oneshot::Sender<Option<String>>,
}

impl Claimed {
    pub fn deliver(self) {
        // The agent's side may be gone already (it exited): nobody is left to tell.
        let _ = self.answer.send(Some(self.option.option_id));
    }
}

#[derive(Default)]
struct Requests {
    pending: HashMap<String, Pending>,
    /// (request id, choice), oldest first.
    answered: VecDeque<(String, Option<String>)>,
}

impl Requests {
    fn remember(&mut self, request_id: String, choice: Option<String>) {
        if self.answered.len() == REMEMBERED_ANSWERS {
            self.answered.pop_front();
        }
        self.answered.push_back((request_id, choice));
    }
}

/// Pending requests by request id. An answer of `None` is `cancelled`.
#[derive(Default)]
pub struct Permissions {
    requests: Mutex<Requests>,
}

/// A new request id.
pub fn new_request_id() -> String {
    format!("perm-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

impl Permissions {
    fn requests(&self) -> std::sync::MutexGuard<'_, Requests> {
        // Entries are inserted and removed whole: a panic elsewhere cannot leave one torn.
        self.requests.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new request offering `options`: its id, and where its answer arrives.
    pub fn register(
        &self,
        tool_call: Value,
        options: &[PermissionOption],
    ) -> (String, oneshot::Receiver<Option<String>>) {
        let request_id = new_request_id();
        let (answer, receiver) = oneshot::channel();
        let asked = Asked {
            request_id: request_id.clone(),
            tool_call,
            options: options.to_vec(),
            seq: 0,
            requested_at: baton_protocol::now_timestamp(),
        };
        self.requests().pending.insert(request_id.clone(), Pending { asked, answer });
        (request_id, receiver)
    }

    /// Notes the seq of the request's journal event.
    pub fn journaled(&self, request_id: &str, seq: u64) {
        if let Some(pending) = self.requests().pending.get_mut(request_id) {
            pending.asked.seq = seq;
        }
    }

    /// Takes `option_id` as the answer of a pending request (see [`Claimed`]).
    pub fn claim(&self, request_id: &str, option_id: &str) -> Result<Claimed, Refusal> {
        let mut requests = self.requests();
        let Some(request) = requests.pending.get(request_id) else {
            return Err(match requests.answered.iter().rev().find(|(id, _)| id == request_id) {
                Some((_, choice)) => Refusal::AlreadyAnswered(choice.clone()),
                None => Refusal::Unknown(request_id.to_string()),
            });
        };
        let Some(option) = request.asked.options.iter().find(|o| o.option_id == option_id).cloned() else {
            let offered = request.asked.options.iter().map(|o| o.option_id.clone()).collect();
            return Err(Refusal::NotOffered { option_id: option_id.to_string(), offered });
        };
        let Some(Pending { asked, answer }) = requests.pending.remove(request_id) else {
            return Err(Refusal::Unknown(request_id.to_string()));
        };
        requests.remember(request_id.to_string(), Some(option_id.to_string()));
        Ok(Claimed { asked, option, answer })
    }

    /// Answers a pending request with one of its options at once.
    #[cfg(test)]
    pub fn answer(&self, request_id: &str, option_id: &str) -> Result<(), Refusal> {
        self.claim(request_id, option_id).map(Claimed::deliver)
    }

    /// Some request waits for an answer.
    pub fn any_pending(&self) -> bool {
        !self.requests().pending.is_empty()
    }

    /// The requests waiting for an answer.
    pub fn pending(&self) -> Vec<Asked> {
        self.requests().pending.values().map(|p| p.asked.clone()).collect()
    }

    /// Answers every pending request `cancelled` (on cancel, stop or exit: ACP requires an answer).
    pub fn cancel_all(&self) {
        let drained: Vec<Pending> = {
            let mut requests = self.requests();
            let drained: Vec<Pending> = requests.pending.drain().map(|(_, request)| request).collect();
            for request in &drained {
                requests.remember(request.asked.request_id.clone(), None);
            }
            drained
        };
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn option(id: &str) -> PermissionOption {
        PermissionOption { option_id: id.into(), name: id.into(), kind: "allow_once".into() }
    }

    #[tokio::test]
    async fn an_answer_must_be_offered_and_reaches_the_agent_once() {
        let permissions = Permissions::default();
        let (id, answer) = permissions.register(Value::Null, &[option("allow"), option("deny")]);
        assert!(matches!(permissions.answer(&id, "maybe"), Err(Refusal::NotOffered { .. })));
        assert!(matches!(permissions.answer("perm-unknown", "allow"), Err(Refusal::Unknown(_))));
        permissions.answer(&id, "allow").unwrap();
        assert_eq!(answer.await, Ok(Some("allow".to_string())));
        assert_eq!(
            permissions.answer(&id, "deny"),
            Err(Refusal::AlreadyAnswered(Some("allow".into()))),
            "answered once, and a second answer is told the first"
        );
    }

    #[tokio::test]
    async fn cancel_all_answers_every_pending_request_cancelled() {
        let permissions = Permissions::default();
        let (first_id, first) = permissions.register(Value::Null, &[option("allow")]);
        let (_, second) = permissions.register(Value::Null, &[option("allow")]);
        assert_eq!(permissions.pending().len(), 2);
        permissions.cancel_all();
        assert!(permissions.pending().is_empty());
        assert_eq!(permissions.answer(&first_id, "allow"), Err(Refusal::AlreadyAnswered(None)));
        assert_eq!((first.await, second.await), (Ok(None), Ok(None)));
    }

    #[test]
    fn a_request_without_options_is_invalid() {
        assert!(parse_options(&json!({"options": []})).is_err());
        let parsed = parse_options(&json!({"options": [{"optionId": "a", "name": "A", "kind": "allow_once"}]}));
        assert_eq!(parsed.unwrap().len(), 1);
    }
}
