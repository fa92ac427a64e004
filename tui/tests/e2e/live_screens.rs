//! Whole-screen snapshots driven by a real `batond` and the mock agent: the app runs with its
//! real runner over a real WebSocket, as the event loop runs it, and is drawn on a 100x30
//! `TestBackend` (the terminal is the only thing replaced). Each wait is for what the screen
//! shows, bounded. What differs from run to run is normalised before the snapshot: ages and
//! countdowns ("5s"), the temporary directory, session ids; status-bar messages expire on a
//! timer, so they are hidden first (tests assert them where they matter).
//!
//! The harness is `common/live.rs`; the server is started by the testkit (which builds
//! `batond` when it is not built yet).

use baton_protocol::{ClientEvent, TaskCreateParams};
use crossterm::event::KeyCode;

use crate::common::live::*;

fn assert_snapshot(name: &str, screen: String) {
    insta::assert_snapshot!(name, screen);
}

/// A new user's first task, made with `n` in the TUI: its answer streams in, a tool call is
/// updated in place, the help shows every key, the server goes away. After the server's
/// restart, a TUI started again lists the session as NEEDS RESUME, opening it auto-resumes it
/// into WAITING, and the agent still remembers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_through_a_server_restart_screen_by_screen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let url = server.url.clone();
    let mut tui = Tui::connect(&url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Press n to create a task.").await;

    // n: title, first prompt, an agent from agent.list (the mock, the first one installed), and
    // the working directory.
    tui.key(KeyCode::Char('n'));
    tui.wait_text("Mock agent (resume + load) (mock)").await;
    tui.type_text("Plan the pineapple harvest");
    tui.key(KeyCode::Tab);
    tui.type_text("remember pineapple");
    tui.key(KeyCode::Tab);
    tui.key(KeyCode::Tab);
    tui.type_text(&dir.path().display().to_string());
    tui.key(KeyCode::Enter);
    tui.wait_for("the answer", |s| {
        s.contains("agent: OK, I will remember pineapple.") && s.contains("waiting for you")
    })
    .await;
    redact_sessions(&mut tui, &session_ids(&url, &data_dir).await);
    assert_snapshot("first_answer", tui.snapshot());

    // An answer caught while it streams, one word every 50 ms: each event is drawn as it comes,
    // so the frame with four words is seen. The turn is running, and Esc would cancel it.
    tui.key(KeyCode::Char('i'));
    tui.type_text("/slow 12");
    tui.key(KeyCode::Enter);
    tui.key(KeyCode::Esc);
    tui.wait_for("four words", |s| s.contains("agent: s1 s2 s3 s4") && !s.contains("s5")).await;
    assert_snapshot("answer_streaming", tui.snapshot());
    tui.wait_for("the whole answer", |s| s.contains("s11 s12") && s.contains("waiting for you")).await;

    // A tool call: one line, its status changed in place from pending to completed.
    tui.key(KeyCode::Char('i'));
    tui.type_text("/tool");
    tui.key(KeyCode::Enter);
    tui.wait_text("read Read file  [in_progress]").await;
    let screen = tui.wait_for("the tool call", |s| s.contains("Tool finished.") && s.contains("waiting for you")).await;
    assert_eq!(screen.matches("read Read file").count(), 1, "updated in place: {screen}");
    assert!(screen.contains("read Read file  [completed]"), "{screen}");
    tui.key(KeyCode::Esc);
    assert_snapshot("tool_call_updated_in_place", tui.snapshot());

    tui.key(KeyCode::Char('?'));
    assert_snapshot("help_overlay", tui.snapshot());
    tui.key(KeyCode::Esc);

    // The server goes away (as in a crash): the TUI says so and keeps retrying.
    let listen = server.listen_addr();
    server.kill9_blocking();
    tui.wait_text("the server is gone").await;
    assert_snapshot("disconnected", tui.snapshot());
    drop(tui);

    // The server is back; a TUI started again shows what needs resuming.
    let server = start_server(&data_dir, &listen);
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    redact_sessions(&mut tui, &session_ids(&server.url, &data_dir).await);
    tui.wait_for("the list", |s| s.contains("NEEDS RESUME") && s.contains("Plan the pineapple harvest")).await;
    assert_snapshot("needs_resume_after_restart", tui.snapshot());

    // Opening it is enough: status, then resume (the frontend auto-resume), then WAITING.
    tui.key(KeyCode::Enter);
    let resumed = "Session resumed: the agent restored its context.";
    tui.wait_for("the auto-resume", |s| {
        s.contains(resumed) && s.contains("waiting for you") && !s.contains("NEEDS RESUME")
    })
    .await;
    assert_snapshot("auto_resumed_waiting", tui.snapshot());
    tui.key(KeyCode::Char('i'));
    tui.type_text("what did I ask you to remember?");
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: You asked me to remember pineapple.").await;
}

