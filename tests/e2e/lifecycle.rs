//! A task's life cycle: rename, archive and unarchive, delete with its sessions and files; every
//! client hears of each change.

use crate::common;

use std::path::{Path, PathBuf};

use baton_protocol::*;
use common::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().expect("git");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// A git repository with one commit, in the test's working directory.
fn repository(env: &TestEnv) -> PathBuf {
    let repo = env.workdir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "hi").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]);
    repo
}

async fn task_with_worktree(client: &Client, repo: &Path, title: &str) -> TaskCreateResult {
    let mut params = TaskCreateParams::new(title, "", "mock");
    params.repository = Some(repo.to_string_lossy().into_owned());
    params.worktree = true;
    params.start = false;
    client.request(params).await.expect("task.create")
}

async fn wait_task_updated(notes: &mut Notifications, task_id: &str, pick: impl Fn(&Task) -> bool) -> Task {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::TaskUpdated(task)) if task.id == task_id && pick(task) => {
                Some(task.clone())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("no task.updated for {task_id}: {e}"))
}

async fn wait_task_deleted(notes: &mut Notifications, task_id: &str) -> TaskDeleted {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::TaskDeleted(deleted)) if deleted.task_id == task_id => {
                Some(deleted.clone())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("no task.deleted for {task_id}: {e}"))
}

async fn task_ids(client: &Client, archived: Option<ArchivedFilter>) -> Vec<String> {
    let tasks = client.request(TaskListParams { archived }).await.expect("task.list").tasks;
    tasks.into_iter().map(|t| t.id).collect()
}

async fn session_ids(client: &Client, archived: Option<ArchivedFilter>) -> Vec<String> {
    let params = SessionListParams { archived, ..Default::default() };
    let sessions = client.request(params).await.expect("task.session.list").sessions;
    sessions.into_iter().map(|s| s.status.session_id).collect()
}

#[tokio::test]
async fn a_renamed_task_is_seen_by_every_client() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _) = server.client().await;
    let (_other, mut other_notes) = server.client().await;
    let created = client.request(env.task("Fix login", "the old words", "mock", false)).await.unwrap();
    let task_id = created.task.id.clone();

    let params =
        TaskUpdateParams { task_id: task_id.clone(), title: Some("  Fix the login test ".into()), description: None };
    let updated = client.request(params).await.unwrap().task;
    assert_eq!(updated.title, "Fix the login test");
    assert_eq!(updated.description, "the old words", "a field left out keeps its value");
    let seen = wait_task_updated(&mut other_notes, &task_id, |t| t.title == "Fix the login test").await;
    assert_eq!(seen, updated);

    let params = TaskUpdateParams { task_id: task_id.clone(), title: None, description: Some("new words".into()) };
    assert_eq!(client.request(params).await.unwrap().task.description, "new words");
    let listed = client.request(SessionListParams::default()).await.unwrap().sessions;
    assert_eq!(listed[0].task_title, "Fix the login test");

    let blank = TaskUpdateParams { task_id: task_id.clone(), title: Some("  ".into()), description: None };
    assert_eq!(server_error(client.request(blank).await).code, ErrorCode::ValidationError);
    let nothing = TaskUpdateParams { task_id: task_id.clone(), title: None, description: None };
    assert_eq!(server_error(client.request(nothing).await).code, ErrorCode::ValidationError);
    let unknown = TaskUpdateParams { task_id: "task-nope".into(), title: Some("x".into()), description: None };
    assert_eq!(server_error(client.request(unknown).await).code, ErrorCode::NotFound);
    assert_eq!(client.request(TaskListParams::default()).await.unwrap().tasks[0].title, "Fix the login test");
}

