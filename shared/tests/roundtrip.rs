//! Every request, result, notification and event survives JSON and back unchanged, and the
//! JSON has the shape docs/PROTOCOL.md shows (§2 the envelope, §4 the actions, §5 the
//! notifications and event kinds).

use baton_protocol::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) -> Value {
    let json = serde_json::to_value(value).expect("serialise");
    let back: T = serde_json::from_value(json.clone()).expect("deserialise");
    assert_eq!(&back, value, "round trip changed {json}");
    json
}

fn status() -> SessionStatus {
    SessionStatus {
        session_id: "s1".into(),
        task_id: "t1".into(),
        agent: "mock".into(),
        state: SessionState::WaitingForInput,
        task_state: TaskState::Review,
        is_agent_running: false,
        is_resumable: true,
        needs_resume: true,
        resume_reason: ResumeReason::AgentNotRunning,
        has_resume_token: true,
        last_error: Some("agent exited".into()),
        worktree_path: Some("/tmp/wt".into()),
        agent_pid: None,
        attention: Some(Attention::Input),
        attention_since: Some("2025-06-02T14:03:12.004Z".into()),
        change_seq: 0,
    }
}

fn session_info() -> SessionInfo {
    SessionInfo {
        status: status(),
        task_title: "Fix it".into(),
        task_archived: false,
        created_at: now_timestamp(),
        updated_at: now_timestamp(),
        last_seq: 42,
        forked_from: Some(ForkOrigin { session_id: "s0".into(), seq: 40 }),
    }
}

fn task() -> Task {
    Task {
        id: "t1".into(),
        title: "Fix it".into(),
        description: "the bug".into(),
        state: TaskState::InProgress,
        agent: "mock".into(),
        workdir: "/tmp".into(),
        repository: Some("/repo".into()),
        worktree_branch: Some("baton/t1".into()),
        base_commit: Some("9c1d0e4b".into()),
        base_branch: Some("main".into()),
        pull_request_url: Some("https://github.com/o/r/pull/1".into()),
        created_at: now_timestamp(),
        updated_at: now_timestamp(),
        archived: true,
        mcp_servers: vec![McpServerInfo {
            name: "docs".into(),
            transport: "http".into(),
            command: None,
            url: Some("https://mcp.example.com/docs".into()),
            secret_names: vec!["Authorization".into()],
        }],
    }
}

fn message() -> Message {
    Message {
        seq: 3,
        kind: MessageKind::ToolCall,
        text: "Read file".into(),
        message_id: None,
        tool_call_id: Some("tool-1".into()),
        status: Some("completed".into()),
        data: Some(json!({"tool_kind": "read"})),
        created_at: now_timestamp(),
        updated_at: now_timestamp(),
    }
}

/// Round-trips a request through `ClientRequest` (the server's decoder) and its result type.
fn request_pair<R: Request + PartialEq + std::fmt::Debug>(params: R, result: R::Response)
where
    R::Response: PartialEq + std::fmt::Debug,
{
    let payload = round_trip(&params);
    let decoded = ClientRequest::parse(R::ACTION, payload.clone()).expect("server decodes");
    assert_eq!(decoded.action(), R::ACTION);
    assert_eq!(decoded.payload(), payload);
    round_trip(&result);
}

