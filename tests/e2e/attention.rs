//! What needs the user: every session row and `session.state_changed` say why a session
//! needs the user and since when, and `attention.changed` keeps every client's count in step,
//! through each transition: a turn ends, a permission is asked and answered, the server
//! restarts, a start fails.

use crate::common;

use baton_protocol::*;
use common::*;

/// Waits for `session.state_changed` of `session_id` whose attention is `attention`.
async fn wait_attention(notes: &mut Notifications, session_id: &str, attention: Option<Attention>) -> StateChanged {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c))
                if c.session_id == session_id && c.attention == attention =>
            {
                Some(c.clone())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("no state change of {session_id} to attention {attention:?}: {e}"))
}

/// Waits for `attention.changed` with `count`.
async fn wait_count(notes: &mut Notifications, count: u64) {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::AttentionChanged(c)) if c.count == count => Some(()),
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("no attention.changed to {count}: {e}"));
}

/// The session's list row and the server-wide count of the list answer.
async fn row(client: &Client, session_id: &str) -> (SessionInfo, u64) {
    let list = client.request(SessionListParams::default()).await.expect("task.session.list");
    let row = list.sessions.into_iter().find(|r| r.status.session_id == session_id).expect("the session's row");
    (row, list.attention_count)
}

#[tokio::test]
async fn attention_follows_a_turn_a_permission_and_a_restart() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    assert_eq!(client.request(SessionListParams::default()).await.unwrap().attention_count, 0);

    // The first turn ends: the session waits for input.
    let created = client.request(env.task("t", "hi", "mock", true)).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    assert_eq!(created.session.status.attention, None, "a starting session needs nothing");
    let input = wait_attention(&mut notes, &session_id, Some(Attention::Input)).await;
    assert_eq!(input.state, SessionState::WaitingForInput);
    let input_since = input.attention_since.clone().expect("since when");
    wait_count(&mut notes, 1).await;
    let (listed, count) = row(&client, &session_id).await;
    assert_eq!(
        (listed.status.attention, listed.status.attention_since.as_deref()),
        (Some(Attention::Input), Some(&*input_since))
    );
    assert_eq!(count, 1);

    // A prompt: working, nothing needed; then the agent asks for a permission.
    subscribe(&client, &session_id, None).await;
    client.request(MessageAddParams::new(session_id.clone(), "/permission")).await.unwrap();
    let running = wait_attention(&mut notes, &session_id, None).await;
    assert_eq!((running.state, running.attention_since), (SessionState::Running, None));
    wait_count(&mut notes, 0).await;
    let events =
        collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    let Some(SessionEvent::PermissionRequest { request_id, .. }) = events.last().map(|e| e.event.clone()) else {
        panic!("no permission request in {events:?}")
    };
    let asked = wait_attention(&mut notes, &session_id, Some(Attention::Permission)).await;
    assert_eq!((asked.state, asked.previous_state), (SessionState::Running, Some(SessionState::Running)));
    wait_count(&mut notes, 1).await;
    assert_eq!(status(&client, &session_id).await.attention, Some(Attention::Permission));

    // Answered: nothing needed while the turn goes on, then input again, since a new time.
    let answer = PermissionRespondParams { session_id: session_id.clone(), request_id, option_id: "allow".into() };
    client.request(answer).await.expect("permission.respond");
    let answered = wait_attention(&mut notes, &session_id, None).await;
    assert_eq!(answered.state, SessionState::Running);
    wait_count(&mut notes, 0).await;
    let input_again = wait_attention(&mut notes, &session_id, Some(Attention::Input)).await;
    wait_count(&mut notes, 1).await;
    let since_again = input_again.attention_since.expect("since when");
    assert!(since_again > input_since, "{since_again} is not after {input_since}");

    // A restart: the agent is gone, the session needs resuming.
    drop(client);
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let (listed, count) = row(&client, &session_id).await;
    assert_eq!(listed.status.attention, Some(Attention::Resume));
    assert!(listed.status.needs_resume);
    assert_eq!(count, 1);

    // Resumed: starting needs nothing, then the agent waits for input.
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .expect("resume");
    wait_attention(&mut notes, &session_id, None).await;
    wait_count(&mut notes, 0).await;
    wait_attention(&mut notes, &session_id, Some(Attention::Input)).await;
    wait_count(&mut notes, 1).await;

    // Stopped: finished, nothing needed.
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    wait_attention(&mut notes, &session_id, None).await;
    wait_count(&mut notes, 0).await;
    let (listed, count) = row(&client, &session_id).await;
    assert_eq!((listed.status.state, listed.status.attention, count), (SessionState::Completed, None, 0));
}

