//! The approval queue (`A`) and standing answers (`P`), driven with scripted server
//! data: every session's pending requests with their tool call, input, diff and options,
//! answered with y/n/1-9 right there, listed again when the queue changes; a session's rules
//! listed and revoked.

use baton_protocol::{
    Notification, PendingPermission, PermissionChange, PermissionListResult, PermissionOption, PermissionQueueChanged,
    PermissionRule, RuleDecision,
};
use baton_tui::command::{Reply, Request};
use crossterm::event::KeyCode;

use crate::common::*;

fn option(id: &str, name: &str, kind: &str) -> PermissionOption {
    PermissionOption { option_id: id.into(), name: name.into(), kind: kind.into() }
}

fn queue() -> PermissionListResult {
    let edit = PendingPermission {
        session_id: "s-1".into(),
        task_id: "t-1".into(),
        task_title: "Fix the login redirect".into(),
        request_id: "perm-1".into(),
        tool_call: serde_json::json!({
            "title": "Edit src/login.ts",
            "kind": "edit",
            "rawInput": {"path": "src/login.ts"},
            "content": [{"type": "diff", "path": "src/login.ts",
                         "oldText": "await page.click(submit);\n", "newText": "await page.click(submit);\nawait page.waitForURL('/home');\n"}],
        }),
        options: vec![
            option("allow", "Allow", "allow_once"),
            option("allow-always", "Always allow", "allow_always"),
            option("reject", "Reject", "reject_once"),
        ],
        seq: 12,
        requested_at: "2026-11-29T17:57:00Z".into(),
    };
    let run = PendingPermission {
        session_id: "s-3".into(),
        task_id: "t-2".into(),
        task_title: "Write the release notes".into(),
        request_id: "perm-2".into(),
        tool_call: serde_json::json!({"title": "git log --oneline", "kind": "execute"}),
        options: vec![option("yes", "Allow", "allow_once"), option("no", "Reject", "reject_once")],
        seq: 40,
        requested_at: "2026-11-29T17:59:30Z".into(),
    };
    PermissionListResult { requests: vec![edit, run], total: 2, next_cursor: None }
}

fn queue_changed(session_id: &str, request_id: &str, change: PermissionChange) -> Notification {
    Notification::PermissionQueueChanged(PermissionQueueChanged {
        session_id: session_id.into(),
        request_id: request_id.into(),
        change,
        option_id: None,
        rule_id: None,
    })
}

#[test]
fn the_queue_shows_every_request_and_answers_it_in_place() {
    let mut app = listed_app();
    press(&mut app, KeyCode::Char('A'));
    assert_eq!(requests(&mut app), vec![Request::ListPermissions]);
    assert!(render(&app).contains("loading…"));
    reply(&mut app, 1, Request::ListPermissions, Reply::Permissions(queue()));
    let screen = render(&app);
    for shown in
        ["Approval queue · 2 waiting", "edit “Edit src/login.ts”", "+await page.waitForURL", "[2] Always allow"]
    {
        assert!(screen.contains(shown), "{shown:?} missing from\n{screen}");
    }
    insta::assert_snapshot!("approval_queue", screen);

    // y answers the request under the cursor with its once-only allow; 2 picks its second option.
    press(&mut app, KeyCode::Char('y'));
    press(&mut app, KeyCode::Char('2'));
    let respond = |option: &str| Request::RespondPermission {
        session_id: "s-1".into(),
        request_id: "perm-1".into(),
        option_id: option.into(),
    };
    assert_eq!(requests(&mut app), vec![respond("allow"), respond("allow-always")]);
    // j moves to the other session's request; N rejects it (n answers nothing, anywhere).
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(requests(&mut app), vec![]);
    press(&mut app, KeyCode::Char('N'));
    let reject =
        Request::RespondPermission { session_id: "s-3".into(), request_id: "perm-2".into(), option_id: "no".into() };
    assert_eq!(requests(&mut app), vec![reject]);

    // Live: a change lists again (once while a listing is on its way, then once more).
    app.on_notification(queue_changed("s-1", "perm-1", PermissionChange::Answered));
    app.on_notification(queue_changed("s-3", "perm-2", PermissionChange::Answered));
    assert_eq!(requests(&mut app), vec![Request::ListPermissions]);
    let mut left = queue();
    left.requests.remove(0);
    left.total = 1;
    reply(&mut app, 1, Request::ListPermissions, Reply::Permissions(left.clone()));
    assert_eq!(requests(&mut app), vec![Request::ListPermissions], "the second change is listed too");
    reply(&mut app, 1, Request::ListPermissions, Reply::Permissions(left));
    let screen = render(&app);
    assert!(screen.contains("1 waiting") && !screen.contains("Edit src/login.ts"), "{screen}");
    assert!(screen.contains("▶ Write the release notes"), "the cursor stays on its request:\n{screen}");

    // A new connection lists the open queue again (changes may have been missed meanwhile).
    app.on_disconnected("the server closed the connection", std::time::Instant::now());
    app.on_connected(2);
    assert!(requests(&mut app).contains(&Request::ListPermissions), "listed again after a reconnect");
    reply(
        &mut app,
        2,
        Request::ListPermissions,
        Reply::Permissions(PermissionListResult {
            requests: queue().requests[1..].to_vec(),
            total: 1,
            next_cursor: None,
        }),
    );

    // Enter opens that request's session; Esc would have closed the queue.
    press(&mut app, KeyCode::Enter);
    assert!(app.overlay().is_none());
    assert_eq!(app.opened_session(), Some("s-3"));
}