#[test]
fn every_action_round_trips() {
    let info = AgentInfo {
        name: "mock".into(),
        display_name: "Mock agent".into(),
        native_session_resume: true,
        history_context_injection: false,
        installed: true,
        mcp_servers: vec![McpServerInfo {
            name: "files".into(),
            transport: "stdio".into(),
            command: Some("mcp-files".into()),
            url: None,
            secret_names: Vec::new(),
        }],
    };
    request_pair(AgentListParams {}, AgentListResult { agents: vec![info] });
    let mut create = TaskCreateParams::new("Fix it", "the bug", "mock");
    create.workdir = Some("/tmp".into());
    create.mcp_servers = vec![McpServerConfig::Stdio {
        name: "files".into(),
        command: "mcp-files".into(),
        args: vec!["--root".into(), ".".into()],
        env: [("TOKEN".to_string(), "secret".to_string())].into(),
    }];
    create.start = false;
    request_pair(create, TaskCreateResult { task: task(), session: session_info() });
    request_pair(TaskListParams { archived: Some(ArchivedFilter::Only) }, TaskListResult { tasks: vec![task()] });
    request_pair(
        TaskUpdateParams { task_id: "t1".into(), title: Some("Fix it".into()), description: None },
        TaskUpdateResult { task: task() },
    );
    request_pair(
        TaskArchiveParams { task_id: "t1".into(), stop_agents: false },
        TaskArchiveResult { task: task(), stopped_sessions: vec![] },
    );
    request_pair(
        TaskArchiveParams { task_id: "t1".into(), stop_agents: true },
        TaskArchiveResult { task: task(), stopped_sessions: vec!["s1".into()] },
    );
    request_pair(
        TaskUnarchiveParams { task_id: "t1".into() },
        TaskArchiveResult { task: task(), stopped_sessions: vec![] },
    );
    request_pair(
        TaskDeleteParams { task_id: "t1".into(), stop_agents: true, discard_changes: false, keep_worktree: false },
        TaskDeleteResult { task_id: "t1".into(), session_ids: vec!["s1".into()], worktree_removed: Some("/wt".into()) },
    );
    request_pair(
        SessionListParams { task_id: Some("t1".into()), archived: Some(ArchivedFilter::Include), ..Default::default() },
        SessionListResult { sessions: vec![session_info()], next_cursor: None, change_seq: 7, attention_count: 0 },
    );
    request_pair(
        SessionListParams {
            task_id: None,
            archived: None,
            state: Some(vec![SessionState::WaitingForInput, SessionState::Failed]),
            changed_since: Some(42),
            order: Some(SessionOrder::Attention),
            limit: Some(50),
            cursor: Some("attention|0|2025-06-02T14:03:11.512Z|sess-1".into()),
        },
        SessionListResult {
            sessions: vec![session_info()],
            next_cursor: Some("created|0|2025-06-02T14:03:11.512Z|sess-1".into()),
            change_seq: 7,
            attention_count: 2,
        },
    );
    request_pair(SessionStatusParams { session_id: "s1".into() }, status());
    request_pair(
        SessionResumeParams { session_id: "s1".into(), fresh: true, retry_failed: false },
        SessionResumeResult { session_id: "s1".into(), state: SessionState::Starting, launched: true },
    );
    request_pair(
        SessionStartParams { task_id: "t1".into(), agent: Some("mock".into()), prompt: Some("go".into()) },
        SessionStartResult { session: session_info() },
    );
    request_pair(SessionCancelParams { session_id: "s1".into() }, SessionCancelResult { session_id: "s1".into() });
    request_pair(
        SessionStopParams { session_id: "s1".into() },
        SessionStopResult { session_id: "s1".into(), state: SessionState::Completed },
    );
    request_pair(
        MessageAddParams::new("s1", "hi"),
        MessageAddResult { message: Some(message()), queued: None, turn_id: Some("turn-1".into()) },
    );
    let queued = QueuedMessage {
        id: "q-1".into(),
        text: "and then this".into(),
        steer: true,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    };
    request_pair(
        MessageAddParams::steer("s1", "and then this"),
        MessageAddResult { message: None, queued: Some(queued.clone()), turn_id: None },
    );
    request_pair(
        MessageListParams { session_id: "s1".into(), before_seq: Some(9), after_seq: Some(1), limit: Some(5) },
        MessageListResult {
            messages: vec![message()],
            has_more: true,
            cut: vec![CutText { seq: 3, total_bytes: 300_000 }],
        },
    );
    request_pair(
        MessageTextParams { session_id: "s1".into(), seq: 3, offset: Some(262_144), limit: Some(16) },
        MessageTextResult {
            seq: 3,
            text: "the rest".into(),
            offset: 262_144,
            total_bytes: 300_000,
            next_offset: Some(262_152),
        },
    );
    request_pair(
        SubscribeParams { session_id: "s1".into(), since_seq: Some(7) },
        SubscribeResult { session_id: "s1".into(), current_seq: 9 },
    );
    request_pair(UnsubscribeParams { session_id: "s1".into() }, UnsubscribeResult { session_id: "s1".into() });
    request_pair(
        PermissionRespondParams { session_id: "s1".into(), request_id: "p1".into(), option_id: "allow".into() },
        PermissionRespondResult { request_id: "p1".into() },
    );
    request_pair(PingParams {}, PingResult { time: "2025-06-02T15:12:50.001Z".into() });
    request_pair(
        SessionForkParams { session_id: "s1".into(), agent: Some("claude-code".into()) },
        SessionForkResult { session: session_info() },
    );
    let turn = TurnUsage {
        turn_seq: 3,
        turn_id: Some("turn-1".into()),
        input_tokens: Some(1200),
        output_tokens: Some(80),
        cached_read_tokens: Some(1000),
        total_tokens: Some(1280),
        cost: Some(Cost { amount: 0.25, currency: "USD".into() }),
        context_used: Some(1280),
        context_size: Some(200_000),
        recorded_at: "2025-06-02T15:12:50.001Z".into(),
        ..TurnUsage::default()
    };
    let summary = UsageSummary {
        turns_reported: 1,
        turns_unreported: 1,
        input_tokens: Some(1200),
        output_tokens: Some(80),
        cost: vec![Cost { amount: 0.25, currency: "USD".into() }],
        sessions: 1,
        ..UsageSummary::default()
    };
    request_pair(
        UsageGetParams { session_id: Some("s1".into()) },
        UsageGetResult {
            session: Some(SessionUsage { session_id: "s1".into(), summary: summary.clone(), turns: vec![turn] }),
            total: summary,
        },
    );
    request_pair(
        SessionExportParams {
            session_id: "s1".into(),
            format: ExportFormat::Jsonl,
            thoughts: true,
            cursor: Some("4:0".into()),
        },
        SessionExportResult {
            session_id: "s1".into(),
            format: ExportFormat::Jsonl,
            content: "{}\n".into(),
            next_cursor: Some("5:0".into()),
            file_name: "t-s1.jsonl".into(),
        },
    );
    request_pair(
        MessageSearchParams {
            query: "flaky login".into(),
            session_id: Some("s1".into()),
            limit: Some(20),
            cursor: Some("42".into()),
        },
        MessageSearchResult {
            hits: vec![SearchHit {
                session_id: "s1".into(),
                task_id: "t1".into(),
                task_title: "Fix".into(),
                seq: 3,
                kind: MessageKind::User,
                snippet: vec![
                    SnippetPart { text: "a ".into(), matched: false },
                    SnippetPart { text: "flaky".into(), matched: true },
                ],
                created_at: "2025-06-02T14:00:00.010Z".into(),
            }],
            next_cursor: Some("3".into()),
        },
    );
    let rule = PermissionRule {
        rule_id: "rule-1".into(),
        session_id: "s1".into(),
        tool_kind: "edit".into(),
        tool_title: "Edit a.rs".into(),
        decision: RuleDecision::Allow,
        option_kind: "allow_always".into(),
        created_at: "2025-06-02T14:00:00.010Z".into(),
        applied: 2,
        tool_input: r#"{"rawInput":{"path":"a.rs"}}"#.into(),
    };
    request_pair(
        PermissionListParams { limit: Some(10), cursor: Some("2025-06-02T14:00:00.010Z|perm-1".into()) },
        PermissionListResult {
            requests: vec![PendingPermission {
                session_id: "s1".into(),
                task_id: "t1".into(),
                task_title: "Fix".into(),
                request_id: "perm-2".into(),
                tool_call: json!({"title": "Edit a.rs", "kind": "edit"}),
                options: vec![PermissionOption {
                    option_id: "allow".into(),
                    name: "Allow".into(),
                    kind: "allow_always".into(),
                }],
                seq: 9,
                requested_at: "2025-06-02T14:00:01.010Z".into(),
            }],
            total: 3,
            next_cursor: Some("2025-06-02T14:00:01.010Z|perm-2".into()),
        },
    );
    request_pair(
        PermissionRuleListParams { session_id: "s1".into() },
        PermissionRuleListResult { rules: vec![rule.clone()] },
    );
    request_pair(
        PermissionRuleRevokeParams { session_id: "s1".into(), rule_id: "rule-1".into() },
        PermissionRuleRevokeResult { rule },
    );
    let offered = SessionOptions {
        modes: vec![ModeInfo { id: "plan".into(), name: "Plan".into(), description: Some("reads only".into()) }],
        current_mode: Some("plan".into()),
        config_options: vec![
            ConfigOption {
                id: "model".into(),
                name: "Model".into(),
                description: None,
                category: Some("model".into()),
                current: OptionValue::Id("a".into()),
                choices: vec![OptionChoice {
                    value: "a".into(),
                    name: "A".into(),
                    description: None,
                    group: Some("Fast".into()),
                }],
                legacy_model: true,
            },
            ConfigOption {
                id: "verbose".into(),
                name: "Verbose".into(),
                description: None,
                category: None,
                current: OptionValue::Bool(false),
                choices: vec![],
                legacy_model: false,
            },
        ],
    };
    let chosen = ChosenOptions {
        mode: Some("plan".into()),
        config: [("verbose".to_string(), OptionValue::Bool(true))].into_iter().collect(),
    };
    let result = SessionOptionsResult { session_id: "s1".into(), options: offered, chosen, applied: true };
    request_pair(SessionOptionsParams { session_id: "s1".into() }, result.clone());
    request_pair(SessionSetModeParams { session_id: "s1".into(), mode_id: "plan".into() }, result.clone());
    request_pair(
        SessionSetOptionParams { session_id: "s1".into(), option_id: "verbose".into(), value: OptionValue::Bool(true) },
        result,
    );
    let queue = QueueResult {
        session_id: "s1".into(),
        queue: MessageQueue { messages: vec![queued], held: Some("the last turn failed".into()) },
    };
    request_pair(QueueListParams { session_id: "s1".into() }, queue.clone());
    request_pair(
        QueueEditParams { session_id: "s1".into(), id: "q-1".into(), content: "this instead".into() },
        queue.clone(),
    );
    request_pair(QueueRemoveParams { session_id: "s1".into(), id: "q-1".into() }, queue.clone());
    request_pair(QueueReleaseParams { session_id: "s1".into() }, queue);
    request_pair(
        DevicePairParams { name: Some("phone".into()), full: false, expires_in_secs: Some(300) },
        DevicePairResult {
            code: "pair-0123".into(),
            expires_at: "2025-06-02T14:05:00.000Z".into(),
            name: "phone".into(),
            limited: true,
        },
    );
    request_pair(
        DeviceListParams {},
        DeviceListResult {
            devices: vec![DeviceInfo {
                device_id: "dev-1".into(),
                name: "phone".into(),
                limited: true,
                paired_at: "2025-06-02T14:00:00.000Z".into(),
                last_seen_at: Some("2025-06-02T14:01:00.000Z".into()),
                last_address: Some("192.168.1.20".into()),
                connections: 1,
            }],
        },
    );
    request_pair(
        DeviceRevokeParams { device_id: "dev-1".into() },
        DeviceRevokeResult { device_id: "dev-1".into(), closed_connections: 1 },
    );
    request_pair(PushKeyParams {}, PushKeyResult { public_key: "BP4z".into() });
    request_pair(
        PushSubscribeParams {
            endpoint: "https://push.example.net/send/1".into(),
            p256dh: "BCVx".into(),
            auth: "BTBZ".into(),
        },
        PushSubscribeResult { subscription_id: "push-1".into() },
    );
    request_pair(
        PushUnsubscribeParams { endpoint: "https://push.example.net/send/1".into() },
        PushUnsubscribeResult { removed: true },
    );
    let changed = ChangedFile {
        path: "b.rs".into(),
        old_path: Some("a.rs".into()),
        status: FileStatus::Renamed,
        part: ChangePart::Committed,
        added: 2,
        removed: 1,
        binary: false,
    };
    request_pair(
        TaskChangesParams { task_id: "t1".into(), offset: 10, limit: Some(5), counts: true },
        TaskChangesResult {
            task_id: "t1".into(),
            workdir: "/w".into(),
            base: ChangeBase { commit: "9c1d".into(), branch: Some("main".into()) },
            branch: Some("baton/t1".into()),
            files: vec![changed],
            total: 11,
            added: 20,
            removed: 4,
            commits: 1,
            counted: true,
        },
    );
    request_pair(
        TaskDiffParams { task_id: "t1".into(), path: "b.rs".into(), part: ChangePart::Uncommitted },
        TaskDiffResult {
            path: "b.rs".into(),
            part: ChangePart::Uncommitted,
            diff: "--- a/b.rs\n".into(),
            binary: false,
            truncated: true,
        },
    );
    request_pair(
        TaskCommitParams { task_id: "t1".into(), message: "Fix".into(), paths: Some(vec!["b.rs".into()]), force: true },
        TaskCommitResult { commit: "1a2b".into(), branch: None, files: 1 },
    );
    request_pair(
        TaskMergeParams { task_id: "t1".into(), remove_worktree: true, force: false },
        TaskMergeResult {
            into: "main".into(),
            commit: "1a2b".into(),
            fast_forward: false,
            commits: 3,
            worktree_removed: Some("/w".into()),
        },
    );
    request_pair(
        TaskPullRequestParams { task_id: "t1".into(), title: Some("T".into()), body: None, force: false },
        TaskPullRequestResult {
            url: "https://github.com/o/r/pull/1".into(),
            branch: "baton/t1".into(),
            base: "main".into(),
        },
    );
    request_pair(
        TaskShellParams { task_id: "t1".into() },
        TaskShellResult {
            runtime: "ssh".into(),
            argv: vec!["ssh".into(), "-t".into(), "box".into(), "cd /w && exec sh".into()],
            workdir: "/w".into(),
            command: "ssh -t box 'cd /w && exec sh'".into(),
        },
    );
    assert_eq!(ClientRequest::ACTIONS.len(), 46, "a new action needs a round trip above");
}

