//! The protocol as its users meet it, against a real batond: a client reads an event kind it
//! does not know and keeps its cursor; pings both ways; a 1001 close at shutdown; what state
//! changes carry; the turn id `message.add` answers and the turn's events carry.

use crate::common;

use baton_protocol::*;
use common::*;
use futures_util::StreamExt;
use rusqlite::{params, Connection};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as WsMessage;

#[tokio::test]
async fn a_client_reads_an_event_kind_it_does_not_know_and_keeps_its_seq_cursor() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("Future", "remember the blue door", "mock", true)).await.expect("create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    client.close();
    server.stop().await;

    // A newer server journaled an event kind this version does not know.
    let db = Connection::open(env.data_dir.join("baton.db")).expect("open the database");
    let seq: i64 = db
        .query_row(
            "UPDATE task_sessions SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq",
            [&session_id],
            |r| r.get(0),
        )
        .expect("next seq");
    db.execute(
        "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, 'usage', ?3, ?4)",
        params![session_id, seq, r#"{"kind":"usage","tokens":1200}"#, now_timestamp()],
    )
    .expect("insert the event");
    drop(db);

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "What did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember the blue door.");
    let all = client
        .request(SubscribeParams { session_id: session_id.clone(), since_seq: Some(0) })
        .await
        .expect("resubscribe");
    let events = collect_events(&mut notes, &session_id, |r| r.seq == all.current_seq).await;

    let seqs: Vec<u64> = events.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=all.current_seq).collect::<Vec<_>>(), "no gap where the unknown event is");
    let unknown = &events[seq as usize - 1];
    let SessionEvent::Unknown(event) = &unknown.event else { panic!("not decoded as unknown: {unknown:?}") };
    assert_eq!((event.kind.as_str(), &event.raw["tokens"]), ("usage", &serde_json::json!(1200)));
    assert!(events[seq as usize..].iter().any(|r| matches!(r.event, SessionEvent::UserMessage { .. })));
    // The folded view skips it.
    let shown = messages(&client, &session_id).await;
    assert!(shown.iter().any(|m| m.text == "You asked me to remember the blue door."), "{shown:?}");
}

type RawSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A plain WebSocket connection (no typed client), to see ping and close frames.
async fn raw_socket(server: &Server) -> RawSocket {
    let (socket, _) = tokio_tungstenite::connect_async(server.url_with_token()).await.expect("connect");
    socket
}

/// The next frame, within WAIT.
async fn next_frame(socket: &mut RawSocket) -> Option<WsMessage> {
    match tokio::time::timeout(WAIT, socket.next()).await.expect("a frame in time") {
        Some(Ok(frame)) => Some(frame),
        Some(Err(_)) | None => None,
    }
}

#[tokio::test]
async fn the_server_pings_answers_ping_and_closes_a_connection_that_never_answers() {
    let env = TestEnv::new();
    let server = env.start_with(&["--ping-interval-ms", "200"]).await;

    // The `ping` action, for browsers that cannot see WebSocket pings.
    let (client, _notes) = server.client().await;
    let pong = client.request(PingParams {}).await.expect("ping");
    assert!(chrono::DateTime::parse_from_rfc3339(&pong.time).is_ok(), "{pong:?}");

    // A client that reads (and so answers pings) is pinged and stays connected.
    let mut reader = raw_socket(&server).await;
    let mut pings = 0;
    while pings < 4 {
        match next_frame(&mut reader).await {
            Some(WsMessage::Ping(_)) => pings += 1,
            Some(WsMessage::Text(_)) => {}
            other => panic!("a live client was closed: {other:?}"),
        }
    }
    // (Done reading: it closes, lest it be taken for dead below.)
    reader.close(None).await.expect("close");
    // The typed client answers pings too: after many intervals it still works.
    assert!(!client.is_closed());
    client.request(PingParams {}).await.expect("still connected");

    // A client that never reads never answers: after two unanswered pings it is closed with
    // 1008 and the reason.
    let mut deaf = raw_socket(&server).await;
    wait_log(&env.data_dir, "no answer to two pings; closing the connection as dead").await;
    // What it finds when it finally reads: the pings, then the close frame.
    let mut close = None;
    for _ in 0..100 {
        match next_frame(&mut deaf).await {
            Some(WsMessage::Close(frame)) => {
                close = frame;
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    let close = close.expect("a close frame");
    assert_eq!(close.code, CloseCode::Policy);
    assert!(close.reason.contains("no answer to ping"), "{close:?}");
    client.request(PingParams {}).await.expect("the reading client is still connected");
}

#[tokio::test]
async fn sigterm_says_server_shutdown_and_closes_with_1001_going_away() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut socket = raw_socket(&server).await;
    let hello = next_frame(&mut socket).await;
    assert!(matches!(&hello, Some(WsMessage::Text(t)) if t.contains("server.hello")), "{hello:?}");

    let status = server.stop().await;
    assert!(status.success(), "{status}");
    let Some(WsMessage::Text(text)) = next_frame(&mut socket).await else { panic!("no server.shutdown") };
    let envelope: Envelope = serde_json::from_str(text.as_str()).expect("an envelope");
    assert_eq!((envelope.kind, envelope.action.as_str()), (MessageType::Notification, "server.shutdown"));
    let Some(WsMessage::Close(Some(close))) = next_frame(&mut socket).await else { panic!("no close frame") };
    assert_eq!(u16::from(close.code), 1001, "{close:?}");

    // The typed client gets the notification, then the end of the connection.
    let shutdown = notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::Shutdown(s)) => Some(s.clone()),
            _ => None,
        })
        .await
        .expect("server.shutdown");
    assert_eq!(shutdown.reason, "the server is shutting down");
    notes.wait_for(WAIT, |event| (event == &ClientEvent::Closed).then_some(())).await.expect("closed");
    assert!(client.is_closed());
}

