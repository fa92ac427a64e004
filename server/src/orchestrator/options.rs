//! The agent's modes and configuration options: what it offers, what the user chose
//! (`session.options`, `session.set_mode`, `session.set_option`), and the choices set again
//! whenever the session's agent starts, so they outlive the agent process.

use std::sync::Arc;

use baton_protocol::{
    ChosenOptions, ErrorPayload, OptionValue, OptionsChange, SessionEvent, SessionOptions, SessionOptionsResult,
};
use serde_json::Value;

use super::{store_logged, ApiResult, Execution, Orchestrator};
use crate::agent::acp::CallError;
use crate::agent::options::{config_options, offered_in_answer, set_mode_request, set_option_request};
use crate::store::Choice;

/// What was asked of the agent, for messages.
enum Target<'a> {
    Mode(&'a str),
    Option { id: &'a str, value: &'a OptionValue },
}

impl Orchestrator {
    /// `session.options`.
    pub async fn session_options(&self, session_id: &str) -> ApiResult<SessionOptionsResult> {
        let (options, chosen) = self.store.session_options(session_id).await?;
        let applied = self.live_acp_session(session_id).is_some();
        Ok(SessionOptionsResult { session_id: session_id.to_string(), options, chosen, applied })
    }

    /// `session.set_mode`.
    pub async fn set_mode(self: &Arc<Self>, session_id: &str, mode_id: &str) -> ApiResult<SessionOptionsResult> {
        let (offered, _) = self.store.session_options(session_id).await?;
        if let Some(option) = offered.mode_option() {
            // The agent's modes are the values of its `mode` option: switched as that option.
            let option_id = option.id.clone();
            return self.set_option(session_id, &option_id, &OptionValue::Id(mode_id.to_string())).await;
        }
        if offered.modes.is_empty() {
            return Err(ErrorPayload::validation(
                "the agent of this session offers no modes (or has not started yet: its modes are known once it has)",
            ));
        }
        if offered.mode(mode_id).is_none() {
            return Err(ErrorPayload::validation(format!(
                "the agent offers no mode {mode_id:?}; its modes are: {}",
                offered.modes.iter().map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        self.choose(session_id, Choice::Mode(mode_id.to_string()), Target::Mode(mode_id)).await
    }

    /// `session.set_option`.
    pub async fn set_option(
        self: &Arc<Self>,
        session_id: &str,
        option_id: &str,
        value: &OptionValue,
    ) -> ApiResult<SessionOptionsResult> {
        let (offered, _) = self.store.session_options(session_id).await?;
        let Some(option) = offered.option(option_id) else {
            let known = offered.config_options.iter().map(|o| o.id.as_str()).collect::<Vec<_>>();
            return Err(ErrorPayload::validation(if known.is_empty() {
                "the agent of this session offers no options (or has not started yet: its options are known once it has)"
                    .to_string()
            } else {
                format!("the agent offers no option {option_id:?}; its options are: {}", known.join(", "))
            }));
        };
        if !option.accepts(value) {
            let expected = if option.choices.is_empty() {
                "true or false".to_string()
            } else {
                option.choices.iter().map(|c| c.value.as_str()).collect::<Vec<_>>().join(", ")
            };
            return Err(ErrorPayload::validation(format!(
                "{value:?} is not a value of the option {option_id:?}; it takes: {expected}"
            )));
        }
        let choice = Choice::Option(option_id.to_string(), value.clone());
        self.choose(session_id, choice, Target::Option { id: option_id, value }).await
    }

    /// Records the choice first (so that an agent starting meanwhile picks it up), then sets it
    /// on the running agent, if there is one. Refused by the agent: the choice is taken back.
    async fn choose(&self, session_id: &str, choice: Choice, target: Target<'_>) -> ApiResult<SessionOptionsResult> {
        let (_, before) = self.store.session_options(session_id).await?;
        let chosen = self.store.choose_option(session_id, choice).await?;
        let applied = match self.live_acp_session(session_id) {
            Some((execution, acp_session)) => match self.set_on_agent(&execution, &acp_session, &target).await {
                Ok(()) => true,
                Err(error) => {
                    store_logged(
                        session_id,
                        "the previous choice",
                        self.store.restore_chosen(session_id, before).await,
                    );
                    return Err(error);
                }
            },
            None => false,
        };
        let (options, _) = self.store.session_options(session_id).await?;
        Ok(SessionOptionsResult { session_id: session_id.to_string(), options, chosen, applied })
    }

    /// The running execution of a session whose agent session is open.
    fn live_acp_session(&self, session_id: &str) -> Option<(Arc<Execution>, String)> {
        let execution = self.execution(session_id)?;
        let acp_session = execution.acp_session_id()?;
        execution.acp().filter(|acp| !acp.is_closed())?;
        Some((execution, acp_session))
    }

    /// Sends one switch to the agent and journals what it now offers.
    async fn set_on_agent(&self, execution: &Execution, acp_session: &str, target: &Target<'_>) -> ApiResult<()> {
        let session_id = execution.session_id();
        let acp = execution.acp().ok_or_else(|| ErrorPayload::unavailable("the agent is not connected"))?;
        let (offered, _) = self.store.session_options(session_id).await?;
        let (method, params, option) = match target {
            Target::Mode(mode) => {
                let (method, params) = set_mode_request(acp_session, mode);
                (method, params, None)
            }
            Target::Option { id, value } => {
                let option = offered
                    .option(id)
                    .ok_or_else(|| ErrorPayload::validation(format!("the agent offers no option {id:?} any more")))?;
                let (method, params) = set_option_request(acp_session, option, value);
                (method, params, Some((option.clone(), *value)))
            }
        };
        let answer =
            acp.request(method, params, Some(self.timeouts.handshake)).await.map_err(|e| refused(method, &e))?;
        let change = match (target, option) {
            (Target::Mode(mode), _) => Some(SessionEvent::Mode { mode_id: mode.to_string() }),
            (Target::Option { .. }, Some((option, value))) => {
                Some(SessionEvent::Options { change: options_after(&offered, &answer, &option.id, value) })
            }
            _ => None,
        };
        if let Some(event) = change {
            self.store.append(session_id, event).await?;
        }
        Ok(())
    }

    /// After the agent's session opened (new, restored or forked): journals what the agent
    /// offers, then sets the user's choices (or the agent entry's defaults) that differ from
    /// what it runs with, and says so in the journal. Nothing here stops the start: an option
    /// the agent refuses is reported and the session goes on.
    pub(in crate::orchestrator) async fn open_with_options(
        &self,
        execution: &Execution,
        acp_session: &str,
        answer: &Value,
    ) {
        let session_id = execution.session_id();
        let change = offered_in_answer(answer);
        if !change.is_empty() {
            store_logged(
                session_id,
                "the agent's options",
                self.store.append(session_id, SessionEvent::Options { change }).await,
            );
        }
        let Ok((offered, chosen)) = self.store.session_options(session_id).await else {
            return;
        };
        let mut wanted = wanted(&chosen, execution);
        if let (Some(option), Some(mode)) = (offered.mode_option(), wanted.mode.clone()) {
            // A mode (the entry's default_mode) of an agent whose modes are an option's values.
            wanted.config.entry(option.id.clone()).or_insert(OptionValue::Id(mode));
            wanted.mode = None;
        }
        let mut set = Vec::new();
        let mut failed = Vec::new();
        if let Some(mode) = &wanted.mode {
            match offered.mode(mode) {
                _ if offered.current_mode.as_deref() == Some(mode.as_str()) => {}
                Some(info) => match self.set_on_agent(execution, acp_session, &Target::Mode(mode)).await {
                    Ok(()) => set.push(format!("mode “{}”", info.name)),
                    Err(e) => failed.push(format!("mode “{}”: {}", info.name, e.message)),
                },
                None => failed.push(format!("mode “{mode}”: the agent does not offer it")),
            }
        }
        for (id, value) in &wanted.config {
            let Some(option) = offered.option(id) else {
                failed.push(format!("{id} “{value}”: the agent does not offer this option"));
                continue;
            };
            if &option.current == value {
                continue;
            }
            if !option.accepts(value) {
                failed.push(format!("{} “{value}”: not one of its values", option.name));
                continue;
            }
            let shown = format!("{} “{}”", option.name, option.value_name(value));
            match self.set_on_agent(execution, acp_session, &Target::Option { id, value }).await {
                Ok(()) => set.push(shown),
                Err(e) => failed.push(format!("{shown}: {}", e.message)),
            }
        }
        let mut lines = Vec::new();
        if !set.is_empty() {
            lines.push(format!("Set on the agent as chosen: {}.", set.join(", ")));
        }
        if !failed.is_empty() {
            lines.push(format!("Could not set on the agent: {}.", failed.join("; ")));
        }
        if !lines.is_empty() {
            store_logged(
                session_id,
                "the event",
                self.store.append(session_id, SessionEvent::status(lines.join(" "))).await,
            );
        }
    }
}

/// The user's choices, completed by the agent entry's defaults (`default_mode`, `config`).
fn wanted(chosen: &ChosenOptions, execution: &Execution) -> ChosenOptions {
    let agent = execution.agent();
    let mut wanted = chosen.clone();
    if wanted.mode.is_none() {
        wanted.mode = agent.default_mode.clone();
    }
    for (id, value) in &agent.config {
        wanted.config.entry(id.clone()).or_insert_with(|| value.clone());
    }
    wanted
}

/// The options after a `session/set_config_option` answer: its full list when it gives one,
/// else the offer with the one value changed (the older `session/set_model` answers `{}`).
fn options_after(offered: &SessionOptions, answer: &Value, id: &str, value: &OptionValue) -> OptionsChange {
    let options = match answer.get("configOptions").and_then(Value::as_array) {
        Some(items) => config_options(items),
        None => {
            let mut options = offered.config_options.clone();
            if let Some(option) = options.iter_mut().find(|o| o.id == id) {
                option.current = value.clone();
            }
            options
        }
    };
    OptionsChange { config_options: Some(options), ..Default::default() }
}

/// The agent's refusal as the client's error: an agent that does not implement the method
/// says so, a timeout or a lost agent is UNAVAILABLE, anything else is passed on.
fn refused(method: &str, error: &CallError) -> ErrorPayload {
    match error {
        CallError::Rpc(rpc) if rpc.code == -32601 => ErrorPayload::unavailable_until_changed(format!(
            "the agent does not support switching this ({method} is not implemented)"
        )),
        CallError::Rpc(rpc) => ErrorPayload::validation(format!("the agent refused {method}: {}", rpc.message)),
        other => ErrorPayload::unavailable(format!("the agent did not answer {method}: {other}")),
    }
}
