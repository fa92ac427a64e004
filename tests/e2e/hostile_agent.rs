//! Hostile agents: file requests aimed at the data dir or out of the working directory through
//! symlinks (dangling ones included), working directories re-pointed after the task was
//! created, agents that never read what is sent to them, files over the read limit. Each test
//! prints one summary line; run with `--nocapture`.

use crate::common;

use std::path::{Path, PathBuf};

use baton_protocol::*;
use common::*;

/// A task on `workdir` with the mock agent, its first turn done; returns the session id.
async fn session_in(client: &Client, notes: &mut Notifications, workdir: &Path) -> String {
    let mut params = TaskCreateParams::new("t", "hi", "mock");
    params.workdir = Some(workdir.display().to_string());
    params.start = true;
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    subscribe(client, &session_id, Some(0)).await;
    collect_events(notes, &session_id, is_turn_end).await;
    wait_state(client, notes, &session_id, SessionState::WaitingForInput).await;
    session_id
}

fn root_of(env: &TestEnv) -> PathBuf {
    env.data_dir.parent().expect("the test dir").to_path_buf()
}

#[tokio::test]
async fn the_data_dir_is_out_of_reach_whatever_the_working_directory() {
    let env = TestEnv::new();
    let root = root_of(&env);
    std::fs::write(root.join("notes.txt"), "mine").unwrap();
    std::os::unix::fs::symlink(&env.data_dir, root.join("to-data")).unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // A working directory that contains the data dir (as `/` or `$HOME` do) is accepted...
    let session_id = session_in(&client, &mut notes, &root).await;
    let data = env.data_dir.display().to_string();
    let mut refused = 0;
    // ...but nothing in the data dir can be read or written through it, directly or by a link.
    for request in [
        format!("/read {data}/token"),
        format!("/read {data}/baton.db"),
        format!("/read {}/to-data/token", root.display()),
        "/read to-data/token".to_string(),
        format!("/write {data}/agents.toml [agents.x]"),
        "/write to-data/agents.toml [agents.x]".to_string(),
        format!("/write {data}/logs/planted.txt x"),
    ] {
        let reply = prompt(&client, &mut notes, &session_id, &request).await;
        assert!(reply.starts_with("Read failed:") || reply.starts_with("Write failed:"), "{request}: {reply}");
        assert!(reply.contains("data dir"), "{request}: {reply}");
        refused += 1;
    }
    assert!(!env.data_dir.join("agents.toml").exists(), "agents.toml was not written");
    assert!(!env.data_dir.join("logs/planted.txt").exists());
    // The rest of the working directory is the agent's.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/read notes.txt").await, "Read: mine");
    println!(
        "[hostile-agent] workdir containing the data dir: {refused} reads/writes of token, baton.db, agents.toml, \
         logs (direct and through a symlink) refused; the rest of the workdir readable"
    );
}

#[tokio::test]
async fn the_kernels_files_are_out_of_reach_even_with_the_root_as_working_directory() {
    let env = TestEnv::new();
    let token = "tok-in-batonds-own-environment-0123456789";
    let server = env.server().env("BATON_TOKEN", token).args(["--token", token]).start().await;
    let (client, mut notes) = server.client().await;
    let session_id = session_in(&client, &mut notes, Path::new("/")).await;
    let mut refused = 0;
    for request in [
        "/read /proc/self/environ".to_string(),
        format!("/read /proc/{}/environ", server.pid),
        "/read proc/self/environ".to_string(),
        format!("/read /proc/{}/cmdline", server.pid),
        "/read /sys/kernel/hostname".to_string(),
        "/read /dev/zero".to_string(),
        "/write /proc/self/comm x".to_string(),
        "/write /dev/null x".to_string(),
    ] {
        let reply = prompt(&client, &mut notes, &session_id, &request).await;
        assert!(!reply.contains(token), "{request}: the token was read");
        assert!(reply.starts_with("Read failed:") || reply.starts_with("Write failed:"), "{request}: {reply}");
        assert!(reply.contains("kernel's files"), "{request}: {reply}");
        refused += 1;
    }
    // A working directory inside them takes no file request at all.
    let proc_session = session_in(&client, &mut notes, Path::new("/proc")).await;
    let reply = prompt(&client, &mut notes, &proc_session, "/read self/environ").await;
    assert!(reply.starts_with("Read failed:") && reply.contains("kernel's files"), "{reply}");
    assert!(!reply.contains(token));
    println!(
        "[hostile-agent] workdir /: {refused} reads/writes in /proc, /sys, /dev refused (batond's own environ \
         included); workdir /proc refused"
    );
}

