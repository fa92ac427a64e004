//! The working directory of a new task: a given directory, a repository, or a git worktree
//! with its own branch under the data dir.

use std::path::{Path, PathBuf};

use baton_protocol::{ErrorPayload, TaskCreateParams};
use tokio::process::Command;

pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
}

/// Where a new task works, and what its changes will be compared with.
pub struct Workdir {
    pub path: PathBuf,
    pub worktree: Option<Worktree>,
    /// The repository's HEAD commit when the task was created.
    pub base_commit: Option<String>,
    /// The branch the repository had checked out then (worktree tasks only).
    pub base_branch: Option<String>,
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

/// Git's empty tree, which every repository has: attributes read from it select no filter.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// `git -C dir ...` with everything a repository can make git execute turned off. An agent
/// writes the files of its working directory, and in a container it may write nothing else:
/// what it wrote must never run on the host as batond's user. So no fsmonitor command, no hooks,
/// no attribute-selected filters (attributes come from the empty tree, not the agent's
/// `.gitattributes`), no submodule recursion, no pager or external diff; `safe.directory`
/// names `dir` so that a container's root owning it is not fatal. Commands that diff must also
/// pass `--no-ext-diff --no-textconv`. Where `dir` is a worktree, [`verify_worktree`] first
/// makes sure its `.git` still leads to the repository batond created it from (git reads that
/// repository's config, which the agent cannot reach, not one the agent wrote).
pub(super) fn git_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    let safe = format!("safe.directory={}", dir.display());
    for setting in [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "core.pager=cat",
        "diff.external=",
        "submodule.recurse=false",
        "status.submoduleSummary=false",
        "protocol.allow=never",
        // A commit may start `git maintenance` in the background otherwise.
        "maintenance.auto=false",
        "gc.auto=0",
        safe.as_str(),
    ] {
        command.arg("-c").arg(setting);
    }
    command
        .arg("-C")
        .arg(dir)
        .env("GIT_ATTR_SOURCE", EMPTY_TREE)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    crate::umask::for_user(command.as_std_mut());
    command
}