#[tokio::test]
async fn a_failed_start_needs_the_user_until_its_task_is_archived() {
    let env = TestEnv::new();
    env.agents_config("[agents.missing]\ncommand = \"/nonexistent/agent\"\n");
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "go", "missing", false)).await.unwrap();
    let session_id = created.session.status.session_id;
    let _ =
        client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false }).await;
    let failed = wait_attention(&mut notes, &session_id, Some(Attention::Failed)).await;
    assert_eq!(failed.state, SessionState::Failed);
    wait_count(&mut notes, 1).await;
    assert_eq!(row(&client, &session_id).await.1, 1);

    // An archived task's sessions are not counted; unarchived, they are again.
    client.request(TaskArchiveParams { task_id: created.task.id.clone(), stop_agents: false }).await.expect("archive");
    wait_count(&mut notes, 0).await;
    client.request(TaskUnarchiveParams { task_id: created.task.id.clone() }).await.expect("unarchive");
    wait_count(&mut notes, 1).await;
    client.request(TaskDeleteParams { task_id: created.task.id.clone(), ..Default::default() }).await.expect("delete");
    wait_count(&mut notes, 0).await;
}

/// The records the notify command appended to `file`: one `key=value` map per run.
fn notify_runs(file: &std::path::Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.split("---\n")
        .filter(|run| !run.trim().is_empty())
        .map(|run| run.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect())
        .collect()
}

/// Waits (bounded) until `file` holds a run for which `pick` holds.
async fn wait_run(file: &std::path::Path, pick: impl Fn(&std::collections::HashMap<String, String>) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !notify_runs(file).iter().any(&pick) {
        assert!(tokio::time::Instant::now() < deadline, "no such notify run in {:?}", notify_runs(file));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_notify_command_runs_once_per_transition_with_the_session_in_its_environment() {
    let env = TestEnv::new();
    let log = env.workdir.join("notified");
    let command = format!("{{ env; echo ---; }} >> '{}'", log.display());
    let token = "tok-never-in-the-notifier-0123456789";
    let server =
        env.server().env("BATON_TOKEN", token).args(["--token", token, "--notify-command", &command]).start().await;
    let (client, mut notes) = server.client().await;

    // input (first turn), permission (asked), input (the turn after the answer ends).
    let created = client.request(env.task("Fix it", "hi", "mock", true)).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    wait_attention(&mut notes, &session_id, Some(Attention::Input)).await;
    subscribe(&client, &session_id, None).await;
    client.request(MessageAddParams::new(session_id.clone(), "/permission")).await.unwrap();
    let events =
        collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    let Some(SessionEvent::PermissionRequest { request_id, .. }) = events.last().map(|e| e.event.clone()) else {
        panic!("no permission request in {events:?}")
    };
    wait_attention(&mut notes, &session_id, Some(Attention::Permission)).await;
    let answer = PermissionRespondParams { session_id: session_id.clone(), request_id, option_id: "allow".into() };
    client.request(answer).await.expect("permission.respond");
    wait_attention(&mut notes, &session_id, Some(Attention::Input)).await;
    // A second session's run, after all of the first one's transitions, marks the end.
    let other = client.request(env.task("Other", "hi", "mock", true)).await.expect("task.create");
    let other_id = other.session.status.session_id.clone();
    wait_run(&log, |run| run.get("BATON_SESSION_ID") == Some(&other_id)).await;

    let runs: Vec<_> =
        notify_runs(&log).into_iter().filter(|run| run.get("BATON_SESSION_ID") == Some(&session_id)).collect();
    let reasons: Vec<&str> = runs.iter().map(|run| run["BATON_ATTENTION"].as_str()).collect();
    assert_eq!(reasons, vec!["input", "permission", "input"], "one run per transition");
    let run = &runs[1];
    assert_eq!(run["BATON_TASK_ID"], created.task.id);
    assert_eq!(run["BATON_TASK_TITLE"], "Fix it");
    assert_eq!(run["BATON_MESSAGE"], "Fix it: the agent asks for a permission");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(token), "the token reached the notify command");
}

#[tokio::test]
async fn a_hanging_notify_command_is_killed_and_the_next_transition_still_notifies() {
    let env = TestEnv::new();
    let log = env.workdir.join("notified");
    let pid_file = env.workdir.join("hung.pid");
    // The first run hangs (its pid is written first); later runs record their reason.
    let command = format!(
        "if [ ! -e '{pid}' ]; then echo $$ > '{pid}'; exec sleep 600; fi; echo \"BATON_ATTENTION=$BATON_ATTENTION\" >> '{log}'; echo --- >> '{log}'",
        pid = pid_file.display(),
        log = log.display()
    );
    let server = env.server().args(["--notify-command", &command, "--notify-timeout-secs", "1"]).start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/permission")).await.unwrap();
    wait_attention(&mut notes, &session_id, Some(Attention::Permission)).await;

    // The permission's run waits for the hung one, which is killed at its timeout.
    wait_run(&log, |run| run.get("BATON_ATTENTION").map(String::as_str) == Some("permission")).await;
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(wait_process_gone(pid).await, "the hung notify command {pid} still runs");
}

#[tokio::test]
async fn a_session_that_failed_to_authenticate_needs_the_user_and_is_counted() {
    let env = TestEnv::new();
    env.agents_config(
        "[agents.locked]\ncommand = \"{batond}\"\nargs = [\"mock-agent\", \"--state-dir\", \"{data_dir}/mock-agent\", \
         \"--require-auth\"]\n",
    );
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "hi", "locked", true)).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    // Back to CREATED with the reason ("failed to start"): nothing retries it, the user must.
    let failed = wait_attention(&mut notes, &session_id, Some(Attention::Failed)).await;
    assert_eq!(failed.state, SessionState::Created);
    wait_count(&mut notes, 1).await;
    let (listed, count) = row(&client, &session_id).await;
    assert_eq!(listed.status.attention, Some(Attention::Failed));
    assert!(listed.status.last_error.as_deref().unwrap_or("").contains("needs authentication"), "{listed:?}");
    assert_eq!(count, 1, "counted among the sessions that need the user");

    // A restart keeps it so.
    let server = server.restart().await;
    let (client, _notes) = server.client().await;
    let (listed, count) = row(&client, &session_id).await;
    assert_eq!((listed.status.attention, count), (Some(Attention::Failed), 1));
    server.stop().await;
}

