//! Finishing a task's work on real git repositories made here: the mock agent writes and edits
//! files in its worktree; `task.changes` and `task.diff` report them exactly; `task.commit`
//! commits what the user keeps; `task.merge` fast-forwards, makes a merge commit, refuses a
//! conflict and a dirty repository with nothing changed, and removes the worktree after;
//! `task.pull_request` pushes the branch and runs a `gh` on PATH that records its arguments.

use crate::common;

use std::path::{Path, PathBuf};

use baton_protocol::*;
use common::*;

/// A repository on `main` with two committed files, and what runs git in it.
struct Repo {
    path: PathBuf,
}

impl Repo {
    fn new(env: &TestEnv) -> Repo {
        let path = env.workdir.join("repo");
        std::fs::create_dir_all(&path).unwrap();
        let repo = Repo { path };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        std::fs::write(repo.path.join("keep.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(repo.path.join("old.txt"), "old\n").unwrap();
        repo.git(&["add", "."]);
        repo.git(&["commit", "-qm", "init"]);
        repo
    }

    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn git(&self, args: &[&str]) -> String {
        Repo::git_in(&self.path, args)
    }

    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    fn commit_file(&self, name: &str, content: &str, message: &str) {
        std::fs::write(self.path.join(name), content).unwrap();
        self.git(&["add", name]);
        self.git(&["commit", "-qm", message]);
    }
}

/// A worktree task on `repo` whose mock agent ran `prompt`; returns (task, session id).
async fn worktree_task(
    client: &Client,
    notes: &mut Notifications,
    repo: &Repo,
    title: &str,
    prompt: &str,
) -> (Task, String) {
    let mut params = TaskCreateParams::new(title, prompt, "mock");
    params.repository = Some(repo.path.to_string_lossy().into_owned());
    params.worktree = true;
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    subscribe(client, &session_id, Some(0)).await;
    collect_events(notes, &session_id, is_turn_end).await;
    wait_state(client, notes, &session_id, SessionState::WaitingForInput).await;
    (created.task, session_id)
}

async fn changes(client: &Client, task_id: &str) -> TaskChangesResult {
    client.request(TaskChangesParams::new(task_id)).await.expect("task.changes")
}

fn listed(result: &TaskChangesResult) -> Vec<(String, FileStatus, ChangePart, u64, u64)> {
    result.files.iter().map(|f| (f.path.clone(), f.status, f.part, f.added, f.removed)).collect()
}

fn file(
    path: &str,
    status: FileStatus,
    part: ChangePart,
    added: u64,
    removed: u64,
) -> (String, FileStatus, ChangePart, u64, u64) {
    (path.to_string(), status, part, added, removed)
}

async fn diff(client: &Client, task_id: &str, path: &str, part: ChangePart) -> TaskDiffResult {
    client.request(TaskDiffParams { task_id: task_id.into(), path: path.into(), part }).await.expect("task.diff")
}

async fn status_lines(client: &Client, session_id: &str) -> Vec<String> {
    messages(client, session_id).await.into_iter().filter(|m| m.kind == MessageKind::Status).map(|m| m.text).collect()
}

#[tokio::test]
async fn a_tasks_changes_are_listed_diffed_committed_and_merged_fast_forward() {
    let env = TestEnv::new();
    let repo = Repo::new(&env);
    let base = repo.head();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let (task, session_id) =
        worktree_task(&client, &mut notes, &repo, "edit files", "/write new.txt hello\\nworld\\n").await;
    assert_eq!(task.base_commit.as_deref(), Some(base.as_str()));
    assert_eq!(task.base_branch.as_deref(), Some("main"));
    prompt(&client, &mut notes, &session_id, "/write keep.txt one\\nTWO\\nthree\\n").await;
    let worktree = PathBuf::from(&task.workdir);
    std::fs::remove_file(worktree.join("old.txt")).unwrap();

    let listed_now = changes(&client, &task.id).await;
    assert_eq!(listed_now.base.commit, base);
    assert_eq!(listed_now.base.branch.as_deref(), Some("main"));
    assert_eq!(listed_now.branch.as_deref(), task.worktree_branch.as_deref());
    assert_eq!(
        listed(&listed_now),
        vec![
            file("keep.txt", FileStatus::Modified, ChangePart::Uncommitted, 1, 1),
            file("new.txt", FileStatus::Untracked, ChangePart::Uncommitted, 2, 0),
            file("old.txt", FileStatus::Deleted, ChangePart::Uncommitted, 0, 1),
        ]
    );
    assert_eq!((listed_now.total, listed_now.added, listed_now.removed, listed_now.commits), (3, 3, 2, 0));
    let page = client
        .request(TaskChangesParams { offset: 1, limit: Some(1), ..TaskChangesParams::new(&task.id) })
        .await
        .expect("a page");
    assert_eq!(page.files.len(), 1);
    assert_eq!((page.files[0].path.as_str(), page.total), ("new.txt", 3));

    let keep = diff(&client, &task.id, "keep.txt", ChangePart::Uncommitted).await;
    assert_eq!(keep.diff, "--- a/keep.txt\n+++ b/keep.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n");
    let new = diff(&client, &task.id, "new.txt", ChangePart::Uncommitted).await;
    assert_eq!(new.diff, "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n");
    let missing = server_error(
        client
            .request(TaskDiffParams { task_id: task.id.clone(), path: "keep.txt".into(), part: ChangePart::Committed })
            .await,
    );
    assert_eq!(missing.code, ErrorCode::NotFound, "{missing:?}");
    let outside = server_error(
        client
            .request(TaskDiffParams { task_id: task.id.clone(), path: "../x".into(), part: ChangePart::Committed })
            .await,
    );
    assert_eq!(outside.code, ErrorCode::ValidationError, "{outside:?}");

    // Only the file the user keeps selected is committed.
    let commit = client
        .request(TaskCommitParams {
            task_id: task.id.clone(),
            message: "Say TWO".into(),
            paths: Some(vec!["keep.txt".into()]),
            force: false,
        })
        .await
        .expect("task.commit");
    assert_eq!((commit.files, commit.branch.as_deref()), (1, task.worktree_branch.as_deref()));
    assert_eq!(Repo::git_in(&worktree, &["log", "-1", "--format=%H %s"]), format!("{} Say TWO", commit.commit));
    assert_eq!(
        listed(&changes(&client, &task.id).await),
        vec![
            file("keep.txt", FileStatus::Modified, ChangePart::Committed, 1, 1),
            file("new.txt", FileStatus::Untracked, ChangePart::Uncommitted, 2, 0),
            file("old.txt", FileStatus::Deleted, ChangePart::Uncommitted, 0, 1),
        ]
    );
    let committed = diff(&client, &task.id, "keep.txt", ChangePart::Committed).await;
    assert_eq!(committed.diff, keep.diff, "the committed diff is base to the branch");

    // A merge with uncommitted changes left in the worktree is refused.
    let pending = server_error(
        client.request(TaskMergeParams { task_id: task.id.clone(), remove_worktree: false, force: false }).await,
    );
    assert!(pending.message.contains("2 uncommitted changes (new.txt, old.txt)"), "{pending:?}");

    client
        .request(TaskCommitParams { task_id: task.id.clone(), message: "The rest".into(), paths: None, force: false })
        .await
        .expect("commit the rest");
    let after = changes(&client, &task.id).await;
    assert_eq!(after.commits, 2);
    assert!(after.files.iter().all(|f| f.part == ChangePart::Committed), "{:?}", after.files);
    let nothing = server_error(
        client
            .request(TaskCommitParams { task_id: task.id.clone(), message: "x".into(), paths: None, force: false })
            .await,
    );
    assert!(nothing.message.contains("nothing to commit"), "{nothing:?}");

    // A dirty main working tree is refused, and nothing changes.
    std::fs::write(repo.path.join("keep.txt"), "edited by hand\n").unwrap();
    let dirty = server_error(
        client.request(TaskMergeParams { task_id: task.id.clone(), remove_worktree: false, force: false }).await,
    );
    assert_eq!(dirty.code, ErrorCode::Conflict);
    assert!(dirty.message.contains("uncommitted changes (keep.txt)"), "{dirty:?}");
    assert_eq!(repo.head(), base, "nothing merged");
    assert_eq!(
        std::fs::read_to_string(repo.path.join("keep.txt")).unwrap(),
        "edited by hand\n",
        "the user's edit stays"
    );
    repo.git(&["checkout", "--", "keep.txt"]);

    let merged = client
        .request(TaskMergeParams { task_id: task.id.clone(), remove_worktree: false, force: false })
        .await
        .expect("task.merge");
    assert!(merged.fast_forward);
    assert_eq!((merged.into.as_str(), merged.commits), ("main", 2));
    assert_eq!(repo.head(), merged.commit);
    assert_eq!(merged.commit, Repo::git_in(&worktree, &["rev-parse", "HEAD"]));
    assert_eq!(std::fs::read_to_string(repo.path.join("keep.txt")).unwrap(), "one\nTWO\nthree\n");
    assert!(repo.path.join("new.txt").exists() && !repo.path.join("old.txt").exists());
    assert_eq!(repo.git(&["status", "--porcelain"]), "");

    let lines = status_lines(&client, &session_id).await;
    assert!(lines.iter().any(|l| l.starts_with(&format!("Committed {}", &commit.commit[..12]))), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("Merged baton/") && l.contains("into main (fast-forward")), "{lines:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_renamed_file_is_diffed_as_a_rename_and_a_list_without_counts_names_the_same_files() {
    let env = TestEnv::new();
    let repo = Repo::new(&env);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let (task, _session_id) = worktree_task(&client, &mut notes, &repo, "rename", "hello").await;
    let worktree = PathBuf::from(&task.workdir);
    Repo::git_in(&worktree, &["mv", "keep.txt", "kept.txt"]);
    std::fs::write(worktree.join("kept.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    Repo::git_in(&worktree, &["commit", "-qam", "rename keep.txt"]);
    std::fs::write(worktree.join("old.txt"), "older\n").unwrap();
    std::fs::write(worktree.join("fresh.txt"), "a\nb\n").unwrap();

    let counted = changes(&client, &task.id).await;
    assert!(counted.counted);
    assert_eq!(
        listed(&counted),
        vec![
            file("kept.txt", FileStatus::Renamed, ChangePart::Committed, 1, 0),
            file("fresh.txt", FileStatus::Untracked, ChangePart::Uncommitted, 2, 0),
            file("old.txt", FileStatus::Modified, ChangePart::Uncommitted, 1, 1),
        ]
    );
    assert_eq!(counted.files[0].old_path.as_deref(), Some("keep.txt"));
    let quick = client.request(TaskChangesParams { counts: false, ..TaskChangesParams::new(&task.id) }).await.unwrap();
    assert!(!quick.counted);
    let named = |r: &TaskChangesResult| -> Vec<(String, Option<String>, FileStatus, ChangePart)> {
        r.files.iter().map(|f| (f.path.clone(), f.old_path.clone(), f.status, f.part)).collect()
    };
    assert_eq!(named(&quick), named(&counted));
    assert!(quick.files.iter().all(|f| f.added == 0 && f.removed == 0), "{quick:?}");
    assert_eq!((quick.total, quick.added, quick.removed, quick.commits), (3, 0, 0, 1));

    // The new path of a rename is diffed against the old one, not as a new file; the old path
    // is not a change of its own.
    let moved = diff(&client, &task.id, "kept.txt", ChangePart::Committed).await;
    assert_eq!(moved.diff, "--- a/keep.txt\n+++ b/kept.txt\n@@ -1,3 +1,4 @@\n one\n two\n three\n+four\n");
    let gone = server_error(
        client
            .request(TaskDiffParams { task_id: task.id.clone(), path: "keep.txt".into(), part: ChangePart::Committed })
            .await,
    );
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone:?}");
    let edited = diff(&client, &task.id, "old.txt", ChangePart::Uncommitted).await;
    assert_eq!(edited.diff, "--- a/old.txt\n+++ b/old.txt\n@@ -1 +1 @@\n-old\n+older\n");
    let fresh = diff(&client, &task.id, "fresh.txt", ChangePart::Uncommitted).await;
    assert_eq!(fresh.diff, "--- /dev/null\n+++ b/fresh.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    server.stop().await;
}

#[tokio::test]
async fn a_merge_makes_a_merge_commit_refuses_a_conflict_and_removes_the_worktree_after() {
    let env = TestEnv::new();
    let repo = Repo::new(&env);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;

    // The base moves on with another file: a merge commit.
    let (task, _) = worktree_task(&client, &mut notes, &repo, "add a file", "/write added.txt from the task\\n").await;
    let commit = TaskCommitParams { task_id: task.id.clone(), message: "Add a file".into(), paths: None, force: false };
    client.request(commit).await.expect("commit");
    repo.commit_file("other.txt", "from main\n", "main moves on");
    let before = repo.head();
    let merged = client
        .request(TaskMergeParams { task_id: task.id.clone(), remove_worktree: false, force: false })
        .await
        .expect("merge");
    assert!(!merged.fast_forward);
    assert_eq!(repo.head(), merged.commit);
    let parents = repo.git(&["log", "-1", "--format=%P"]);
    assert_eq!(parents.split(' ').count(), 2, "a merge commit: {parents}");
    assert!(parents.starts_with(&before));
    assert!(repo.path.join("added.txt").exists() && repo.path.join("other.txt").exists());

    // Both change the same line: refused, naming the file, and nothing changes.
    let (clash, clash_session) =
        worktree_task(&client, &mut notes, &repo, "clash", "/write keep.txt ONE\\ntwo\\nthree\\n").await;
    client
        .request(TaskCommitParams { task_id: clash.id.clone(), message: "ONE".into(), paths: None, force: false })
        .await
        .expect("commit");
    repo.commit_file("keep.txt", "uno\ntwo\nthree\n", "main says uno");
    let head = repo.head();
    let refused = server_error(
        client.request(TaskMergeParams { task_id: clash.id.clone(), remove_worktree: true, force: false }).await,
    );
    assert_eq!(refused.code, ErrorCode::Conflict);
    assert!(refused.message.contains("conflicts in keep.txt"), "{refused:?}");
    assert_eq!(refused.details.as_ref().and_then(|d| d.get("conflicts")), Some(&serde_json::json!(["keep.txt"])));
    assert_eq!(repo.head(), head, "nothing merged");
    assert_eq!(repo.git(&["status", "--porcelain"]), "", "the main working tree is untouched");
    assert!(!repo.path.join(".git/MERGE_HEAD").exists());
    assert!(Path::new(&clash.workdir).exists(), "the worktree stays");

    // Resolved in the task (the base merged in), then merged, the worktree and branch removed.
    let worktree = PathBuf::from(&clash.workdir);
    let _ = std::process::Command::new("git").arg("-C").arg(&worktree).args(["merge", "-q", "main"]).output();
    std::fs::write(worktree.join("keep.txt"), "uno ONE\ntwo\nthree\n").unwrap();
    Repo::git_in(&worktree, &["add", "keep.txt"]);
    Repo::git_in(&worktree, &["-c", "user.name=T", "-c", "user.email=t@t", "commit", "-qm", "resolved"]);
    let done = client
        .request(TaskMergeParams { task_id: clash.id.clone(), remove_worktree: true, force: false })
        .await
        .expect("merge after resolving");
    assert_eq!(done.worktree_removed.as_deref(), Some(clash.workdir.as_str()));
    assert!(!worktree.exists(), "the worktree is removed");
    let branch = clash.worktree_branch.clone().unwrap();
    assert_eq!(repo.git(&["branch", "--list", &branch]), "", "the branch is removed");
    assert_eq!(std::fs::read_to_string(repo.path.join("keep.txt")).unwrap(), "uno ONE\ntwo\nthree\n");
    let archived = client.request(TaskListParams { archived: Some(ArchivedFilter::Only) }).await.expect("task.list");
    assert!(archived.tasks.iter().any(|t| t.id == clash.id), "the task stays, archived");
    let lines = status_lines(&client, &clash_session).await;
    assert!(lines.iter().any(|l| l.starts_with("Removed the worktree")), "{lines:?}");
    server.stop().await;
}

#[tokio::test]
async fn commit_waits_for_the_agents_turn_unless_forced_and_a_task_without_a_repository_has_no_changes() {
    let env = TestEnv::new();
    let repo = Repo::new(&env);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let (task, session_id) = worktree_task(&client, &mut notes, &repo, "busy", "/write a.txt a\\n").await;
    client.request(MessageAddParams::new(&session_id, "/hang")).await.expect("message.add");
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::TurnStarted { .. })).await;
    let commit = |force| TaskCommitParams { task_id: task.id.clone(), message: "a".into(), paths: None, force };
    let busy = server_error(client.request(commit(false)).await);
    assert_eq!(busy.code, ErrorCode::Conflict);
    assert!(busy.message.contains("in a turn") && busy.message.contains("force"), "{busy:?}");
    assert_eq!(changes(&client, &task.id).await.commits, 0, "nothing committed");
    client.request(commit(true)).await.expect("forced");
    assert_eq!(changes(&client, &task.id).await.commits, 1);
    client.request(SessionCancelParams { session_id: session_id.clone() }).await.expect("cancel");
    collect_events(&mut notes, &session_id, is_turn_end).await;

    let plain = client.request(env.task("plain", "hi", "mock", false)).await.expect("task.create");
    let none = server_error(client.request(TaskChangesParams::new(plain.task.id)).await);
    assert_eq!(none.code, ErrorCode::ValidationError);
    assert!(none.message.contains("which is not in a git repository"), "{none:?}");

    // A task made in a directory of a repository (as the TUI's form makes them): its changes
    // are there, paths from the repository's top, against the commit it started from.
    let sub = repo.path.join("docs");
    std::fs::create_dir_all(&sub).unwrap();
    let mut params = TaskCreateParams::new("in a subdirectory", "", "mock");
    params.workdir = Some(sub.to_string_lossy().into_owned());
    params.start = false;
    let inside = client.request(params).await.expect("task.create");
    assert_eq!(inside.task.base_commit.as_deref(), Some(repo.head().as_str()));
    std::fs::write(sub.join("guide.md"), "one\ntwo\n").unwrap();
    std::fs::write(repo.path.join("keep.txt"), "one\n").unwrap();
    let found = changes(&client, &inside.task.id).await;
    assert_eq!(
        listed(&found),
        vec![
            file("docs/guide.md", FileStatus::Untracked, ChangePart::Uncommitted, 2, 0),
            file("keep.txt", FileStatus::Modified, ChangePart::Uncommitted, 0, 2),
        ]
    );
    let guide = diff(&client, &inside.task.id, "docs/guide.md", ChangePart::Uncommitted).await;
    assert_eq!(guide.diff, "--- /dev/null\n+++ b/docs/guide.md\n@@ -0,0 +1,2 @@\n+one\n+two\n");

    // What an agent may leave to trip a reader: a FIFO (nobody writes to it: git passes over it)
    // and a symlink out of the repository (listed, not read).
    let fifo = sub.join("pipe");
    let name = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: mkfifo(3) with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
    std::os::unix::fs::symlink("/etc/passwd", sub.join("passwords")).unwrap();
    let found = changes(&client, &inside.task.id).await;
    let listed_paths: Vec<(String, u64)> = found.files.iter().map(|f| (f.path.clone(), f.added)).collect();
    assert!(!listed_paths.iter().any(|(path, _)| path == "docs/pipe"), "{listed_paths:?}");
    assert!(listed_paths.contains(&("docs/passwords".to_string(), 0)), "{listed_paths:?}");
    let refused = server_error(
        client
            .request(TaskDiffParams {
                task_id: inside.task.id.clone(),
                path: "docs/pipe".into(),
                part: ChangePart::Uncommitted,
            })
            .await,
    );
    assert_eq!(refused.code, ErrorCode::NotFound, "{refused:?}");
    let unknown = server_error(client.request(TaskChangesParams::new("task-nope")).await);
    assert_eq!(unknown.code, ErrorCode::NotFound);
    server.stop().await;
}

/// The agent of a task working in a repository itself (a Docker agent has it mounted, `.git`
/// included) can write the repository's config: nothing it names there runs on the host.
#[tokio::test]
async fn commands_an_agent_writes_into_the_repositorys_own_config_never_run() {
    let env = TestEnv::new();
    let repo = Repo::new(&env);
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let mut params = TaskCreateParams::new("in place", "", "mock");
    params.workdir = Some(repo.path.to_string_lossy().into_owned());
    params.start = false;
    let task = client.request(params).await.expect("task.create").task;
    std::fs::write(repo.path.join("keep.txt"), "one\n").unwrap();
    let ran = env.workdir.join("ran");
    let touch = |what: &str| format!("touch {}-{what}; cat", ran.display());

    // A signing key command, with signing on: the commit is refused (git finds no key), and
    // neither the key command nor the signing program named ran.
    repo.git(&["config", "commit.gpgSign", "true"]);
    repo.git(&["config", "gpg.format", "ssh"]);
    repo.git(&["config", "gpg.ssh.defaultKeyCommand", &touch("key")]);
    repo.git(&["config", "gpg.ssh.program", &touch("program")]);
    let commit = TaskCommitParams { task_id: task.id.clone(), message: "one".into(), paths: None, force: false };
    let signed = server_error(client.request(commit.clone()).await);
    assert!(signed.message.contains("signingKey"), "{signed:?}");
    assert!(!env.workdir.join("ran-key").exists() && !env.workdir.join("ran-program").exists(), "{signed:?}");
    repo.git(&["config", "commit.gpgSign", "false"]);

    // A filter driver selected by .git/info/attributes: refused, naming it, before git runs.
    repo.git(&["config", "filter.evil.clean", &touch("clean")]);
    repo.git(&["config", "filter.evil.process", &touch("process")]);
    std::fs::create_dir_all(repo.path.join(".git/info")).unwrap();
    std::fs::write(repo.path.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    std::fs::write(repo.path.join("keep.txt"), "two\n").unwrap();
    for refused in [
        server_error(client.request(TaskChangesParams::new(&task.id)).await),
        server_error(
            client
                .request(TaskDiffParams {
                    task_id: task.id.clone(),
                    path: "keep.txt".into(),
                    part: ChangePart::Uncommitted,
                })
                .await,
        ),
        server_error(client.request(commit.clone()).await),
    ] {
        assert_eq!(refused.code, ErrorCode::ValidationError, "{refused:?}");
        assert!(refused.message.contains("filter.evil.clean, filter.evil.process"), "{refused:?}");
    }
    // A working tree moved out of the repository: refused too.
    repo.git(&["config", "--unset-all", "filter.evil.clean"]);
    repo.git(&["config", "--unset-all", "filter.evil.process"]);
    repo.git(&["config", "core.worktree", "/etc"]);
    let moved = server_error(client.request(TaskChangesParams::new(&task.id)).await);
    assert!(moved.message.contains("core.worktree"), "{moved:?}");
    repo.git(&["config", "--unset", "core.worktree"]);
    let listed_now = changes(&client, &task.id).await;
    assert_eq!(listed(&listed_now), vec![file("keep.txt", FileStatus::Modified, ChangePart::Uncommitted, 0, 2)]);
    let leftovers: Vec<_> = std::fs::read_dir(&env.workdir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("ran-"))
        .collect();
    assert!(leftovers.is_empty(), "commands the repository named ran: {leftovers:?}");
    server.stop().await;
}

/// A `gh` that records its arguments and answers as a logged-in GitHub CLI would (or as a
/// logged-out one when `logged_in` is false).
fn fake_gh(dir: &Path, logged_in: bool) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("gh-args");
    let auth = if logged_in { "exit 0" } else { "echo 'You are not logged into any GitHub hosts' >&2; exit 1" };
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {log}\nif [ \"$1 $2\" = 'auth status' ]; then {auth}; fi\n\
         if [ \"$1 $2\" = 'pr create' ]; then echo 'Creating pull request'; echo https://github.com/o/r/pull/7; fi\n",
        log = log.display()
    );
    let gh = bin.join("gh");
    std::fs::write(&gh, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[tokio::test]
async fn a_pull_request_pushes_the_branch_runs_gh_and_is_kept_on_the_task() {
    let env = TestEnv::new();
    let repo = Repo::new(&env);
    let origin = env.workdir.join("origin.git");
    Repo::git_in(&env.workdir, &["init", "-q", "--bare", &origin.to_string_lossy()]);
    repo.git(&["remote", "add", "origin", &origin.to_string_lossy()]);
    let tools = tempfile::tempdir().unwrap();
    let bin = fake_gh(tools.path(), true);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let server = env.server().env("PATH", &path).start().await;
    let (client, mut notes) = server.client().await;
    let (task, session_id) =
        worktree_task(&client, &mut notes, &repo, "Fix the docs", "/write docs.md better\\n").await;
    client
        .request(TaskCommitParams {
            task_id: task.id.clone(),
            message: "Better docs".into(),
            paths: None,
            force: false,
        })
        .await
        .expect("commit");
    let opened = client
        .request(TaskPullRequestParams {
            task_id: task.id.clone(),
            title: None,
            body: Some("Made clearer.".into()),
            force: false,
        })
        .await
        .expect("task.pull_request");
    let branch = task.worktree_branch.clone().unwrap();
    assert_eq!(
        (opened.url.as_str(), opened.branch.as_str(), opened.base.as_str()),
        ("https://github.com/o/r/pull/7", branch.as_str(), "main")
    );
    let pushed = Repo::git_in(&origin, &["rev-parse", &branch]);
    assert_eq!(pushed, Repo::git_in(Path::new(&task.workdir), &["rev-parse", "HEAD"]), "the branch is pushed");
    let args = std::fs::read_to_string(tools.path().join("gh-args")).unwrap();
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        vec![
            "auth status".to_string(),
            format!("pr create --head {branch} --base main --title Fix the docs --body Made clearer.")
        ]
    );
    let tasks = client.request(TaskListParams { archived: Some(ArchivedFilter::Include) }).await.expect("task.list");
    let kept = tasks.tasks.iter().find(|t| t.id == task.id).unwrap();
    assert_eq!(kept.pull_request_url.as_deref(), Some("https://github.com/o/r/pull/7"));
    let lines = status_lines(&client, &session_id).await;
    assert!(lines.iter().any(|l| l.starts_with("Opened pull request https://github.com/o/r/pull/7")), "{lines:?}");
    server.stop().await;

    // Logged out: the error says how to log in and gives the exact commands.
    let logged_out = tempfile::tempdir().unwrap();
    let bin = fake_gh(logged_out.path(), false);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let server = env.server().env("PATH", &path).start().await;
    let (client, _notes) = server.client().await;
    let refused = server_error(
        client.request(TaskPullRequestParams { task_id: task.id.clone(), title: None, body: None, force: false }).await,
    );
    assert!(refused.message.contains("gh auth login"), "{refused:?}");
    assert!(
        refused.message.contains(&format!("git push --set-upstream origin {branch} && gh pr create --head {branch}")),
        "{refused:?}"
    );
    server.stop().await;
}
