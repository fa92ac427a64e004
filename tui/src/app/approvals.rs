//! The approval queue (`A`: every pending permission request of every session, answered right
//! there) and the standing answers of a session (`P`: listed, revoked). Both are overlays whose
//! state lives in the overlay; they follow the server through `permission.queue_changed`.

use baton_protocol::{PendingPermission, PermissionOption, PermissionQueueChanged, PermissionRule};

use crate::action::Action;
use crate::command::Request;

use super::{App, Overlay};

/// The queue as last listed, and the request under the cursor.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApprovalQueue {
    pub requests: Vec<PendingPermission>,
    /// Requests waiting in all (the list shows the first page).
    pub total: u64,
    pub selected: usize,
    /// The first answer to `permission.list` has arrived.
    pub loaded: bool,
    in_flight: bool,
    /// The queue changed while a listing was on its way: list again when it arrives.
    stale: bool,
}

/// A session's standing answers, and the one under the cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct RulesView {
    pub session_id: String,
    pub label: String,
    pub rules: Vec<PermissionRule>,
    pub selected: usize,
    pub loaded: bool,
}

/// The option of `family` (`allow` / `reject`) to answer with: the once-only one when offered,
/// else any of the family.
pub(super) fn pick_option(options: &[PermissionOption], family: &str) -> Option<String> {
    let once = format!("{family}_once");
    options
        .iter()
        .find(|o| o.kind == once)
        .or_else(|| options.iter().find(|o| o.kind.starts_with(family)))
        .map(|o| o.option_id.clone())
}

impl App {
    /// `A`: opens the approval queue and lists it.
    pub(super) fn open_approvals(&mut self) {
        self.overlay = Some(Overlay::Approvals(ApprovalQueue::default()));
        self.list_approvals();
    }

    fn list_approvals(&mut self) {
        let Some(Overlay::Approvals(queue)) = &mut self.overlay else { return };
        if queue.in_flight {
            queue.stale = true;
            return;
        }
        queue.in_flight = true;
        self.send(Request::ListPermissions);
    }

    /// `P`: opens the standing answers of the highlighted session (the one every key acts on).
    pub(super) fn open_rules(&mut self) {
        let session_id = self.key_target();
        let Some(session_id) = session_id else {
            self.flash("no session selected", true);
            return;
        };
        let label = self.sessions.get(&session_id).map_or_else(|| session_id.clone(), crate::sessions::label);
        self.overlay = Some(Overlay::Rules(RulesView {
            session_id: session_id.clone(),
            label,
            rules: Vec::new(),
            selected: 0,
            loaded: false,
        }));
        self.send(Request::ListRules { session_id });
    }

    /// Keys while the queue or the rules are open; false for the ones they leave alone.
    pub(super) fn approvals_action(&mut self, action: &Action) -> bool {
        match (&mut self.overlay, action) {
            (Some(Overlay::Approvals(queue)), Action::MoveUp) => queue.selected = queue.selected.saturating_sub(1),
            (Some(Overlay::Approvals(queue)), Action::MoveDown) => {
                queue.selected = (queue.selected + 1).min(queue.requests.len().saturating_sub(1));
            }
            (Some(Overlay::Approvals(_)), Action::AllowPermission) => {
                self.answer_selected(|options| pick_option(options, "allow"))
            }
            (Some(Overlay::Approvals(_)), Action::RejectPermission) => {
                self.answer_selected(|options| pick_option(options, "reject"))
            }
            (Some(Overlay::Approvals(_)), Action::ChooseOption(index)) => {
                let index = *index;
                self.answer_selected(|options| options.get(index).map(|o| o.option_id.clone()))
            }
            (Some(Overlay::Approvals(queue)), Action::OpenSelected) => {
                let Some(session_id) = queue.requests.get(queue.selected).map(|r| r.session_id.clone()) else {
                    return true;
                };
                self.overlay = None;
                self.open_session(&session_id);
                self.narrow_shows_session = true;
            }
            (Some(Overlay::Rules(view)), Action::MoveUp) => view.selected = view.selected.saturating_sub(1),
            (Some(Overlay::Rules(view)), Action::MoveDown) => {
                view.selected = (view.selected + 1).min(view.rules.len().saturating_sub(1));
            }
            (Some(Overlay::Rules(view)), Action::RevokeRule) => {
                let Some(rule) = view.rules.get(view.selected) else {
                    self.flash("no standing answer to revoke", true);
                    return true;
                };
                let (session_id, rule_id) = (view.session_id.clone(), rule.rule_id.clone());
                self.send(Request::RevokeRule { session_id, rule_id });
            }
            _ => return false,
        }
        self.dirty = true;
        true
    }

