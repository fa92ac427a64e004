//! Finishing a task's work: what its agent changed (`task.changes`, `task.diff`), and bringing
//! it home (`task.commit`, `task.merge`, `task.pull_request`). Git runs through
//! [`worktree::git_command`] (nothing the repository configures is executed); every change made
//! is journaled on the task's latest session as a status line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_protocol::*;
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::worktree::{self, git, git_command, head_of, run};
use super::{ApiResult, Orchestrator};
use crate::agent_runtime::AgentRuntime;
use crate::store::{ExecutorRecord, SessionRecord};

/// Most conflicting files a refused merge names.
const LISTED_CONFLICTS: usize = 50;
/// An untracked file longer than this is counted, not read whole for its line count.
const MAX_COUNTED_BYTES: u64 = 8 << 20;

/// The repository side of a task: where to run git and what to compare with.
struct TaskRepo {
    task: Task,
    /// The task's working directory (its worktree, or the repository itself).
    dir: PathBuf,
    /// The repository the worktree was made from, for a worktree task.
    main: Option<PathBuf>,
    /// The commit the work is compared with.
    base: String,
}

impl TaskRepo {
    fn branch_or_err(&self) -> ApiResult<(&str, &Path)> {
        match (&self.task.worktree_branch, &self.main) {
            (Some(branch), Some(main)) => Ok((branch, main)),
            _ => Err(ErrorPayload::validation(format!(
                "task {} has no worktree of its own: its changes are in {} already; commit them there",
                self.task.id, self.task.workdir
            ))),
        }
    }
}

/// Settings of a repository's own config that [`git_command`]'s fixed overrides cannot turn
/// off, because their names are the repository's to choose (a filter driver selected by
/// `.git/info/attributes`), or that move the working tree elsewhere (`core.worktree`: a commit
/// would take in files from outside the repository).
const AGENT_CONFIGURABLE: &str = r"^(filter\..*\.(clean|smudge|process)|core\.worktree)$";

/// A task working in the repository itself (no worktree) can write its `.git`: its local config
/// is refused when it names a command git would run on the agent's files (see
/// [`AGENT_CONFIGURABLE`]); the other commands it could name are overridden by [`git_command`].
async fn refuse_commands_the_agent_could_configure(workdir: &Path) -> ApiResult<()> {
    let mut command = git_command(workdir);
    command.args(["config", "--includes", "--show-scope", "--name-only", "--get-regexp", AGENT_CONFIGURABLE]);
    let output = command.output().await.map_err(|e| ErrorPayload::internal(format!("cannot run git: {e}")))?;
    // `git config --get-regexp` exits 1 when nothing matches. Lines are `SCOPE\tNAME`; the
    // user's own (global, system) settings are theirs.
    let names: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(scope, _)| matches!(*scope, "local" | "worktree"))
        .map(|(_, name)| name.to_string())
        .collect();
    if output.status.success() && !names.is_empty() {
        return Err(ErrorPayload::validation(format!(
            "the config of the repository at {} sets {}: the task's agent can write that file, and batond runs \
             nothing it could have written; remove these settings to review, commit or diff here (or work in a \
             task with a worktree)",
            workdir.display(),
            names.join(", ")
        ))
        .with_details(json!({"settings": names})));
    }
    Ok(())
}

fn git_error(what: &str) -> impl Fn(String) -> ErrorPayload + '_ {
    move |e| ErrorPayload::internal(format!("git could not {what}: {e}"))
}

impl Orchestrator {
    /// The task's repository, checked: it has one, its worktree is still batond's.
    async fn task_repo(&self, task_id: &str) -> ApiResult<TaskRepo> {
        let task = self.store.get_task(task_id).await?;
        let workdir = PathBuf::from(&task.workdir);
        if !workdir.is_dir() {
            return Err(ErrorPayload::conflict(format!(
                "the task's working directory {} is gone (its worktree was removed?)",
                workdir.display()
            )));
        }
        let (dir, main) = match (&task.worktree_branch, &task.repository) {
            (Some(_), Some(repository)) => {
                let main = PathBuf::from(repository);
                worktree::verify_worktree(&workdir, &main).await.map_err(ErrorPayload::conflict)?;
                (workdir, Some(main))
            }
            // A task working in a repository (given as such, or a directory inside one): git
            // runs at its top, where the paths it lists start.
            _ => match git(&workdir, &["rev-parse", "--show-toplevel"]).await {
                Ok(top) if !top.is_empty() => {
                    // Asked where the task works: `core.worktree` moves the top elsewhere.
                    refuse_commands_the_agent_could_configure(&workdir).await?;
                    (PathBuf::from(top), None)
                }
                _ => {
                    return Err(ErrorPayload::validation(format!(
                        "task {} works in {}, which is not in a git repository: there are no changes to review",
                        task.id, task.workdir
                    )))
                }
            },
        };
        let base = match &task.base_commit {
            Some(commit) => commit.clone(),
            // Tasks made before their base was kept: where the branch left its base branch.
            None => {
                let other = match &main {
                    Some(main) => head_of(main).await.0,
                    None => None,
                };
                let fork_point = match other {
                    Some(other) => git(&dir, &["merge-base", "HEAD", &other]).await.ok(),
                    None => None,
                };
                match fork_point {
                    Some(commit) => commit,
                    None => git(&dir, &["rev-parse", "--verify", "HEAD^{commit}"])
                        .await
                        .map_err(|e| ErrorPayload::conflict(format!("the repository has no commit yet: {e}")))?,
                }
            }
        };
        Ok(TaskRepo { task, dir, main, base })
    }

