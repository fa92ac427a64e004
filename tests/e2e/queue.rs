//! Messages written while a turn runs, with a real batond and real mock agents: they wait in
//! the session's queue (journaled, listed, editable, removable), are sent one turn each, in
//! order, once the running turn ends well, and wait (saying why) after a turn that was cut
//! short, until the user releases them. `steer` cancels the running turn for its message. The
//! queue outlives `kill -9` of batond, and no message is sent twice.

use std::path::PathBuf;

use crate::common;

use baton_protocol::*;
use common::*;

/// A turn that runs until the test creates `gate` (the mock's `/until`).
async fn gated_turn(client: &Client, notes: &mut Notifications, session_id: &str, gate: &std::path::Path) {
    let added = client
        .request(MessageAddParams::new(session_id, format!("/until {}", gate.display())))
        .await
        .expect("message.add");
    assert!(added.message.is_some(), "no turn ran: the message starts one: {added:?}");
    collect_events(
        notes,
        session_id,
        |e| matches!(&e.event, SessionEvent::MessageChunk { text, .. } if text.contains("waiting")),
    )
    .await;
}

async fn queue_message(client: &Client, session_id: &str, content: &str) -> QueuedMessage {
    let added = client.request(MessageAddParams::new(session_id, content)).await.expect("message.add");
    assert!(added.message.is_none() && added.turn_id.is_none(), "a turn runs: the message waits: {added:?}");
    added.queued.expect("the queued message")
}

async fn queue_of(client: &Client, session_id: &str) -> MessageQueue {
    client.request(QueueListParams { session_id: session_id.into() }).await.expect("queue.list").queue
}

fn texts(queue: &MessageQueue) -> Vec<&str> {
    queue.messages.iter().map(|m| m.text.as_str()).collect()
}

/// Collects events until `turns` turns have ended.
async fn turns_ended(notes: &mut Notifications, session_id: &str, turns: usize) -> Vec<EventRecord> {
    let mut ended = 0;
    collect_events(notes, session_id, |e| {
        ended += usize::from(is_turn_end(e));
        ended == turns
    })
    .await
}

/// Waits for a `queue` event of the session that `done` accepts.
async fn queue_event(
    notes: &mut Notifications,
    session_id: &str,
    done: impl Fn(&MessageQueue) -> bool,
) -> MessageQueue {
    let mut found = None;
    collect_events(notes, session_id, |e| match &e.event {
        SessionEvent::Queue { queue } if done(queue) => {
            found = Some(queue.clone());
            true
        }
        _ => false,
    })
    .await;
    found.expect("a queue event")
}