#[tokio::test]
async fn symlinks_out_of_the_working_directory_are_not_followed() {
    let env = TestEnv::new();
    let root = root_of(&env);
    std::fs::write(root.join("outside.txt"), "outside").unwrap();
    // Dangling (the target does not exist yet), absolute and relative, and a directory link.
    std::os::unix::fs::symlink(root.join("created-outside.txt"), env.workdir.join("dangling")).unwrap();
    std::os::unix::fs::symlink("../created-relative.txt", env.workdir.join("dangling-relative")).unwrap();
    std::os::unix::fs::symlink(root.join("outside.txt"), env.workdir.join("existing")).unwrap();
    std::os::unix::fs::symlink("..", env.workdir.join("up")).unwrap();
    std::fs::create_dir(env.workdir.join("sub")).unwrap();
    std::os::unix::fs::symlink("sub", env.workdir.join("inside")).unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = session_in(&client, &mut notes, &env.workdir).await;
    let mut refused = 0;
    for request in [
        "/write dangling x",
        "/write dangling-relative x",
        "/write existing x",
        "/read existing",
        "/write up/created-up.txt x",
        "/read up/outside.txt",
    ] {
        let reply = prompt(&client, &mut notes, &session_id, request).await;
        assert!(reply.starts_with("Read failed:") || reply.starts_with("Write failed:"), "{request}: {reply}");
        refused += 1;
    }
    for never in ["created-outside.txt", "created-relative.txt", "created-up.txt"] {
        assert!(!root.join(never).exists(), "{never} was created outside the working directory");
    }
    assert_eq!(std::fs::read_to_string(root.join("outside.txt")).unwrap(), "outside", "not overwritten");
    // A link that stays inside is followed.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/write inside/a.txt ok").await, "Wrote inside/a.txt.");
    assert_eq!(std::fs::read_to_string(env.workdir.join("sub/a.txt")).unwrap(), "ok");
    println!(
        "[hostile-agent] symlinks: {refused} requests through dangling/absolute/relative/.. links refused, \
         nothing created or changed outside; a link inside followed"
    );
}

