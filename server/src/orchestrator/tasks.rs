//! A task's life cycle after creation: edit, archive and unarchive, delete. Every change
//! is announced to every client by the store (`task.updated`, `task.deleted`).

use std::path::PathBuf;
use std::sync::Arc;

use baton_protocol::*;
use serde_json::json;

use super::{worktree, ApiResult, Orchestrator};
use crate::session_status::Live;

/// How many changed paths a refusal lists (a large worktree would make a huge error).
const LISTED_CHANGES: usize = 20;

impl Orchestrator {
    pub async fn update_task(&self, params: TaskUpdateParams) -> ApiResult<TaskUpdateResult> {
        let title = match params.title {
            Some(title) if title.trim().is_empty() => return Err(ErrorPayload::validation("title must not be empty")),
            Some(title) => Some(title.trim().to_string()),
            None => None,
        };
        if title.is_none() && params.description.is_none() {
            return Err(ErrorPayload::validation("nothing to change: give a title or a description"));
        }
        let task = self.store.update_task(&params.task_id, title, params.description).await?;
        Ok(TaskUpdateResult { task })
    }

    /// Archives (or unarchives) a task; with `stop_agents`, the task's running and starting
    /// agents are stopped first, so that nothing runs unseen behind the default lists.
    pub async fn archive_task(
        self: &Arc<Self>,
        task_id: &str,
        archived: bool,
        stop_agents: bool,
    ) -> ApiResult<TaskArchiveResult> {
        let mut stopped_sessions = Vec::new();
        if archived && stop_agents {
            // No session of the task is started or launched while its agents are stopped.
            let _task = self.lock_task(task_id).await;
            let task = self.store.get_task(task_id).await?;
            let sessions = self.store.list_sessions(Some(task.id.clone()), ArchivedFilter::Include).await?;
            for (session, _) in sessions.iter().filter(|(s, _)| !s.state.is_terminal()) {
                if self.live(&session.id).0 == Live::None {
                    continue;
                }
                match self.stop(&session.id).await {
                    Ok(_) => stopped_sessions.push(session.id.clone()),
                    // Stopped meanwhile by someone else.
                    Err(e) if e.code == ErrorCode::Conflict => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let task = self.store.set_archived(task_id, archived).await?;
        Ok(TaskArchiveResult { task, stopped_sessions })
    }

    /// Deletes a task with its sessions, journals, history files and worktree. Refused while an
    /// agent of the task runs (unless `stop_agents`) and while its worktree has uncommitted
    /// changes (unless `discard_changes` or `keep_worktree`); a refusal deletes nothing.
    pub async fn delete_task(self: &Arc<Self>, params: TaskDeleteParams) -> ApiResult<TaskDeleteResult> {
        // No session of the task is created or launched until the deletion is over.
        let _task = self.lock_task(&params.task_id).await;
        let task = self.store.get_task(&params.task_id).await?;
        let sessions = self.store.list_sessions(Some(task.id.clone()), ArchivedFilter::Include).await?;
        let running: Vec<String> =
            sessions.iter().filter(|(s, _)| self.live(&s.id).0 != Live::None).map(|(s, _)| s.id.clone()).collect();
        if !running.is_empty() && !params.stop_agents {
            return Err(ErrorPayload::conflict(format!(
                "an agent of this task is running ({}); stop it first, or ask to stop it (stop_agents)",
                running.join(", ")
            ))
            .with_details(json!({"running_sessions": running})));
        }
        let worktree = self.worktree_to_remove(&task, &params);
        if let Some(path) = &worktree {
            self.refuse_uncommitted_changes(path, task.repository.as_deref(), &params).await?;
        }
        for (session, _) in sessions.iter().filter(|(s, _)| !s.state.is_terminal()) {
            // Stopping first also blocks any launch racing the deletion (a message that resumes
            // the session lazily): a stopped session is never started again.
            match self.stop(&session.id).await {
                Ok(_) => {}
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(path) = &worktree {
            // An agent stopped just now may have written files since the first check.
            self.refuse_uncommitted_changes(path, task.repository.as_deref(), &params).await?;
        }
        let deleted = self.store.delete_task(&task.id).await?;
        for session_id in &deleted.session_ids {
            if let Err(e) = self.history.remove(session_id) {
                tracing::warn!(session_id, "cannot delete the history file: {e}");
            }
        }
        let mut worktree_removed = None;
        if let Some(path) = worktree {
            match worktree::remove_worktree(&self.data_dir, task.repository.as_deref(), &path).await {
                Ok(()) => worktree_removed = Some(path.to_string_lossy().into_owned()),
                Err(e) => tracing::warn!(task_id = %task.id, "the worktree was not removed: {e}"),
            }
        }
        tracing::info!(task_id = %task.id, sessions = deleted.session_ids.len(), "task deleted");
        Ok(TaskDeleteResult { task_id: task.id, session_ids: deleted.session_ids, worktree_removed })
    }

    /// The task's own worktree (created by `task.create` under the data dir) when it is to be
    /// removed with the task.
    fn worktree_to_remove(&self, task: &Task, params: &TaskDeleteParams) -> Option<PathBuf> {
        if params.keep_worktree || task.worktree_branch.is_none() {
            return None;
        }
        let path = self.data_dir.join("worktrees").join(&task.id);
        path.exists().then_some(path)
    }

    async fn refuse_uncommitted_changes(
        &self,
        path: &std::path::Path,
        repository: Option<&str>,
        params: &TaskDeleteParams,
    ) -> ApiResult<()> {
        if params.discard_changes {
            return Ok(());
        }
        let changes = match worktree::uncommitted_changes(path, repository.map(std::path::Path::new)).await {
            Ok(changes) if changes.is_empty() => return Ok(()),
            Ok(changes) => changes,
            Err(reason) => vec![format!("(git cannot tell: {reason})")],
        };
        let listed: Vec<&String> = changes.iter().take(LISTED_CHANGES).collect();
        Err(ErrorPayload::conflict(format!(
            "the worktree {} has uncommitted changes ({} paths); commit them, keep the worktree \
             (keep_worktree) or discard them (discard_changes)",
            path.display(),
            changes.len()
        ))
        .with_details(json!({"worktree_path": path, "changes": listed})))
    }
}