/// The user messages the journal sent as turns, in order.
fn sent(journal: &[EventRecord]) -> Vec<String> {
    journal
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::UserMessage { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn gate(env: &TestEnv) -> PathBuf {
    env.workdir.join("go")
}

fn open_gate(path: &std::path::Path) {
    std::fs::write(path, "").expect("the gate file");
}

#[tokio::test]
async fn messages_sent_during_a_turn_wait_and_go_in_order_one_turn_each() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let gate = gate(&env);
    gated_turn(&client, &mut notes, &session_id, &gate).await;

    let first = queue_message(&client, &session_id, "one").await;
    queue_message(&client, &session_id, "two").await;
    queue_message(&client, &session_id, "three").await;
    let queue = queue_of(&client, &session_id).await;
    assert_eq!(texts(&queue), ["one", "two", "three"]);
    assert_eq!(queue.messages[0].id, first.id);
    assert_eq!(queue.held, None);
    // Every client is told, through the journal.
    queue_event(&mut notes, &session_id, |q| q.messages.len() == 3).await;
    assert_eq!(status(&client, &session_id).await.state, SessionState::Running, "the running turn goes on");

    open_gate(&gate);
    let events = turns_ended(&mut notes, &session_id, 4).await;
    let replies: Vec<String> = events.split(is_turn_end).map(agent_text).filter(|text| !text.is_empty()).collect();
    assert_eq!(replies[1..], ["Echo: one", "Echo: two", "Echo: three"], "one turn each, in order: {replies:?}");
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert!(queue_of(&client, &session_id).await.messages.is_empty());
    let journal = read_journal(&client, &mut notes, &session_id).await;
    let gate_prompt = format!("/until {}", gate.display());
    assert_eq!(sent(&journal), ["hi", gate_prompt.as_str(), "one", "two", "three"], "each sent once");
    server.stop().await;
}

#[tokio::test]
async fn a_queued_message_can_be_edited_or_removed_until_it_is_sent_and_the_queue_is_bounded() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let gate = gate(&env);
    gated_turn(&client, &mut notes, &session_id, &gate).await;

    let a = queue_message(&client, &session_id, "alpha").await;
    let b = queue_message(&client, &session_id, "bravo").await;
    let edited = client
        .request(QueueEditParams { session_id: session_id.clone(), id: a.id.clone(), content: "alpha, edited".into() })
        .await
        .expect("queue.edit");
    assert_eq!(texts(&edited.queue), ["alpha, edited", "bravo"]);
    let removed =
        client.request(QueueRemoveParams { session_id: session_id.clone(), id: b.id.clone() }).await.expect("remove");
    assert_eq!(texts(&removed.queue), ["alpha, edited"]);
    let empty = server_error(
        client.request(QueueEditParams { session_id: session_id.clone(), id: a.id.clone(), content: " ".into() }).await,
    );
    assert_eq!(empty.code, ErrorCode::ValidationError, "{empty:?}");
    let unknown = server_error(client.request(QueueRemoveParams { session_id: session_id.clone(), id: b.id }).await);
    assert_eq!(unknown.code, ErrorCode::NotFound, "{unknown:?}");
    assert!(unknown.message.contains("no queued message"), "{unknown:?}");

    // Bounded: past the bound, a clear refusal, and nothing of the queue is lost.
    for n in 1..MAX_QUEUED {
        queue_message(&client, &session_id, &format!("filler {n}")).await;
    }
    let full = server_error(client.request(MessageAddParams::new(&session_id, "one too many")).await);
    assert_eq!(full.code, ErrorCode::Conflict, "{full:?}");
    assert!(full.message.contains("queue is full"), "{full:?}");
    let queue = queue_of(&client, &session_id).await;
    assert_eq!(queue.messages.len(), MAX_QUEUED);
    for filler in &queue.messages[1..] {
        client
            .request(QueueRemoveParams { session_id: session_id.clone(), id: filler.id.clone() })
            .await
            .expect("queue.remove");
    }

    open_gate(&gate);
    turns_ended(&mut notes, &session_id, 2).await;
    let journal = read_journal(&client, &mut notes, &session_id).await;
    assert_eq!(sent(&journal).last().map(String::as_str), Some("alpha, edited"), "the edited text was sent");
    assert!(!sent(&journal).iter().any(|t| t == "bravo" || t.starts_with("filler")), "removed ones never go");
    // Sent, it is no longer queued: editing it is refused.
    let late = server_error(
        client.request(QueueEditParams { session_id: session_id.clone(), id: a.id, content: "too late".into() }).await,
    );
    assert_eq!(late.code, ErrorCode::NotFound, "{late:?}");
    server.stop().await;
}

#[tokio::test]
async fn steer_cancels_the_running_turn_and_its_message_goes_before_the_queued_ones() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(&session_id, "/hang")).await.expect("message.add");
    collect_events(
        &mut notes,
        &session_id,
        |e| matches!(&e.event, SessionEvent::MessageChunk { text, .. } if text.contains("working")),
    )
    .await;
    queue_message(&client, &session_id, "later").await;
    let steered = client.request(MessageAddParams::steer(&session_id, "now, instead")).await.expect("steer");
    let queued = steered.queued.expect("queued until the agent stopped");
    assert!(queued.steer);

    let events = turns_ended(&mut notes, &session_id, 3).await;
    let ends: Vec<&StopReason> = events
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::TurnCompleted { stop_reason, .. } => Some(stop_reason),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [&StopReason::Cancelled, &StopReason::EndTurn, &StopReason::EndTurn]);
    assert_eq!(sent(&events), ["now, instead", "later"], "the steering message first");
    server.stop().await;
}

