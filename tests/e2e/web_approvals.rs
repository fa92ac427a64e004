//! The reference web page's approval queue and standing answers, in headless Chromium
//! (see `common/chromium.rs`) against a real batond and the mock agent.

use crate::common;
use crate::common::chromium;

use baton_protocol::*;
use chromium::*;
use common::*;

/// The page's approval queue and standing answers: two sessions' requests with their
/// tool call, input, diff and options in one panel that follows the server live (a request
/// answered from another client leaves it), one answered there with "Always allow"; the
/// session's rule shown, counted when it answers the agent's next request, and revoked.
/// Screenshots are saved.
#[tokio::test]
async fn web_page_answers_the_approval_queue_and_revokes_a_standing_answer() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let parser = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let created = client.request(env.task("Bump the release", "hello", "mock", true)).await.expect("task.create");
    let release = created.session.status.session_id;
    wait_state(&client, &mut notes, &release, SessionState::WaitingForInput).await;
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.wait_text("#approvals-open", "Approvals", true).await;

    client.request(MessageAddParams::new(&parser, "/permission always Write file")).await.expect("message.add");
    client.request(MessageAddParams::new(&release, "/permission")).await.expect("message.add");
    chromium.wait_text("#approvals-open", "Approvals (2)", true).await;
    // The list says which sessions wait on an answer, not just that they run.
    chromium.wait_text(&format!("button.session[data-session-id='{release}'] .badge"), "asks permission", true).await;
    // Beside the conversation, the question shows what it would approve: the input and the diff.
    chromium.click(&format!("button.session[data-session-id='{parser}']")).await;
    chromium.wait_text("#transcript li.permission pre.input", "\"path\": \"src/lib.rs\"", false).await;
    chromium.wait_text("#transcript li.permission pre .add", "+     42", false).await;
    chromium.screenshot("permission_in_the_transcript").await;
    chromium.click("#approvals-open").await;
    chromium
        .wait_until("two requests", "document.querySelectorAll('#approvals-list li[data-request-id]').length === 2")
        .await;
    let parser_item = format!("#approvals-list li[data-session-id='{parser}']");
    chromium.wait_text(&format!("{parser_item} .tool"), "edit “Write file”", true).await;
    chromium.wait_text(&format!("{parser_item} pre .add"), "+     42", false).await;
    chromium.wait_text(&format!("{parser_item} pre.input"), "\"path\": \"src/lib.rs\"", false).await;
    chromium.wait_text(&format!("{parser_item} .options button[data-kind='allow_always']"), "Always allow", true).await;
    chromium.screenshot("approval_queue").await;

    // Another client answers the release's request: it leaves the page's queue.
    let queue = client.request(PermissionListParams::default()).await.expect("permission.list");
    let other = queue.requests.iter().find(|r| r.session_id == release).expect("the release's request");
    let answer = PermissionRespondParams {
        session_id: release.clone(),
        request_id: other.request_id.clone(),
        option_id: "allow".into(),
    };
    client.request(answer).await.expect("permission.respond");
    chromium
        .wait_until("one request left", "document.querySelectorAll('#approvals-list li[data-request-id]').length === 1")
        .await;
    chromium.wait_text("#approvals-count", "· 1 waiting", true).await;

    // "Always allow" from the page: the queue is empty, and the session has a standing answer.
    chromium.click(&format!("{parser_item} .options button[data-kind='allow_always']")).await;
    chromium.wait_text("#approvals-list li.empty", "Nothing waits for your answer.", true).await;
    chromium.click("#approvals-close").await;
    chromium.click(&format!("button.session[data-session-id='{parser}']")).await;
    chromium.wait_text("#transcript li", "Permission outcome: selected allow-always", false).await;
    chromium.click("#rules-open").await;
    chromium.wait_text("#rules-list li[data-rule-id] .tool", "always allow edit “Write file”", true).await;
    chromium.wait_text("#rules-list li[data-rule-id] .since", "answered 0×", false).await;

    // The agent asks again: batond answers by the rule, and the panel counts it.
    client.request(MessageAddParams::new(&parser, "/permission always Write file")).await.expect("message.add");
    chromium.wait_text("#rules-list li[data-rule-id] .since", "answered 1×", false).await;
    chromium.screenshot("standing_answers").await;
    chromium.click("#rules-list button.revoke").await;
    chromium.wait_text("#rules-list li.empty", "No standing answers.", false).await;
    chromium.click("#rules-close").await;
    chromium.wait_text("#transcript li.status", "Allowed by your standing rule", false).await;
}

