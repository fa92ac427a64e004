//! ACP `authenticate`: which of the methods an agent offers in `initialize` Baton can use, and
//! what to tell the user when it can use none.
//!
//! Real agents refuse `session/new`/`load`/`resume` with -32000 until a client authenticates,
//! even when the key is in their environment (codex-acp with `OPENAI_API_KEY` needs
//! `openai-api-key`, gemini with `GEMINI_API_KEY` needs `gemini-api-key`; see docs/ACP.md,
//! 'authenticate' and 'Real agents').

use serde_json::Value;

/// One entry of `authMethods` in the `initialize` result.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthMethod {
    pub id: String,
    pub name: String,
    /// `type`: omitted means `"agent"`; `"env_var"` and `"terminal"` are the others seen.
    pub kind: String,
    /// The environment variables an `env_var` method reads (`varName`, or `vars[].name`).
    pub env_vars: Vec<String>,
    /// What the agent says of the method (`description`).
    pub description: Option<String>,
    /// The arguments a `terminal` method runs the agent's command with (`args`).
    pub terminal_args: Vec<String>,
}

impl AuthMethod {
    /// A login that waits for a person (at a terminal, in a browser): ACP's `terminal` methods,
    /// and the built-in agents' browser logins, which `authenticate` would leave waiting until
    /// its timeout.
    pub fn is_interactive(&self) -> bool {
        self.kind == "terminal" || INTERACTIVE_IDS.contains(&self.id.as_str())
    }
}

/// Method ids of the built-in agents that log in interactively though their type does not say
/// so (codex's ChatGPT login, gemini's Google login, copilot's login).
const INTERACTIVE_IDS: &[&str] = &["chatgpt", "oauth-personal", "copilot-login"];

/// Method ids of the built-in agents that work with an API key in the environment, and the
/// variable each reads (the agents name them only in prose, if at all).
const KNOWN_KEY_METHODS: &[(&str, &str)] = &[
    ("openai-api-key", "OPENAI_API_KEY"),
    ("codex-api-key", "CODEX_API_KEY"),
    ("api-key", "OPENAI_API_KEY"),
    ("gemini-api-key", "GEMINI_API_KEY"),
    ("anthropic-api-key", "ANTHROPIC_API_KEY"),
];

/// The key an agent program reads when it offers no `authMethods` to name it (claude-agent-acp
/// reads `ANTHROPIC_API_KEY` and answers a prompt without it with -32000), by the file name of
/// its command, and its built-in agent name.
const KEYS_BY_PROGRAM: &[(&str, &str, &str)] = &[
    ("claude-agent-acp", "claude-code", "ANTHROPIC_API_KEY"),
    ("claude-code-acp", "claude-code", "ANTHROPIC_API_KEY"),
    ("codex-acp", "codex", "OPENAI_API_KEY"),
    ("gemini", "gemini", "GEMINI_API_KEY"),
];

/// How to log in with an agent's own CLI instead, by built-in agent name.
const LOGIN_HINTS: &[(&str, &str)] = &[
    ("codex", "run `codex login`"),
    ("gemini", "run `gemini` once and log in"),
    ("claude-code", "run `claude` once and log in"),
    ("copilot", "run `copilot` once and log in"),
    ("opencode", "run `opencode auth login`"),
];

