//! Usage as agents report it (`usage.get`), with a real batond and the mock agent's `/usage`:
//! recorded per turn, summed per session and over sessions; unknown stays unknown.

use crate::common;

use baton_protocol::*;
use common::*;

async fn usage(client: &Client, session_id: Option<&str>) -> UsageGetResult {
    client.request(UsageGetParams { session_id: session_id.map(str::to_owned) }).await.expect("usage.get")
}

#[tokio::test]
async fn reported_usage_is_recorded_per_turn_and_summed() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // The first turn (the task description) reports nothing.
    let first = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let report = prompt(&client, &mut notes, &first, "/usage 1200 80 1000 0.25").await;
    assert!(report.contains("Used 1200 input and 80 output tokens."), "{report}");

    // Read right after the turn ended: the usage is there already.
    let got = usage(&client, Some(&first)).await;
    let session = got.session.expect("the session's usage");
    assert_eq!(session.turns.len(), 2, "{:?}", session.turns);
    let (silent, reported) = (&session.turns[0], &session.turns[1]);
    assert!(!silent.has_tokens(), "a turn without usage stays unknown: {silent:?}");
    assert_eq!((silent.input_tokens, silent.cost.as_ref()), (None, None));
    assert_eq!(reported.input_tokens, Some(1200));
    assert_eq!(reported.output_tokens, Some(80));
    assert_eq!(reported.cached_read_tokens, Some(1000));
    assert_eq!(reported.total_tokens, Some(1280));
    assert_eq!(reported.cached_write_tokens, None, "not reported, not zero");
    assert_eq!(reported.cost, Some(Cost { amount: 0.25, currency: "USD".into() }));
    assert_eq!((reported.context_used, reported.context_size), (Some(1280), Some(200_000)));
    let summary = &session.summary;
    assert_eq!((summary.turns_reported, summary.turns_unreported), (1, 1));
    assert_eq!((summary.input_tokens, summary.output_tokens), (Some(1200), Some(80)));
    assert_eq!(summary.thought_tokens, None);

    // A second turn with usage adds up; the cost is the agent's cumulative figure.
    prompt(&client, &mut notes, &first, "/usage 300 20 0 0.40").await;
    let summary = usage(&client, Some(&first)).await.session.expect("usage").summary;
    assert_eq!((summary.turns_reported, summary.input_tokens, summary.output_tokens), (2, Some(1500), Some(100)));
    assert_eq!(summary.cost, vec![Cost { amount: 0.40, currency: "USD".into() }]);

    // A second session: the total covers both.
    let second = started_session(&env, &client, &mut notes, "mock-fresh", "hello").await;
    prompt(&client, &mut notes, &second, "/usage 10 5").await;
    let total = usage(&client, None).await;
    assert!(total.session.is_none());
    let total = total.total;
    assert_eq!(total.sessions, 2);
    assert_eq!((total.turns_reported, total.turns_unreported), (3, 2));
    assert_eq!((total.input_tokens, total.output_tokens, total.total_tokens), (Some(1510), Some(105), Some(1615)));
    assert_eq!(total.cost, vec![Cost { amount: 0.40, currency: "USD".into() }], "the second reported no cost");
    let second_usage = usage(&client, Some(&second)).await.session.expect("usage").summary;
    assert!(second_usage.cost.is_empty(), "no cost reported: unknown, not 0");
}

#[tokio::test]
async fn a_session_without_reports_has_unknown_usage() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let got = usage(&client, Some(&session_id)).await;
    let summary = got.session.expect("usage").summary;
    assert_eq!((summary.turns_reported, summary.turns_unreported), (0, 1));
    assert_eq!((summary.input_tokens, summary.total_tokens), (None, None));
    assert!(summary.cost.is_empty());
    let error = server_error(client.request(UsageGetParams { session_id: Some("sess-nope".into()) }).await);
    assert_eq!(error.code, ErrorCode::NotFound);
}