/// The page's modes and options: the agent's offer with its current values, a mode picked in
/// the page switches the running agent, a model picked by another client shows in the open
/// panel, and a boolean option is a checkbox.
#[tokio::test]
async fn web_page_switches_the_agents_mode_and_options() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.click(&format!("button.session[data-session-id='{session_id}']")).await;
    chromium.wait_text("#transcript li", "Echo: hi", false).await;
    chromium.click("#options-open").await;
    chromium
        .wait_until(
            "the mode select",
            "document.querySelector('#options-list select[data-option=mode]')?.value === 'default'",
        )
        .await;
    chromium.wait_text("#options-state", "The agent runs", false).await;
    chromium.screenshot("options_panel").await;

    let pick = "const s = document.querySelector('#options-list select[data-option=mode]'); s.value = 'plan'; \
                s.dispatchEvent(new Event('change'));";
    browser.execute(pick, vec![]).await.expect("pick plan");
    let mut switched = false;
    for _ in 0..200 {
        let now = client.request(SessionOptionsParams { session_id: session_id.clone() }).await.expect("options");
        if now.options.current_mode.as_deref() == Some("plan") {
            assert_eq!(now.chosen.mode.as_deref(), Some("plan"));
            switched = true;
            break;
        }
        notes
            .wait_for(std::time::Duration::from_millis(100), |event| match event {
                ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => Some(()),
                _ => None,
            })
            .await
            .ok();
    }
    assert!(switched, "the page's pick reached the agent");

    client
        .request(SessionSetOptionParams {
            session_id: session_id.clone(),
            option_id: "model".into(),
            value: OptionValue::Id("mock-2".into()),
        })
        .await
        .expect("session.set_option");
    chromium
        .wait_until(
            "the model follows",
            "document.querySelector('#options-list select[data-option=model]')?.value === 'mock-2'",
        )
        .await;
    chromium.click("#options-list input[data-option=verbose]").await;
    chromium
        .wait_until(
            "verbose on",
            "document.querySelector('#options-list input[data-option=verbose]')?.checked === true",
        )
        .await;
    chromium.click("#options-close").await;
    subscribe(&client, &session_id, None).await;
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "/options").await,
        "mode=plan model=mock-2 effort=medium verbose=true"
    );
}

/// Messages written on the page while a turn runs are listed as queued; Remove takes one out,
/// and the rest are sent once the turn ends.
#[tokio::test]
async fn web_page_lists_queued_messages_and_removes_one() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let gate = env.workdir.join("go");
    client.request(MessageAddParams::new(&session_id, format!("/until {}", gate.display()))).await.expect("a turn");
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.click(&format!("button.session[data-session-id='{session_id}']")).await;
    chromium.wait_text("#transcript li", "waiting", false).await;
    for text in ["keep this one", "drop this one"] {
        let send = format!(
            "const p = document.querySelector('#prompt'); p.value = {text:?}; \
             document.querySelector('#send').click();"
        );
        browser.execute(&send, vec![]).await.expect("send from the page");
        chromium.wait_text("#queue-list li", text, false).await;
    }
    chromium.screenshot("queued_messages").await;
    chromium.click("#queue-list li:nth-child(2) button.remove").await;
    chromium.wait_until("one queued message left", "document.querySelectorAll('#queue-list li').length === 1").await;
    let queue = client.request(QueueListParams { session_id: session_id.clone() }).await.expect("queue.list").queue;
    assert_eq!(queue.messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["keep this one"]);

    std::fs::write(&gate, "").expect("the gate file");
    chromium.wait_text("#transcript li", "Echo: keep this one", false).await;
    chromium.wait_until("the queue box hidden", "document.querySelector('#queue').hidden === true").await;
}
