//! The protocol as its users meet it, against a real batond: a client reads an event kind and
//! a notification it does not know and keeps its cursor.

mod common;

use baton_protocol::*;
use common::*;
use rusqlite::{params, Connection};

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