#[tokio::test]
async fn a_dangling_symlink_checked_out_in_a_worktree_leads_nowhere() {
    let env = TestEnv::new();
    let root = root_of(&env);
    let repo = env.workdir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::os::unix::fs::symlink(root.join("from-worktree.txt"), repo.join("link")).unwrap();
    git(&["add", "link"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a dangling link"]);

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut params = TaskCreateParams::new("wt", "hi", "mock");
    params.repository = Some(repo.display().to_string());
    params.worktree = true;
    params.start = true;
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    let reply = prompt(&client, &mut notes, &session_id, "/write link x").await;
    assert!(reply.starts_with("Write failed:"), "{reply}");
    assert!(!root.join("from-worktree.txt").exists());
    // The worktree (under DATA_DIR/worktrees) is the agent's; the rest of the data dir is not.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/write mine.txt ok").await, "Wrote mine.txt.");
    let reply = prompt(&client, &mut notes, &session_id, &format!("/read {}/token", env.data_dir.display())).await;
    assert!(reply.starts_with("Read failed:"), "{reply}");
    println!("[hostile-agent] worktree: a committed dangling link refused; the worktree writable, the data dir not");
}

#[tokio::test]
async fn a_working_directory_re_pointed_later_does_not_reach_the_data_dir() {
    let env = TestEnv::new();
    let root = root_of(&env);
    let real = root.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = root.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let project = root.join("project");
    std::fs::create_dir(&project).unwrap();

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // Through a symlink: the task keeps the resolved directory.
    let linked = session_in(&client, &mut notes, &link).await;
    let status = client.request(SessionStatusParams { session_id: linked.clone() }).await.unwrap();
    let tasks = client.request(TaskListParams::default()).await.unwrap().tasks;
    assert!(tasks.iter().any(|t| Path::new(&t.workdir) == real), "the resolved path is kept: {tasks:?}");
    let plain = session_in(&client, &mut notes, &project).await;
    server.kill9().await;

    // Later, the link is re-pointed at the data dir and the plain directory replaced by a link
    // to it.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&env.data_dir, &link).unwrap();
    std::fs::remove_dir(&project).unwrap();
    std::os::unix::fs::symlink(&env.data_dir, &project).unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // The linked task still runs in the directory it resolved to.
    subscribe(&client, &linked, None).await;
    let reply = prompt(&client, &mut notes, &linked, "/write here.txt x").await;
    assert_eq!(reply, "Wrote here.txt.");
    assert!(real.join("here.txt").exists() && !env.data_dir.join("here.txt").exists());
    // The replaced one is refused at launch, with the reason; it is not started in the data dir.
    let error = server_error(
        client.request(SessionResumeParams { session_id: plain.clone(), fresh: false, retry_failed: false }).await,
    );
    assert_eq!(error.code, ErrorCode::ValidationError, "{error:?}");
    assert!(error.message.contains("data dir"), "{}", error.message);
    let status_after = client.request(SessionStatusParams { session_id: plain.clone() }).await.unwrap();
    assert!(!status_after.is_agent_running, "{status_after:?}");
    let _ = status;
    println!(
        "[hostile-agent] re-pointed workdirs: a symlinked workdir kept its resolved path; a directory replaced by a \
         link to the data dir refused at launch ({})",
        error.message
    );
}

#[tokio::test]
async fn a_working_directory_replaced_during_a_session_does_not_move_its_file_requests() {
    let env = TestEnv::new();
    let root = root_of(&env);
    let project = root.join("project");
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir(&project).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(project.join("a.txt"), "mine").unwrap();
    std::fs::write(elsewhere.join("a.txt"), "not the session's").unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = session_in(&client, &mut notes, &project).await;
    let a = project.join("a.txt").display().to_string();
    assert_eq!(prompt(&client, &mut notes, &session_id, &format!("/read {a}")).await, "Read: mine");

    // While the agent runs, the directory is moved away and its path made a symlink elsewhere.
    std::fs::rename(&project, root.join("project-moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &project).unwrap();
    let mut refused = 0;
    for request in [format!("/read {a}"), format!("/write {}/planted.txt x", project.display())] {
        let reply = prompt(&client, &mut notes, &session_id, &request).await;
        assert!(reply.starts_with("Read failed:") || reply.starts_with("Write failed:"), "{request}: {reply}");
        assert!(reply.contains("was replaced"), "{request}: {reply}");
        refused += 1;
    }
    assert!(!elsewhere.join("planted.txt").exists(), "written in the directory the link leads to");
    println!(
        "[hostile-agent] workdir replaced by a symlink mid-session: {refused} file requests refused, nothing read or \
         written in the directory it now leads to"
    );
}

#[tokio::test]
async fn text_cut_mid_emoji_loses_a_character_not_the_line() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/half-emoji")).await.unwrap();
    // The chunk arrives with the broken character replaced, and the permission request with it
    // is shown (and can be answered): the turn does not hang.
    let events =
        collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    assert!(agent_text(&events).contains("cut \u{fffd} here."), "{:?}", agent_text(&events));
    let Some(SessionEvent::PermissionRequest { request_id, tool_call, .. }) = events.last().map(|e| e.event.clone())
    else {
        unreachable!()
    };
    assert!(tool_call.to_string().contains('\u{fffd}'), "{tool_call}");
    client
        .request(PermissionRespondParams { session_id: session_id.clone(), request_id, option_id: "allow".into() })
        .await
        .expect("the request is answerable");
    let rest = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert_eq!(agent_text(&rest), "Permission answered: selected");
    println!("[hostile-agent] lone surrogate escapes: chunk kept (U+FFFD), permission request shown and answered");
}

#[tokio::test]
async fn a_request_that_cannot_be_read_is_answered_and_shown() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/broken-request")).await.unwrap();
    // Both requests are answered with an error (the turn goes on to its end) and both are
    // shown in the session.
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let reply = agent_text(&events);
    assert_eq!(
        reply,
        "Cut short: error -32700 Parse error. Bad options: error -32602 session/request_permission needs at least \
         one option."
    );
    let errors: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::Error { message } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("session/request_permission request that could not be read"), "{}", errors[0]);
    assert!(errors[0].contains("EOF"), "the parser's reason is given: {}", errors[0]);
    assert!(errors[1].contains("permission request that could not be read"), "{}", errors[1]);
    assert!(!events.iter().any(|e| matches!(e.event, SessionEvent::PermissionRequest { .. })));
    wait_log(&env.data_dir, "an unreadable message from the agent").await;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    println!(
        "[hostile-agent] unreadable requests: a permission request cut short answered -32700, one with options \
         that do not decode answered -32602; both shown as errors, the turn ended"
    );
}

/// The array nesting of `value` along its first elements, and what is at the bottom.
fn depth_and_core(value: &serde_json::Value) -> (usize, serde_json::Value) {
    let (mut depth, mut at) = (0, value);
    while let Some(first) = at.as_array().and_then(|items| items.first()) {
        depth += 1;
        at = first;
    }
    (depth, at.clone())
}

#[tokio::test]
async fn deeply_nested_tool_input_is_cut_and_the_session_stays_listable() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    // 124 levels fit an agent's line (serde_json's limit is 128), not a frame around them.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/deep 124").await, "Deep tool call sent.");
    let (client, mut notes) = server.client().await;
    let messages = client.request(MessageListParams::all(&session_id)).await.expect("message.list decodes").messages;
    let tool = messages.iter().find(|m| m.text.contains("Deep input")).expect("the tool call is listed");
    let raw_input = tool.data.as_ref().and_then(|d| d.get("raw_input")).expect("its input is kept");
    let (depth, core) = depth_and_core(raw_input);
    assert!(depth < MAX_NESTING, "cut within the bound: {depth}");
    assert_eq!(core, serde_json::json!(NESTING_MARKER), "the cut part is marked");
    // The journal replays through the typed client as well.
    let journal = read_journal(&client, &mut notes, &session_id).await;
    assert!(journal.iter().any(|e| matches!(&e.event, SessionEvent::ToolCall { title, .. } if title.contains("Deep"))));
    wait_log(&env.data_dir, "nested deeper than 64 levels").await;
    println!(
        "[hostile-agent] deep nesting: a tool input nested 124 levels was cut at {depth} levels (marked); \
         message.list and the replay decode in the typed client"
    );
}