#[test]
fn every_event_kind_round_trips() {
    let events = vec![
        SessionEvent::UserMessage { text: "hi".into(), turn_id: None },
        SessionEvent::MessageChunk { message_id: Some("m1".into()), text: "Hel".into() },
        SessionEvent::ThoughtChunk { message_id: None, text: "hmm".into() },
        SessionEvent::ToolCall {
            tool_call_id: "tool-1".into(),
            title: "Read".into(),
            tool_kind: Some("read".into()),
            status: Some("pending".into()),
            content: Some(json!([])),
            raw_input: Some(json!({"path": "a"})),
        },
        SessionEvent::ToolCallUpdate {
            tool_call_id: "tool-1".into(),
            title: None,
            status: Some("completed".into()),
            content: Some(json!([{"type": "content"}])),
            raw_output: None,
        },
        SessionEvent::Plan {
            entries: vec![PlanEntry { content: "a".into(), priority: "high".into(), status: "pending".into() }],
        },
        SessionEvent::status("Session resumed"),
        SessionEvent::Error { message: "boom".into() },
        SessionEvent::TurnStarted { turn_id: None },
        SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None },
        SessionEvent::PermissionRequest {
            request_id: "p1".into(),
            tool_call: json!({"toolCallId": "x"}),
            options: vec![PermissionOption {
                option_id: "allow".into(),
                name: "Allow".into(),
                kind: "allow_once".into(),
            }],
        },
        SessionEvent::PermissionResolved { request_id: "p1".into(), option_id: Some("allow".into()) },
        SessionEvent::AvailableCommands { commands: vec![json!({"name": "tool"})] },
        SessionEvent::Mode { mode_id: "default".into() },
        SessionEvent::Options {
            change: OptionsChange { current_mode: Some("plan".into()), ..OptionsChange::default() },
        },
        SessionEvent::Queue { queue: MessageQueue::default() },
        SessionEvent::TerminalOutput {
            terminal_id: "term-1".into(),
            command: Some("cargo test".into()),
            output: "ok\n".into(),
            offset: 120,
            exit: Some(TerminalExit { exit_code: None, signal: Some("SIGKILL".into()) }),
        },
        SessionEvent::AgentUpdate { update_kind: "future_thing".into(), raw: json!({"x": 1}) },
    ];
    for event in events {
        let json = round_trip(&event);
        assert_eq!(json["kind"], event.kind(), "tag of {event:?}");
    }
}