#[tokio::test]
async fn an_archived_task_leaves_the_default_lists_and_keeps_its_data() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let (_other, mut other_notes) = server.client().await;
    let kept = client.request(env.task("kept", "", "mock", false)).await.unwrap();
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let archived_task = client.request(SessionStatusParams { session_id: session_id.clone() }).await.unwrap().task_id;
    let before = messages(&client, &session_id).await;

    let task =
        client.request(TaskArchiveParams { task_id: archived_task.clone(), stop_agents: false }).await.unwrap().task;
    assert!(task.archived);
    assert!(wait_task_updated(&mut other_notes, &archived_task, |t| t.archived).await.archived);

    assert_eq!(task_ids(&client, None).await, vec![kept.task.id.clone()], "hidden from the default list");
    assert_eq!(task_ids(&client, Some(ArchivedFilter::Only)).await, vec![archived_task.clone()]);
    assert_eq!(task_ids(&client, Some(ArchivedFilter::Include)).await.len(), 2);
    assert_eq!(session_ids(&client, None).await, vec![kept.session.status.session_id.clone()]);
    assert_eq!(session_ids(&client, Some(ArchivedFilter::Only)).await, vec![session_id.clone()]);
    let of_task = SessionListParams { task_id: Some(archived_task.clone()), ..Default::default() };
    let rows = client.request(of_task).await.unwrap().sessions;
    assert!(rows[0].task_archived, "a task named explicitly lists its sessions, marked archived");
    assert_eq!(messages(&client, &session_id).await, before, "the conversation is kept");

    // Archiving survives a restart; unarchiving brings the task back.
    drop((client, notes));
    server.stop().await;
    let server = env.start().await;
    let (client, _) = server.client().await;
    let (_other, mut other_notes) = server.client().await;
    assert_eq!(task_ids(&client, Some(ArchivedFilter::Only)).await, vec![archived_task.clone()]);
    let task = client.request(TaskUnarchiveParams { task_id: archived_task.clone() }).await.unwrap().task;
    assert!(!task.archived);
    wait_task_updated(&mut other_notes, &archived_task, |t| !t.archived).await;
    assert_eq!(session_ids(&client, None).await.len(), 2);
    let unknown = TaskArchiveParams { task_id: "task-nope".into(), stop_agents: false };
    assert_eq!(server_error(client.request(unknown).await).code, ErrorCode::NotFound);
}

