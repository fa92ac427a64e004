//! What a task's agent changed in its repository, and the actions that review it and bring it
//! home: `task.changes` (the changed files), `task.diff` (one file's diff), `task.commit`,
//! `task.merge`, `task.pull_request`, and `task.shell` (the command that opens a shell where
//! the agent works).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum;

/// Most files one `task.changes` page lists.
pub const MAX_CHANGES_PAGE: u32 = 2000;
/// Files a `task.changes` page lists when the request gives no `limit`.
pub const DEFAULT_CHANGES_PAGE: u32 = 500;
/// Most bytes of diff text `task.diff` sends for one file (2 MiB, well inside a frame); a
/// longer diff is cut there
/// (`truncated`).
pub const MAX_DIFF_BYTES: usize = 2 << 20;
/// Most paths `task.commit` takes.
pub const MAX_COMMIT_PATHS: usize = 10_000;

string_enum! {
    /// How a file changed.
    FileStatus {
        /// New in the task's work, known to git.
        Added => "added",
        /// Its content (or mode) changed.
        Modified => "modified",
        /// Removed.
        Deleted => "deleted",
        /// Moved (`old_path` names where from), perhaps changed too.
        Renamed => "renamed",
        /// Its type changed (a file became a symlink...).
        TypeChanged => "type_changed",
        /// New and not known to git yet (uncommitted part only).
        Untracked => "untracked",
        /// Git could not merge it (a conflict left in the working tree).
        Conflicted => "conflicted",
    }
}

string_enum! {
    /// Which part of a task's work a change belongs to.
    ChangePart {
        /// Committed on the task's branch since its base.
        Committed => "committed",
        /// In the working directory, not committed (staged or not, untracked files included).
        Uncommitted => "uncommitted",
    }
}

/// One changed file of one part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChangedFile {
    /// Its path, relative to the repository's top.
    pub path: String,
    /// Where it was before a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// How it changed.
    pub status: FileStatus,
    /// Which part it is in (a file changed in both appears once in each).
    pub part: ChangePart,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// True for a binary file: its diff is summarised, not sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

/// The commit a task's work is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeBase {
    /// The commit (full hash).
    pub commit: String,
    /// The branch it was on when the task was created (what `task.merge` merges into); absent
    /// when the repository's HEAD was detached or the task has no worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// `task.changes`: what the task's agent changed, against the task's base: committed changes
/// (its branch since the commit its worktree was made from) and uncommitted ones apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskChangesParams {
    /// The task.
    pub task_id: String,
    /// How many files of the list to skip (committed ones first, then uncommitted ones, each
    /// sorted by path).
    #[serde(default)]
    pub offset: u32,
    /// Most files to return (1 to 2000; 500 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Count the lines each file adds and removes (the default). `false` answers sooner when
    /// many files changed (git reads every file to count): the files and their status only,
    /// every count 0 and `counted` false. A client can show that list at once and ask again
    /// with counts.
    #[serde(default = "counted_by_default", skip_serializing_if = "is_true")]
    pub counts: bool,
}

fn counted_by_default() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl TaskChangesParams {
    /// The first page (500 files) of `task_id`'s changes, with line counts.
    pub fn new(task_id: impl Into<String>) -> Self {
        TaskChangesParams { task_id: task_id.into(), offset: 0, limit: None, counts: true }
    }
}

/// The changed files of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskChangesResult {
    /// The task.
    pub task_id: String,
    /// The directory compared (the task's working directory).
    pub workdir: String,
    /// What the work is compared with.
    pub base: ChangeBase,
    /// The branch checked out in the working directory (absent when detached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The page of files asked for: committed ones first, then uncommitted ones.
    pub files: Vec<ChangedFile>,
    /// How many files there are in all (both parts).
    pub total: u32,
    /// Lines added and removed over all files (both parts, every page).
    pub added: u64,
    /// See `added`.
    pub removed: u64,
    /// Commits on the branch since the base.
    pub commits: u32,
    /// False when asked without counts (`counts: false`): `added`, `removed` and `binary` are
    /// then unknown (0 and false) here and in every file.
    #[serde(default = "counted_by_default")]
    pub counted: bool,
}