#[tokio::test]
async fn deep_values_stored_before_the_bound_are_cut_on_the_way_out() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "/deep 3").await, "Deep tool call sent.");
    server.stop().await;
    // What a server without the bound stored: 124 levels in the event and the folded message.
    let deep = (0..124).fold(serde_json::json!("core"), |inner, _| serde_json::json!([inner]));
    let db = rusqlite::Connection::open(env.data_dir.join("baton.db")).expect("the database opens");
    let (seq, payload): (i64, String) = db
        .query_row(
            "SELECT seq, payload FROM session_events WHERE session_id = ?1 AND kind = 'tool_call'",
            [&session_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("the tool call event");
    let mut event: serde_json::Value = serde_json::from_str(&payload).unwrap();
    event["raw_input"] = deep.clone();
    let data = serde_json::json!({"raw_input": deep}).to_string();
    db.execute(
        "UPDATE session_events SET payload = ?1 WHERE session_id = ?2 AND seq = ?3",
        rusqlite::params![event.to_string(), session_id, seq],
    )
    .unwrap();
    let changed = db
        .execute(
            "UPDATE messages SET data = ?1 WHERE session_id = ?2 AND kind = 'tool_call'",
            rusqlite::params![data, session_id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let messages = client.request(MessageListParams::all(&session_id)).await.expect("message.list decodes").messages;
    let tool = messages.iter().find(|m| m.text.contains("Deep input")).expect("the tool call is listed");
    let (depth, core) = depth_and_core(&tool.data.as_ref().expect("data")["raw_input"]);
    assert!(depth < MAX_NESTING && core == serde_json::json!(NESTING_MARKER), "{depth} {core}");
    let journal = read_journal(&client, &mut notes, &session_id).await;
    let Some(SessionEvent::ToolCall { raw_input: Some(raw_input), .. }) =
        journal.iter().map(|e| &e.event).find(|e| matches!(e, SessionEvent::ToolCall { .. }))
    else {
        panic!("the tool call is replayed")
    };
    let (depth, core) = depth_and_core(raw_input);
    assert!(depth < MAX_NESTING && core == serde_json::json!(NESTING_MARKER), "{depth} {core}");
    println!("[hostile-agent] deep values already stored (124 levels): cut at {depth} on the way out; list and replay decode");
}

/// An agent that asks for a 15 MB file 40 times and reads none of the answers (`/flood-read`),
/// under `runtime` ("child" or "hosted"): killed with the reason once about 64 MiB wait for it,
/// batond's memory stays bounded, and the session resumes like after any agent crash.
async fn an_agent_that_never_reads_its_answers_is_killed(runtime: &str) {
    let env = TestEnv::new();
    if runtime == "hosted" {
        env.agents_config("[agents.mock]\nruntime = \"hosted\"\n");
    }
    let line = "x".repeat(99) + "\n";
    std::fs::write(env.workdir.join("big.txt"), line.repeat(150_000)).expect("write a 15 MB file");
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let before_kib = memory_kib(server.pid, "VmRSS:");
    client.request(MessageAddParams::new(session_id.clone(), "/flood-read big.txt 40")).await.expect("message.add");
    // 40 answers of 15 MB would be 600 MB waiting; the agent is killed at 64 MiB instead.
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let error = events
        .iter()
        .find_map(|e| match &e.event {
            SessionEvent::Error { message } => Some(message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no error event: {events:?}"));
    assert!(error.contains("did not read its input"), "{error}");
    assert!(error.contains("at most 67108864"), "the bound is named: {error}");
    assert!(
        events.iter().any(|e| matches!(&e.event, SessionEvent::TurnCompleted { stop_reason, .. }
            if *stop_reason == StopReason::Interrupted)),
        "{events:?}"
    );
    let peak_kib = memory_kib(server.pid, "VmHWM:");
    // Without the bound batond held every answer: well over 600 MB.
    assert!(peak_kib < 400 * 1024, "batond peaked at {peak_kib} KiB");
    // Like after any agent crash: the next message resumes the session.
    let reply = prompt(&client, &mut notes, &session_id, "hello again").await;
    assert!(reply.contains("hello again"), "{reply}");
    println!(
        "[hostile-agent] {runtime}: 40 reads of a 15 MB file never read: agent killed ({error}); batond RSS \
         {before_kib} KiB before, peak {peak_kib} KiB; the session resumed"
    );
}

#[tokio::test]
async fn an_agent_that_never_reads_its_answers_is_killed_not_buffered() {
    an_agent_that_never_reads_its_answers_is_killed("child").await;
}

#[tokio::test]
async fn a_hosted_agent_that_never_reads_its_answers_is_killed_not_buffered() {
    an_agent_that_never_reads_its_answers_is_killed("hosted").await;
}

#[tokio::test]
async fn a_file_over_the_read_limit_is_refused_with_the_limit_named() {
    let env = TestEnv::new();
    // One byte over MAX_READ_BYTES (16 MiB).
    std::fs::write(env.workdir.join("huge.txt"), "y".repeat(16 * 1024 * 1024 + 1)).expect("write the file");
    std::fs::write(env.workdir.join("small.txt"), "fits").expect("write the file");
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let refused = prompt(&client, &mut notes, &session_id, "/read huge.txt").await;
    assert!(refused.contains("Read failed:"), "{refused}");
    assert!(refused.contains("16777217 bytes; at most 16777216 are read"), "{refused}");
    let read = prompt(&client, &mut notes, &session_id, "/read small.txt").await;
    assert!(read.contains("Read: fits"), "{read}");
    println!("[hostile-agent] read limit: a file of 16 MiB + 1 byte is refused ({refused}); a small one is read");
}