#[tokio::test]
async fn delete_is_refused_while_an_agent_runs_unless_asked_to_stop_it() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let (_other, mut other_notes) = server.client().await;
    // mock-fresh records the conversation for history injection.
    let session_id = started_session(&env, &client, &mut notes, "mock-fresh", "remember pineapple").await;
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await.unwrap();
    let (task_id, pid) = (status.task_id.clone(), status.agent_pid.expect("an agent runs"));
    let history = env.data_dir.join("sessions").join(format!("{session_id}.jsonl"));
    assert!(history.exists(), "the session has a history file");

    let refused = TaskDeleteParams { task_id: task_id.clone(), ..Default::default() };
    let error = server_error(client.request(refused).await);
    assert_eq!(error.code, ErrorCode::Conflict, "{error:?}");
    assert!(error.message.contains("running"), "{}", error.message);
    assert_eq!(task_ids(&client, None).await, vec![task_id.clone()], "nothing was deleted");
    assert!(process_alive(pid), "the agent still runs");
    assert!(!messages(&client, &session_id).await.is_empty());

    let params = TaskDeleteParams { task_id: task_id.clone(), stop_agents: true, ..Default::default() };
    let deleted = client.request(params).await.unwrap();
    assert_eq!(deleted.session_ids, vec![session_id.clone()]);
    assert_eq!(wait_task_deleted(&mut other_notes, &task_id).await.session_ids, vec![session_id.clone()]);
    assert!(wait_process_gone(pid).await, "the agent was stopped");
    assert!(task_ids(&client, Some(ArchivedFilter::Include)).await.is_empty());
    assert!(session_ids(&client, Some(ArchivedFilter::Include)).await.is_empty());
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await;
    assert_eq!(server_error(status).code, ErrorCode::NotFound);
    let listed = client.request(MessageListParams::all(&session_id)).await;
    assert_eq!(server_error(listed).code, ErrorCode::NotFound, "the journal and messages are gone");
    assert!(!history.exists(), "the history file is gone");

    // Nothing of it is left in the database, and nothing comes back after a restart.
    drop((client, notes));
    server.stop().await;
    let db = rusqlite::Connection::open(env.data_dir.join("baton.db")).unwrap();
    for table in ["session_events", "messages", "executors_running", "task_sessions"] {
        let column = if table == "task_sessions" { "id" } else { "session_id" };
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} = ?1");
        let rows: i64 = db.query_row(&sql, [&session_id], |r| r.get(0)).unwrap();
        assert_eq!(rows, 0, "{table} still holds the session");
    }
    drop(db);
    let server = env.start().await;
    let (client, _) = server.client().await;
    assert!(task_ids(&client, Some(ArchivedFilter::Include)).await.is_empty());
    let unknown = TaskDeleteParams { task_id: task_id.clone(), ..Default::default() };
    assert_eq!(server_error(client.request(unknown).await).code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_worktree_with_uncommitted_changes_is_kept_unless_they_are_discarded() {
    let env = TestEnv::new();
    let repo = repository(&env);
    let server = env.start().await;
    let (client, _) = server.client().await;

    // A clean worktree goes with its task; its branch stays in the repository.
    let clean = task_with_worktree(&client, &repo, "clean").await;
    let clean_path = PathBuf::from(&clean.task.workdir);
    assert!(clean_path.join("README").exists());
    let params = TaskDeleteParams { task_id: clean.task.id.clone(), ..Default::default() };
    let deleted = client.request(params).await.unwrap();
    assert_eq!(deleted.worktree_removed.as_deref(), Some(clean.task.workdir.as_str()));
    assert!(!clean_path.exists(), "the worktree was removed");
    let branch = clean.task.worktree_branch.clone().unwrap();
    git(&repo, &["rev-parse", "--verify", &branch]);
    assert!(!git(&repo, &["worktree", "list"]).contains(&clean.task.workdir), "git forgot the worktree");

    // A worktree with changes: refused, everything kept.
    let dirty = task_with_worktree(&client, &repo, "dirty").await;
    let dirty_path = PathBuf::from(&dirty.task.workdir);
    std::fs::write(dirty_path.join("work.txt"), "unsaved work").unwrap();
    std::fs::write(dirty_path.join("README"), "changed").unwrap();
    let params = TaskDeleteParams { task_id: dirty.task.id.clone(), stop_agents: true, ..Default::default() };
    let error = server_error(client.request(params).await);
    assert_eq!(error.code, ErrorCode::Conflict, "{error:?}");
    assert!(error.message.contains("uncommitted changes"), "{}", error.message);
    let changes = error.details.as_ref().and_then(|d| d["changes"].as_array().cloned()).unwrap_or_default();
    assert_eq!(changes.len(), 2, "{:?}", error.details);
    assert_eq!(std::fs::read_to_string(dirty_path.join("work.txt")).unwrap(), "unsaved work");
    assert_eq!(task_ids(&client, None).await, vec![dirty.task.id.clone()], "the task was kept");

    // keep_worktree deletes the task and leaves the directory as it is.
    let params = TaskDeleteParams { task_id: dirty.task.id.clone(), keep_worktree: true, ..Default::default() };
    let deleted = client.request(params).await.unwrap();
    assert_eq!(deleted.worktree_removed, None);
    assert!(task_ids(&client, None).await.is_empty());
    assert_eq!(std::fs::read_to_string(dirty_path.join("work.txt")).unwrap(), "unsaved work");

    // discard_changes removes a worktree with changes.
    let discarded = task_with_worktree(&client, &repo, "discarded").await;
    let discarded_path = PathBuf::from(&discarded.task.workdir);
    std::fs::write(discarded_path.join("scratch.txt"), "throw away").unwrap();
    let params = TaskDeleteParams { task_id: discarded.task.id.clone(), discard_changes: true, ..Default::default() };
    let deleted = client.request(params).await.unwrap();
    assert_eq!(deleted.worktree_removed.as_deref(), Some(discarded.task.workdir.as_str()));
    assert!(!discarded_path.exists());
}

/// What an agent may write in its worktree never runs on the host: it replaces the worktree's
/// `.git` with a repository of its own whose config runs a command from `git status`
/// (`core.fsmonitor`), and whose attributes and config select a filter that runs one too.
/// batond sees the worktree is no longer tied to its repository, says so, and runs no git there.
#[tokio::test]
async fn git_never_runs_what_an_agent_wrote_into_its_worktree() {
    let env = TestEnv::new();
    let repo = repository(&env);
    let server = env.start().await;
    let (client, _) = server.client().await;
    let task = task_with_worktree(&client, &repo, "hostile").await;
    let path = PathBuf::from(&task.task.workdir);
    let ran = env.workdir.join("ran");
    let hook = format!("touch '{}'", ran.display());

    // The agent's own repository in place of the gitfile.
    std::fs::remove_file(path.join(".git")).unwrap();
    git(&path, &["init", "-q"]);
    git(&path, &["add", "README"]);
    git(&path, &["config", "core.fsmonitor", &hook]);
    git(&path, &["config", "filter.evil.clean", &hook]);
    std::fs::write(path.join(".gitattributes"), "* filter=evil\n").unwrap();
    std::fs::write(path.join("README"), "changed since").unwrap();
    assert!(!ran.exists());

    let params = TaskDeleteParams { task_id: task.task.id.clone(), stop_agents: true, ..Default::default() };
    let error = server_error(client.request(params).await);
    assert_eq!(error.code, ErrorCode::Conflict, "{error:?}");
    assert!(error.message.contains("uncommitted changes"), "{}", error.message);
    let changes = error.details.as_ref().map(|d| d["changes"].to_string()).unwrap_or_default();
    assert!(changes.contains("no longer the file that ties the worktree"), "{changes}");
    assert!(!ran.exists(), "batond ran the agent's command");
    assert_eq!(task_ids(&client, None).await, vec![task.task.id.clone()], "the task was kept");
}

/// Forks and new sessions sent together with `task.delete {stop_agents}` leave no agent
/// without a session, in the standalone and the hosted runtime, and nothing survives a stop.
#[tokio::test]
async fn launches_racing_a_delete_leave_no_agent_behind() {
    for runtime in ["standalone", "hosted"] {
        let env = TestEnv::new();
        let server = env.start_with(&["--agent-runtime", runtime]).await;
        let (client, mut notes) = server.client().await;
        let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
        let task_id = status(&client, &session_id).await.task_id;
        let forks = (0..4).map(|_| client.request(SessionForkParams::new(session_id.clone())));
        let starts =
            (0..4).map(|_| client.request(SessionStartParams { task_id: task_id.clone(), agent: None, prompt: None }));
        let delete =
            client.request(TaskDeleteParams { task_id: task_id.clone(), stop_agents: true, ..Default::default() });
        let (_, _, deleted) =
            tokio::join!(futures_util::future::join_all(forks), futures_util::future::join_all(starts), delete);
        deleted.unwrap_or_else(|e| panic!("{runtime}: task.delete: {e:?}"));
        let left = mock_agent_processes(&env, true);
        for pid in &left {
            assert!(wait_process_gone(*pid).await, "{runtime}: agent {pid} outlived its deleted session");
        }
        assert!(task_ids(&client, Some(ArchivedFilter::Include)).await.is_empty(), "{runtime}");
        server.stop().await;
        assert!(mock_agent_processes(&env, true).is_empty(), "{runtime}: an agent survived the stop");
    }
}

/// `stop_agents` stops the archived task's running agents (nothing works unseen behind the
/// default lists); without it they keep running, and the archived listing says so.
#[tokio::test]
async fn archiving_with_stop_agents_stops_the_running_agents() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;

    let left_running = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let status = client.request(SessionStatusParams { session_id: left_running.clone() }).await.unwrap();
    assert!(status.is_agent_running);
    let params = TaskArchiveParams { task_id: status.task_id.clone(), stop_agents: false };
    let result = client.request(params).await.unwrap();
    assert!(result.stopped_sessions.is_empty());
    let rows = client
        .request(SessionListParams { archived: Some(ArchivedFilter::Only), ..Default::default() })
        .await
        .unwrap()
        .sessions;
    assert!(rows[0].status.is_agent_running, "an agent left running is listed as running");

    let stopped = started_session(&env, &client, &mut notes, "mock", "remember mango").await;
    let status = client.request(SessionStatusParams { session_id: stopped.clone() }).await.unwrap();
    let pid = status.agent_pid.expect("the agent's pid");
    let params = TaskArchiveParams { task_id: status.task_id.clone(), stop_agents: true };
    let result = client.request(params).await.unwrap();
    assert!(result.task.archived);
    assert_eq!(result.stopped_sessions, vec![stopped.clone()]);
    let after = client.request(SessionStatusParams { session_id: stopped.clone() }).await.unwrap();
    assert!(!after.is_agent_running);
    assert_eq!(after.state, SessionState::Completed);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the agent process is gone");
    assert!(!messages(&client, &stopped).await.is_empty(), "the conversation is kept");
}