#[test]
fn every_notification_round_trips_through_an_envelope() {
    let notifications = vec![
        Notification::Hello(Hello {
            protocol_version: 1,
            server_version: "0.1.0".into(),
            capabilities: vec!["resume".into()],
        }),
        Notification::StateChanged(StateChanged {
            session_id: "s1".into(),
            task_id: "t1".into(),
            state: SessionState::Starting,
            previous_state: Some(SessionState::WaitingForInput),
            task_state: TaskState::InProgress,
            task_title: "Task".into(),
            last_seq: 0,
            updated_at: "2025-06-02T14:03:12.004Z".into(),
            needs_resume: false,
            attention: None,
            attention_since: None,
            change_seq: 0,
        }),
        Notification::StateChanged(StateChanged {
            session_id: "s1".into(),
            task_id: "t1".into(),
            state: SessionState::Running,
            previous_state: Some(SessionState::Running),
            task_state: TaskState::InProgress,
            task_title: "Task".into(),
            last_seq: 7,
            updated_at: "2025-06-02T14:03:12.004Z".into(),
            needs_resume: false,
            attention: Some(Attention::Permission),
            attention_since: Some("2025-06-02T14:03:13.000Z".into()),
            change_seq: 0,
        }),
        Notification::AttentionChanged(AttentionChanged { count: 3 }),
        Notification::PermissionQueueChanged(PermissionQueueChanged {
            session_id: "s1".into(),
            request_id: "perm-1".into(),
            change: PermissionChange::Answered,
            option_id: Some("allow".into()),
            rule_id: Some("rule-1".into()),
        }),
        Notification::Event(EventRecord {
            session_id: "s1".into(),
            seq: 5,
            event: SessionEvent::TurnStarted { turn_id: None },
            created_at: now_timestamp(),
        }),
        Notification::Shutdown(Shutdown { reason: "the server is shutting down".into() }),
        Notification::TaskUpdated(task()),
        Notification::TaskDeleted(TaskDeleted { task_id: "t1".into(), session_ids: vec!["s1".into()] }),
    ];
    for notification in notifications {
        // The one-pass `to_json` writes the same envelope as going through `to_envelope`.
        let texts = [notification.to_envelope().to_json(), notification.to_json()];
        let mut decoded = Vec::new();
        for text in texts {
            let mut envelope: Envelope = serde_json::from_str(&text).unwrap();
            assert_eq!(envelope.kind, MessageType::Notification);
            assert_eq!(envelope.action, notification.action());
            assert!(envelope.timestamp.take().is_some());
            assert_eq!(Notification::from_envelope(&envelope).unwrap(), notification);
            assert_eq!(Notification::from_json(notification.action(), &text).unwrap(), notification);
            decoded.push(envelope);
        }
        assert_eq!(decoded[0], decoded[1]);
    }
}