/// An agent that cannot restore its conversation after a restart: the resume fails, and the
/// screen says why and which keys retry it or start over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resume_says_why_and_offers_retry_and_start_fresh() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notifications) = server.client().await;
    // The first turn's end, before the crash.
    let session_id =
        mock_task_waiting(&client, &mut notifications, dir.path(), "Migrate the billing tables", "remember kiwi").await;
    client.close();
    let listen = server.listen_addr();
    server.kill9_blocking();

    // From now on the mock agent answers every restore with an internal error.
    let args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent", "--restore-error", "-32603"];
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let config = format!("[agents.mock]\ncommand = \"{{batond}}\"\nargs = [{}]\n", args.join(", "));
    std::fs::write(data_dir.join("agents.toml"), config).expect("agents.toml");
    let server = start_server(&data_dir, &listen);

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    redact_sessions(&mut tui, std::slice::from_ref(&session_id));
    tui.wait_text("NEEDS RESUME").await;
    tui.key(KeyCode::Enter);
    let screen = tui
        // The transcript loads beside the failure: wait for both, the last line of its error too.
        .wait_for("the failure", |s| {
            s.contains("RESUME FAILED")
                && s.contains("r retry")
                && !s.contains("asking")
                && s.contains("on the web page).")
        })
        .await;
    assert!(screen.contains("Resume failed"), "{screen}");
    assert!(screen.contains("R start fresh with the conversation so far"), "{screen}");
    assert_snapshot("resume_failed", tui.snapshot());

    // r retries: the same failure again, shown the same way.
    tui.key(KeyCode::Char('r'));
    tui.wait_for("the retry", |s| !s.contains("RESUME FAILED")).await;
    tui.wait_for("the second failure", |s| s.contains("RESUME FAILED") && !s.contains("asking")).await;
    // R asks before starting over.
    tui.key(KeyCode::Char('R'));
    tui.wait_for("the question", |s| s.contains("fresh?") && s.contains("A new agent session gets the conversation"))
        .await;
}

#[test]
fn ages_and_countdowns_are_normalised_whatever_their_unit() {
    let screen = "│›● waiting   mock 12s ago NEEDS│\n│   done   mock  1m ago│\n reconnecting in 2s │ Echo: s1 s2";
    let expected = "│›● waiting   mock  ?s ago NEEDS│\n│   done   mock  ?s ago│\n reconnecting in ?s │ Echo: s1 s2";
    assert_eq!(normalise_ages(screen), expected);
}

/// An agent that cannot start (here: a missing API key) leaves its new session CREATED: the list
/// says FAILED TO START, the session says the agent's reason, and r retries once it is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_fails_to_start_says_why_and_r_retries() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    std::fs::create_dir_all(&data_dir).expect("data dir");
    let script = "if [ -e '{data_dir}/no-key' ]; then echo 'error: ANTHROPIC_API_KEY is not set' >&2; exit 1; fi; \
                  exec '{batond}' mock-agent --state-dir '{data_dir}/mock-agent'";
    let config =
        format!("[agents.keyed]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\nnative_session_resume = true\n");
    std::fs::write(data_dir.join("agents.toml"), config).expect("agents.toml");
    std::fs::write(data_dir.join("no-key"), "").expect("marker");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, _notifications) = server.client().await;
    let mut params = TaskCreateParams::new("Summarise the changelog", "remember mango", "keyed");
    params.workdir = Some(dir.path().display().to_string());
    client.request(params).await.expect("task.create");
    client.close();

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("FAILED TO START").await;
    tui.key(KeyCode::Enter);
    let screen = tui.wait_for("the reason", |s| s.contains("Failed to start") && s.contains("r retry")).await;
    assert!(screen.contains("ANTHROPIC_API_KEY is not set"), "the agent's own words: {screen}");
    assert!(!screen.contains("CONFLICT"), "{screen}");

    // Fixed: r starts it, and the task's description is its first prompt.
    std::fs::remove_file(data_dir.join("no-key")).expect("fix");
    tui.key(KeyCode::Char('r'));
    let screen = tui.wait_text("agent: OK, I will remember mango.").await;
    assert!(!screen.contains("FAILED TO START"), "{screen}");
}

