//! `task.session.list` in pages: every order pages through each session once while sessions
//! are created meanwhile, filters, `changed_since`, and the errors of bad paging parameters.

use crate::common;

use std::collections::HashSet;

use baton_protocol::*;
use common::*;

/// Pages through the list with `params` (its cursor set for each page), calling `between`
/// after every page; returns the rows in the order they came.
async fn page_through(
    client: &Client,
    mut params: SessionListParams,
    mut between: impl AsyncFnMut(usize),
) -> Vec<SessionInfo> {
    let mut rows = Vec::new();
    for page in 0.. {
        let result = client.request(params.clone()).await.expect("task.session.list");
        assert!(result.sessions.len() <= params.limit.unwrap_or(DEFAULT_SESSION_PAGE) as usize);
        rows.extend(result.sessions);
        match result.next_cursor {
            Some(cursor) => params.cursor = Some(cursor),
            None => return rows,
        }
        between(page).await;
    }
    unreachable!()
}

fn ids(rows: &[SessionInfo]) -> Vec<String> {
    rows.iter().map(|r| r.status.session_id.clone()).collect()
}

/// The key a row sorts by in `order` (attention rank, creation, id), to check a page's order.
fn sort_key(order: SessionOrder, row: &SessionInfo) -> (bool, String, String) {
    let rank = order == SessionOrder::Attention && !row.status.state.needs_attention();
    (rank, row.created_at.clone(), row.status.session_id.clone())
}

#[tokio::test]
async fn every_order_pages_through_each_session_once_while_sessions_are_created() {
    const SESSIONS: usize = 60;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // A few sessions that wait for input (they need attention), the rest never started.
    let mut existing = HashSet::new();
    for _ in 0..4 {
        existing.insert(started_session(&env, &client, &mut notes, "mock", "hi").await);
    }
    while existing.len() < SESSIONS {
        let created = client.request(env.task("t", "", "mock", false)).await.expect("task.create");
        existing.insert(created.session.status.session_id);
    }

    for order in [SessionOrder::Created, SessionOrder::Recent, SessionOrder::Attention, SessionOrder::Changed] {
        let params = SessionListParams { order: Some(order), limit: Some(7), ..Default::default() };
        let mut inserted = Vec::new();
        let rows = page_through(&client, params, async |_| {
            // A new session between every two pages.
            let created = client.request(env.task("new", "", "mock", false)).await.expect("task.create");
            inserted.push(created.session.status.session_id);
        })
        .await;
        let seen = ids(&rows);
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "{order:?}: no session twice");
        for id in &existing {
            assert!(unique.contains(id), "{order:?}: session {id} missed");
        }
        assert!(seen.iter().all(|id| existing.contains(id) || inserted.contains(id)), "{order:?}: only sessions");
        // The rows come in the order asked for.
        let keys: Vec<_> = rows.iter().map(|row| sort_key(order, row)).collect();
        let mut sorted = keys.clone();
        match order {
            SessionOrder::Created | SessionOrder::Changed => sorted.sort(),
            SessionOrder::Recent => sorted.sort_by(|a, b| b.cmp(a)),
            SessionOrder::Attention => {
                sorted.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| (&b.1, &b.2).cmp(&(&a.1, &a.2))))
            }
        }
        if order != SessionOrder::Changed {
            assert_eq!(keys, sorted, "{order:?}: rows in order");
        }
        if order == SessionOrder::Attention {
            let waiting = rows.iter().take_while(|r| r.status.state.needs_attention()).count();
            assert_eq!(waiting, 4, "the four sessions waiting for input come first");
        }
        existing.extend(inserted);
    }
}

#[tokio::test]
async fn the_default_page_filters_and_bad_parameters() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let waiting = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let mut task_of_many = None;
    for i in 0..DEFAULT_SESSION_PAGE + 5 {
        let created = client.request(env.task(&format!("t{i}"), "", "mock", false)).await.expect("task.create");
        task_of_many.get_or_insert(created.task.id);
    }
    // Without a limit: the default page, and a cursor to the rest.
    let first = client.request(SessionListParams::default()).await.unwrap();
    assert_eq!(first.sessions.len(), DEFAULT_SESSION_PAGE as usize);
    let cursor = first.next_cursor.clone().expect("more rows follow");
    let rest = client.request(SessionListParams { cursor: Some(cursor.clone()), ..Default::default() }).await.unwrap();
    assert_eq!(rest.sessions.len(), 6);
    assert_eq!(rest.next_cursor, None, "the last page has no cursor");

    // By state, by task.
    let params = SessionListParams { state: Some(vec![SessionState::WaitingForInput]), ..Default::default() };
    assert_eq!(ids(&client.request(params).await.unwrap().sessions), vec![waiting.clone()]);
    let params = SessionListParams {
        state: Some(vec![SessionState::Created, SessionState::Failed]),
        limit: Some(1000),
        ..Default::default()
    };
    let created = client.request(params).await.unwrap().sessions;
    assert_eq!(created.len(), DEFAULT_SESSION_PAGE as usize + 5);
    assert!(created.iter().all(|r| r.status.state == SessionState::Created));
    let params = SessionListParams { task_id: task_of_many.clone(), ..Default::default() };
    let of_task = client.request(params).await.unwrap().sessions;
    assert_eq!(of_task.len(), 1);
    assert_eq!(Some(&of_task[0].status.task_id), task_of_many.as_ref());

    // Bad paging parameters: clear errors.
    for limit in [0, MAX_SESSION_PAGE + 1] {
        let error = server_error(client.request(SessionListParams { limit: Some(limit), ..Default::default() }).await);
        assert_eq!(error.code, ErrorCode::ValidationError, "{limit}: {error:?}");
        assert!(error.message.contains("limit"), "{error:?}");
    }
    for bad in ["", "nonsense", "created|x|2025|sess-1", "created|1|2025|../x"] {
        let params = SessionListParams { cursor: Some(bad.into()), ..Default::default() };
        let error = server_error(client.request(params).await);
        assert_eq!(error.code, ErrorCode::ValidationError, "{bad:?}: {error:?}");
        assert!(error.message.contains("cursor"), "{error:?}");
    }
    let params = SessionListParams { cursor: Some(cursor), order: Some(SessionOrder::Recent), ..Default::default() };
    let error = server_error(client.request(params).await);
    assert!(error.message.contains("order"), "a cursor of another order is refused: {error:?}");
    let error = client.request_raw("task.session.list", serde_json::json!({"order": "sideways"})).await.unwrap_err();
    assert_eq!(error.server_error().map(|e| &e.code), Some(&ErrorCode::BadRequest), "{error}");
    // A limit out of its range is the same error whether the number fits the field's type or
    // not (a negative or too large number).
    for limit in [serde_json::json!(-1), serde_json::json!(5_000_000_000u64)] {
        let error = client.request_raw("task.session.list", serde_json::json!({"limit": limit})).await.unwrap_err();
        let error = error.server_error().expect("a server error");
        assert_eq!(error.code, ErrorCode::ValidationError, "{limit}: {error:?}");
        assert!(error.message.contains(&format!("{limit}")) && !error.retryable, "{error:?}");
    }
}