#[test]
fn envelope_matches_the_documented_shape() {
    let text = r#"{"id":"c1-17","type":"request","action":"task.session.status","payload":{"session_id":"s1"},"timestamp":"2026-11-29T18:00:00Z"}"#;
    let envelope: Envelope = serde_json::from_str(text).unwrap();
    assert_eq!(envelope.kind, MessageType::Request);
    assert_eq!(envelope.id.as_deref(), Some("c1-17"));
    let request = ClientRequest::parse(&envelope.action, envelope.payload.clone()).unwrap();
    assert_eq!(request, ClientRequest::SessionStatus(SessionStatusParams { session_id: "s1".into() }));
    assert_eq!(serde_json::to_value(&envelope).unwrap(), serde_json::from_str::<Value>(text).unwrap());
}

#[test]
fn states_are_screaming_snake_and_one_spelling() {
    assert_eq!(json!(SessionState::WaitingForInput), json!("WAITING_FOR_INPUT"));
    assert_eq!(json!(TaskState::InProgress), json!("IN_PROGRESS"));
    for state in SessionState::ALL {
        assert_eq!(SessionState::parse(state.as_str()), Some(*state));
        assert_eq!(json!(state), json!(state.as_str()));
    }
    for state in TaskState::ALL {
        assert_eq!(TaskState::parse(state.as_str()), Some(*state));
    }
    assert_eq!(json!(ResumeReason::AgentNotRunningFreshStart), json!("agent_not_running_fresh_start"));
    assert_eq!(json!(ErrorCode::UnknownAction), json!("UNKNOWN_ACTION"));
}