/// The mock agent's edit tool call carries ACP diff content; the transcript draws it under the
/// call as a unified diff, as the update arrives over the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_tool_call_shows_its_diff() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, _notifications) = server.client().await;
    let mut params = TaskCreateParams::new("Greet the world", "/edit", "mock");
    params.workdir = Some(dir.path().display().to_string());
    client.request(params).await.expect("task.create");
    client.close();

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Greet the world").await;
    tui.key(KeyCode::Enter);
    let screen = tui.wait_for("the diff", |s| s.contains("agent: Edited src/lib.rs.")).await;
    for row in [
        "edit Edit src/lib.rs  [completed]",
        "+2 -1",
        "@@ -1,3 +1,4 @@",
        "+/// The greeting.",
        "-    \"hello\"",
        "+    \"hello, world\"",
    ] {
        assert!(screen.contains(row), "{row:?} on the screen:\n{screen}");
    }
}

/// The approval queue against a real batond: two sessions' agents ask, the open queue
/// shows both as they arrive, each is answered there (one with "Always allow"), and the
/// session's standing answer is shown, answers the agent's next request by itself (its count
/// moves on screen) and is revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_queue_answers_two_sessions_and_keeps_a_standing_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notifications) = server.client().await;
    let mut sessions = Vec::new();
    for title in ["Tidy the parser", "Bump the release"] {
        let mut params = TaskCreateParams::new(title, "hi", "mock");
        params.workdir = Some(dir.path().display().to_string());
        let session_id = client.request(params).await.expect("task.create").session.status.session_id;
        notifications
            .wait_for(WAIT, |event| match event {
                ClientEvent::Notification(baton_protocol::Notification::StateChanged(change))
                    if change.session_id == session_id
                        && change.state == baton_protocol::SessionState::WaitingForInput =>
                {
                    Some(())
                }
                _ => None,
            })
            .await
            .expect("the first turn ends");
        sessions.push(session_id);
    }
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    redact_sessions(&mut tui, &session_ids(&server.url, &data_dir).await);
    tui.wait_for("the list", |s| s.contains("Tidy the parser") && s.contains("Bump the release")).await;
    // The newest task is first: j moves to the parser's session, Enter opens it.
    tui.key(KeyCode::Char('j'));
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: Echo: hi").await;

    tui.key(KeyCode::Char('A'));
    tui.wait_text("Nothing waits for your answer.").await;
    let ask = |session_id: &str, content: &str| baton_protocol::MessageAddParams::new(session_id, content);
    client.request(ask(&sessions[0], "/permission always Write file")).await.expect("message.add");
    tui.wait_text("1 waiting").await;
    client.request(ask(&sessions[1], "/permission")).await.expect("message.add");
    let screen = tui.wait_text("2 waiting").await;
    assert!(screen.contains("+    42") && screen.contains("[2] Always allow"), "{screen}");
    assert_snapshot("approval_queue_live", tui.snapshot());

    // 2 picks "Always allow" for the oldest request; y allows the other one.
    tui.key(KeyCode::Char('2'));
    tui.wait_for("the first answer", |s| s.contains("1 waiting") && s.contains("Bump the release")).await;
    tui.key(KeyCode::Char('y'));
    tui.wait_text("Nothing waits for your answer.").await;
    tui.key(KeyCode::Esc);
    tui.wait_text("agent: Permission outcome: selected allow-always").await;

    // P: the opened session's standing answer, used by its agent's next request.
    tui.key(KeyCode::Char('P'));
    tui.wait_text("always allow edit “Write file” · answered 0×").await;
    client.request(ask(&sessions[0], "/permission always Write file")).await.expect("message.add");
    tui.wait_text("answered 1×").await;
    tui.key(KeyCode::Char('x'));
    tui.wait_text("No standing answers.").await;
    tui.key(KeyCode::Esc);
    // The transcript shows who answered the second request.
    let screen = tui
        .wait_for("the second turn's end", |s| {
            s.contains("Allowed by your standing rule") && s.contains("waiting for you")
        })
        .await;
    assert!(screen.contains("Permission outcome: selected allow-always"), "{screen}");
}

