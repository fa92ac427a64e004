//! The working directory of a new task: a given directory, a repository, or a git worktree
//! with its own branch under the data dir.

use std::path::{Path, PathBuf};

use baton_protocol::{ErrorPayload, TaskCreateParams};
use tokio::process::Command;

pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
}

/// A directory a client names for a task: absolute, existing, and not inside the data dir (an
/// agent confined to its working directory there could read the database, the token file and
/// other sessions' history). Symlinks are resolved before the check, and the resolved path is
/// what the task keeps: a symlink re-pointed later does not move the task.
fn existing_dir(data_dir: &Path, path: &str, what: &str) -> Result<PathBuf, ErrorPayload> {
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(ErrorPayload::validation(format!("{what} must be an absolute path: {}", path.display())));
    }
    if !path.is_dir() {
        return Err(ErrorPayload::validation(format!(
            "{what} {} does not exist or is not a directory",
            path.display()
        )));
    }
    let real = path.canonicalize().map_err(|e| ErrorPayload::validation(format!("{what} {}: {e}", path.display())))?;
    if let Ok(data_dir) = data_dir.canonicalize() {
        if real.starts_with(&data_dir) {
            return Err(ErrorPayload::validation(format!(
                "{what} {} is inside the server's data dir; choose a directory outside it",
                path.display()
            )));
        }
    }
    Ok(real)
}

/// The working directory a session is launched in, checked again at every launch: it must
/// still exist and, symlinks resolved now, must not have come to lie in the data dir (a
/// component replaced by a symlink since the task was created). A task's own worktree under
/// `DATA_DIR/worktrees` is allowed. Returns the resolved path.
pub fn launch_dir(data_dir: &Path, workdir: &Path) -> Result<PathBuf, String> {
    let real = workdir.canonicalize().map_err(|e| format!("{}: {e}", workdir.display()))?;
    if let Ok(data_dir) = data_dir.canonicalize() {
        if real.starts_with(&data_dir) && !real.starts_with(data_dir.join("worktrees")) {
            return Err(format!(
                "the session's working directory {} now leads into the server's data dir ({}); \
                 no session may run there",
                workdir.display(),
                real.display()
            ));
        }
    }
    Ok(real)
}

async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let output =
        Command::new("git").arg("-C").arg(dir).args(args).output().await.map_err(|e| format!("cannot run git: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Decides (and for worktrees, creates) the task's working directory.
pub async fn prepare_workdir(
    data_dir: &Path,
    task_id: &str,
    params: &TaskCreateParams,
) -> Result<(PathBuf, Option<Worktree>), ErrorPayload> {
    match (&params.repository, params.worktree) {
        (None, true) => Err(ErrorPayload::validation("worktree: true needs a repository")),
        (Some(repository), true) => {
            let repository = existing_dir(data_dir, repository, "repository")?;
            git(&repository, &["rev-parse", "--git-dir"]).await.map_err(|e| {
                ErrorPayload::validation(format!("{} is not a git repository: {e}", repository.display()))
            })?;
            let short = task_id.trim_start_matches("task-").chars().take(12).collect::<String>();
            let branch = format!("baton/{short}");
            let path = data_dir.join("worktrees").join(task_id);
            std::fs::create_dir_all(data_dir.join("worktrees"))
                .map_err(|e| ErrorPayload::internal(format!("cannot create worktrees dir: {e}")))?;
            let target = path.to_string_lossy().into_owned();
            git(&repository, &["worktree", "add", "-b", &branch, &target, "HEAD"])
                .await
                .map_err(|e| ErrorPayload::validation(format!("cannot create a worktree: {e}")))?;
            Ok((path.clone(), Some(Worktree { path, branch })))
        }
        (Some(repository), false) => Ok((existing_dir(data_dir, repository, "repository")?, None)),
        (None, false) => match &params.workdir {
            Some(workdir) => Ok((existing_dir(data_dir, workdir, "workdir")?, None)),
            None => {
                let cwd = std::env::current_dir()
                    .map_err(|e| ErrorPayload::internal(format!("no working directory: {e}")))?;
                Ok((cwd, None))
            }
        },
    }
}

/// The uncommitted changes of a worktree, as `git status --porcelain` lists them (untracked
/// files included). An error when git cannot tell: a worktree git cannot read is treated as
/// holding changes.
pub async fn uncommitted_changes(path: &Path) -> Result<Vec<String>, String> {
    let status = git(path, &["status", "--porcelain", "--untracked-files=all"]).await?;
    Ok(status.lines().map(str::to_owned).collect())
}

/// Removes a task's worktree. Only a directory under `DATA_DIR/worktrees` is ever removed; the
/// branch stays in the repository (its commits are the task's work).
pub async fn remove_worktree(data_dir: &Path, repository: Option<&str>, path: &Path) -> Result<(), String> {
    let worktrees = data_dir.join("worktrees");
    if path.parent() != Some(worktrees.as_path()) {
        return Err(format!("{} is not a worktree of this server; it was left alone", path.display()));
    }
    let target = path.to_string_lossy().into_owned();
    let removed_by_git = match repository {
        Some(repository) => git(Path::new(repository), &["worktree", "remove", "--force", &target]).await,
        None => Err("no repository".to_string()),
    };
    if let Err(reason) = removed_by_git {
        // The repository may be gone or may no longer know the worktree: remove the directory,
        // and let git forget it if it still can.
        tracing::warn!(path = %path.display(), "git worktree remove failed ({reason}); removing the directory");
        if path.exists() {
            std::fs::remove_dir_all(path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
        }
        if let Some(repository) = repository {
            if let Err(e) = git(Path::new(repository), &["worktree", "prune"]).await {
                tracing::warn!(repository, "git worktree prune failed: {e}");
            }
        }
    }
    Ok(())
}
