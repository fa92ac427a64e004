//! The changes view (`d`): the task's changed files and the diff of the one under the cursor,
//! moving by file and by hunk, choosing the files of a commit, the commit message, merging and
//! the pull request (asked first), and reading the list again when the agent's tool call ends.

use baton_protocol::*;
use baton_tui::app::Overlay;
use baton_tui::command::{Reply, Request};
use crossterm::event::KeyCode;

use crate::common::*;

fn file(path: &str, status: FileStatus, part: ChangePart, added: u64, removed: u64) -> ChangedFile {
    ChangedFile { path: path.into(), old_path: None, status, part, added, removed, binary: false }
}

fn changes() -> TaskChangesResult {
    let mut renamed = file("src/auth/session.rs", FileStatus::Renamed, ChangePart::Committed, 3, 1);
    renamed.old_path = Some("src/session.rs".into());
    TaskChangesResult {
        task_id: "t-1".into(),
        workdir: "/data/worktrees/t-1".into(),
        base: ChangeBase { commit: "9c1d0e4b7a2f5e8d".into(), branch: Some("main".into()) },
        branch: Some("baton/t1".into()),
        files: vec![
            renamed,
            file("src/login.rs", FileStatus::Modified, ChangePart::Uncommitted, 12, 4),
            file("tests/login.rs", FileStatus::Untracked, ChangePart::Uncommitted, 20, 0),
            ChangedFile { binary: true, ..file("assets/logo.png", FileStatus::Added, ChangePart::Uncommitted, 0, 0) },
        ],
        total: 4,
        added: 35,
        removed: 5,
        commits: 1,
        counted: true,
    }
}

/// The same list asked without counts.
fn uncounted() -> TaskChangesResult {
    let mut quick = changes();
    quick.counted = false;
    quick.added = 0;
    quick.removed = 0;
    for file in &mut quick.files {
        (file.added, file.removed, file.binary) = (0, 0, false);
    }
    quick
}

fn diff(path: &str, part: ChangePart, text: &str) -> TaskDiffResult {
    TaskDiffResult { path: path.into(), part, diff: text.into(), binary: false, truncated: false }
}

const SESSION_DIFF: &str = "--- a/src/session.rs\n+++ b/src/auth/session.rs\n@@ -1,4 +1,6 @@\n use std::time::Duration;\n-const TIMEOUT: u64 = 5;\n+/// How long a login may take.\n+const TIMEOUT: Duration = Duration::from_secs(5);\n+\n pub fn start() {}\n@@ -40,3 +42,3 @@\n fn end() {\n-    drop(1);\n+    drop(2);\n }\n";

/// `d` on `s-1` (task `t-1`), the list and the first diff answered.
fn opened() -> baton_tui::app::App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    requests(&mut app);
    press(&mut app, KeyCode::Char('d'));
    let quick = Request::Changes { task_id: "t-1".into(), counts: false };
    let counted = Request::Changes { task_id: "t-1".into(), counts: true };
    assert_eq!(requests(&mut app), vec![quick.clone(), counted.clone()], "without counts, and with them");
    reply(&mut app, 1, quick, Reply::Changes(Box::new(uncounted())));
    let first =
        Request::Diff { task_id: "t-1".into(), path: "src/auth/session.rs".into(), part: ChangePart::Committed };
    assert_eq!(requests(&mut app), vec![first.clone()], "the first file's diff is read");
    let result = diff("src/auth/session.rs", ChangePart::Committed, SESSION_DIFF);
    reply(&mut app, 1, first, Reply::Diff { task_id: "t-1".into(), result: Box::new(result) });
    reply(&mut app, 1, counted, Reply::Changes(Box::new(changes())));
    assert_eq!(requests(&mut app), vec![], "the diff read is kept when the counts come");
    app
}