#[tokio::test]
async fn state_changes_carry_the_task_title_last_seq_and_updated_at() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created =
        client.request(env.task("Paint the fence", "remember the fence", "mock", true)).await.expect("create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let turn_end = events.last().expect("events").seq;
    let change = notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c))
                if c.session_id == session_id && c.state == SessionState::WaitingForInput =>
            {
                Some(c.clone())
            }
            _ => None,
        })
        .await
        .expect("the turn's end changes the state");
    assert_eq!(change.task_title, "Paint the fence");
    assert_eq!(change.last_seq, turn_end, "the newest event when the state changed");
    let rows = client.request(SessionListParams::default()).await.expect("list").sessions;
    let row = rows.iter().find(|r| r.status.session_id == session_id).expect("the row");
    assert_eq!(change.updated_at, row.updated_at, "the row's updated_at, as the list would show it");
    assert!(chrono::DateTime::parse_from_rfc3339(&change.updated_at).is_ok());
}

/// The restart-and-resume script a client author writes with the crate's helpers.
#[tokio::test]
async fn a_scripted_restart_and_resume_with_the_client_helpers() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let task = TaskCreateParams::new("Door", "remember the blue door", "mock").workdir(env.workdir.to_string_lossy());
    let session_id = client.request(task).await.expect("create").session.status.session_id;
    client.request(SubscribeParams::since(&session_id, 0)).await.expect("subscribe");
    let first = notes.wait_turn(&session_id, WAIT).await.expect("the first turn");
    assert_eq!(first.text, "OK, I will remember the blue door.");

    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    client.request(SubscribeParams::from_now(&session_id)).await.expect("subscribe");
    let status = client.resume_and_wait(&mut notes, &session_id, WAIT).await.expect("resume");
    assert!(status.is_agent_running && !status.needs_resume, "{status:?}");
    let turn = client.prompt_and_wait(&mut notes, &session_id, "What did I ask you to remember?", WAIT).await;
    let turn = turn.expect("the turn");
    assert_eq!(
        (turn.stop_reason.as_str(), turn.text.as_str()),
        ("end_turn", "You asked me to remember the blue door.")
    );
    assert!(matches!(turn.events.last().map(|r| &r.event), Some(SessionEvent::TurnCompleted { .. })));
}

#[tokio::test]
async fn clients_say_which_protocol_they_speak_and_a_malformed_version_is_refused() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    client.request(PingParams {}).await.expect("connected");
    wait_log(&env.data_dir, "client says who it is").await;
    wait_log(&env.data_dir, "baton-protocol/").await;
    let url = format!("{}&protocol_version=one", server.url_with_token());
    let refused = tokio_tungstenite::connect_async(url).await.expect_err("refused");
    let tokio_tungstenite::tungstenite::Error::Http(response) = refused else { panic!("{refused:?}") };
    assert_eq!(response.status(), 400);
    let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
    assert!(body.contains("protocol_version must be a number"), "{body}");
}

/// The turn id an event carries (the kinds that have one).
fn turn_id_of(event: &SessionEvent) -> Option<&str> {
    match event {
        SessionEvent::UserMessage { turn_id, .. }
        | SessionEvent::TurnStarted { turn_id }
        | SessionEvent::TurnCompleted { turn_id, .. } => turn_id.as_deref(),
        _ => None,
    }
}

/// For each of `user_message`, `turn_started`, `turn_completed`: the turn ids of those events,
/// in journal order.
fn turn_ids_by_kind(events: &[EventRecord]) -> Vec<(&'static str, Vec<Option<String>>)> {
    ["user_message", "turn_started", "turn_completed"]
        .into_iter()
        .map(|kind| {
            let ids = events
                .iter()
                .filter(|r| r.event.kind() == kind)
                .map(|r| turn_id_of(&r.event).map(str::to_string))
                .collect();
            (kind, ids)
        })
        .collect()
}

