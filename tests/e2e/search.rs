//! Full-text search across sessions: `message.search` over the folded view, kept in step
//! with the journal, paged without repeats, forgetting deleted tasks.

use crate::common;

use std::collections::BTreeSet;

use baton_protocol::*;
use common::*;

async fn search(client: &Client, query: &str) -> Vec<SearchHit> {
    client.request(MessageSearchParams::new(query)).await.unwrap_or_else(|e| panic!("message.search {query}: {e}")).hits
}

fn snippet_text(hit: &SearchHit) -> String {
    hit.snippet.iter().map(|p| p.text.as_str()).collect()
}

#[tokio::test]
async fn search_finds_a_word_once_the_turn_that_streamed_it_ends() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    assert!(search(&client, "ready").await.is_empty(), "nothing says ready yet");

    // The mock streams "Plan ready." word by word: the word only ever came as a chunk.
    let events = run_turn(&client, &mut notes, &session_id, "/plan").await;
    assert!(agent_text(&events).contains("ready"), "{events:?}");
    let hits = search(&client, "READY").await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    let hit = &hits[0];
    let status = status(&client, &session_id).await;
    assert_eq!(
        (hit.session_id.as_str(), hit.task_id.as_str(), hit.task_title.as_str()),
        (&*session_id, &*status.task_id, "t")
    );
    assert_eq!(hit.kind, MessageKind::Agent);
    assert!(hit.snippet.iter().any(|p| p.matched && p.text == "ready"), "{:?}", hit.snippet);
    assert!(snippet_text(hit).contains("Plan ready."), "{:?}", hit.snippet);

    // The hit in context: the page of the folded view that ends with it.
    let page = client
        .request(MessageListParams {
            session_id: session_id.clone(),
            before_seq: Some(hit.seq + 1),
            after_seq: None,
            limit: Some(20),
        })
        .await
        .expect("message.list");
    let entry = page.messages.last().expect("the hit's entry");
    assert_eq!((entry.seq, entry.kind, entry.created_at.as_str()), (hit.seq, MessageKind::Agent, &*hit.created_at));
    assert!(entry.text.contains("Plan ready."), "{entry:?}");

    // Words of the user's prompt and of a tool call's title are found too; a session filter
    // keeps to its session.
    run_turn(&client, &mut notes, &session_id, "tell me about the quokka").await;
    let kinds: Vec<MessageKind> = search(&client, "quokka").await.iter().map(|h| h.kind).collect();
    assert_eq!(kinds, vec![MessageKind::Agent, MessageKind::User], "newest first");
    let other = started_session(&env, &client, &mut notes, "mock", "a quokka elsewhere").await;
    assert_eq!(search(&client, "quokka").await.len(), 4);
    let only = client
        .request(MessageSearchParams { session_id: Some(other.clone()), ..MessageSearchParams::new("quokka") })
        .await
        .expect("message.search");
    assert!(only.hits.len() == 2 && only.hits.iter().all(|h| h.session_id == other), "{:?}", only.hits);
    assert_eq!(search(&client, "quok*").await.len(), 4, "a prefix");
}

/// A long answer's text is joined and indexed after its turn's end is published (so that the
/// end reaches clients without waiting for the indexing); a search sent as soon as the end
/// arrives still finds the answer's last word.
#[tokio::test]
async fn a_long_answer_is_found_as_soon_as_its_turn_ends() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let events = run_turn(&client, &mut notes, &session_id, "/chunks 50000").await;
    assert!(agent_text(&events).ends_with("c50000 "), "the whole answer streamed");
    let hits = search(&client, "c50000").await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].session_id, session_id);
    assert_eq!(search(&client, "c1").await.len(), 1, "and its first word");
}