#[test]
fn the_files_and_first_diff_show_before_the_counts_which_fill_in_after() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    requests(&mut app);
    press(&mut app, KeyCode::Char('d'));
    requests(&mut app);
    reply(
        &mut app,
        1,
        Request::Changes { task_id: "t-1".into(), counts: false },
        Reply::Changes(Box::new(uncounted())),
    );
    requests(&mut app);
    let result = diff("src/auth/session.rs", ChangePart::Committed, SESSION_DIFF);
    let first =
        Request::Diff { task_id: "t-1".into(), path: "src/auth/session.rs".into(), part: ChangePart::Committed };
    reply(&mut app, 1, first, Reply::Diff { task_id: "t-1".into(), result: Box::new(result) });
    let screen = render_sized(&app, 120, 30);
    assert!(screen.contains("counting…") && screen.contains("src/login.rs"), "{screen}");
    assert!(screen.contains("+/// How long a login may take."), "the diff is shown: {screen}");
    assert!(!screen.contains("+12 -4"), "{screen}");
    reply(&mut app, 1, Request::Changes { task_id: "t-1".into(), counts: true }, Reply::Changes(Box::new(changes())));
    let screen = render_sized(&app, 120, 30);
    assert!(screen.contains("+35 -5") && screen.contains("+12 -4") && screen.contains("binary"), "{screen}");
    assert!(screen.contains("+/// How long a login may take."), "the diff stays: {screen}");

    // A list with counts that came first is not replaced by the one without.
    reply(
        &mut app,
        1,
        Request::Changes { task_id: "t-1".into(), counts: false },
        Reply::Changes(Box::new(uncounted())),
    );
    assert!(render_sized(&app, 120, 30).contains("+12 -4"));
}

#[test]
fn d_shows_the_files_and_the_diff_side_by_side_or_stacked() {
    for (width, height) in [(200, 50), (80, 24)] {
        let app = opened();
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("Changes: 4 files +35 -5 · 1 commit"), "{screen}");
        assert!(screen.contains("src/session.rs → src/auth/session.rs") || width < 120, "{screen}");
        assert!(screen.contains("+const TIMEOUT: Duration"), "{screen}");
        insta::assert_snapshot!(format!("changes_view_{width}x{height}"), screen);
    }
}

#[test]
fn files_and_hunks_are_stepped_through_and_the_kept_files_are_committed() {
    let mut app = opened();
    // n: the second hunk; n again past the last one: the next file, whose diff is read.
    press(&mut app, KeyCode::Char('n'));
    press(&mut app, KeyCode::Char('n'));
    let Some(Overlay::Changes(view)) = app.overlay() else { panic!("the changes") };
    assert_eq!(view.scroll, 9, "the second hunk's row");
    press(&mut app, KeyCode::Char('n'));
    let second = Request::Diff { task_id: "t-1".into(), path: "src/login.rs".into(), part: ChangePart::Uncommitted };
    assert_eq!(requests(&mut app), vec![second]);

    // Space leaves the new test out; c proposes the task's title; Enter commits the rest.
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Char(' '));
    requests(&mut app);
    let screen = render_sized(&app, 80, 24);
    assert!(screen.contains("[ ] ? tests/login.rs") && screen.contains("[x] M src/login.rs"), "{screen}");
    press(&mut app, KeyCode::Char('c'));
    let screen = render_sized(&app, 80, 24);
    assert!(screen.contains("Commit message (2 files)") && screen.contains("Fix the login redirect"), "{screen}");
    press(&mut app, KeyCode::Enter);
    let commit = Request::Commit {
        task_id: "t-1".into(),
        message: "Fix the login redirect".into(),
        paths: Some(vec!["src/login.rs".into(), "assets/logo.png".into()]),
        force: false,
    };
    assert_eq!(requests(&mut app), vec![commit.clone()]);
    let done = TaskCommitResult { commit: "1a2b3c4d5e6f7a8b".into(), branch: Some("baton/t1".into()), files: 2 };
    reply(&mut app, 1, commit, Reply::Committed(done));
    assert_eq!(app.flash_text(), Some("committed 1a2b3c4d5e6f on baton/t1 (2 files)"));
    assert_eq!(
        requests(&mut app),
        vec![Request::Changes { task_id: "t-1".into(), counts: true }],
        "the list is read again"
    );
}