/// The state changes of `session_id` up to the end of the next turn (RUNNING, then waiting for
/// input again).
async fn states_through_a_turn(notes: &mut Notifications, session_id: &str) -> Vec<StateChanged> {
    let mut changes: Vec<StateChanged> = Vec::new();
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => {
                changes.push(c.clone());
                let ran = changes.iter().any(|c| c.state == SessionState::Running);
                (ran && c.state == SessionState::WaitingForInput).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("no turn of {session_id} ran ({e}); states: {changes:?}"));
    changes
}

#[tokio::test]
async fn a_message_to_a_session_without_agent_says_the_turn_is_over_only_after_it_ran() {
    let env = TestEnv::new();
    let log = env.workdir.join("notified");
    let command = format!("{{ env; echo ---; }} >> '{}'", log.display());
    let server = env.server().args(["--notify-command", &command]).start().await;
    let (client, mut notes) = server.client().await;
    let input_runs = |session_id: &str| {
        notify_runs(&log)
            .into_iter()
            .filter(|run| run.get("BATON_SESSION_ID").map(String::as_str) == Some(session_id))
            .filter(|run| run.get("BATON_ATTENTION").map(String::as_str) == Some("input"))
            .count()
    };

    // A session never started: the message launches its agent.
    let created = client.request(env.task("Never started", "", "mock", false)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    client.request(MessageAddParams::new(session_id.clone(), "hi")).await.unwrap();
    let states = states_through_a_turn(&mut notes, &session_id).await;
    let seen: Vec<_> = states.iter().map(|c| (c.state, c.attention)).collect();
    let running = states.iter().position(|c| c.state == SessionState::Running).expect("RUNNING");
    assert!(
        states[..running].iter().all(|c| c.attention.is_none()),
        "the session said it waits for input before its turn ran: {seen:?}"
    );
    assert_eq!(states.last().map(|c| c.attention), Some(Some(Attention::Input)), "{seen:?}");
    wait_run(&log, |run| run.get("BATON_SESSION_ID") == Some(&session_id)).await;

    // A session whose agent a restart took: the message resumes it.
    drop(client);
    server.kill9().await;
    let server = env.server().args(["--notify-command", &command]).start().await;
    let (client, mut notes) = server.client().await;
    client.request(MessageAddParams::new(session_id.clone(), "again")).await.unwrap();
    let states = states_through_a_turn(&mut notes, &session_id).await;
    let seen: Vec<_> = states.iter().map(|c| (c.state, c.attention)).collect();
    let running = states.iter().position(|c| c.state == SessionState::Running).expect("RUNNING");
    assert!(
        states[..running].iter().all(|c| c.attention != Some(Attention::Input)),
        "the resumed session said it waits for input before its turn ran: {seen:?}"
    );

    // The notify command heard "the turn is over" once per turn, after it. A second session's
    // run marks the end of the first one's.
    let other = client.request(env.task("Other", "hi", "mock", true)).await.expect("task.create");
    let other_id = other.session.status.session_id.clone();
    wait_run(&log, |run| run.get("BATON_SESSION_ID") == Some(&other_id)).await;
    let reasons: Vec<String> = notify_runs(&log)
        .into_iter()
        .filter(|run| run.get("BATON_SESSION_ID") == Some(&session_id))
        .filter_map(|run| run.get("BATON_ATTENTION").cloned())
        .collect();
    assert_eq!(input_runs(&session_id), 2, "one 'turn is over' per turn, after it: {reasons:?}");
}