#[tokio::test]
async fn changed_since_answers_only_the_sessions_changed_since() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let talking = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let mut sessions = Vec::new();
    for i in 0..4 {
        let created = client.request(env.task(&format!("t{i}"), "", "mock", false)).await.expect("task.create");
        sessions.push((created.task.id, created.session.status.session_id));
    }
    let seen = client.request(SessionListParams::default()).await.unwrap();
    assert_eq!(seen.sessions.len(), 5);
    let since = seen.change_seq;
    let nothing = SessionListParams { changed_since: Some(since), ..Default::default() };
    let unchanged = client.request(nothing.clone()).await.unwrap();
    assert!(unchanged.sessions.is_empty(), "nothing changed: {unchanged:?}");
    assert_eq!(unchanged.change_seq, since);

    // A turn (the session's state changes and back), a renamed task, a new session.
    prompt(&client, &mut notes, &talking, "again").await;
    let renamed = TaskUpdateParams { task_id: sessions[2].0.clone(), title: Some("renamed".into()), description: None };
    client.request(renamed).await.expect("task.update");
    let created = client.request(env.task("new", "", "mock", false)).await.expect("task.create");
    let new_session = created.session.status.session_id;

    let changed = client.request(nothing).await.unwrap();
    let changed_ids: HashSet<String> = ids(&changed.sessions).into_iter().collect();
    let expected: HashSet<String> = [talking.clone(), sessions[2].1.clone(), new_session.clone()].into();
    assert_eq!(changed_ids, expected, "the session that talked, the renamed task's, the new one");
    assert_eq!(ids(&changed.sessions).last(), Some(&new_session), "oldest change first");
    let renamed_row = changed.sessions.iter().find(|r| r.status.session_id == sessions[2].1).unwrap();
    assert_eq!(renamed_row.task_title, "renamed");
    assert!(changed.change_seq > since);

    // Archiving a task counts as a change of its sessions (listed with `archived: include`).
    let since = changed.change_seq;
    client
        .request(TaskArchiveParams { task_id: sessions[0].0.clone(), stop_agents: false })
        .await
        .expect("task.archive");
    let params =
        SessionListParams { changed_since: Some(since), archived: Some(ArchivedFilter::Include), ..Default::default() };
    let archived = client.request(params).await.unwrap().sessions;
    assert_eq!(ids(&archived), vec![sessions[0].1.clone()]);
    assert!(archived[0].task_archived);
}

/// Answers and notifications are not ordered on the wire: every view of a session carries its
/// `change_seq`, so that a client can tell the newer of two. A status read before a turn is older
/// than each of the turn's state changes, which grow, and a status read after them is not older.
#[tokio::test]
async fn every_view_of_a_session_carries_its_change_seq_and_a_later_view_a_greater_one() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let before = status(&client, &session).await;
    assert!(before.change_seq > 0, "a status carries the session's change_seq: {before:?}");
    let listed = client.request(SessionListParams::default()).await.expect("task.session.list");
    let row = listed.sessions.iter().find(|r| r.status.session_id == session).expect("the session's row");
    assert_eq!(row.status.change_seq, before.change_seq, "a list row carries the same as the status");

    client.request(MessageAddParams::new(session.clone(), "again")).await.expect("message.add");
    let mut changes = Vec::new();
    notes
        .wait_for(WAIT, |event| match event {
            // From the turn's start (what the session's start left to tell may come first).
            ClientEvent::Notification(Notification::StateChanged(c))
                if c.session_id == session && (c.state == SessionState::Running || !changes.is_empty()) =>
            {
                changes.push((c.state, c.change_seq));
                (c.state == SessionState::WaitingForInput).then_some(())
            }
            _ => None,
        })
        .await
        .expect("the turn's state changes");
    let mut held = before.change_seq;
    for (state, change_seq) in &changes {
        assert!(*change_seq > held, "{state:?} at {change_seq} follows a view at {held}: {changes:?}");
        assert!(!supersedes(before.change_seq, *change_seq), "the status read before the turn is older");
        held = *change_seq;
    }
    let after = status(&client, &session).await;
    assert!(supersedes(after.change_seq, held), "a status read after the turn is not older: {after:?} / {changes:?}");
    assert_eq!(after.state, SessionState::WaitingForInput);
}