#[test]
fn a_commit_refused_mid_turn_asks_to_go_ahead_and_merge_asks_first() {
    let mut app = opened();
    press(&mut app, KeyCode::Char('c'));
    press(&mut app, KeyCode::Enter);
    let commit =
        Request::Commit { task_id: "t-1".into(), message: "Fix the login redirect".into(), paths: None, force: false };
    assert_eq!(requests(&mut app), vec![commit.clone()]);
    let busy = ErrorPayload::conflict("the task's agent is in a turn (s-1): …")
        .with_details(serde_json::json!({"working_sessions": ["s-1"]}));
    app.on_outcome(baton_tui::command::Outcome { epoch: 1, request: commit, result: Err(ClientError::Server(busy)) });
    let screen = render_sized(&app, 80, 24);
    assert!(screen.contains("half done. Commit anyway?"), "{screen}");
    press(&mut app, KeyCode::Char('y'));
    let forced =
        Request::Commit { task_id: "t-1".into(), message: "Fix the login redirect".into(), paths: None, force: true };
    assert_eq!(requests(&mut app), vec![forced]);
    assert!(matches!(app.overlay(), Some(Overlay::Changes(_))), "back to the changes");

    press(&mut app, KeyCode::Char('M'));
    let screen = render_sized(&app, 80, 24);
    assert!(screen.contains("Merge the branch of") && screen.contains("worktree and branch are"), "{screen}");
    assert_eq!(requests(&mut app), vec![], "nothing before the answer");
    press(&mut app, KeyCode::Char('n'));
    assert!(matches!(app.overlay(), Some(Overlay::Changes(_))));
    press(&mut app, KeyCode::Char('m'));
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(
        requests(&mut app),
        vec![Request::Merge { task_id: "t-1".into(), remove_worktree: false, force: false }]
    );
}

#[test]
fn the_list_follows_the_agents_edits() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    requests(&mut app);
    press(&mut app, KeyCode::Char('d'));
    requests(&mut app);
    reply(&mut app, 1, Request::Changes { task_id: "t-1".into(), counts: true }, Reply::Changes(Box::new(changes())));
    requests(&mut app);
    let edit = SessionEvent::ToolCallUpdate {
        tool_call_id: "c1".into(),
        title: None,
        status: Some(ToolCallStatus::Completed),
        content: None,
        raw_output: None,
    };
    app.on_notification(Notification::Event(record("s-1", 5, edit)));
    assert_eq!(requests(&mut app), vec![Request::Changes { task_id: "t-1".into(), counts: true }]);
    // Another edit while that read is on its way: one more read after it, not two at once.
    let chunk = SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: None };
    app.on_notification(Notification::Event(record("s-1", 6, chunk)));
    assert_eq!(requests(&mut app), vec![]);
    reply(&mut app, 1, Request::Changes { task_id: "t-1".into(), counts: true }, Reply::Changes(Box::new(changes())));
    assert!(requests(&mut app).contains(&Request::Changes { task_id: "t-1".into(), counts: true }));
}

#[test]
fn the_commit_message_proposed_is_the_title_and_what_the_agent_last_said() {
    let mut app = opened();
    let answer = chunk("m1", "Kept the next parameter through the redirect.\nDetails follow.");
    app.on_notification(Notification::Event(record("s-1", 1, answer)));
    press(&mut app, KeyCode::Char('c'));
    press(&mut app, KeyCode::Enter);
    let commit = Request::Commit {
        task_id: "t-1".into(),
        message: "Fix the login redirect: Kept the next parameter through the redirect.".into(),
        paths: None,
        force: false,
    };
    assert_eq!(requests(&mut app), vec![commit]);
}

#[test]
fn a_task_without_a_branch_of_its_own_is_told_merging_is_not_for_it() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    requests(&mut app);
    press(&mut app, KeyCode::Char('d'));
    requests(&mut app);
    let mut in_place = changes();
    in_place.base.branch = None;
    reply(&mut app, 1, Request::Changes { task_id: "t-1".into(), counts: true }, Reply::Changes(Box::new(in_place)));
    requests(&mut app);
    for key in ['m', 'M', 'P'] {
        press(&mut app, KeyCode::Char(key));
        assert!(matches!(app.overlay(), Some(Overlay::Changes(_))), "no question for {key}");
        assert!(app.flash_text().is_some_and(|t| t.contains("committing is all it takes")), "{key}");
    }
    assert_eq!(requests(&mut app), vec![]);
}