    /// Refuses while an agent of the task is in a turn, unless the user insists.
    async fn refuse_while_working(&self, task_id: &str, force: bool, what: &str) -> ApiResult<()> {
        if force {
            return Ok(());
        }
        let sessions = self.store.list_sessions(Some(task_id.to_string()), ArchivedFilter::Include).await?;
        let working: Vec<String> =
            sessions.iter().filter(|(s, _)| self.turn_running(&s.id)).map(|(s, _)| s.id.clone()).collect();
        if working.is_empty() {
            return Ok(());
        }
        Err(ErrorPayload::conflict(format!(
            "the task's agent is in a turn ({}): its edits would race the {what}; wait for the turn to end, \
             cancel it, or insist (force)",
            working.join(", ")
        ))
        .with_details(json!({"working_sessions": working})))
    }

    /// The task's newest session, with its executor record.
    async fn latest_session(&self, task_id: &str) -> ApiResult<Option<(SessionRecord, Option<ExecutorRecord>)>> {
        let sessions = self.store.list_sessions(Some(task_id.to_string()), ArchivedFilter::Include).await?;
        Ok(sessions.into_iter().max_by(|a, b| a.0.created_at.cmp(&b.0.created_at)))
    }

    /// Journals `line` on the task's latest session, so that its transcript shows it.
    async fn journal_on_task(&self, task_id: &str, line: String) {
        let latest = match self.latest_session(task_id).await {
            Ok(Some((latest, _))) => latest,
            Ok(None) => return,
            Err(e) => return tracing::warn!(task_id, "not journaled ({line}): {}", e.message),
        };
        if let Err(e) = self.store.append_events(&latest.id, vec![SessionEvent::status(line.clone())]).await {
            tracing::warn!(task_id, "not journaled ({line}): {e}");
        }
    }

    pub async fn task_changes(&self, params: TaskChangesParams) -> ApiResult<TaskChangesResult> {
        let repo = self.task_repo(&params.task_id).await?;
        let range = format!("{}..HEAD", repo.base);
        let commits = async {
            Ok::<u32, ErrorPayload>(
                git(&repo.dir, &["rev-list", "--count", &range]).await.ok().and_then(|n| n.parse().ok()).unwrap_or(0),
            )
        };
        let branch = async { Ok::<_, ErrorPayload>(head_of(&repo.dir).await.1) };
        let (mut files, commits, branch) =
            tokio::try_join!(changed_files(&repo.dir, &repo.base, params.counts), commits, branch)?;
        let total = files.len() as u32;
        let (added, removed) = files.iter().fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
        let limit = params.limit.unwrap_or(DEFAULT_CHANGES_PAGE) as usize;
        let page: Vec<ChangedFile> = files.drain(..).skip(params.offset as usize).take(limit).collect();
        Ok(TaskChangesResult {
            task_id: repo.task.id.clone(),
            workdir: repo.task.workdir.clone(),
            base: ChangeBase { commit: repo.base.clone(), branch: repo.task.base_branch.clone() },
            branch,
            files: page,
            total,
            added,
            removed,
            commits,
            counted: params.counts,
        })
    }

