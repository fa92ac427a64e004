//! The changes view and the shell key as the user meets them: the real `baton` in tmux against a
//! real `batond` whose mock agent wrote a file in its task's git worktree. `d` lists it with its
//! diff, `c` and Enter commit it (git has the commit), and `!` opens a shell in the worktree
//! that a command typed there runs in; exiting it brings the screen back.

use std::path::Path;

use crate::common::tmux::{baton_command, tools, Tmux};
use baton_protocol::TaskCreateParams;
use baton_testkit::ServerBuilder;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn d_reviews_and_commits_an_agents_change_and_bang_opens_a_shell_in_its_worktree() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Test User"]);
    git(&repo, &["config", "user.email", "test@example.com"]);
    std::fs::write(repo.join("README"), "hello\n").expect("README");
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-qm", "init"]);

    let server = ServerBuilder::new(&dir.path().join("server")).start_blocking();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let worktree = runtime.block_on(async {
        let (client, _notifications) = server.client().await;
        let mut params = TaskCreateParams::new("Greet in the README", "/write README hello\\nworld\\n", "mock");
        params.repository = Some(repo.display().to_string());
        params.worktree = true;
        let created = client.request(params).await.expect("task.create");
        client.close();
        created.task.workdir
    });
    let tmux = Tmux::start(dir.path(), 100, 30, &baton_command(&server, &dir.path().join("tui"), ""));
    tmux.wait_for("the session list", |s| s.contains("Greet in the README") && s.contains("connected"));
    // The agent's turn has written the file once its session waits for input.
    tmux.wait_text("to review");

    tmux.keys(&["d"]);
    let screen = tmux.wait_text("+world");
    assert!(screen.contains("Changes: 1 file +1 -0") && screen.contains("M README"), "{screen}");
    tmux.keys(&["c"]);
    tmux.wait_text("Commit message (1 file)");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the commit", |s| s.contains("committed ") && s.contains("(1 file)"));
    assert_eq!(git(Path::new(&worktree), &["log", "-1", "--format=%s"]), "Greet in the README");
    tmux.wait_text("1 commit ·");

    // A shell in the worktree: what is typed there runs there; exit comes back.
    tmux.keys(&["!"]);
    tmux.wait_text("baton: a shell in");
    tmux.type_text("pwd > shell-was-here; exit");
    tmux.keys(&["Enter"]);
    tmux.wait_text("back from the shell");
    let written = std::fs::read_to_string(Path::new(&worktree).join("shell-was-here")).expect("the shell ran there");
    assert_eq!(Path::new(written.trim()).canonicalize().ok(), Path::new(&worktree).canonicalize().ok());
    // The view reads the changes again: the file the shell wrote is listed.
    tmux.keys(&["r"]);
    tmux.wait_text("? shell-was-here");
}
