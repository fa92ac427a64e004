//! The protocol, the store and the gateway, end to end against a real `batond`.

use crate::common;

use baton_protocol::*;
use common::*;
use serde_json::json;

#[tokio::test]
async fn hello_carries_the_protocol_version() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _) = server.client().await;
    assert_eq!(client.hello().protocol_version, PROTOCOL_VERSION);
    assert!(!client.hello().server_version.is_empty());
}

#[tokio::test]
async fn tasks_and_sessions_are_created_and_listed() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _) = server.client().await;
    let created = client.request(env.task("Fix the bug", "it crashes", "mock", false)).await.unwrap();
    assert_eq!(created.task.state, TaskState::Todo);
    assert_eq!(created.session.status.state, SessionState::Created, "start: false leaves the session CREATED");
    assert_eq!(created.session.status.resume_reason, ResumeReason::NotStarted);

    let tasks = client.request(TaskListParams::default()).await.unwrap().tasks;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].title, "Fix the bug");
    assert_eq!(tasks[0].workdir, env.workdir.to_string_lossy());

    let sessions = client
        .request(SessionListParams { task_id: Some(created.task.id.clone()), ..Default::default() })
        .await
        .unwrap()
        .sessions;
    assert_eq!(sessions.len(), 1);
    let row = &sessions[0];
    assert_eq!(row.status.session_id, created.session.status.session_id);
    assert!(!row.status.needs_resume && !row.status.is_agent_running, "status fields are in every row");
    assert_eq!(row.task_title, "Fix the bug");

    let status = client.request(SessionStatusParams { session_id: row.status.session_id.clone() }).await.unwrap();
    assert_eq!(status, row.status);

    let none =
        client.request(SessionListParams { task_id: Some("task-nope".into()), ..Default::default() }).await.unwrap();
    assert!(none.sessions.is_empty());
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_the_connection_stays_open() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;

    let error = server_error(client.request(SessionStatusParams { session_id: "sess-unknown".into() }).await);
    assert_eq!(error.code, ErrorCode::NotFound);

    client.send_text("{this is not json").unwrap();
    let error = notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Error(error) => Some(error.clone()),
            _ => None,
        })
        .await
        .unwrap();
    assert_eq!(error.code, ErrorCode::BadRequest);

    let error = server_error(client.request_raw("task.explode", json!({})).await);
    assert_eq!(error.code, ErrorCode::UnknownAction);

    let error = server_error(client.request_raw("task.session.status", json!({"session": 5})).await);
    assert_eq!(error.code, ErrorCode::BadRequest, "a payload that does not fit the action");

    let error = server_error(client.request(TaskCreateParams::new("", "x", "mock")).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    let error = server_error(client.request(TaskCreateParams::new("t", "x", "no-such-agent")).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("mock"), "the error lists the known agents: {}", error.message);

    let error = server_error(client.request(MessageAddParams::new("sess-unknown", "hi")).await);
    assert_eq!(error.code, ErrorCode::NotFound);
    let error = server_error(
        client
            .request(SessionResumeParams { session_id: "sess-unknown".into(), fresh: false, retry_failed: false })
            .await,
    );
    assert_eq!(error.code, ErrorCode::NotFound);
    let error = server_error(client.request(SessionCancelParams { session_id: "sess-unknown".into() }).await);
    assert_eq!(error.code, ErrorCode::NotFound);

    // After all that, the same connection still works.
    assert!(client.request(TaskListParams::default()).await.unwrap().tasks.is_empty());
    assert!(!client.is_closed());
}

#[tokio::test]
async fn resubscribing_with_since_seq_has_no_gap_and_no_duplicate() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "/chunks 30").await;

    // A first client reads part of the journal and goes away.
    let (first, mut first_notes) = server.client().await;
    let current = subscribe(&first, &session_id, Some(0)).await.current_seq;
    assert!(current >= 30, "the first turn journaled its chunks (current_seq {current})");
    let seen = collect_events(&mut first_notes, &session_id, |e| e.seq == 10).await;
    first.close();
    let last_seen = seen.last().unwrap().seq;

    // More happens while it is away.
    let (worker, mut worker_notes) = server.client().await;
    subscribe(&worker, &session_id, None).await;
    prompt(&worker, &mut worker_notes, &session_id, "/chunks 40").await;

    // It reconnects with since_seq and gets exactly what it missed, then live events.
    let (again, mut again_notes) = server.client().await;
    let resumed = subscribe(&again, &session_id, Some(last_seen)).await;
    let replay = collect_events(&mut again_notes, &session_id, |e| e.seq == resumed.current_seq).await;
    let seqs: Vec<u64> = replay.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (last_seen + 1..=resumed.current_seq).collect();
    assert_eq!(seqs, expected, "replay after since_seq is complete and in order");

    again.request_with_timeout(MessageAddParams::new(session_id.clone(), "/chunks 5"), WAIT).await.unwrap();
    let live = collect_events(&mut again_notes, &session_id, is_turn_end).await;
    assert_eq!(live.first().unwrap().seq, resumed.current_seq + 1, "live events continue right after the replay");
    assert!(live.windows(2).all(|w| w[1].seq == w[0].seq + 1), "no gap, no duplicate in live events");
}