    pub async fn task_diff(&self, params: TaskDiffParams) -> ApiResult<TaskDiffResult> {
        let repo = self.task_repo(&params.task_id).await?;
        let Some(file) = find_change(&repo.dir, &repo.base, &params.path, params.part).await? else {
            return Err(ErrorPayload::not_found(format!(
                "{} has no {} change in task {}",
                params.path, params.part, repo.task.id
            )));
        };
        let mut command = git_command(&repo.dir);
        command.args(["diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M"]);
        match (file.part, file.status) {
            (ChangePart::Uncommitted, FileStatus::Untracked) => {
                // What is not a plain file or a symlink (a FIFO the agent made) is not read.
                let kind = std::fs::symlink_metadata(repo.dir.join(&file.path)).map(|m| m.file_type());
                if !kind.is_ok_and(|kind| kind.is_file() || kind.is_symlink()) {
                    return Err(ErrorPayload::validation(format!(
                        "{} is not a file (a FIFO, socket or device): it has no diff",
                        file.path
                    )));
                }
                // Exits 1 when the files differ, as they do.
                command.args(["--no-index", "--", "/dev/null", &file.path]);
            }
            (ChangePart::Uncommitted, _) => {
                command.arg("HEAD");
            }
            (ChangePart::Committed, _) => {
                command.args([repo.base.as_str(), "HEAD"]);
            }
        }
        if file.status != FileStatus::Untracked {
            command.arg("--");
            for path in std::iter::once(&file.path).chain(file.old_path.as_ref()) {
                command.arg(format!(":(literal){path}"));
            }
        }
        let (text, truncated) = bounded_output(command, MAX_DIFF_BYTES).await.map_err(git_error("diff"))?;
        let binary = file.binary || text.lines().any(|l| l.starts_with("Binary files ") && l.ends_with(" differ"));
        let diff = if binary { String::new() } else { strip_diff_header(&text).to_string() };
        Ok(TaskDiffResult { path: file.path.clone(), part: file.part, diff, binary, truncated })
    }

    pub async fn task_commit(&self, params: TaskCommitParams) -> ApiResult<TaskCommitResult> {
        let _task = self.lock_task(&params.task_id).await;
        self.refuse_while_working(&params.task_id, params.force, "commit").await?;
        let repo = self.task_repo(&params.task_id).await?;
        let uncommitted = uncommitted_files(&repo.dir).await?;
        if uncommitted.is_empty() {
            return Err(ErrorPayload::conflict(format!("nothing to commit in {}", repo.dir.display())));
        }
        let mut pathspecs = Vec::new();
        let mut chosen = 0;
        match &params.paths {
            Some(paths) => {
                for path in paths {
                    let Some(file) = uncommitted.iter().find(|f| &f.path == path) else {
                        return Err(ErrorPayload::validation(format!("{path} has no uncommitted change to commit")));
                    };
                    chosen += 1;
                    pathspecs.push(format!(":(literal){}", file.path));
                    if let Some(old) = &file.old_path {
                        pathspecs.push(format!(":(literal){old}"));
                    }
                }
            }
            None => chosen = uncommitted.len(),
        }
        let mut add = git_command(&repo.dir);
        add.args(["add", "--all", "--"]);
        if pathspecs.is_empty() {
            add.arg(":/");
        } else {
            add.args(&pathspecs);
        }
        run(add).await.map_err(git_error("stage the changes"))?;
        let mut commit = git_command(&repo.dir);
        if repo.main.is_none() {
            // The agent works in this repository itself and may have written its config: the
            // signing programs are git's own, not ones it named.
            for setting in [
                "gpg.program=gpg",
                "gpg.openpgp.program=gpg",
                "gpg.ssh.program=ssh-keygen",
                "gpg.x509.program=gpgsm",
                "gpg.ssh.defaultKeyCommand=",
            ] {
                commit.arg("-c").arg(setting);
            }
        }
        commit.args(["commit", "--quiet", "--no-verify", "--cleanup=strip", "-m", params.message.trim()]);
        if !pathspecs.is_empty() {
            commit.arg("--only").arg("--").args(&pathspecs);
        }
        run(commit).await.map_err(|e| {
            if e.contains("Please tell me who you are") || e.contains("user.email") {
                ErrorPayload::validation(format!(
                    "git does not know who commits: run git config --global user.name \"Your Name\" and git config \
                     --global user.email you@example.com, then commit again ({e})"
                ))
            } else {
                ErrorPayload::internal(format!("git could not commit: {e}"))
            }
        })?;
        let (commit, branch) = head_of(&repo.dir).await;
        let commit = commit.ok_or_else(|| ErrorPayload::internal("the commit was made but HEAD does not read"))?;
        let first_line = params.message.trim().lines().next().unwrap_or_default().to_string();
        let on = branch.as_deref().map(|b| format!(" on {b}")).unwrap_or_default();
        let files = if params.paths.is_some() { chosen } else { uncommitted.len() } as u32;
        let counted = if files == 1 { "1 file".to_string() } else { format!("{files} files") };
        self.journal_on_task(&repo.task.id, format!("Committed {}{on}: {first_line} ({counted})", short(&commit)))
            .await;
        Ok(TaskCommitResult { commit, branch, files })
    }