pub(super) async fn run(mut command: Command) -> Result<String, String> {
    let output = command.output().await.map_err(|e| format!("cannot run git: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

pub(super) async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = git_command(dir);
    command.args(args);
    run(command).await
}

/// Checks that the worktree at `path` is still what `git worktree add` made of `repository`:
/// its `.git` a plain file naming a directory under the repository's `worktrees/`, which names
/// this worktree back. An agent that replaced it (with a repository of its own whose config
/// runs commands, say) gets an error, and git is not run there.
pub async fn verify_worktree(path: &Path, repository: &Path) -> Result<(), String> {
    let gitfile = path.join(".git");
    let replaced = |why: &str| {
        format!(
            "{} is no longer the file that ties the worktree to {} ({why}); batond will not run git \
             there: inspect it, or delete the task with keep_worktree",
            gitfile.display(),
            repository.display()
        )
    };
    let meta = std::fs::symlink_metadata(&gitfile).map_err(|e| replaced(&e.to_string()))?;
    if !meta.file_type().is_file() || meta.len() > 4096 {
        return Err(replaced("not a small plain file"));
    }
    let text = std::fs::read_to_string(&gitfile).map_err(|e| replaced(&e.to_string()))?;
    let gitdir = text.strip_prefix("gitdir: ").map(str::trim_end).ok_or_else(|| replaced("no gitdir line"))?;
    let common = git(repository, &["rev-parse", "--path-format=absolute", "--git-common-dir"]).await?;
    let expected = Path::new(&common).canonicalize().map_err(|e| replaced(&e.to_string()))?.join("worktrees");
    let gitdir = Path::new(gitdir).canonicalize().map_err(|e| replaced(&e.to_string()))?;
    if gitdir.parent() != Some(expected.as_path()) {
        return Err(replaced(&format!("it names {}", gitdir.display())));
    }
    let back = std::fs::read_to_string(gitdir.join("gitdir")).map_err(|e| replaced(&e.to_string()))?;
    let back = Path::new(back.trim_end()).canonicalize().map_err(|e| replaced(&e.to_string()))?;
    let own = gitfile.canonicalize().map_err(|e| replaced(&e.to_string()))?;
    if back != own {
        return Err(replaced("the repository knows it as another worktree"));
    }
    Ok(())
}

/// The commit `dir`'s HEAD is at, and the branch it is on (None when detached or unborn).
pub(super) async fn head_of(dir: &Path) -> (Option<String>, Option<String>) {
    let commit = git(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).await.ok().filter(|c| !c.is_empty());
    let branch = git(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"]).await.ok().filter(|b| !b.is_empty());
    (commit, branch)
}

/// Decides (and for worktrees, creates) the task's working directory.
pub async fn prepare_workdir(
    data_dir: &Path,
    task_id: &str,
    params: &TaskCreateParams,
) -> Result<Workdir, ErrorPayload> {
    match (&params.repository, params.worktree) {
        (None, true) => Err(ErrorPayload::validation("worktree: true needs a repository")),
        (Some(repository), true) => {
            let repository = existing_dir(data_dir, repository, "repository")?;
            git(&repository, &["rev-parse", "--git-dir"]).await.map_err(|e| {
                ErrorPayload::validation(format!("{} is not a git repository: {e}", repository.display()))
            })?;
            let (base_commit, base_branch) = head_of(&repository).await;
            let short = task_id.trim_start_matches("task-").chars().take(12).collect::<String>();
            let branch = format!("baton/{short}");
            let path = data_dir.join("worktrees").join(task_id);
            std::fs::create_dir_all(data_dir.join("worktrees"))
                .map_err(|e| ErrorPayload::internal(format!("cannot create worktrees dir: {e}")))?;
            let target = path.to_string_lossy().into_owned();
            let start = base_commit.clone().unwrap_or_else(|| "HEAD".to_string());
            let mut add = git_command(&repository);
            // No agent has written the new worktree yet: the repository's own attributes (LFS,
            // line endings) apply to its checkout.
            add.env_remove("GIT_ATTR_SOURCE").args(["worktree", "add", "-b", &branch, &target, &start]);
            run(add).await.map_err(|e| ErrorPayload::validation(format!("cannot create a worktree: {e}")))?;
            Ok(Workdir { path: path.clone(), worktree: Some(Worktree { path, branch }), base_commit, base_branch })
        }
        (Some(repository), false) => {
            let path = existing_dir(data_dir, repository, "repository")?;
            let (base_commit, _) = head_of(&path).await;
            Ok(Workdir { path, worktree: None, base_commit, base_branch: None })
        }
        (None, false) => {
            let path = match &params.workdir {
                Some(workdir) => existing_dir(data_dir, workdir, "workdir")?,
                None => {
                    std::env::current_dir().map_err(|e| ErrorPayload::internal(format!("no working directory: {e}")))?
                }
            };
            // A directory inside a git repository: its changes can be reviewed from here on.
            let (base_commit, _) = head_of(&path).await;
            Ok(Workdir { path, worktree: None, base_commit, base_branch: None })
        }
    }
}

/// The uncommitted changes of a worktree of `repository`, as `git status --porcelain` lists
/// them (untracked files included). An error when git cannot tell or the worktree is not what
/// batond made ([`verify_worktree`]): a worktree git cannot read is treated as holding changes.
pub async fn uncommitted_changes(path: &Path, repository: Option<&Path>) -> Result<Vec<String>, String> {
    let repository = repository.ok_or_else(|| format!("the repository of {} is not known", path.display()))?;
    verify_worktree(path, repository).await?;
    let status = git(path, &["status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all"]).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let status = std::process::Command::new("sh").arg("-c").arg(script).current_dir(dir).status().unwrap();
        assert!(status.success(), "{script}");
    }

    /// A repository whose config and attributes run commands (fsmonitor, a hook, a clean filter,
    /// an external diff): batond's git runs none of them, and still reads the status.
    #[tokio::test]
    async fn git_runs_nothing_a_repository_configures() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        let ran = repo.join("ran");
        sh(repo, "git init -q && echo a > f && git add f && git -c user.name=t -c user.email=t@t commit -qm one");
        let hook = format!("touch {}", ran.display());
        for key in ["core.fsmonitor", "filter.evil.clean", "diff.external"] {
            sh(repo, &format!("git config {key} '{hook}'"));
        }
        sh(repo, &format!("mkdir -p .git/hooks && printf '#!/bin/sh\\n{hook}\\n' > .git/hooks/post-index-change && chmod +x .git/hooks/post-index-change"));
        sh(repo, "echo '* filter=evil' > .gitattributes && echo b > f");
        let status = git(repo, &["status", "--porcelain"]).await.unwrap();
        assert!(status.contains("M f"), "{status}");
        git(repo, &["diff", "--no-ext-diff", "--no-textconv"]).await.unwrap();
        git(repo, &["add", "f"]).await.unwrap();
        assert!(!ran.exists(), "git ran a command the repository configured");
    }
}