#[test]
fn session_rows_carry_the_status_fields_flat() {
    let json = round_trip(&session_info());
    for field in ["session_id", "needs_resume", "is_resumable", "resume_reason", "has_resume_token", "task_state"] {
        assert!(json.get(field).is_some(), "{field} missing from {json}");
    }
}

#[test]
fn bad_requests_are_told_apart() {
    assert!(matches!(ClientRequest::parse("nope.nope", json!({})), Err(RequestParseError::UnknownAction(_))));
    assert!(matches!(
        ClientRequest::parse("task.session.status", json!({"session": 1})),
        Err(RequestParseError::InvalidPayload { .. })
    ));
    // Parameterless actions accept a missing payload.
    assert_eq!(
        ClientRequest::parse("task.list", Value::Null).unwrap(),
        ClientRequest::TaskList(TaskListParams::default())
    );
    let create = ClientRequest::parse("task.create", json!({"title": "t", "agent": "mock"})).unwrap();
    let ClientRequest::TaskCreate(create) = create else { panic!("wrong variant") };
    assert!(create.start, "start defaults to true");
}

#[test]
fn out_of_range_numbers_are_validation_errors_and_wrong_types_bad_requests() {
    let code = |payload: Value| match ClientRequest::parse("task.session.list", payload) {
        Err(e) => e.to_error().code,
        Ok(request) => request.validate().err().map_or(ErrorCode::Other("accepted".into()), |e| e.code),
    };
    // The same range check whether the value fits the field's type or not.
    for limit in [json!(0), json!(-1), json!(1001), json!(5_000_000_000u64), json!(-5_000_000_000i64)] {
        assert_eq!(code(json!({"limit": limit})), ErrorCode::ValidationError, "limit {limit}");
    }
    for wrong in [json!("ten"), json!(1.5), json!([1]), json!(true)] {
        assert_eq!(code(json!({"limit": wrong})), ErrorCode::BadRequest, "limit {wrong}");
    }
    let unknown = ClientRequest::parse("nope.nope", json!({})).unwrap_err().to_error();
    assert_eq!(unknown.code, ErrorCode::UnknownAction);
    assert_eq!(unknown.details.expect("details")["actions"], json!(ClientRequest::ACTIONS));
}