    pub async fn task_merge(self: &Arc<Self>, params: TaskMergeParams) -> ApiResult<TaskMergeResult> {
        let _task = self.lock_task(&params.task_id).await;
        self.refuse_while_working(&params.task_id, params.force, "merge").await?;
        let repo = self.task_repo(&params.task_id).await?;
        let (branch, main) = repo.branch_or_err()?;
        let Some(into) = repo.task.base_branch.clone() else {
            return Err(ErrorPayload::validation(format!(
                "the repository {} had no branch checked out when the task was made: merge {branch} by hand \
                 (git merge {branch})",
                main.display()
            )));
        };
        let pending = uncommitted_files(&repo.dir).await?;
        let pending: Vec<&String> = pending.iter().map(|f| &f.path).collect();
        if !pending.is_empty() {
            let count = if pending.len() == 1 {
                "1 uncommitted change".to_string()
            } else {
                format!("{} uncommitted changes", pending.len())
            };
            return Err(ErrorPayload::conflict(format!(
                "the task's worktree has {count} ({}): commit them first (task.commit), or they stay behind",
                pending.iter().take(5).map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
            ))
            .with_details(json!({"uncommitted": pending.iter().take(LISTED_CONFLICTS).collect::<Vec<_>>()})));
        }
        let (_, checked_out) = head_of(main).await;
        if checked_out.as_deref() != Some(into.as_str()) {
            return Err(ErrorPayload::conflict(format!(
                "{} has {} checked out, not {into}: check out {into} there (git switch {into}), then merge again",
                main.display(),
                checked_out.as_deref().unwrap_or("a detached HEAD")
            )));
        }
        let dirty = git_raw(main, &["status", "--porcelain", "-z", "--untracked-files=no", "--ignore-submodules=all"])
            .await
            .map_err(git_error("read the repository's status"))?;
        if !dirty.is_empty() {
            // `XY path` entries (a rename's source follows as an entry of its own, without XY).
            let files: Vec<&str> = dirty
                .split('\0')
                .filter_map(|entry| entry.get(3..).filter(|_| entry.as_bytes().get(2) == Some(&b' ')))
                .take(LISTED_CONFLICTS)
                .collect();
            return Err(ErrorPayload::conflict(format!(
                "{} has uncommitted changes ({}): commit or stash them there, then merge again; nothing was merged",
                main.display(),
                files.join(", ")
            ))
            .with_details(json!({"dirty": files})));
        }
        let commits: u32 = git(main, &["rev-list", "--count", &format!("{into}..{branch}")])
            .await
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if commits == 0 {
            return Err(ErrorPayload::conflict(format!("{branch} has no commit that {into} lacks: nothing to merge")));
        }
        let fast_forward = git(main, &["merge-base", "--is-ancestor", &into, branch]).await.is_ok();
        if !fast_forward {
            // Tried first without touching any working tree: a conflict changes nothing.
            let mut tree = git_command(main);
            tree.args(["merge-tree", "--write-tree", "--name-only", "--no-messages", &into, branch]);
            let output = tree.output().await.map_err(|e| ErrorPayload::internal(format!("cannot run git: {e}")))?;
            match output.status.code() {
                Some(0) => {}
                Some(1) => {
                    let text = String::from_utf8_lossy(&output.stdout);
                    let conflicts: Vec<&str> = text.lines().skip(1).filter(|l| !l.is_empty()).collect();
                    let listed: Vec<&str> = conflicts.iter().take(LISTED_CONFLICTS).copied().collect();
                    return Err(ErrorPayload::conflict(format!(
                        "merging {branch} into {into} conflicts in {}: nothing was changed; resolve it in the task \
                         (merge {into} into its worktree, or ask the agent), then merge again",
                        listed.join(", ")
                    ))
                    .with_details(json!({"conflicts": listed})));
                }
                _ => {
                    return Err(ErrorPayload::internal(format!(
                        "git could not try the merge: {}",
                        String::from_utf8_lossy(&output.stderr).trim()
                    )))
                }
            }
        }
        let mut merge = git_command(main);
        // The checkout writes the user's own repository: its attributes (LFS, line endings)
        // apply, as they would to a merge made by hand.
        merge.env_remove("GIT_ATTR_SOURCE");
        if fast_forward {
            merge.args(["merge", "--ff-only", "--quiet", branch]);
        } else {
            let message = format!("Merge {branch}: {}", repo.task.title);
            merge.args(["merge", "--no-ff", "--no-edit", "--quiet", "-m", &message, branch]);
        }
        if let Err(e) = run(merge).await {
            // Only reachable when something changed between the try and the merge.
            let _ = git(main, &["merge", "--abort"]).await;
            return Err(ErrorPayload::conflict(format!(
                "git could not merge {branch} into {into}: {e}; nothing was merged"
            )));
        }
        let commit = head_of(main).await.0.unwrap_or_default();
        let how = if fast_forward { "fast-forward".to_string() } else { format!("merge commit {}", short(&commit)) };
        self.journal_on_task(&repo.task.id, format!("Merged {branch} into {into} ({how}, {commits} commits)")).await;
        let mut worktree_removed = None;
        if params.remove_worktree {
            worktree_removed = Some(self.remove_merged_worktree(&repo, branch, main).await?);
        }
        Ok(TaskMergeResult { into, commit, fast_forward, commits, worktree_removed })
    }

