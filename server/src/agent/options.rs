//! An agent's modes and configuration options as Baton keeps them: read leniently from the
//! answers that open a session (`session/new`, `session/load`, `session/resume`, `session/fork`),
//! from `config_option_update`, and from the older `models` answer some agents still send; and
//! the requests that switch them (see docs/ACP.md, 'Modes and configuration options').

use agent_client_protocol_schema::v1::{
    SessionConfigKind, SessionConfigOption, SessionConfigOptionValue, SessionConfigSelectOptions, SessionModeState,
};
use baton_protocol::{
    ConfigOption, ModeInfo, OptionChoice, OptionValue, OptionsChange, MAX_OFFERED, MAX_OPTION_VALUES,
};
use serde_json::Value;

use super::acp::outgoing::{self, Outgoing};

/// What an answer that opened a session says the agent offers. Parts the answer leaves out are
/// `None` (unchanged); `configOptions` wins over a legacy `models` answer.
pub fn offered_in_answer(answer: &Value) -> OptionsChange {
    let mut change = OptionsChange::default();
    if let Some(modes) = answer.get("modes").filter(|m| !m.is_null()) {
        if let Ok(state) = serde_json::from_value::<SessionModeState>(modes.clone()) {
            change.modes = Some(state.available_modes.iter().take(MAX_OFFERED).map(mode_info).collect());
            change.current_mode = Some(state.current_mode_id.0.to_string());
        }
    }
    if let Some(options) = answer.get("configOptions").and_then(Value::as_array) {
        change.config_options = Some(config_options(options));
    } else if let Some(models) = answer.get("models").filter(|m| m.is_object()) {
        change.config_options = legacy_models(models).map(|option| vec![option]);
    }
    change
}

/// The full list of a `session/set_config_option` answer (or of a session's answer).
pub fn config_options(items: &[Value]) -> Vec<ConfigOption> {
    items
        .iter()
        .filter_map(|item| serde_json::from_value::<SessionConfigOption>(item.clone()).ok())
        .take(MAX_OFFERED)
        .map(|option| config_option(&option))
        .collect()
}

/// The full list of a `config_option_update`, as the schema decoded it.
pub fn config_options_of(options: &[SessionConfigOption]) -> Vec<ConfigOption> {
    options.iter().take(MAX_OFFERED).map(config_option).collect()
}

fn mode_info(mode: &agent_client_protocol_schema::v1::SessionMode) -> ModeInfo {
    ModeInfo { id: mode.id.0.to_string(), name: mode.name.clone(), description: mode.description.clone() }
}

fn config_option(option: &SessionConfigOption) -> ConfigOption {
    let category =
        option.category.as_ref().and_then(|c| serde_json::to_value(c).ok()).and_then(|c| c.as_str().map(str::to_owned));
    let (current, choices) = match &option.kind {
        SessionConfigKind::Boolean(boolean) => (OptionValue::Bool(boolean.current_value), Vec::new()),
        SessionConfigKind::Select(select) => {
            let mut choices = Vec::new();
            let mut push = |value: &agent_client_protocol_schema::v1::SessionConfigSelectOption,
                            group: Option<&str>| {
                if choices.len() < MAX_OPTION_VALUES {
                    choices.push(OptionChoice {
                        value: value.value.0.to_string(),
                        name: value.name.clone(),
                        description: value.description.clone(),
                        group: group.map(str::to_owned),
                    });
                }
            };
            match &select.options {
                SessionConfigSelectOptions::Ungrouped(values) => values.iter().for_each(|v| push(v, None)),
                SessionConfigSelectOptions::Grouped(groups) => {
                    for group in groups {
                        group.options.iter().for_each(|v| push(v, Some(&group.name)));
                    }
                }
                // A later schema may add shapes; such an option offers nothing to pick.
                #[allow(unreachable_patterns)]
                _ => {}
            }
            (OptionValue::Id(select.current_value.0.to_string()), choices)
        }
        // A later schema may add kinds; shown with its value unknown, nothing to pick.
        #[allow(unreachable_patterns)]
        _ => (OptionValue::Id(String::new()), Vec::new()),
    };
    ConfigOption {
        id: option.id.0.to_string(),
        name: option.name.clone(),
        description: option.description.clone(),
        category,
        current,
        choices,
        legacy_model: false,
    }
}