#[tokio::test]
async fn message_add_answers_the_turn_id_that_its_turn_events_carry_live_and_replayed() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("Turns", "remember the blue door", "mock", false)).await.expect("create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let mut answered = Vec::new();
    let mut live = Vec::new();
    for content in ["Remember the blue door.", "What did I ask you to remember?"] {
        let added = client.request(MessageAddParams::new(&session_id, content)).await.expect("message.add");
        answered.push(added.turn_id.clone().expect("message.add answers a turn id"));
        let turn = notes.wait_turn(&session_id, WAIT).await.expect("the turn");
        live.extend(turn.events);
    }
    assert_ne!(answered[0], answered[1], "two turns have different ids");
    let expected: Vec<Option<String>> = answered.iter().cloned().map(Some).collect();
    for (kind, ids) in turn_ids_by_kind(&live) {
        assert_eq!(ids, expected, "live {kind} events");
    }
    client.close();
    server.stop().await;

    // Replayed from the journal by a restarted server: the same ids.
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let all = subscribe(&client, &session_id, Some(0)).await;
    let replayed = collect_events(&mut notes, &session_id, |r| r.seq == all.current_seq).await;
    for (kind, ids) in turn_ids_by_kind(&replayed) {
        assert_eq!(ids, expected, "replayed {kind} events");
    }
    // Each id is on its own turn's three events only.
    for turn_id in &answered {
        let seqs: Vec<u64> =
            replayed.iter().filter(|r| turn_id_of(&r.event) == Some(turn_id.as_str())).map(|r| r.seq).collect();
        assert_eq!(seqs.len(), 3, "{turn_id}: {seqs:?}");
    }
}

/// A finished answer longer than 256 KiB is cut in `message.list` (at a character boundary,
/// named in `cut` with its whole size), and `message.text` reads it page after page, the parts
/// joined being the whole answer; offsets that are not boundaries or beyond the text, and
/// unknown entries, are refused clearly.
#[tokio::test]
async fn a_long_answer_is_cut_in_message_list_and_read_by_parts_with_message_text() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "café au lait").await;
    let answer = prompt(&client, &mut notes, &session_id, "/chunks 60000").await;
    assert!(answer.len() > MESSAGE_TEXT_CUT, "a long answer: {} bytes", answer.len());

    let page = client.request(MessageListParams::all(&session_id)).await.expect("message.list");
    let entry = page.messages.iter().rev().find(|m| m.kind == MessageKind::Agent).expect("the answer");
    assert_eq!(entry.text.len(), MESSAGE_TEXT_CUT, "cut at 256 KiB (ASCII: a boundary there)");
    assert!(answer.starts_with(&entry.text));
    assert_eq!(page.cut, vec![CutText { seq: entry.seq, total_bytes: answer.len() as u64 }]);
    let short = page.messages.iter().find(|m| m.kind == MessageKind::User).expect("the first prompt");
    assert_eq!(short.text, "café au lait", "short entries are whole");
    // Once the answer's parts are joined into one text (a search waits for that), only its
    // start is read from the database: the same page.
    let search =
        MessageSearchParams { query: "c59999".into(), session_id: Some(session_id.clone()), limit: None, cursor: None };
    assert_eq!(client.request(search).await.expect("message.search").hits.len(), 1, "joined and indexed");
    let again = client.request(MessageListParams::all(&session_id)).await.expect("message.list");
    assert_eq!((&again.messages, &again.cut), (&page.messages, &page.cut), "the same page once joined");

    let mut joined = String::new();
    let mut offset = None;
    let mut parts = 0;
    loop {
        let params = MessageTextParams { session_id: session_id.clone(), seq: entry.seq, offset, limit: Some(100_000) };
        let part = client.request(params).await.expect("message.text");
        assert_eq!((part.seq, part.total_bytes), (entry.seq, answer.len() as u64));
        assert_eq!(part.offset, offset.unwrap_or(0));
        joined.push_str(&part.text);
        parts += 1;
        match part.next_offset {
            Some(next) => offset = Some(next),
            None => break,
        }
    }
    assert_eq!(joined, answer, "the parts joined are the whole answer");
    assert_eq!(parts, answer.len().div_ceil(100_000));

    // A part ends at a character boundary; an offset inside a character is refused.
    let whole = |offset, limit| MessageTextParams { session_id: session_id.clone(), seq: short.seq, offset, limit };
    let part = client.request(whole(None, Some(4))).await.expect("message.text");
    assert_eq!((part.text.as_str(), part.next_offset), ("caf", Some(3)), "é is two bytes: not split");
    let error = server_error(client.request(whole(Some(4), None)).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("inside a character"), "{}", error.message);
    let error = server_error(client.request(whole(Some(1_000), None)).await);
    assert!(error.message.contains("beyond the text"), "{}", error.message);
    let error = server_error(client.request(whole(None, Some(0))).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    let unknown = MessageTextParams { session_id: session_id.clone(), seq: 999_999, offset: None, limit: None };
    assert_eq!(server_error(client.request(unknown).await).code, ErrorCode::NotFound);
}