#[tokio::test]
async fn since_seq_ahead_of_the_journal_is_refused() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _) = server.client().await;
    let created = client.request(env.task("t", "", "mock", false)).await.unwrap();
    let error = server_error(
        client.request(SubscribeParams { session_id: created.session.status.session_id, since_seq: Some(99) }).await,
    );
    assert_eq!(error.code, ErrorCode::ValidationError);
    let error = server_error(client.request(SubscribeParams { session_id: "sess-nope".into(), since_seq: None }).await);
    assert_eq!(error.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_restart_on_the_same_data_dir_loses_nothing() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let idle = client.request(env.task("second", "", "mock-plain", false)).await.unwrap();
    let tasks_before = client.request(TaskListParams::default()).await.unwrap().tasks;
    let messages_before = messages(&client, &session_id).await;
    let seq_before = subscribe(&client, &session_id, None).await.current_seq;
    server.stop().await;

    let server = env.start().await;
    let (client, _) = server.client().await;
    assert_eq!(client.request(TaskListParams::default()).await.unwrap().tasks, tasks_before);
    assert_eq!(messages(&client, &session_id).await, messages_before);
    assert_eq!(subscribe(&client, &session_id, None).await.current_seq, seq_before);
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await.unwrap();
    assert_eq!(status.state, SessionState::WaitingForInput);
    assert!(status.needs_resume && status.has_resume_token, "after a restart the session needs resuming: {status:?}");
    let idle = client.request(SessionStatusParams { session_id: idle.session.status.session_id }).await.unwrap();
    assert_eq!(idle.state, SessionState::Created);
}

#[tokio::test]
async fn a_second_server_on_the_same_data_dir_is_refused() {
    let env = TestEnv::new();
    let _server = env.start().await;
    assert!(batond_refuses(&env.data_dir, "127.0.0.1:0", &[]).await.contains("already using"));
}

#[tokio::test]
async fn every_listener_requires_a_token_unless_told_otherwise() {
    let env = TestEnv::new();
    // No --token and no token file: one is generated, and loopback needs it like any address.
    let server = env.start().await;
    let token = server.token.clone().expect("a token was generated into the data dir");
    assert!(token.len() >= 32, "{token}");
    let error = Client::connect(&server.url).await.err().expect("no token, no connection, even on loopback");
    assert!(matches!(&error, ClientError::Connect(m) if m.contains("401")), "{error}");
    let (client, _) = Client::connect_with(&server.url, ClientOptions::for_data_dir(&env.data_dir))
        .await
        .expect("the typed client reads the token from the data dir");
    assert!(client.request(TaskListParams::default()).await.is_ok());
    server.stop().await;
    // The same token on the next start.
    let server = env.start().await;
    assert_eq!(server.token.as_deref(), Some(token.as_str()), "the token is kept across restarts");
    server.stop().await;

    // --no-token: loopback only, with a warning in the log.
    let refused = batond_refuses(&env.data_dir, "0.0.0.0:0", &["--no-token"]).await;
    assert!(refused.contains("--no-token is refused") && refused.contains("not loopback"), "{refused}");
    let server = env.start_with(&["--no-token"]).await;
    let (client, _) = Client::connect(&server.url).await.expect("--no-token lets anyone in");
    assert!(client.request(TaskListParams::default()).await.is_ok());
    wait_log(&env.data_dir, "--no-token: connections need no token").await;
    server.stop().await;

    let server = env.start_with(&["--token", "s3cret"]).await;
    assert!(Client::connect(&server.url).await.is_err(), "no token, no connection");
    let options = ClientOptions { token: Some("s3cret".into()), ..Default::default() };
    let (client, _) = Client::connect_with(&server.url, options).await.unwrap();
    assert!(client.request(TaskListParams::default()).await.is_ok());
}

#[tokio::test]
async fn a_client_that_stops_reading_catches_up_without_gap_or_duplicate() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as WsMessage;

    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;

    // A raw WebSocket client that subscribes, then reads nothing while a burst is produced. Its
    // receive buffer is kept small so that the burst cannot hide in the kernel: the server's
    // queue for it fills and the connection must catch up from the journal.
    let address = server.url.trim_start_matches("ws://").trim_end_matches("/ws").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(address).await.unwrap();
    let (mut slow, _) = tokio_tungstenite::client_async(server.url_with_token(), stream).await.unwrap();
    let request = Envelope::request("s1", "session.subscribe", json!({"session_id": session_id}));
    slow.send(WsMessage::text(request.to_json())).await.unwrap();
    let mut current_seq = None;
    while current_seq.is_none() {
        let Some(Ok(WsMessage::Text(text))) = slow.next().await else { panic!("connection ended") };
        let envelope: Envelope = serde_json::from_str(text.as_str()).unwrap();
        if envelope.id.as_deref() == Some("s1") {
            current_seq = envelope.payload["current_seq"].as_u64();
        }
    }
    let from = current_seq.unwrap();

    subscribe(&client, &session_id, None).await;
    prompt(&client, &mut notes, &session_id, "/chunks 30000").await;
    let last =
        client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.unwrap().current_seq;
    assert!(last > from + 30000);

    // Now it reads: every event after `from`, once, in order.
    let mut expected = from + 1;
    while expected <= last {
        let frame = tokio::time::timeout(WAIT, slow.next()).await.expect("events keep coming");
        let Some(Ok(WsMessage::Text(text))) = frame else { panic!("connection ended at seq {expected}") };
        let envelope: Envelope = serde_json::from_str(text.as_str()).unwrap();
        if let Ok(Notification::Event(record)) = Notification::from_envelope(&envelope) {
            assert_eq!(record.seq, expected, "no gap, no duplicate");
            expected += 1;
        }
    }
    // The burst outran the connection's queue, so what it missed was re-read from the journal.
    wait_log(&env.data_dir, "catching up from the journal").await;
}