/// Reads `authMethods` leniently: entries without an id are skipped.
pub fn parse_auth_methods(initialize: &Value) -> Vec<AuthMethod> {
    let Some(methods) = initialize.get("authMethods").and_then(Value::as_array) else {
        return Vec::new();
    };
    methods
        .iter()
        .filter_map(|m| {
            let id = m.get("id").and_then(Value::as_str)?.to_string();
            let mut env_vars: Vec<String> = Vec::new();
            if let Some(var) = m.get("varName").and_then(Value::as_str) {
                env_vars.push(var.to_string());
            }
            for var in m.get("vars").and_then(Value::as_array).into_iter().flatten() {
                if let Some(name) = var.get("name").and_then(Value::as_str).or_else(|| var.as_str()) {
                    env_vars.push(name.to_string());
                }
            }
            if env_vars.is_empty() {
                if let Some((_, var)) = KNOWN_KEY_METHODS.iter().find(|(known, _)| *known == id) {
                    env_vars.push(var.to_string());
                }
            }
            let terminal_args = m
                .get("args")
                .and_then(Value::as_array)
                .map(|args| args.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            Some(AuthMethod {
                name: m.get("name").and_then(Value::as_str).unwrap_or(&id).to_string(),
                kind: m.get("type").and_then(Value::as_str).unwrap_or("agent").to_string(),
                description: m.get("description").and_then(Value::as_str).map(str::to_string),
                id,
                env_vars,
                terminal_args,
            })
        })
        .collect()
}

/// The method to authenticate with: the configured one wins; else the first method whose
/// environment variable is set. `terminal` methods need a person at a terminal and are never
/// chosen by themselves (ACP forbids sending `authenticate` for them).
pub fn choose_method(
    methods: &[AuthMethod],
    configured: Option<&str>,
    env_is_set: impl Fn(&str) -> bool,
) -> Option<String> {
    if let Some(configured) = configured {
        return Some(configured.to_string());
    }
    methods
        .iter()
        .filter(|m| m.kind != "terminal")
        .find(|m| m.env_vars.iter().any(|v| env_is_set(v)))
        .map(|m| m.id.clone())
}

/// Why the method `configured` in agents.toml cannot be used, when it is an interactive login
/// (see [`AuthMethod::is_interactive`]; an id the agent does not offer counts when it is one of
/// the known interactive ones): `authenticate` is never sent for it (ACP forbids it for
/// `terminal` methods, and the others wait for a person until the timeout, at every resume).
/// `command` is the agent's command line, for the login a `terminal` method describes.
pub fn interactive_refusal(agent: &str, command: &str, methods: &[AuthMethod], configured: &str) -> Option<String> {
    let method = methods.iter().find(|m| m.id == configured);
    let interactive = match method {
        Some(method) => method.is_interactive(),
        None => INTERACTIVE_IDS.contains(&configured),
    };
    if !interactive {
        return None;
    }
    let mut text = format!("auth_method = {configured:?} in [agents.{agent}] is an interactive login");
    if let Some(method) = method {
        let said = method.description.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
        text.push_str(&format!(" ({}{said})", method.name));
    }
    text.push_str(", which needs a person at a terminal or in a browser: batond cannot do it for you.");
    let login = match (method.map(|m| m.terminal_args.join(" ")), LOGIN_HINTS.iter().find(|(name, _)| *name == agent)) {
        (Some(args), _) if !args.is_empty() => format!("run `{command} {args}` in a terminal"),
        (_, Some((_, hint))) => hint.to_string(),
        _ => "run the agent once in a terminal and log in".to_string(),
    };
    text.push_str(&format!(
        " Log in once with the agent's own command ({login}) and remove auth_method, so that the agent uses its \
         stored login"
    ));
    let keys: Vec<String> = methods
        .iter()
        .filter(|m| !m.is_interactive() && !m.env_vars.is_empty())
        .map(|m| format!("auth_method = {:?} with {} in its env", m.id, m.env_vars.join(" or ")))
        .collect();
    if !keys.is_empty() {
        text.push_str(&format!(", or use a key: {}", keys.join(", or ")));
    }
    text.push_str("; then resume the session");
    Some(text)
}

/// What to say when the agent wants authentication and no method could be used (or the one
/// used was refused): the methods it offers and what to set. `command` is the agent's program
/// (its file name tells a known agent configured under another name).
pub fn explain_missing(agent: &str, command: &str, methods: &[AuthMethod], tried: Option<&str>) -> String {
    let program = std::path::Path::new(command).file_name().and_then(|n| n.to_str()).unwrap_or(command);
    let known = KEYS_BY_PROGRAM.iter().find(|(p, name, _)| *p == program || *name == agent);
    let mut text = format!("{agent} needs authentication");
    if let Some(tried) = tried {
        text.push_str(&format!(" and refused the method {tried:?}"));
    }
    if methods.is_empty() {
        text.push_str(" but offers no authentication method");
    } else {
        let offered: Vec<String> = methods
            .iter()
            .map(|m| match (&m.description, m.is_interactive()) {
                (Some(said), true) => format!("{} ({}: {said}; interactive)", m.id, m.name),
                (None, true) => format!("{} ({}; interactive)", m.id, m.name),
                _ => format!("{} ({})", m.id, m.name),
            })
            .collect();
        text.push_str(&format!("; it offers: {}", offered.join(", ")));
    }
    let mut vars: Vec<&str> = methods.iter().flat_map(|m| m.env_vars.iter().map(String::as_str)).collect();
    if vars.is_empty() {
        if let Some((_, _, key)) = known {
            vars.push(key);
        }
    }
    let mut ways = Vec::new();
    if !vars.is_empty() {
        ways.push(format!("set {} in the `env` of [agents.{agent}] in agents.toml", vars.join(" or ")));
    } else if methods.is_empty() {
        ways.push(format!("set the API key {program} reads (see its documentation) in the `env` of [agents.{agent}]"));
    }
    // Naming a method helps only an agent that offers some.
    if !methods.is_empty() {
        ways.push(format!("name a method with `auth_method = \"…\"` in [agents.{agent}]"));
    }
    let builtin = known.map_or(agent, |(_, name, _)| *name);
    if let Some((_, hint)) = LOGIN_HINTS.iter().find(|(name, _)| *name == agent || *name == builtin) {
        ways.push(hint.to_string());
    }
    text.push_str(&format!(". To fix it: {}; then resume the session", ways.join(", or ")));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codex_016() -> Value {
        // As codex-acp 0.16 answers initialize (docs/ACP.md, 'Real agents').
        json!({"authMethods": [
            {"id": "chatgpt", "name": "Login with ChatGPT"},
            {"id": "codex-api-key", "name": "Use CODEX_API_KEY", "type": "env_var", "vars": [{"name": "CODEX_API_KEY"}]},
            {"id": "openai-api-key", "name": "Use OPENAI_API_KEY", "type": "env_var", "vars": [{"name": "OPENAI_API_KEY"}]},
        ]})
    }

    #[test]
    fn a_method_whose_env_var_is_set_is_chosen() {
        let methods = parse_auth_methods(&codex_016());
        assert_eq!(choose_method(&methods, None, |v| v == "OPENAI_API_KEY").as_deref(), Some("openai-api-key"));
        assert_eq!(choose_method(&methods, None, |v| v == "CODEX_API_KEY").as_deref(), Some("codex-api-key"));
        assert_eq!(choose_method(&methods, None, |_| false), None);
    }

    #[test]
    fn known_ids_of_built_in_agents_name_their_variable() {
        let gemini = json!({"authMethods": [
            {"id": "oauth-personal", "name": "Log in with Google"},
            {"id": "gemini-api-key", "name": "Use Gemini API key"},
            {"id": "vertex-ai", "name": "Vertex AI"},
        ]});
        let methods = parse_auth_methods(&gemini);
        assert_eq!(choose_method(&methods, None, |v| v == "GEMINI_API_KEY").as_deref(), Some("gemini-api-key"));
    }

    #[test]
    fn the_configured_method_wins_and_terminal_methods_are_never_guessed() {
        let methods = parse_auth_methods(&json!({"authMethods": [
            {"id": "term", "name": "T", "type": "terminal", "varName": "X"},
            {"id": "key", "name": "K", "type": "env_var", "varName": "X"},
        ]}));
        assert_eq!(choose_method(&methods, None, |_| true).as_deref(), Some("key"));
        assert_eq!(choose_method(&methods, Some("chatgpt"), |_| true).as_deref(), Some("chatgpt"));
        assert!(parse_auth_methods(&json!({"authMethods": [{"name": "no id"}, 3]})).is_empty());
    }

    #[test]
    fn an_interactive_login_is_refused_with_what_to_do_instead() {
        let methods = parse_auth_methods(&codex_016());
        let text = interactive_refusal("codex", "codex-acp", &methods, "chatgpt").expect("refused");
        for needle in [
            "chatgpt",
            "Login with ChatGPT",
            "interactive",
            "`codex login`",
            "remove auth_method",
            "openai-api-key",
            "OPENAI_API_KEY",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
        assert_eq!(interactive_refusal("codex", "codex-acp", &methods, "openai-api-key"), None);
        // Known interactive ids count even when the agent does not list them; a terminal
        // method's own login command and description are passed on.
        assert!(interactive_refusal("gemini", "gemini", &[], "oauth-personal").is_some());
        let copilot = parse_auth_methods(&json!({"authMethods": [{"id": "copilot-login", "name": "Log in",
            "type": "terminal", "description": "Sign in with GitHub", "args": ["login"]}]}));
        let text = interactive_refusal("copilot", "copilot", &copilot, "copilot-login").expect("refused");
        assert!(text.contains("Sign in with GitHub") && text.contains("`copilot login`"), "{text}");
    }

    #[test]
    fn the_missing_auth_message_names_methods_variables_and_login() {
        let methods = parse_auth_methods(&codex_016());
        let text = explain_missing("codex", "codex-acp", &methods, None);
        for needle in ["codex needs authentication", "openai-api-key", "OPENAI_API_KEY", "agents.toml", "`codex login`"]
        {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
    }

    #[test]
    fn an_agent_that_offers_no_method_is_told_its_key_not_a_method() {
        // claude-agent-acp offers no authMethods and answers a prompt without its key with -32000.
        let text = explain_missing("claude", "/opt/npm/bin/claude-agent-acp", &[], None);
        assert!(text.contains("set ANTHROPIC_API_KEY in the `env` of [agents.claude]"), "{text}");
        assert!(text.contains("run `claude` once and log in"), "{text}");
        assert!(!text.contains("auth_method"), "no method to name: {text}");
        let text = explain_missing("mine", "/usr/bin/my-agent", &[], None);
        assert!(text.contains("set the API key my-agent reads"), "{text}");
        assert!(!text.contains("auth_method"), "{text}");
    }
}