/// `M` on an opened session: the agent's modes and options, the current value of each marked;
/// Enter on "Plan" switches the running agent's mode (it says so when asked), and a switch made
/// by another client shows in the open list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m_lists_the_agents_modes_and_options_and_enter_switches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notifications) = server.client().await;
    let session_id = mock_task_waiting(&client, &mut notifications, dir.path(), "Tidy the parser", "hi").await;
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Tidy the parser").await;
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: Echo: hi").await;

    tui.key(KeyCode::Char('M'));
    let screen = tui.wait_text("● Default").await;
    for shown in [
        "● Default",
        "Plan",
        "Auto-accept edits",
        "Model",
        "● Mock 1",
        "Reasoning effort",
        "● medium",
        "off (Enter turns it on)",
    ] {
        assert!(screen.contains(shown), "{shown:?} missing:\n{screen}");
    }
    // The cursor starts on the first mode: j, Enter picks Plan.
    tui.key(KeyCode::Char('j'));
    tui.key(KeyCode::Enter);
    tui.wait_for("Plan marked", |s| s.contains("● Plan") && !s.contains("● Default")).await;
    let options = client
        .request(baton_protocol::SessionOptionsParams { session_id: session_id.clone() })
        .await
        .expect("session.options");
    assert_eq!(options.options.current_mode.as_deref(), Some("plan"));
    assert_eq!(options.chosen.mode.as_deref(), Some("plan"));

    // Another client picks the model: the open list follows.
    client
        .request(baton_protocol::SessionSetOptionParams {
            session_id: session_id.clone(),
            option_id: "model".into(),
            value: baton_protocol::OptionValue::Id("mock-2".into()),
        })
        .await
        .expect("session.set_option");
    tui.wait_for("Mock 2 marked", |s| s.contains("● Mock 2") && !s.contains("● Mock 1")).await;
    tui.key(KeyCode::Esc);
    tui.key(KeyCode::Char('i'));
    tui.type_text("/options");
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: mode=plan model=mock-2 effort=medium").await;
}