#[test]
fn error_payloads_keep_unknown_codes_and_say_whether_to_retry() {
    // A code this version does not know: kept as sent, with its message.
    let text = r#"{"code":"RATE_LIMITED","message":"slow down","retryable":true,"retry_after_ms":1500}"#;
    let error: ErrorPayload = serde_json::from_str(text).expect("an unknown code decodes");
    assert_eq!(error.code, ErrorCode::Other("RATE_LIMITED".into()));
    assert_eq!((error.message.as_str(), error.retryable, error.retry_after_ms), ("slow down", true, Some(1500)));
    assert_eq!(serde_json::to_value(&error).unwrap(), serde_json::from_str::<Value>(text).unwrap());
    assert_eq!(error.to_string(), "RATE_LIMITED: slow down");
    // From a server older than `retryable`: not retryable.
    let old: ErrorPayload = serde_json::from_str(r#"{"code":"CONFLICT","message":"m"}"#).unwrap();
    assert!(!old.retryable && old.retry_after_ms.is_none());
    // Written, `retryable` is always there; UNAVAILABLE is retryable unless said otherwise.
    assert_eq!(serde_json::to_value(ErrorPayload::conflict("c")).unwrap()["retryable"], json!(false));
    assert!(ErrorPayload::busy("b").retryable && ErrorPayload::unavailable("u").retryable);
    assert!(!ErrorPayload::unavailable_until_changed("u").retryable);
    let later = ErrorPayload::unavailable("u").retry_after_ms(250);
    assert_eq!(serde_json::to_value(&later).unwrap()["retry_after_ms"], json!(250));
    for code in ErrorCode::KNOWN {
        assert_eq!(&ErrorCode::parse(code.as_str()), code);
    }
}

#[test]
fn only_turns_that_did_not_simply_finish_get_a_note() {
    let note = |reason: &str| StopReason::parse(reason).turn_end_note();
    assert_eq!(note("end_turn"), None);
    assert_eq!(note("interrupted"), None, "explained by its own status line");
    assert_eq!(note("error"), None, "explained by its error line");
    assert_eq!(note("cancelled").as_deref(), Some("Turn cancelled."));
    assert!(note("max_tokens").unwrap().contains("token limit"));
    assert_eq!(note("new_reason").as_deref(), Some("Turn ended: new_reason."));
}

/// A plan entry's status and priority are the strings ACP sends, `""` when the agent gave none,
/// and a value this version does not know is kept as sent.
#[test]
fn plan_entry_values_are_the_same_strings_on_the_wire() {
    let statuses = ["", "pending", "in_progress", "completed"];
    assert_eq!(PlanEntryStatus::KNOWN.iter().map(PlanEntryStatus::as_str).collect::<Vec<_>>(), statuses);
    let priorities = ["", "high", "medium", "low"];
    assert_eq!(PlanEntryPriority::KNOWN.iter().map(PlanEntryPriority::as_str).collect::<Vec<_>>(), priorities);
    for (status, priority) in statuses.into_iter().zip(priorities).chain([("blocked", "urgent")]) {
        let entry = PlanEntry { content: "a".into(), priority: priority.into(), status: status.into() };
        let json = round_trip(&entry);
        assert_eq!(json, json!({"content": "a", "priority": priority, "status": status}));
        assert_eq!(entry.status.as_str(), status);
    }
    let absent: PlanEntry = serde_json::from_value(json!({"content": "a"})).unwrap();
    assert_eq!((absent.status, absent.priority), (PlanEntryStatus::Unspecified, PlanEntryPriority::Unspecified));
    let known: PlanEntry = serde_json::from_value(json!({"content": "a", "status": "completed"})).unwrap();
    assert_eq!(known.status, PlanEntryStatus::Completed);
    assert_eq!(PlanEntryStatus::parse("blocked"), PlanEntryStatus::Other("blocked".into()));
}

/// The JSON of every stop reason and tool call status is the bare string it always was, a
/// value this version does not know is kept as sent, and the enums' spellings are serde's.
#[test]
fn stop_reasons_and_tool_statuses_are_the_same_strings_on_the_wire() {
    let reasons = ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "interrupted", "error"];
    assert_eq!(StopReason::KNOWN.iter().map(StopReason::as_str).collect::<Vec<_>>(), reasons);
    for text in reasons.into_iter().chain(["a_reason_from_a_newer_agent"]) {
        let event = SessionEvent::TurnCompleted { stop_reason: StopReason::parse(text), turn_id: Some("t1".into()) };
        let json = round_trip(&event);
        assert_eq!(json, json!({"kind": "turn_completed", "stop_reason": text, "turn_id": "t1"}));
        let decoded: SessionEvent =
            serde_json::from_value(json!({"kind": "turn_completed", "stop_reason": text})).unwrap();
        let SessionEvent::TurnCompleted { stop_reason, .. } = decoded else { panic!("not a turn end") };
        assert_eq!(stop_reason.as_str(), text);
        assert_eq!(stop_reason, StopReason::parse(text), "decoded as the known variant when there is one");
    }
    let newer: StopReason = serde_json::from_value(json!("a_reason_from_a_newer_agent")).unwrap();
    assert_eq!(newer, StopReason::Other("a_reason_from_a_newer_agent".into()));
    assert_eq!(serde_json::from_value::<StopReason>(json!("max_tokens")).unwrap(), StopReason::MaxTokens);

    let statuses = ["pending", "in_progress", "completed", "failed"];
    assert_eq!(ToolCallStatus::KNOWN.iter().map(ToolCallStatus::as_str).collect::<Vec<_>>(), statuses);
    for text in statuses.into_iter().chain(["awaiting_review"]) {
        let call = SessionEvent::ToolCall {
            tool_call_id: "t1@e".into(),
            title: "Read".into(),
            tool_kind: Some("read".into()),
            status: Some(ToolCallStatus::parse(text)),
            content: Some(json!([])),
            raw_input: None,
        };
        let json = round_trip(&call);
        assert_eq!(
            json,
            json!({"kind": "tool_call", "tool_call_id": "t1@e", "title": "Read", "tool_kind": "read", "status": text, "content": []})
        );
        let update = SessionEvent::ToolCallUpdate {
            tool_call_id: "t1@e".into(),
            title: None,
            status: Some(ToolCallStatus::parse(text)),
            content: None,
            raw_output: None,
        };
        assert_eq!(round_trip(&update), json!({"kind": "tool_call_update", "tool_call_id": "t1@e", "status": text}));
    }
    assert_eq!(
        serde_json::from_value::<ToolCallStatus>(json!("awaiting_review")).unwrap(),
        ToolCallStatus::Other("awaiting_review".into())
    );
    assert!(ToolCallStatus::Completed.is_finished() && ToolCallStatus::Failed.is_finished());
    assert!(!ToolCallStatus::InProgress.is_finished() && !ToolCallStatus::Other("done".into()).is_finished());
    // Not a string: refused, as before.
    assert!(serde_json::from_value::<StopReason>(json!(3)).is_err());
    assert!(serde_json::from_value::<ToolCallStatus>(json!(null)).is_err());
}

