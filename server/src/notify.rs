//! `--notify-command`: a command of the user's run when a session
//! starts needing the user, so a desktop notifier, ntfy or a pager hears of it with no client
//! open. It reads the `session.state_changed` notifications the hub fans out, runs once per
//! change of a session's `attention` to a reason, one run at a time per session (a change that
//! arrives meanwhile runs after it; only the newest waits), each bounded by a timeout after
//! which its process group is killed. Failures are logged, never retried.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_protocol::{Attention, Notification, StateChanged};
use tokio::sync::broadcast::error::RecvError;

use crate::hub::Hub;

/// The user's command (run with `sh -c`) and its time limit.
#[derive(Debug, Clone)]
pub struct NotifyCommand {
    pub command: String,
    pub timeout: Duration,
}

/// One run of the command: what its environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub session_id: String,
    pub task_id: String,
    pub task_title: String,
    pub attention: Attention,
}

impl Notice {
    /// A short text for people, e.g. "Fix the login test: the agent asks for a permission".
    pub fn message(&self) -> String {
        let what = match self.attention {
            Attention::Permission => "the agent asks for a permission",
            Attention::Input => "the agent's turn is over",
            Attention::Resume => "the agent is gone; resume the session",
            Attention::Failed => "the session failed",
        };
        format!("{}: {what}", self.task_title)
    }

    /// The environment the command gets (never the server's token).
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        vec![
            ("BATON_SESSION_ID", self.session_id.clone()),
            ("BATON_TASK_ID", self.task_id.clone()),
            ("BATON_TASK_TITLE", self.task_title.clone()),
            ("BATON_ATTENTION", self.attention.as_str().to_string()),
            ("BATON_MESSAGE", self.message()),
        ]
    }
}

/// Decides which state changes start a run: a session whose attention became a reason it did
/// not have in the last change seen. One run per transition, however often it is re-sent.
#[derive(Debug, Default)]
pub struct Transitions {
    last: HashMap<String, Option<Attention>>,
}

impl Transitions {
    pub fn notice(&mut self, change: &StateChanged) -> Option<Notice> {
        let before = self.last.insert(change.session_id.clone(), change.attention);
        let attention = change.attention?;
        if before == Some(Some(attention)) {
            return None;
        }
        Some(Notice {
            session_id: change.session_id.clone(),
            task_id: change.task_id.clone(),
            task_title: change.task_title.clone(),
            attention,
        })
    }

    pub fn forget(&mut self, session_ids: &[String]) {
        for session_id in session_ids {
            self.last.remove(session_id);
        }
    }
}

/// Per session: a run is under way, and the notice that waits for it to end.
#[derive(Default)]
struct Slot {
    running: bool,
    next: Option<Notice>,
}

type Slots = Arc<Mutex<HashMap<String, Slot>>>;

/// Runs `notify` for every session that starts needing the user, until the hub closes.
pub fn spawn(hub: &Hub, notify: NotifyCommand) -> tokio::task::JoinHandle<()> {
    let mut receiver = hub.subscribe();
    tokio::spawn(async move {
        let slots: Slots = Arc::default();
        let mut transitions = Transitions::default();
        loop {
            let published = match receiver.recv().await {
                Ok(published) => published,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "the notify command missed notifications (the server was too busy)");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            match &published.notification {
                Notification::StateChanged(change) => {
                    if let Some(notice) = transitions.notice(change) {
                        queue(&slots, &notify, notice);
                    }
                }
                Notification::TaskDeleted(deleted) => transitions.forget(&deleted.session_ids),
                _ => {}
            }
        }
    })
}

fn queue(slots: &Slots, notify: &NotifyCommand, notice: Notice) {
    let Ok(mut map) = slots.lock() else { return };
    let slot = map.entry(notice.session_id.clone()).or_default();
    if slot.running {
        slot.next = Some(notice);
        return;
    }
    slot.running = true;
    drop(map);
    let (slots, notify) = (slots.clone(), notify.clone());
    tokio::spawn(async move {
        let mut notice = notice;
        loop {
            run(&notify, &notice).await;
            let Ok(mut map) = slots.lock() else { return };
            let Some(slot) = map.get_mut(&notice.session_id) else { return };
            match slot.next.take() {
                Some(next) => notice = next,
                None => {
                    map.remove(&notice.session_id);
                    return;
                }
            }
        }
    });
}

/// One run: `sh -c COMMAND` in its own process group, killed whole at the timeout.
async fn run(notify: &NotifyCommand, notice: &Notice) {
    let session_id = &notice.session_id;
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&notify.command)
        .envs(notice.environment())
        .env_remove("BATON_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::umask::for_user(command.as_std_mut());
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::error!(%session_id, "cannot run the notify command: {e}");
            return;
        }
    };
    let pid = child.id();
    match tokio::time::timeout(notify.timeout, child.wait_with_output()).await {
        Ok(Ok(output)) if output.status.success() => {
            tracing::debug!(%session_id, attention = %notice.attention, "ran the notify command");
        }
        Ok(Ok(output)) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stderr = stderr.trim();
            tracing::warn!(%session_id, status = %output.status, %stderr, "the notify command failed");
        }
        Ok(Err(e)) => tracing::error!(%session_id, "cannot wait for the notify command: {e}"),
        Err(_) => {
            // The child itself is killed on drop; what it started goes with its process group.
            if let Some(pid) = pid {
                // SAFETY: killpg only sends a signal to the group this run created.
                unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
            }
            tracing::warn!(%session_id, timeout = ?notify.timeout, "the notify command did not finish in time: killed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::{SessionState, TaskState};

    fn change(attention: Option<Attention>) -> StateChanged {
        StateChanged {
            session_id: "s".into(),
            task_id: "t".into(),
            task_title: "Fix it".into(),
            state: SessionState::WaitingForInput,
            previous_state: Some(SessionState::Running),
            task_state: TaskState::Review,
            needs_resume: false,
            last_seq: 1,
            updated_at: String::new(),
            attention,
            attention_since: None,
            change_seq: 0,
        }
    }

    #[test]
    fn one_notice_per_transition_to_a_reason() {
        let mut transitions = Transitions::default();
        assert_eq!(transitions.notice(&change(None)), None);
        let first = transitions.notice(&change(Some(Attention::Input))).expect("a notice");
        assert_eq!(first.attention, Attention::Input);
        assert_eq!(transitions.notice(&change(Some(Attention::Input))), None, "the same reason again");
        assert!(transitions.notice(&change(Some(Attention::Resume))).is_some(), "another reason");
        assert_eq!(transitions.notice(&change(None)), None);
        assert!(transitions.notice(&change(Some(Attention::Resume))).is_some(), "needed again");
    }

    #[test]
    fn the_environment_names_the_session_and_never_the_token() {
        let notice = Notice {
            session_id: "s".into(),
            task_id: "t".into(),
            task_title: "Fix it".into(),
            attention: Attention::Permission,
        };
        let env = notice.environment();
        assert!(env.contains(&("BATON_ATTENTION", "permission".into())));
        assert!(env.contains(&("BATON_MESSAGE", "Fix it: the agent asks for a permission".into())));
        assert!(env.iter().all(|(name, _)| !name.contains("TOKEN")));
    }
}