#[tokio::test]
async fn search_pages_never_return_a_hit_twice() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    for i in 0..8 {
        run_turn(&client, &mut notes, &session_id, &format!("zebra number {i}")).await;
    }
    let expected: BTreeSet<u64> =
        messages(&client, &session_id).await.into_iter().filter(|m| m.text.contains("zebra")).map(|m| m.seq).collect();
    assert_eq!(expected.len(), 16, "each prompt and its echo");

    let mut params = MessageSearchParams { limit: Some(3), ..MessageSearchParams::new("zebra") };
    let mut seen: Vec<u64> = Vec::new();
    let mut pages = 0;
    loop {
        let page = client.request(params.clone()).await.expect("message.search");
        assert!(page.hits.len() <= 3);
        seen.extend(page.hits.iter().map(|h| h.seq));
        pages += 1;
        if pages == 2 {
            // New entries while paging: they are newer than the cursor and never show up in
            // the pages still to come.
            run_turn(&client, &mut notes, &session_id, "zebra arriving late").await;
        }
        match page.next_cursor {
            Some(cursor) => params.cursor = Some(cursor),
            None => break,
        }
    }
    assert_eq!(pages, 6, "16 hits in pages of 3");
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "a hit came twice: {seen:?}");
    assert_eq!(unique, expected);
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first: {seen:?}");
    assert_eq!(search(&client, "zebra").await.len(), 18, "a new search sees the late entries");
}

#[tokio::test]
async fn deleting_a_task_removes_its_hits() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let kept = started_session(&env, &client, &mut notes, "mock", "the okapi stays").await;
    let gone = started_session(&env, &client, &mut notes, "mock", "the okapi goes").await;
    let sessions: BTreeSet<String> = search(&client, "okapi").await.into_iter().map(|h| h.session_id).collect();
    assert_eq!(sessions, BTreeSet::from([kept.clone(), gone.clone()]));

    let task_id = status(&client, &gone).await.task_id;
    client
        .request(TaskDeleteParams { task_id, stop_agents: true, ..TaskDeleteParams::default() })
        .await
        .expect("task.delete");
    let hits = search(&client, "okapi").await;
    assert!(!hits.is_empty() && hits.iter().all(|h| h.session_id == kept), "{hits:?}");
    assert!(search(&client, "goes").await.is_empty());
}

#[tokio::test]
async fn search_refuses_what_it_cannot_search_for() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    for params in [
        MessageSearchParams::new("   "),
        MessageSearchParams::new(" - * \"\" "),
        MessageSearchParams::new("x".repeat(MAX_SEARCH_QUERY_CHARS + 1)),
        MessageSearchParams { limit: Some(0), ..MessageSearchParams::new("a") },
        MessageSearchParams { limit: Some(MAX_SEARCH_PAGE + 1), ..MessageSearchParams::new("a") },
        MessageSearchParams { cursor: Some("abc".into()), ..MessageSearchParams::new("a") },
        MessageSearchParams { session_id: Some("../x".into()), ..MessageSearchParams::new("a") },
        MessageSearchParams::new("quokka\0wallaby"),
        MessageSearchParams::new(["w"; MAX_SEARCH_WORDS + 1].join(" ")),
        MessageSearchParams::new(["wo*"; MAX_SEARCH_PREFIXES + 1].join(" ")),
    ] {
        let error = server_error(client.request(params.clone()).await);
        assert_eq!(error.code, ErrorCode::ValidationError, "{params:?}: {error:?}");
    }
    // 166 one-letter prefixes, which expand to most of the index, are refused at once with
    // what to change; a query at the bounds is searched.
    let costly: String = ('a'..='z').cycle().take(166).map(|c| format!("{c}* ")).collect();
    let started = std::time::Instant::now();
    let error = server_error(client.request(MessageSearchParams::new(costly)).await);
    assert_eq!(error.code, ErrorCode::ValidationError, "{error:?}");
    assert!(error.message.contains("must have at most"), "{error:?}");
    let error = server_error(client.request(MessageSearchParams::new("a* b* c* d* e*")).await);
    assert!(error.message.contains(&format!("at most {MAX_SEARCH_PREFIXES} words ending in *")), "{error:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "refused in {:?}", started.elapsed());
    let mut bounded = vec!["w"; MAX_SEARCH_WORDS - MAX_SEARCH_PREFIXES];
    bounded.extend(["wo*"; MAX_SEARCH_PREFIXES]);
    assert!(search(&client, &bounded.join(" ")).await.is_empty());
    // Operators and quotes are plain text, not syntax errors.
    assert!(search(&client, "NOT \"a AND b* -c:d").await.is_empty());
}
