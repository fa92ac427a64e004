//! What an agent lets the user switch while a session runs: its modes and its configuration
//! options (model, reasoning effort...), the user's choices, and the actions that switch them
//! (`session.options`, `session.set_mode`, `session.set_option`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most modes or options of one kind kept for a session; an agent offering more is cut there.
pub const MAX_OFFERED: usize = 64;
/// Most values of one select option kept.
pub const MAX_OPTION_VALUES: usize = 256;

/// One mode an agent can work in (ACP `availableModes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModeInfo {
    /// The agent's id of the mode (what `session.set_mode` takes).
    pub id: String,
    /// Its name, for display.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A value of an option: a select option's value id, or a boolean option's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OptionValue {
    /// A boolean option's value.
    Bool(bool),
    /// A select option's value id.
    Id(String),
}

impl std::fmt::Display for OptionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionValue::Bool(value) => write!(f, "{}", if *value { "on" } else { "off" }),
            OptionValue::Id(id) => f.write_str(id),
        }
    }
}

/// One value a select option can take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OptionChoice {
    /// The value's id (what `session.set_option` takes).
    pub value: String,
    /// Its name, for display.
    pub name: String,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The name of the group the agent put it in, if it groups its values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One configuration option an agent offers (ACP `configOptions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigOption {
    /// The agent's id of the option (what `session.set_option` takes).
    pub id: String,
    /// Its name, for display.
    pub name: String,
    /// What it sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A hint of what it is about, as the agent sends it: `mode`, `model`, `model_config`,
    /// `thought_level` or another word. Only for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Its current value: a value id of `choices` for a select option, a boolean otherwise.
    pub current: OptionValue,
    /// The values a select option can take; empty for a boolean option.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<OptionChoice>,
    /// True when the agent offered it through the older `models` answer (no `configOptions`):
    /// Baton then switches it with the agent's `session/set_model`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy_model: bool,
}

impl ConfigOption {
    /// Whether `value` is one this option can take.
    pub fn accepts(&self, value: &OptionValue) -> bool {
        match (&self.current, value) {
            (OptionValue::Bool(_), OptionValue::Bool(_)) => true,
            (OptionValue::Id(_), OptionValue::Id(id)) => self.choices.iter().any(|c| &c.value == id),
            _ => false,
        }
    }

    /// The display name of a value of this option.
    pub fn value_name(&self, value: &OptionValue) -> String {
        match value {
            OptionValue::Id(id) => {
                self.choices.iter().find(|c| &c.value == id).map_or_else(|| id.clone(), |c| c.name.clone())
            }
            other => other.to_string(),
        }
    }
}

/// What an agent offers to switch, as it last said (kept when the agent is not running).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionOptions {
    /// The modes it can work in; empty when it offers none.
    #[serde(default)]
    pub modes: Vec<ModeInfo>,
    /// The mode it works in now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_mode: Option<String>,
    /// Its configuration options; empty when it offers none.
    #[serde(default)]
    pub config_options: Vec<ConfigOption>,
}

impl SessionOptions {
    /// The option with this id.
    pub fn option(&self, id: &str) -> Option<&ConfigOption> {
        self.config_options.iter().find(|o| o.id == id)
    }

    /// The mode with this id.
    pub fn mode(&self, id: &str) -> Option<&ModeInfo> {
        self.modes.iter().find(|m| m.id == id)
    }

    /// The option that holds the mode, for an agent that offers its modes as a configuration
    /// option (`category` `mode`, as opencode does) instead of ACP `modes`: None when it offers
    /// `modes`.
    pub fn mode_option(&self) -> Option<&ConfigOption> {
        if !self.modes.is_empty() {
            return None;
        }
        self.config_options.iter().find(|o| o.category.as_deref() == Some("mode") && !o.choices.is_empty())
    }

    /// Applies a change the agent announced (an `options` event).
    pub fn apply(&mut self, change: &OptionsChange) {
        if let Some(modes) = &change.modes {
            self.modes = modes.clone();
        }
        if let Some(current) = &change.current_mode {
            self.current_mode = Some(current.clone());
        }
        if let Some(options) = &change.config_options {
            self.config_options = options.clone();
        }
    }
}

/// A change of what the agent offers; absent parts are unchanged. The payload of the `options`
/// journal event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OptionsChange {
    /// The modes offered now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<Vec<ModeInfo>>,
    /// The mode the agent works in now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_mode: Option<String>,
    /// The configuration options offered now, each with its current value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_options: Option<Vec<ConfigOption>>,
}

impl OptionsChange {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.modes.is_none() && self.current_mode.is_none() && self.config_options.is_none()
    }
}

/// What the user chose for a session. Set again on the agent whenever the session's agent
/// starts (a resume, a restart), so the choice outlives the agent process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChosenOptions {
    /// The mode chosen with `session.set_mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Values chosen with `session.set_option`, by option id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, OptionValue>,
}

/// `session.options`: what the session's agent offers to switch and what the user chose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionOptionsParams {
    /// The session.
    pub session_id: String,
}

/// `session.set_mode`: switches the agent's mode. With the agent running, the agent switches
/// before the answer; otherwise the choice is kept and set when the agent next starts. Either
/// way the choice is set again after every resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSetModeParams {
    /// The session.
    pub session_id: String,
    /// One of the ids of the session's `modes`.
    pub mode_id: String,
}

/// `session.set_option`: sets one of the agent's configuration options (its model, reasoning
/// effort...). Like `session.set_mode`, kept and set again after every resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSetOptionParams {
    /// The session.
    pub session_id: String,
    /// The id of one of the session's `config_options`.
    pub option_id: String,
    /// A value id of that option's `choices`, or a boolean for a boolean option.
    pub value: OptionValue,
}

/// The answer to `session.options`, `session.set_mode` and `session.set_option`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionOptionsResult {
    /// The session.
    pub session_id: String,
    /// What the agent offers, as it last said; empty before its first start.
    pub options: SessionOptions,
    /// What the user chose.
    pub chosen: ChosenOptions,
    /// Whether the agent is running and now works with the choice (false: it is set when the
    /// agent next starts).
    pub applied: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(id: &str, category: Option<&str>, values: &[&str]) -> ConfigOption {
        ConfigOption {
            id: id.into(),
            name: id.into(),
            description: None,
            category: category.map(str::to_owned),
            current: OptionValue::Id(values.first().copied().unwrap_or_default().into()),
            choices: values
                .iter()
                .map(|v| OptionChoice { value: v.to_string(), name: v.to_string(), description: None, group: None })
                .collect(),
            legacy_model: false,
        }
    }

    #[test]
    fn the_mode_option_stands_for_modes_only_when_the_agent_offers_none() {
        // opencode: its modes are the values of an option of category `mode`.
        let mut offered = SessionOptions {
            config_options: vec![
                option("model", Some("model"), &["a", "b"]),
                option("mode", Some("mode"), &["build", "plan"]),
            ],
            ..Default::default()
        };
        assert_eq!(offered.mode_option().map(|o| o.id.as_str()), Some("mode"));
        offered.modes = vec![ModeInfo { id: "plan".into(), name: "Plan".into(), description: None }];
        assert_eq!(offered.mode_option(), None, "ACP modes are the modes");
        let offered = SessionOptions { config_options: vec![option("mode", Some("mode"), &[])], ..Default::default() };
        assert_eq!(offered.mode_option(), None, "an option with no values to pick");
    }
}