#[test]
fn an_empty_queue_says_so_and_a_change_elsewhere_lists_nothing_when_closed() {
    let mut app = listed_app();
    app.on_notification(queue_changed("s-1", "perm-1", PermissionChange::Requested));
    assert!(requests(&mut app).is_empty(), "no queue open, nothing listed");
    press(&mut app, KeyCode::Char('A'));
    requests(&mut app);
    reply(
        &mut app,
        1,
        Request::ListPermissions,
        Reply::Permissions(PermissionListResult { requests: vec![], total: 0, next_cursor: None }),
    );
    assert!(render(&app).contains("Nothing waits for your answer."));
    press(&mut app, KeyCode::Char('y'));
    assert!(requests(&mut app).is_empty());
    press(&mut app, KeyCode::Esc);
    assert!(app.overlay().is_none());
}

fn rule(id: &str, decision: RuleDecision, title: &str) -> PermissionRule {
    PermissionRule {
        rule_id: id.into(),
        session_id: "s-3".into(),
        tool_kind: "edit".into(),
        tool_title: title.into(),
        decision,
        option_kind: decision.option_kind().into(),
        created_at: "2026-11-29T17:30:00Z".into(),
        applied: 3,
        tool_input: if title.starts_with("rm") {
            r#"{"rawInput":{"command":"rm -rf build"}}"#.into()
        } else {
            String::new()
        },
    }
}

#[test]
fn the_standing_answers_of_a_session_are_listed_and_revoked() {
    let mut app = listed_app();
    assert_eq!(app.cursor_session(), Some("s-3"), "P shows the rules of the highlighted session");
    press(&mut app, KeyCode::Char('P'));
    assert_eq!(requests(&mut app), vec![Request::ListRules { session_id: "s-3".into() }]);
    let rules = vec![
        rule("rule-1", RuleDecision::Allow, "Edit src/login.ts"),
        rule("rule-2", RuleDecision::Reject, "rm -rf build"),
    ];
    reply(
        &mut app,
        1,
        Request::ListRules { session_id: "s-3".into() },
        Reply::Rules { session_id: "s-3".into(), rules: rules.clone() },
    );
    let screen = render(&app);
    assert!(screen.contains("always allow edit “Edit src/login.ts”") && screen.contains("answered 3×"), "{screen}");
    assert!(screen.contains(r#"only: {"rawInput":{"command":"rm -rf build"}}"#), "the input a rule matches: {screen}");
    insta::assert_snapshot!("standing_answers", screen);

    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Char('x'));
    let revoke = Request::RevokeRule { session_id: "s-3".into(), rule_id: "rule-2".into() };
    assert_eq!(requests(&mut app), vec![revoke.clone()]);
    reply(&mut app, 1, revoke, Reply::RuleRevoked(rules[1].clone()));
    assert!(app.flash_text().is_some_and(|t| t.contains("revoked the standing answer for edit “rm -rf build”")));
    assert_eq!(requests(&mut app), vec![Request::ListRules { session_id: "s-3".into() }]);
}
