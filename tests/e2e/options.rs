//! Modes and configuration options (`session.options`, `session.set_mode`,
//! `session.set_option`) with a real batond and real mock agents: what the agent offers is
//! kept, a switch reaches the running agent, and the user's choices are set again on the agent
//! after batond is killed with -9 and the session resumes (natively or by history injection).
//! The mock starts every session of a new process with its defaults, so only batond setting
//! them again can make `/options` tell the chosen ones.

use crate::common;

use baton_protocol::*;
use common::*;

/// An agent offering modes and the older `models` answer only, one offering nothing, and one
/// with defaults in its entry.
const AGENTS: &str = r#"
[agents.mock-legacy]
command = "{batond}"
args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent", "--options", "legacy"]
native_session_resume = true

[agents.mock-bare]
command = "{batond}"
args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent", "--options", "none"]
native_session_resume = true

[agents.mock-configured]
command = "{batond}"
args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent"]
native_session_resume = true
default_mode = "auto"

[agents.mock-configured.config]
effort = "high"
verbose = true
"#;

async fn options(client: &Client, session_id: &str) -> SessionOptionsResult {
    client.request(SessionOptionsParams { session_id: session_id.into() }).await.expect("session.options")
}

async fn set_mode(client: &Client, session_id: &str, mode: &str) -> Result<SessionOptionsResult, ClientError> {
    client.request(SessionSetModeParams { session_id: session_id.into(), mode_id: mode.into() }).await
}

async fn set_option(
    client: &Client,
    session_id: &str,
    option: &str,
    value: OptionValue,
) -> Result<SessionOptionsResult, ClientError> {
    client.request(SessionSetOptionParams { session_id: session_id.into(), option_id: option.into(), value }).await
}

fn id(value: &str) -> OptionValue {
    OptionValue::Id(value.into())
}

fn statuses(journal: &[EventRecord]) -> Vec<String> {
    journal
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::Status { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Chooses plan mode, model Mock 2 and verbose on, then kills batond with -9, starts it again and
/// asks the resumed agent what it runs with.
async fn choices_survive_a_kill_9(agent: &str) {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, agent, "hello").await;

    let offered = options(&client, &session_id).await;
    assert!(offered.applied, "the agent runs");
    let modes: Vec<&str> = offered.options.modes.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(modes, ["default", "plan", "auto"]);
    assert_eq!(offered.options.current_mode.as_deref(), Some("default"));
    let ids: Vec<&str> = offered.options.config_options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["model", "effort", "verbose"], "configOptions win over the older models answer");
    assert_eq!(offered.options.option("model").map(|o| &o.current), Some(&id("mock-1")));
    assert_eq!(offered.chosen, ChosenOptions::default());

    let switched = set_mode(&client, &session_id, "plan").await.expect("session.set_mode");
    assert!(switched.applied);
    assert_eq!(switched.options.current_mode.as_deref(), Some("plan"));
    assert_eq!(switched.chosen.mode.as_deref(), Some("plan"));
    let model = set_option(&client, &session_id, "model", id("mock-2")).await.expect("set model");
    assert_eq!(model.options.option("model").map(|o| &o.current), Some(&id("mock-2")));
    set_option(&client, &session_id, "verbose", OptionValue::Bool(true)).await.expect("set verbose");
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "/options").await,
        "mode=plan model=mock-2 effort=medium verbose=true"
    );
    // The switches are in the journal, for every client.
    let journal = read_journal(&client, &mut notes, &session_id).await;
    assert!(journal.iter().any(|e| matches!(&e.event, SessionEvent::Mode { mode_id } if mode_id == "plan")));
    assert!(journal.iter().any(|e| matches!(&e.event, SessionEvent::Options { change }
        if change.config_options.as_ref().is_some_and(|o| o.iter().any(|o| o.id == "verbose" && o.current == OptionValue::Bool(true))))));

    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let kept = options(&client, &session_id).await;
    assert!(!kept.applied, "no agent runs before the resume");
    assert_eq!(kept.chosen.mode.as_deref(), Some("plan"));
    assert_eq!(kept.chosen.config.get("model"), Some(&id("mock-2")));

    subscribe(&client, &session_id, None).await;
    // A message resumes the session lazily: the choices are set before it reaches the agent.
    let told = prompt(&client, &mut notes, &session_id, "/options").await;
    assert!(told.ends_with("mode=plan model=mock-2 effort=medium verbose=true"), "{told}");
    let journal = read_journal(&client, &mut notes, &session_id).await;
    let said = statuses(&journal);
    assert!(
        said.iter().any(|s| s.contains("Set on the agent as chosen: mode “Plan”")
            && s.contains("Model “Mock 2”")
            && s.contains("Verbose “on”")),
        "{said:?}"
    );
    let now = options(&client, &session_id).await;
    assert!(now.applied);
    assert_eq!(now.options.current_mode.as_deref(), Some("plan"));
}