/// Messages written while a turn runs: the prompt box takes them, they are listed under the
/// transcript as queued, `u` lists them to remove or edit one, and they are sent once the
/// turn ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_written_during_a_turn_are_listed_as_queued_and_can_be_edited_or_removed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notifications) = server.client().await;
    let session_id = mock_task_waiting(&client, &mut notifications, dir.path(), "Queue some work", "hi").await;
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Queue some work").await;
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: Echo: hi").await;

    let gate = dir.path().join("go");
    tui.key(KeyCode::Char('i'));
    tui.type_text(&format!("/until {}", gate.display()));
    tui.key(KeyCode::Enter);
    // The gated turn runs (its prompt is in the transcript) before the next message is written.
    tui.wait_for("the gated turn running", |s| s.contains("you: /until") && s.contains("working")).await;
    tui.type_text("check the parser");
    tui.key(KeyCode::Enter);
    tui.wait_text("queued: sent when the running turn ends").await;
    tui.type_text("and the lexer");
    tui.key(KeyCode::Enter);
    let screen = tui.wait_text("2. and the lexer").await;
    assert!(screen.contains("1. check the parser") && screen.contains("Queued"), "{screen}");

    tui.key(KeyCode::Esc);
    tui.key(KeyCode::Char('u'));
    tui.wait_text("Queued messages").await;
    tui.key(KeyCode::Char('j'));
    tui.key(KeyCode::Char('x'));
    tui.wait_for("the second one removed", |s| !s.contains("and the lexer")).await;
    tui.key(KeyCode::Char('e'));
    tui.wait_text("editing a queued message").await;
    tui.type_text(" twice");
    tui.key(KeyCode::Enter);
    tui.wait_text("1. check the parser twice").await;
    let queue =
        client.request(baton_protocol::QueueListParams { session_id: session_id.clone() }).await.expect("queue.list");
    let texts: Vec<&str> = queue.queue.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["check the parser twice"]);

    std::fs::write(&gate, "").expect("the gate file");
    tui.wait_for("the queued message sent", |s| {
        s.contains("agent: Echo: check the parser twice") && !s.contains("Queued")
    })
    .await;

    // Ctrl-S steers: the running turn is cancelled and the message goes at once, ahead of
    // the one queued before it.
    let gate = dir.path().join("never");
    tui.type_text(&format!("/until {}", gate.display()));
    tui.key(KeyCode::Enter);
    // Told apart by its gate's name: the first one's line may have scrolled out of the pane.
    tui.wait_for("the second gated turn running", |s| s.contains("/never") && s.contains("working")).await;
    tui.type_text("queued behind");
    tui.key(KeyCode::Enter);
    tui.wait_text("1. queued behind").await;
    tui.type_text("change of plan");
    tui.ctrl('s');
    tui.wait_for("the steering message answered first", |s| {
        s.contains("agent: Echo: change of plan") && s.contains("agent: Echo: queued behind")
    })
    .await;
    let journal = client
        .request(baton_protocol::MessageListParams::all(session_id.clone()))
        .await
        .expect("message.list")
        .messages;
    let said: Vec<&str> =
        journal.iter().filter(|m| m.kind == baton_protocol::MessageKind::User).map(|m| m.text.as_str()).collect();
    let steer = said.iter().position(|t| *t == "change of plan").expect("the steering message was sent");
    let behind = said.iter().position(|t| *t == "queued behind").expect("the queued message was sent");
    assert!(steer < behind, "the steering message goes before the queued one: {said:?}");
}

/// `H` hands the highlighted session's conversation to another agent: the list of agents
/// marks the session's own, Enter starts a new session of the task with the one under the
/// cursor, which opens, says where it came from and knows the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h_hands_the_conversation_to_another_agent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notifications) = server.client().await;
    let session_id =
        mock_task_waiting(&client, &mut notifications, dir.path(), "Plan the harvest", "remember pineapple").await;
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Plan the harvest").await;
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: OK, I will remember pineapple.").await;

    tui.key(KeyCode::Char('H'));
    let screen = tui.wait_text("Hand over").await;
    assert!(screen.contains("(mock) · its agent now: a fork"), "{screen}");
    // The cursor starts on the first other agent that is installed.
    assert!(screen.contains("▶ Mock agent (history injection) (mock-fresh)"), "{screen}");
    tui.key(KeyCode::Enter);
    let screen = tui.wait_text("Switched from mock").await;
    assert!(screen.contains("Plan the harvest #2 · mock-fresh"), "{screen}");
    let handed = tui.app.opened_session().expect("the new session is opened").to_string();
    assert_ne!(handed, session_id);

    tui.key(KeyCode::Char('i'));
    tui.type_text("what did I ask you to remember?");
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: [resume context received] You asked me to").await;
    let rows = client.request(baton_protocol::SessionListParams::default()).await.expect("list").sessions;
    let row = rows.iter().find(|r| r.status.session_id == handed).expect("the new session is listed");
    assert_eq!(row.status.agent, "mock-fresh");
    assert_eq!(row.forked_from.as_ref().map(|o| o.session_id.as_str()), Some(session_id.as_str()));
}