#[test]
fn unknown_event_kinds_and_notifications_decode_and_write_back_unchanged() {
    // An event kind a newer server added: kept whole, with its seq.
    let text = r#"{"type":"notification","action":"session.event","payload":{"session_id":"s1","seq":8,"event":{"kind":"usage","tokens":1200,"model":"m"},"created_at":"2025-06-02T14:03:12.004Z"},"timestamp":"2025-06-02T14:03:12.004Z"}"#;
    let Notification::Event(record) = Notification::from_json("session.event", text).expect("decoded") else {
        panic!("not an event")
    };
    assert_eq!(record.seq, 8, "the cursor can move past it");
    let SessionEvent::Unknown(unknown) = &record.event else { panic!("not unknown: {:?}", record.event) };
    assert_eq!(unknown.kind, "usage");
    assert_eq!(record.event.kind(), "usage");
    assert_eq!(unknown.raw, json!({"kind": "usage", "tokens": 1200, "model": "m"}));
    assert_eq!(serde_json::to_value(&record.event).unwrap(), unknown.raw, "written back as received");
    round_trip(&record);

    // A known kind that does not decode is an error, not an unknown event.
    assert!(serde_json::from_value::<SessionEvent>(json!({"kind": "message_chunk"})).is_err());
    assert!(serde_json::from_value::<SessionEvent>(json!({"text": "no kind"})).is_err());

    // A notification a newer server added.
    let text = r#"{"type":"notification","action":"server.shutdown","payload":{"reason":"restart"},"timestamp":"2025-06-02T14:03:12.004Z"}"#;
    let unknown = Notification::from_json("server.future", text).expect("decoded");
    assert_eq!(
        unknown,
        Notification::Unknown { action: "server.future".into(), payload: json!({"reason": "restart"}) }
    );
    assert_eq!(unknown.action(), "server.future");
    let envelope: Envelope = serde_json::from_str(text).unwrap();
    let from_envelope = Notification::from_envelope(&envelope).expect("decoded");
    assert_eq!(from_envelope.to_envelope().payload, json!({"reason": "restart"}));
    // Without a payload it is still a notification.
    let bare = r#"{"type":"notification","action":"server.tick","timestamp":"2025-06-02T14:03:12.004Z"}"#;
    assert_eq!(
        Notification::from_json("server.tick", bare).expect("decoded"),
        Notification::Unknown { action: "server.tick".into(), payload: Value::Null }
    );
}