#[tokio::test]
async fn choices_hold_after_a_kill_9_and_a_native_resume() {
    choices_survive_a_kill_9("mock").await;
}

#[tokio::test]
async fn choices_hold_after_a_kill_9_and_a_resume_by_injection() {
    choices_survive_a_kill_9("mock-fresh").await;
}

#[tokio::test]
async fn unknown_ids_and_agents_without_options_get_clear_errors() {
    let env = TestEnv::new();
    env.agents_config(AGENTS);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;

    let error = server_error(set_mode(&client, &session_id, "yolo").await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("no mode \"yolo\"") && error.message.contains("default, plan, auto"), "{error:?}");
    let error = server_error(set_option(&client, &session_id, "model", id("gpt-9")).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("mock-1, mock-2"), "{error:?}");
    let error = server_error(set_option(&client, &session_id, "verbose", id("yes")).await);
    assert!(error.message.contains("true or false"), "{error:?}");
    let error = server_error(set_option(&client, &session_id, "temperature", id("1")).await);
    assert!(error.message.contains("no option \"temperature\""), "{error:?}");
    let error = server_error(set_mode(&client, "sess-missing", "plan").await);
    assert_eq!(error.code, ErrorCode::NotFound);
    let error = server_error(set_mode(&client, &session_id, "bad\u{7}id").await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    // Nothing was chosen by the refused requests.
    assert_eq!(options(&client, &session_id).await.chosen, ChosenOptions::default());

    let bare = started_session(&env, &client, &mut notes, "mock-bare", "hello").await;
    let error = server_error(set_mode(&client, &bare, "plan").await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("offers no modes"), "{error:?}");
    let error = server_error(set_option(&client, &bare, "model", id("mock-2")).await);
    assert!(error.message.contains("offers no options"), "{error:?}");
}

#[tokio::test]
async fn an_older_models_answer_is_switched_with_set_model() {
    let env = TestEnv::new();
    env.agents_config(AGENTS);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock-legacy", "hello").await;
    let offered = options(&client, &session_id).await;
    let model = offered.options.option("model").expect("the models answer as a model option");
    assert!(model.legacy_model);
    assert_eq!(model.choices.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["Mock 1", "Mock 2"]);
    let switched = set_option(&client, &session_id, "model", id("mock-2")).await.expect("session.set_option");
    assert_eq!(switched.options.option("model").map(|o| &o.current), Some(&id("mock-2")));
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "/options").await,
        "mode=default model=mock-2 effort=medium verbose=false"
    );
}

#[tokio::test]
async fn a_choice_made_while_the_agent_is_stopped_and_the_entry_defaults_are_set_at_start() {
    let env = TestEnv::new();
    env.agents_config(AGENTS);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock-configured", "hello").await;
    // The entry's defaults were set before the first prompt.
    let first = read_journal(&client, &mut notes, &session_id).await;
    let said = statuses(&first);
    assert!(
        said.iter().any(|s| s.contains("mode “Auto-accept edits”") && s.contains("Reasoning effort “high”")),
        "{said:?}"
    );
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "/options").await,
        "mode=auto model=mock-1 effort=high verbose=true"
    );

    // batond stops (and its agents with it); a choice made meanwhile is kept for the next start.
    server.stop().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let kept = set_option(&client, &session_id, "effort", id("low")).await.expect("a choice while stopped");
    assert!(!kept.applied, "set when the agent next starts");
    assert_eq!(kept.chosen.config.get("effort"), Some(&id("low")));
    subscribe(&client, &session_id, None).await;
    // The user's choice wins over the entry's default; the entry's other defaults hold.
    let told = prompt(&client, &mut notes, &session_id, "/options").await;
    assert!(told.ends_with("mode=auto model=mock-1 effort=low verbose=true"), "{told}");
}