/// Stopping one session of a task leaves the task's state alone while another session of it
/// still waits for the user; stopping the last one makes the task done.
#[tokio::test]
async fn a_task_is_done_only_when_its_last_session_is_stopped() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let first = started_session(&env, &client, &mut notes, "mock", "remember plums").await;
    let task_id = client.request(SessionStatusParams { session_id: first.clone() }).await.unwrap().task_id;
    let params = SessionStartParams { task_id: task_id.clone(), agent: None, prompt: Some(String::new()) };
    let second = client.request(params).await.expect("task.session.start").session.status.session_id;
    wait_state(&client, &mut notes, &second, SessionState::WaitingForInput).await;

    client.request(SessionStopParams { session_id: first.clone() }).await.expect("stop the first");
    let second_status = client.request(SessionStatusParams { session_id: second.clone() }).await.unwrap();
    assert_ne!(second_status.task_state, TaskState::Completed, "the second session still waits");
    let task = client.request(TaskListParams::default()).await.unwrap().tasks;
    assert_ne!(task.iter().find(|t| t.id == task_id).expect("the task").state, TaskState::Completed);

    client.request(SessionStopParams { session_id: second.clone() }).await.expect("stop the second");
    let task = client.request(TaskListParams::default()).await.unwrap().tasks;
    assert_eq!(task.iter().find(|t| t.id == task_id).expect("the task").state, TaskState::Completed);
}