/// `p` lists the paired devices; `n` shows a one-time pairing code as a QR code and as the
/// page's address; that code, exchanged as the page does (`POST /login`), pairs a phone that
/// the list then shows connected; `x` (asked first) revokes it and its connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p_pairs_a_phone_with_a_qr_code_lists_it_and_revokes_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.key(KeyCode::Char('p'));
    tui.wait_text("No paired device").await;

    tui.key(KeyCode::Char('n'));
    let screen = tui.wait_text("Pair a phone").await;
    assert!(screen.lines().filter(|line| line.contains("█")).count() > 10, "a QR code: {screen}");
    assert!(screen.contains("pairs \"phone\" (it may watch and answer)"), "{screen}");
    let at = screen.find("?login=pair-").unwrap_or_else(|| panic!("no pairing address: {screen}"));
    let code: String =
        screen[at + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect::<String>();

    // The code, exchanged as the page exchanges it, pairs a device that connects.
    let addr = server.url.trim_start_matches("ws://").trim_end_matches("/ws").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let request = format!("POST /login HTTP/1.1\r\nHost: {addr}\r\nBaton-Login: {code}\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response)).await.expect("answer in time").expect("read");
    let response = String::from_utf8_lossy(&response).into_owned();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    let token = serde_json::from_str::<serde_json::Value>(body).expect("JSON")["token"]
        .as_str()
        .expect("a device token")
        .to_string();
    let options = baton_protocol::ClientOptions { token: Some(token), ..Default::default() };
    let (_device, mut device_events) =
        baton_protocol::Client::connect_with(&server.url, options).await.expect("the device connects");

    tui.key(KeyCode::Esc);
    let screen = tui.wait_text("phone · watch and answer · connected (1)").await;
    assert!(screen.contains("from 127.0.0.1"), "{screen}");

    tui.key(KeyCode::Char('x'));
    tui.wait_text("Revoke the device phone?").await;
    tui.key(KeyCode::Char('y'));
    tui.wait_text("No paired device").await;
    let closed = tokio::time::timeout(WAIT, async {
        while let Some(event) = device_events.recv().await {
            if event == ClientEvent::Closed {
                return;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the revoked phone's connection was not closed");
}

/// A command the agent runs in a terminal shows under the transcript as it runs: its command,
/// the last lines of its output and how it exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_terminal_shows_its_last_lines_and_exit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notifications) = server.client().await;
    mock_task_waiting(&client, &mut notifications, dir.path(), "Run the checks", "hi").await;
    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Run the checks").await;
    tui.key(KeyCode::Enter);
    tui.wait_text("agent: Echo: hi").await;
    tui.key(KeyCode::Char('i'));
    tui.type_text("/terminal for n in 1 2 3 4 5 6 7 8 9 10; do echo line $n; done; exit 1");
    tui.key(KeyCode::Enter);
    let screen = tui.wait_for("the terminal's exit", |s| s.contains("││  exit 1")).await;
    for shown in ["$ sh -c for n in", "… 2 earlier lines (Enter shows them)", "line 3", "line 10"] {
        assert!(screen.contains(shown), "{shown:?} missing:\n{screen}");
    }
    // Under the terminal's line: the last eight lines of its output, then its exit.
    let rows: Vec<&str> = screen.lines().collect();
    let first = rows.iter().position(|r| r.contains("… 2 earlier lines")).expect("the earlier lines said");
    let exit = rows.iter().position(|r| r.contains("││  exit 1")).expect("the exit");
    let shown: Vec<String> = rows[first + 1..exit]
        .iter()
        .map(|r| r.split("││").nth(1).unwrap_or_default().trim_matches([' ', '│', '"']).to_string())
        .collect();
    let expected: Vec<String> = (3..=10).map(|n| format!("line {n}")).collect();
    assert_eq!(shown, expected, "{screen}");
}

/// A task with the mock agent working in `dir`, started with `prompt`; returns its session once
/// the first turn has ended and the session waits for input.
async fn mock_task_waiting(
    client: &baton_protocol::Client,
    notifications: &mut baton_protocol::Notifications,
    dir: &std::path::Path,
    title: &str,
    prompt: &str,
) -> String {
    let mut params = TaskCreateParams::new(title, prompt, "mock");
    params.workdir = Some(dir.display().to_string());
    let session_id = client.request(params).await.expect("task.create").session.status.session_id;
    notifications
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(baton_protocol::Notification::StateChanged(change))
                if change.session_id == session_id && change.state == baton_protocol::SessionState::WaitingForInput =>
            {
                Some(())
            }
            _ => None,
        })
        .await
        .expect("the first turn ends");
    session_id
}