    fn answer_selected(&mut self, choose: impl Fn(&[PermissionOption]) -> Option<String>) {
        let Some(Overlay::Approvals(queue)) = &self.overlay else { return };
        let Some(request) = queue.requests.get(queue.selected) else {
            self.flash("no permission request is waiting", true);
            return;
        };
        match choose(&request.options) {
            Some(option_id) => {
                let (session_id, request_id) = (request.session_id.clone(), request.request_id.clone());
                self.send(Request::RespondPermission { session_id, request_id, option_id });
            }
            None => {
                let title = request.task_title.clone();
                self.flash(format!("the request of “{title}” has no such option"), true);
            }
        }
    }

    /// `permission.list` answered.
    pub(super) fn approvals_listed(&mut self, requests: Vec<PendingPermission>, total: u64) {
        let Some(Overlay::Approvals(queue)) = &mut self.overlay else { return };
        // The cursor stays on the request it was on while that one waits.
        let on = queue.requests.get(queue.selected).map(|r| r.request_id.clone());
        queue.selected = on
            .and_then(|id| requests.iter().position(|r| r.request_id == id))
            .unwrap_or(queue.selected)
            .min(requests.len().saturating_sub(1));
        queue.requests = requests;
        queue.total = total;
        queue.loaded = true;
        queue.in_flight = false;
        if std::mem::take(&mut queue.stale) {
            self.list_approvals();
        }
        self.dirty = true;
    }

    /// `permission.list` failed: the queue says so rather than waiting for ever.
    pub(super) fn approvals_failed(&mut self) {
        if let Some(Overlay::Approvals(queue)) = &mut self.overlay {
            queue.in_flight = false;
            queue.loaded = true;
        }
    }

    pub(super) fn rules_listed(&mut self, session_id: &str, rules: Vec<PermissionRule>) {
        let Some(Overlay::Rules(view)) = &mut self.overlay else { return };
        if view.session_id != session_id {
            return;
        }
        view.selected = view.selected.min(rules.len().saturating_sub(1));
        view.rules = rules;
        view.loaded = true;
        self.dirty = true;
    }

    pub(super) fn rule_revoked(&mut self, rule: PermissionRule) {
        self.flash(format!("revoked the standing answer for {} “{}”", rule.tool_kind, rule.tool_title), false);
        self.send(Request::ListRules { session_id: rule.session_id });
    }

    /// A new connection: what the open queue or rules show is listed again (the listing in
    /// flight went with the old connection).
    pub(super) fn approvals_reconnected(&mut self) {
        match &mut self.overlay {
            Some(Overlay::Approvals(queue)) => {
                queue.in_flight = false;
                queue.stale = false;
                self.list_approvals();
            }
            Some(Overlay::Rules(view)) => {
                let session_id = view.session_id.clone();
                self.send(Request::ListRules { session_id });
            }
            _ => {}
        }
    }

    /// `permission.queue_changed`: an open queue lists again; open rules of that session too
    /// when a rule answered (its count moved).
    pub(super) fn on_queue_changed(&mut self, changed: &PermissionQueueChanged) {
        match &self.overlay {
            Some(Overlay::Approvals(_)) => self.list_approvals(),
            Some(Overlay::Rules(view)) if view.session_id == changed.session_id && changed.rule_id.is_some() => {
                let session_id = view.session_id.clone();
                self.send(Request::ListRules { session_id });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pick_option;
    use baton_protocol::PermissionOption;

    fn option(id: &str, kind: &str) -> PermissionOption {
        PermissionOption { option_id: id.into(), name: id.into(), kind: kind.into() }
    }

    #[test]
    fn y_and_n_pick_the_once_only_option_first() {
        let options = [option("aa", "allow_always"), option("a", "allow_once"), option("rr", "reject_always")];
        assert_eq!(pick_option(&options, "allow").as_deref(), Some("a"));
        assert_eq!(pick_option(&options, "reject").as_deref(), Some("rr"), "else any of the family");
    }
}