    /// After a merge: the task's agents stopped, its worktree and branch removed, the task
    /// archived.
    async fn remove_merged_worktree(self: &Arc<Self>, repo: &TaskRepo, branch: &str, main: &Path) -> ApiResult<String> {
        let sessions = self.store.list_sessions(Some(repo.task.id.clone()), ArchivedFilter::Include).await?;
        for (session, _) in sessions.iter().filter(|(s, _)| !s.state.is_terminal()) {
            match self.stop(&session.id).await {
                Ok(_) => {}
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        worktree::remove_worktree(&self.data_dir, Some(&main.to_string_lossy()), &repo.dir)
            .await
            .map_err(|e| ErrorPayload::internal(format!("merged, but the worktree was not removed: {e}")))?;
        // Merged just now: -d (not -D) still refuses if it somehow is not.
        if let Err(e) = git(main, &["branch", "-d", branch]).await {
            tracing::warn!(task_id = %repo.task.id, "merged, but the branch {branch} stays: {e}");
        }
        self.store.set_archived(&repo.task.id, true).await?;
        let path = repo.dir.to_string_lossy().into_owned();
        self.journal_on_task(
            &repo.task.id,
            format!("Removed the worktree {path} and the branch {branch}; task archived"),
        )
        .await;
        Ok(path)
    }

    pub async fn task_pull_request(&self, params: TaskPullRequestParams) -> ApiResult<TaskPullRequestResult> {
        let _task = self.lock_task(&params.task_id).await;
        self.refuse_while_working(&params.task_id, params.force, "pull request").await?;
        let repo = self.task_repo(&params.task_id).await?;
        let (branch, _) = repo.branch_or_err()?;
        let base = repo.task.base_branch.clone().ok_or_else(|| {
            ErrorPayload::validation(
                "the repository had no branch checked out when the task was made: no base to ask for",
            )
        })?;
        let title = params.title.clone().unwrap_or_else(|| repo.task.title.clone());
        let body = params.body.clone().unwrap_or_else(|| repo.task.description.clone());
        let by_hand = format!(
            "cd {} && git push --set-upstream origin {branch} && gh pr create --head {branch} --base {base} --title {} --body {}",
            shell_quote(&repo.task.workdir),
            shell_quote(&title),
            shell_quote(&body)
        );
        let gh = |args: &[&str]| {
            let mut command = tokio::process::Command::new("gh");
            command.args(args).current_dir(&repo.dir).stdin(std::process::Stdio::null()).kill_on_drop(true);
            command.env("GH_PROMPT_DISABLED", "1").env("NO_COLOR", "1");
            command
        };
        match gh(&["auth", "status"]).output().await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ErrorPayload::unavailable_until_changed(format!(
                    "the GitHub CLI (gh) is not installed where batond runs: install it and log in (gh auth login), \
                     or open the pull request yourself: {by_hand}"
                )))
            }
            Err(e) => return Err(ErrorPayload::internal(format!("cannot run gh: {e}"))),
            Ok(out) if !out.status.success() => {
                return Err(ErrorPayload::unavailable_until_changed(format!(
                    "the GitHub CLI is not logged in: run gh auth login, then ask again; or open it yourself: {by_hand}"
                )))
            }
            Ok(_) => {}
        }
        // The push reaches a remote: its transports are allowed here, and only here.
        let mut push = git_command(&repo.dir);
        push.arg("-c").arg("protocol.allow=always").args(["push", "--quiet", "--set-upstream", "origin", branch]);
        run(push).await.map_err(|e| {
            ErrorPayload::unavailable(format!(
                "git could not push {branch} to origin: {e}; push it yourself: {by_hand}"
            ))
        })?;
        let out = gh(&["pr", "create", "--head", branch, "--base", &base, "--title", &title, "--body", &body])
            .output()
            .await
            .map_err(|e| ErrorPayload::internal(format!("cannot run gh: {e}")))?;
        if !out.status.success() {
            return Err(ErrorPayload::unavailable(format!(
                "gh could not open the pull request: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(url) =
            stdout.lines().rev().map(str::trim).find(|l| l.starts_with("https://") || l.starts_with("http://"))
        else {
            return Err(ErrorPayload::internal(format!("gh opened no pull request it named: {}", stdout.trim())));
        };
        self.store.set_pull_request(&repo.task.id, url).await?;
        self.journal_on_task(&repo.task.id, format!("Opened pull request {url} ({branch} into {base})")).await;
        Ok(TaskPullRequestResult { url: url.to_string(), branch: branch.to_string(), base })
    }
}

impl Orchestrator {
    /// The command that opens a shell where the task's latest agent works.
    pub async fn task_shell(&self, task_id: &str) -> ApiResult<TaskShellResult> {
        let task = self.store.get_task(task_id).await?;
        let latest = self.latest_session(&task.id).await?;
        let agent = latest.as_ref().map_or(task.agent.clone(), |(s, _)| s.agent.clone());
        let spec = self.registry.get(&agent);
        let runtime = spec.and_then(|s| s.runtime).unwrap_or(self.default_runtime);
        let workdir = PathBuf::from(&task.workdir);
        let login_shell = "exec \"${SHELL:-/bin/sh}\" -l";
        match (runtime, spec) {
            (AgentRuntime::Docker, Some(spec)) => {
                let config = spec.docker.as_ref().ok_or_else(|| {
                    ErrorPayload::validation(format!("agent {agent} runs in Docker but has no [agents.{agent}.docker]"))
                })?;
                let executor = latest.and_then(|(_, executor)| executor);
                let Some(agent_id) = executor.filter(|e| e.status.has_process()).and_then(|e| e.agent_execution_id)
                else {
                    return Err(ErrorPayload::conflict(format!(
                        "the agent of task {} is not running: its container lives only while the agent does; \
                         resume the session, then open the shell",
                        task.id
                    )));
                };
                let identity = crate::agent::docker::data_dir_identity(&self.data_dir)
                    .map_err(|e| ErrorPayload::internal(format!("the data dir's identity does not read: {e}")))?;
                let mut argv = vec!["docker".to_string()];
                if let Some(host) = &config.docker_host {
                    argv.extend(["-H".to_string(), host.clone()]);
                }
                argv.extend(["exec", "-it", "-w", &task.workdir].map(String::from));
                argv.extend([
                    format!("baton-{identity}-{agent_id}"),
                    "/bin/sh".into(),
                    "-c".into(),
                    login_shell.into(),
                ]);
                let command = argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
                Ok(TaskShellResult { runtime: "docker".into(), argv, workdir: task.workdir.clone(), command })
            }
            (AgentRuntime::Ssh, Some(spec)) => {
                let config = spec.ssh.as_ref().ok_or_else(|| {
                    ErrorPayload::validation(format!("agent {agent} runs over ssh but has no [agents.{agent}.ssh]"))
                })?;
                let remote = config.remote_path(&workdir).to_string_lossy().into_owned();
                let mut argv = vec!["ssh".to_string()];
                argv.extend(config.ssh_args.iter().cloned());
                argv.extend(["-t".to_string(), config.host.clone()]);
                argv.push(format!("cd {} && {login_shell}", shell_quote(&remote)));
                let command = argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
                Ok(TaskShellResult { runtime: "ssh".into(), argv, workdir: remote, command })
            }
            _ => Ok(TaskShellResult {
                runtime: "local".into(),
                argv: Vec::new(),
                workdir: task.workdir.clone(),
                command: format!("cd {} && \"${{SHELL:-/bin/sh}}\"", shell_quote(&task.workdir)),
            }),
        }
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// `text` quoted for a POSIX shell.
pub(super) fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c)) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The first `limit` bytes of what the command writes (true when there was more), however
/// much it would write; exit codes 0 and 1 count as success (`git diff --no-index` exits 1
/// when the files differ).
async fn bounded_output(mut command: tokio::process::Command, limit: usize) -> Result<(String, bool), String> {
    command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no output")?;
    let mut buffer = Vec::with_capacity(limit.min(1 << 16));
    (&mut stdout).take(limit as u64 + 1).read_to_end(&mut buffer).await.map_err(|e| e.to_string())?;
    let truncated = buffer.len() > limit;
    if truncated {
        // The rest is not wanted: kill_on_drop ends git.
        buffer.truncate(limit);
        let cut = buffer.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
        buffer.truncate(cut);
        return Ok((String::from_utf8_lossy(&buffer).into_owned(), true));
    }
    drop(stdout);
    let output = child.wait_with_output().await.map_err(|e| e.to_string())?;
    if !matches!(output.status.code(), Some(0 | 1)) {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    Ok((String::from_utf8_lossy(&buffer).into_owned(), false))
}

/// A diff without git's header lines: from its first `---` (or `Binary`) line on.
fn strip_diff_header(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("--- ") || line.starts_with("@@") {
            return &text[at..];
        }
        at += line.len();
    }
    ""
}

/// `git diff -z -M --raw` of `range` (with `--numstat` when `counts`), parsed.
async fn diff_part(dir: &Path, range: &[&str], part: ChangePart, counts: bool) -> ApiResult<Vec<ChangedFile>> {
    let mut args = vec!["diff", "--no-ext-diff", "--no-textconv", "--no-color", "-z", "-M", "--raw"];
    if counts {
        args.push("--numstat");
    }
    args.extend(range);
    let output = git_raw(dir, &args).await.map_err(git_error("list the changes"))?;
    Ok(parse_diff(part, &output))
}

/// The new files of `dir` git does not know (all of them, or `only` when given), their lines
/// counted when `counted`.
async fn untracked(dir: &Path, only: Option<&str>, counted: bool) -> ApiResult<Vec<ChangedFile>> {
    let literal = only.map(|path| format!(":(literal){path}"));
    let mut args = vec!["ls-files", "-z", "--others", "--exclude-standard", "--full-name"];
    if let Some(literal) = &literal {
        args.extend(["--", literal.as_str()]);
    }
    let listed = git_raw(dir, &args).await.map_err(git_error("list the new files"))?;
    let dir = dir.to_path_buf();
    // Reading the new files is file I/O: off the runtime's threads.
    tokio::task::spawn_blocking(move || {
        listed
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(|path| {
                let (added, binary) = if counted { count_lines(&dir.join(path)) } else { (0, false) };
                ChangedFile {
                    path: path.to_string(),
                    old_path: None,
                    status: FileStatus::Untracked,
                    part: ChangePart::Uncommitted,
                    added,
                    removed: 0,
                    binary,
                }
            })
            .collect()
    })
    .await
    .map_err(|e| ErrorPayload::internal(format!("the new files could not be counted: {e}")))
}

/// Every changed file of the working directory `dir` against `base`: committed changes
/// (`base..HEAD`) and uncommitted ones (HEAD to the working tree, untracked files included),
/// each part sorted by path, their lines counted when `counts`. The three listings run at once.
async fn changed_files(dir: &Path, base: &str, counts: bool) -> ApiResult<Vec<ChangedFile>> {
    let since_base = [base, "HEAD"];
    let (committed, uncommitted, new_files) = tokio::try_join!(
        diff_part(dir, &since_base, ChangePart::Committed, counts),
        diff_part(dir, &["HEAD"], ChangePart::Uncommitted, counts),
        untracked(dir, None, counts),
    )?;
    let mut files = committed;
    files.extend(uncommitted);
    files.extend(new_files);
    files.sort_by(|a, b| {
        (a.part == ChangePart::Uncommitted, &a.path).cmp(&(b.part == ChangePart::Uncommitted, &b.path))
    });
    Ok(files)
}

/// The change of `path` in `part`, without counting lines (what a diff needs to know).
///
/// Git is asked about that one path first (a large change set is not listed for one file's
/// diff). A path seen alone as added or deleted can be one side of a rename, which git sees
/// only with both paths: then the whole part is listed to tell.
async fn find_change(dir: &Path, base: &str, path: &str, part: ChangePart) -> ApiResult<Option<ChangedFile>> {
    let range: Vec<&str> = match part {
        ChangePart::Committed => vec![base, "HEAD"],
        ChangePart::Uncommitted => vec!["HEAD"],
    };
    let literal = format!(":(literal){path}");
    let mut alone = range.clone();
    alone.extend(["--", literal.as_str()]);
    let found = diff_part(dir, &alone, part, false).await?.into_iter().find(|f| f.path == path);
    let found = match found {
        Some(file) if matches!(file.status, FileStatus::Added | FileStatus::Deleted) => {
            diff_part(dir, &range, part, false).await?.into_iter().find(|f| f.path == path)
        }
        found => found,
    };
    if found.is_some() || part == ChangePart::Committed {
        return Ok(found);
    }
    Ok(untracked(dir, Some(path), false).await?.into_iter().find(|f| f.path == path))
}

/// The uncommitted changes of `dir`, new files included, by path, without counting lines (what
/// a commit or a merge needs to know).
async fn uncommitted_files(dir: &Path) -> ApiResult<Vec<ChangedFile>> {
    let (mut files, new_files) =
        tokio::try_join!(diff_part(dir, &["HEAD"], ChangePart::Uncommitted, false), untracked(dir, None, false),)?;
    files.extend(new_files);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Git's output whole (not trimmed: `-z` lists end in NUL).
async fn git_raw(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = git_command(dir);
    command.args(args);
    let output = command.output().await.map_err(|e| format!("cannot run git: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The lines of a new file, and whether it is binary (a NUL in its first 8000 bytes, as git
/// decides). A file too large to read whole is counted as binary. The agent wrote it: a
/// symlink is not followed and a FIFO or device is not opened (either reads nothing).
fn count_lines(path: &Path) -> (u64, bool) {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if !std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file()) {
        return (0, false);
    }
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let Ok(file) = opened else { return (0, false) };
    let Ok(meta) = file.metadata() else { return (0, false) };
    if !meta.is_file() {
        return (0, false);
    }
    if meta.len() > MAX_COUNTED_BYTES {
        return (0, true);
    }
    let mut bytes = Vec::new();
    if file.take(MAX_COUNTED_BYTES).read_to_end(&mut bytes).is_err() {
        return (0, false);
    }
    if bytes[..bytes.len().min(8000)].contains(&0) {
        return (0, true);
    }
    let newlines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    let last_unterminated = u64::from(bytes.last().is_some_and(|b| *b != b'\n'));
    (newlines + last_unterminated, false)
}

/// Parses `git diff -z --raw [--numstat]`: raw records (`:MODES SHAS STATUS`, then the path,
/// or the old and new paths of a rename or copy) name the files, numstat records
/// (`ADDED\tREMOVED\tPATH`, or an empty path followed by the old and new paths) count their
/// lines (`-` for a binary file).
fn parse_diff(part: ChangePart, output: &str) -> Vec<ChangedFile> {
    let mut files: Vec<ChangedFile> = Vec::new();
    let mut counts: BTreeMap<String, (u64, u64, bool)> = BTreeMap::new();
    let mut fields = output.split('\0');
    while let Some(field) = fields.next() {
        if let Some(meta) = field.strip_prefix(':') {
            let code = meta.rsplit(' ').next().unwrap_or_default();
            let letter = code.chars().next().unwrap_or('M');
            let first = fields.next().unwrap_or_default().to_string();
            let (path, old_path) = if matches!(letter, 'R' | 'C') {
                (fields.next().unwrap_or_default().to_string(), Some(first))
            } else {
                (first, None)
            };
            let status = match letter {
                'A' | 'C' => FileStatus::Added,
                'D' => FileStatus::Deleted,
                'R' => FileStatus::Renamed,
                'T' => FileStatus::TypeChanged,
                'U' => FileStatus::Conflicted,
                _ => FileStatus::Modified,
            };
            let old_path = if letter == 'R' { old_path } else { None };
            files.push(ChangedFile { path, old_path, status, part, added: 0, removed: 0, binary: false });
            continue;
        }
        let mut columns = field.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) = (columns.next(), columns.next(), columns.next()) else {
            continue;
        };
        // A rename: the path column is empty and the old and new paths follow.
        let path = if path.is_empty() {
            let _old = fields.next();
            fields.next().unwrap_or_default().to_string()
        } else {
            path.to_string()
        };
        let binary = added == "-" && removed == "-";
        counts.insert(path, (added.parse().unwrap_or(0), removed.parse().unwrap_or(0), binary));
    }
    for file in &mut files {
        if let Some((added, removed, binary)) = counts.get(&file.path) {
            (file.added, file.removed, file.binary) = (*added, *removed, *binary);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_numstat_records_join_with_renames_and_binaries() {
        let output = [
            ":100644 100644 1111111 2222222 M",
            "src/a.rs",
            ":100644 100644 3333333 4444444 R087",
            "old name.txt",
            "new name.txt",
            ":000000 100644 0000000 5555555 A",
            "img.png",
            ":100644 000000 6666666 0000000 D",
            "gone",
            "3\t1\tsrc/a.rs",
            "2\t2\t",
            "old name.txt",
            "new name.txt",
            "-\t-\timg.png",
            "0\t7\tgone",
            "",
        ]
        .join("\0");
        let files = parse_diff(ChangePart::Committed, &output);
        type Shown<'a> = (&'a str, Option<&'a str>, FileStatus, u64, u64, bool);
        let shown: Vec<Shown<'_>> = files
            .iter()
            .map(|f| (f.path.as_str(), f.old_path.as_deref(), f.status, f.added, f.removed, f.binary))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("src/a.rs", None, FileStatus::Modified, 3, 1, false),
                ("new name.txt", Some("old name.txt"), FileStatus::Renamed, 2, 2, false),
                ("img.png", None, FileStatus::Added, 0, 0, true),
                ("gone", None, FileStatus::Deleted, 0, 7, false),
            ]
        );
    }

    /// A new file the agent made a FIFO (nobody writes to it) or a symlink out of the tree is
    /// counted as empty without being opened: opening the FIFO would wait forever.
    #[test]
    fn new_files_that_are_not_plain_files_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let name = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(count_lines(&fifo), (0, false));
        std::fs::write(dir.path().join("real"), "a\nb\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        assert_eq!(count_lines(&dir.path().join("link")), (0, false));
        assert_eq!(count_lines(&dir.path().join("real")), (2, false));
    }

    #[test]
    fn a_diff_loses_its_git_header_lines_only() {
        let text = "diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(strip_diff_header(text), "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n");
        assert_eq!(strip_diff_header("diff --git a/f b/f\nnew file mode 100644\n"), "");
    }

    #[test]
    fn shell_quoting_keeps_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("baton/abc"), "baton/abc");
        assert_eq!(shell_quote("it's done"), r"'it'\''s done'");
        assert_eq!(shell_quote(""), "''");
    }
}