#[tokio::test]
async fn a_turn_cut_short_holds_the_queue_until_the_user_releases_it() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    gated_turn(&client, &mut notes, &session_id, &gate(&env)).await;
    queue_message(&client, &session_id, "one").await;
    queue_message(&client, &session_id, "two").await;
    let agent = status(&client, &session_id).await.agent_pid.expect("the agent's pid");

    kill9(agent);
    let held = queue_event(&mut notes, &session_id, |q| q.held.is_some()).await;
    let reason = held.held.clone().unwrap_or_default();
    assert!(reason.contains("cut short") && reason.contains("queue.release"), "{reason}");
    assert_eq!(texts(&held), ["one", "two"], "nothing was sent into the crashed turn's place");
    let waiting = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert!(!waiting.is_agent_running, "no agent was started for the queue: {waiting:?}");

    // A message of the user's goes straight to the agent past a held queue.
    let reply = prompt(&client, &mut notes, &session_id, "are you back?").await;
    assert!(reply.contains("Echo: are you back?"), "{reply}");
    assert_eq!(texts(&queue_of(&client, &session_id).await), ["one", "two"], "still held");

    let released = client.request(QueueReleaseParams { session_id: session_id.clone() }).await.expect("release");
    assert_eq!(released.queue.held, None);
    let events = turns_ended(&mut notes, &session_id, 2).await;
    assert_eq!(sent(&events), ["one", "two"], "the rest followed the released one");
    assert!(queue_of(&client, &session_id).await.messages.is_empty());

    let nothing = server_error(client.request(QueueReleaseParams { session_id: session_id.clone() }).await);
    assert_eq!(nothing.code, ErrorCode::Conflict, "{nothing:?}");
    server.stop().await;
}

/// Three messages queued during a turn, batond killed with -9, started again: with a hosted
/// agent the turn goes on through the restart and the three follow it by themselves; with a
/// standalone agent the turn was cut short, so they wait until released. Either way each is
/// sent once, in order, as a turn of its own.
#[tokio::test]
async fn three_queued_messages_survive_a_kill_9_and_are_sent_once_in_order() {
    for runtime in ["hosted", "standalone"] {
        let env = TestEnv::new();
        env.agents_config(&format!("[agents.mock]\nruntime = \"{runtime}\"\n"));
        let server = env.start().await;
        let (client, mut notes) = server.client().await;
        let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
        let gate = gate(&env);
        gated_turn(&client, &mut notes, &session_id, &gate).await;
        for text in ["one", "two", "three"] {
            queue_message(&client, &session_id, text).await;
        }
        server.kill9().await;

        let server = env.start().await;
        let (client, mut notes) = server.client().await;
        // Subscribed before the queue is read: a hold made after the read is heard.
        subscribe(&client, &session_id, None).await;
        let queue = queue_of(&client, &session_id).await;
        assert_eq!(texts(&queue), ["one", "two", "three"], "{runtime}: the queue outlived batond");
        if runtime == "standalone" {
            let held = match queue.held {
                Some(_) => queue,
                None => queue_event(&mut notes, &session_id, |q| q.held.is_some()).await,
            };
            assert!(held.held.as_deref().is_some_and(|r| r.contains("cut short")), "{held:?}");
            client.request(QueueReleaseParams { session_id: session_id.clone() }).await.expect("release");
        } else {
            assert_eq!(queue.held, None, "the hosted turn goes on: nothing to hold");
            open_gate(&gate);
        }
        let wanted = if runtime == "hosted" { 4 } else { 3 };
        turns_ended(&mut notes, &session_id, wanted).await;
        wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
        let journal = read_journal(&client, &mut notes, &session_id).await;
        let gate_prompt = format!("/until {}", gate.display());
        assert_eq!(
            sent(&journal),
            ["hi", gate_prompt.as_str(), "one", "two", "three"],
            "{runtime}: each once, in order"
        );
        let turns = journal.iter().filter(|e| matches!(e.event, SessionEvent::TurnStarted { .. })).count();
        assert_eq!(turns, 5, "{runtime}: one turn each");
        assert!(queue_of(&client, &session_id).await.messages.is_empty());
        server.stop().await;
    }
}

#[tokio::test]
async fn a_stopped_sessions_queue_waits_and_says_why() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    gated_turn(&client, &mut notes, &session_id, &gate(&env)).await;
    queue_message(&client, &session_id, "never").await;
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    let held = queue_event(&mut notes, &session_id, |q| q.held.is_some()).await;
    assert!(held.held.as_deref().is_some_and(|r| r.contains("COMPLETED")), "{held:?}");
    let refused = server_error(client.request(QueueReleaseParams { session_id: session_id.clone() }).await);
    assert_eq!(refused.code, ErrorCode::Conflict, "{refused:?}");
    let journal = read_journal(&client, &mut notes, &session_id).await;
    assert!(!sent(&journal).contains(&"never".to_string()));
    server.stop().await;
}