/// The older `models: {currentModelId, availableModels: [{modelId, name, description?}]}` as
/// one `model` option (gemini-cli and some codex-acp versions still answer this way).
fn legacy_models(models: &Value) -> Option<ConfigOption> {
    let current = models.get("currentModelId")?.as_str()?.to_string();
    let choices: Vec<OptionChoice> = models
        .get("availableModels")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|m| {
                    let value = m.get("modelId")?.as_str()?.to_string();
                    let name = m.get("name").and_then(Value::as_str).unwrap_or(&value).to_string();
                    let description = m.get("description").and_then(Value::as_str).map(str::to_owned);
                    Some(OptionChoice { value, name, description, group: None })
                })
                .take(MAX_OPTION_VALUES)
                .collect()
        })
        .unwrap_or_default();
    Some(ConfigOption {
        id: "model".into(),
        name: "Model".into(),
        description: None,
        category: Some("model".into()),
        current: OptionValue::Id(current),
        choices,
        legacy_model: true,
    })
}

/// `session/set_mode`: its method and params.
pub fn set_mode_request(acp_session: &str, mode_id: &str) -> (&'static str, Value) {
    let Outgoing { method, params } = outgoing::set_mode(acp_session, mode_id);
    (method, params)
}

/// The request that sets `option` to `value`: `session/set_config_option`, or the older
/// `session/set_model` for a model offered the older way.
pub fn set_option_request(acp_session: &str, option: &ConfigOption, value: &OptionValue) -> (&'static str, Value) {
    let Outgoing { method, params } = if option.legacy_model {
        outgoing::set_model(acp_session, &value.to_string())
    } else {
        let value: SessionConfigOptionValue = match value {
            OptionValue::Bool(b) => (*b).into(),
            OptionValue::Id(id) => id.as_str().into(),
        };
        outgoing::set_config_option(acp_session, &option.id, value)
    };
    (method, params)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_answer_gives_modes_options_and_grouped_values() {
        let answer = json!({
            "sessionId": "s",
            "modes": {"currentModeId": "code", "availableModes": [
                {"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "edits"}, {"bad": 1}]},
            "configOptions": [
                {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "a",
                 "options": [{"group": "g1", "name": "Fast", "options": [{"value": "a", "name": "A"}]},
                             {"group": "g2", "name": "Smart", "options": [{"value": "b", "name": "B"}]}]},
                {"id": "think", "name": "Think", "type": "boolean", "currentValue": true},
                {"id": "weird", "type": "select"}
            ],
            "models": {"currentModelId": "ignored", "availableModels": []}
        });
        let change = offered_in_answer(&answer);
        let modes = change.modes.expect("modes");
        assert_eq!(modes.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["ask", "code"]);
        assert_eq!(change.current_mode.as_deref(), Some("code"));
        let options = change.config_options.expect("options");
        assert_eq!(options.len(), 2, "the option that does not decode is left out: {options:?}");
        assert_eq!(options[0].current, OptionValue::Id("a".into()));
        assert_eq!(options[0].category.as_deref(), Some("model"));
        assert_eq!(options[0].choices[1].group.as_deref(), Some("Smart"));
        assert!(!options[0].legacy_model);
        assert_eq!(options[1].current, OptionValue::Bool(true));
        assert!(options[1].accepts(&OptionValue::Bool(false)));
        assert!(!options[1].accepts(&OptionValue::Id("x".into())));
    }

    #[test]
    fn a_legacy_models_answer_is_a_model_option_set_with_set_model() {
        let answer = json!({"sessionId": "s", "models": {"currentModelId": "gemini-2.5-pro",
            "availableModels": [{"modelId": "gemini-2.5-pro", "name": "Pro"}, {"modelId": "gemini-2.5-flash"}]}});
        let change = offered_in_answer(&answer);
        assert!(change.modes.is_none());
        let options = change.config_options.expect("a model option");
        assert!(options[0].legacy_model);
        assert_eq!(options[0].choices[1].name, "gemini-2.5-flash");
        let (method, params) = set_option_request("s", &options[0], &OptionValue::Id("gemini-2.5-flash".into()));
        assert_eq!(method, "session/set_model");
        assert_eq!(params, json!({"sessionId": "s", "modelId": "gemini-2.5-flash"}));
    }

    #[test]
    fn requests_are_the_schema_shapes() {
        assert_eq!(set_mode_request("s", "plan"), ("session/set_mode", json!({"sessionId": "s", "modeId": "plan"})));
        let option = config_options(&[json!({"id": "think", "name": "T", "type": "boolean", "currentValue": false})]);
        let (method, params) = set_option_request("s", &option[0], &OptionValue::Bool(true));
        assert_eq!(method, "session/set_config_option");
        assert_eq!(params, json!({"sessionId": "s", "configId": "think", "type": "boolean", "value": true}));
        let empty = offered_in_answer(&json!({}));
        assert!(empty.is_empty());
    }
}
