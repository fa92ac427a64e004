//! The mock's modes and configuration options (`--options`): what it offers in the answers that
//! open a session, `session/set_mode`, `session/set_config_option`, the older
//! `session/set_model`, and `/options`, which tells what the session runs with. A new mock
//! process starts every session with the defaults, as an agent that does not keep them would:
//! whatever a client chose must be set again after a restart.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::wire::RpcError;
use super::{lock, str_param, Agent};

/// What the mock offers (`--options`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OfferedOptions {
    /// Modes and configuration options (a model, a reasoning effort, a boolean), plus the older
    /// `models` answer, which a client must ignore when `configOptions` is there.
    #[default]
    Full,
    /// Modes and only the older `models` answer, switched with `session/set_model`.
    Legacy,
    /// Neither modes nor options; the methods that switch them are not implemented.
    None,
}

const MODES: &[(&str, &str)] = &[("default", "Default"), ("plan", "Plan"), ("auto", "Auto-accept edits")];
const MODELS: &[(&str, &str)] = &[("mock-1", "Mock 1"), ("mock-2", "Mock 2")];
const EFFORTS: &[&str] = &["low", "medium", "high"];

/// What one session runs with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settings {
    pub mode: String,
    pub config: BTreeMap<String, Value>,
}

impl Default for Settings {
    fn default() -> Self {
        let config = BTreeMap::from([
            ("model".to_string(), json!("mock-1")),
            ("effort".to_string(), json!("medium")),
            ("verbose".to_string(), json!(false)),
        ]);
        Settings { mode: "default".into(), config }
    }
}

impl Settings {
    /// `/options`'s answer.
    pub fn describe(&self) -> String {
        let value = |id: &str| match self.config.get(id) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "?".into(),
        };
        format!("mode={} model={} effort={} verbose={}", self.mode, value("model"), value("effort"), value("verbose"))
    }

    fn config_options(&self) -> Value {
        let choices = |values: &[(&str, &str)]| -> Vec<Value> {
            values.iter().map(|(value, name)| json!({"value": value, "name": name})).collect()
        };
        let efforts: Vec<(&str, &str)> = EFFORTS.iter().map(|e| (*e, *e)).collect();
        json!([
            {"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": self.config["model"], "options": choices(MODELS)},
            {"id": "effort", "name": "Reasoning effort", "category": "thought_level", "type": "select",
             "currentValue": self.config["effort"], "options": choices(&efforts)},
            {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": self.config["verbose"]},
        ])
    }
}

impl Agent {
    /// The parts of a session's answer that say what it offers.
    pub(super) fn offered(&self, session_id: &str, answer: &mut Value) {
        let settings = self.settings(session_id);
        let modes: Vec<Value> = MODES.iter().map(|(id, name)| json!({"id": id, "name": name})).collect();
        let models = json!({
            "currentModelId": settings.config["model"],
            "availableModels": MODELS.iter().map(|(id, name)| json!({"modelId": id, "name": name})).collect::<Vec<_>>(),
        });
        match self.args.options {
            OfferedOptions::Full => {
                answer["modes"] = json!({"currentModeId": settings.mode, "availableModes": modes});
                answer["configOptions"] = settings.config_options();
                // Not part of ACP v1 any more, but real agents still send it beside the options.
                answer["models"] = models;
            }
            OfferedOptions::Legacy => {
                answer["modes"] = json!({"currentModeId": settings.mode, "availableModes": modes});
                answer["models"] = models;
            }
            OfferedOptions::None => {}
        }
    }

    pub(super) fn settings(&self, session_id: &str) -> Settings {
        lock(&self.sessions).get(session_id).map(|s| s.settings.clone()).unwrap_or_default()
    }

    /// `session/set_mode`, `session/set_config_option` and `session/set_model`; None when the
    /// method is not one of them.
    pub(super) async fn set_option(&self, method: &str, id: &Value, params: &Value) -> Option<()> {
        let offers = self.args.options;
        let result = match (method, offers) {
            (_, OfferedOptions::None) => return None,
            ("session/set_mode", _) => self.set_mode(params).await,
            ("session/set_config_option", OfferedOptions::Full) => self.set_config(params),
            ("session/set_model", OfferedOptions::Legacy) => self.set_model(params),
            _ => return None,
        };
        match result {
            Ok(answer) => self.out.respond(id, answer).await,
            Err(error) => self.out.fail(id, error).await,
        }
        Some(())
    }

    fn with_session<T>(
        &self,
        params: &Value,
        f: impl FnOnce(&mut Settings) -> Result<T, RpcError>,
    ) -> Result<T, RpcError> {
        let session_id =
            str_param(params, "sessionId").ok_or_else(|| RpcError::invalid_params("sessionId is required"))?;
        let mut sessions = lock(&self.sessions);
        let session = sessions.get_mut(session_id).ok_or_else(|| RpcError::session_not_found(session_id))?;
        f(&mut session.settings)
    }

    async fn set_mode(&self, params: &Value) -> Result<Value, RpcError> {
        let mode = str_param(params, "modeId").unwrap_or("").to_string();
        if !MODES.iter().any(|(id, _)| *id == mode) {
            return Err(RpcError::invalid_params("unknown modeId"));
        }
        self.with_session(params, |settings| {
            settings.mode = mode.clone();
            Ok(())
        })?;
        // Agents announce the switch, whoever asked for it.
        if let Some(session_id) = str_param(params, "sessionId") {
            self.out.update(session_id, json!({"sessionUpdate": "current_mode_update", "currentModeId": mode})).await;
        }
        Ok(json!({}))
    }

    fn set_config(&self, params: &Value) -> Result<Value, RpcError> {
        let config_id = str_param(params, "configId").unwrap_or("");
        let value = params.get("value").cloned().unwrap_or(Value::Null);
        let valid = match config_id {
            "model" => value.as_str().is_some_and(|v| MODELS.iter().any(|(id, _)| *id == v)),
            "effort" => value.as_str().is_some_and(|v| EFFORTS.contains(&v)),
            "verbose" => value.is_boolean(),
            _ => return Err(RpcError::invalid_params("unknown configId")),
        };
        if !valid {
            return Err(RpcError::invalid_params("invalid value"));
        }
        self.with_session(params, |settings| {
            settings.config.insert(config_id.to_string(), value);
            Ok(json!({"configOptions": settings.config_options()}))
        })
    }

    fn set_model(&self, params: &Value) -> Result<Value, RpcError> {
        let model = str_param(params, "modelId").unwrap_or("");
        if !MODELS.iter().any(|(id, _)| *id == model) {
            return Err(RpcError::invalid_params("unknown modelId"));
        }
        self.with_session(params, |settings| {
            settings.config.insert("model".into(), json!(model));
            Ok(json!({}))
        })
    }
}
