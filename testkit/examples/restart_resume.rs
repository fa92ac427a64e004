//! A scripted protocol test: a conversation survives a crash of the server.
//!
//! Run it with `cargo run -p baton-testkit --example restart_resume` (it builds batond if needed;
//! BATON_BATOND=/path/to/batond runs another one). Copy it to script your own scenarios.

use baton_protocol::SessionState;
use baton_testkit::*;

#[tokio::main]
async fn main() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;

    // A task with the mock agent; its first turn is the task's description.
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    assert_eq!(agent_text(&read_journal(&client, &mut notes, &session_id).await), "OK, I will remember pineapple.");

    // kill -9 and the same batond again on the same data dir: nothing runs the session now.
    // One call connects again and follows the session from now on.
    let server = server.restart().await;
    let (client, mut notes) = server.reconnect(&[&session_id]).await;
    let interrupted = status(&client, &session_id).await;
    assert!(interrupted.needs_resume && !interrupted.is_agent_running, "{interrupted:?}");

    // Resume it: the agent gets its context back and answers from it.
    let resumed = resume(&client, &mut notes, &session_id, false).await;
    assert_eq!(resumed.state, SessionState::WaitingForInput);
    let answer = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(answer, "You asked me to remember pineapple.");

    // The journal holds both turns, in order, once each.
    let users = user_messages(&client, &session_id).await;
    assert_eq!(users, ["remember pineapple", "what did I ask you to remember?"]);
    println!("session {session_id} resumed after kill -9: {answer}");
}

/// The same steps under `cargo test`, so the example is proven in CI.
#[test]
fn restart_resume_example_runs() {
    main()
}