/// `task.diff`: the diff of one changed file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDiffParams {
    /// The task.
    pub task_id: String,
    /// The file's path, as `task.changes` lists it.
    pub path: String,
    /// Which part's diff: the committed one (base to the branch's last commit) or the
    /// uncommitted one (the last commit to the working directory).
    pub part: ChangePart,
}

/// One file's diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDiffResult {
    /// The file.
    pub path: String,
    /// The part.
    pub part: ChangePart,
    /// The unified diff (git's format, 3 lines of context), without git's header lines
    /// (`diff --git`, `index`): from the first `---` line on. Empty for a binary file.
    pub diff: String,
    /// True for a binary file (its diff is not sent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// True when the diff was longer than 2 MiB and is cut there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// `task.commit`: commits the task's uncommitted changes on its branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskCommitParams {
    /// The task.
    pub task_id: String,
    /// The commit message (not empty).
    pub message: String,
    /// The files to commit, as `task.changes` lists them (a rename by its new path); absent:
    /// every uncommitted change. Other changes stay uncommitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// Commit while the task's agent is in a turn (its edits may land half done).
    #[serde(default)]
    pub force: bool,
}

/// A commit made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskCommitResult {
    /// The new commit (full hash).
    pub commit: String,
    /// The branch it is on (absent when detached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// How many files it changed.
    pub files: u32,
}

/// `task.merge`: merges the task's branch into its base branch in the repository the worktree
/// was made from: a fast-forward when the base has not moved, else a merge commit. Refused,
/// with nothing changed, when the repository's working tree has uncommitted changes to tracked
/// files, when it has another branch checked out, when the task's worktree has uncommitted
/// changes, or when the merge would conflict (`details.conflicts` lists the files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskMergeParams {
    /// The task (one with a worktree).
    pub task_id: String,
    /// After the merge, remove the task's worktree and its branch, and archive the task.
    #[serde(default)]
    pub remove_worktree: bool,
    /// Merge while the task's agent is in a turn.
    #[serde(default)]
    pub force: bool,
}

/// A merge made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskMergeResult {
    /// The branch merged into.
    pub into: String,
    /// Its commit after the merge.
    pub commit: String,
    /// True when it was a fast-forward (no merge commit).
    pub fast_forward: bool,
    /// How many of the task's commits it brought.
    pub commits: u32,
    /// The worktree removed (with `remove_worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_removed: Option<String>,
}

/// `task.pull_request`: pushes the task's branch to the repository's `origin` and opens a pull
/// request with the GitHub CLI (`gh`), which must be installed and logged in (else the error
/// gives the exact commands to run). The pull request's address is kept on the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskPullRequestParams {
    /// The task (one with a worktree).
    pub task_id: String,
    /// The pull request's title; the task's title when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description; the task's description when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Open it while the task's agent is in a turn.
    #[serde(default)]
    pub force: bool,
}

/// A pull request opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskPullRequestResult {
    /// Its address.
    pub url: String,
    /// The branch pushed.
    pub branch: String,
    /// The branch it asks to merge into.
    pub base: String,
}

/// `task.shell`: the command that opens a shell where the task's agent works: the user's
/// shell in its working directory, `docker exec -it` into its container, or `ssh -t` to its
/// host. Batond runs nothing: the client runs the command (the TUI on its terminal) or shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskShellParams {
    /// The task.
    pub task_id: String,
}

/// Where and how to open the shell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskShellResult {
    /// `local`, `docker` or `ssh`: where the agent runs.
    pub runtime: String,
    /// The program and its arguments; empty for `local`, where the client runs the user's own
    /// `$SHELL` in `workdir`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The agent's working directory (on its host or in its container).
    pub workdir: String,
    /// The command as one line to paste in a terminal.
    pub command: String,
}
