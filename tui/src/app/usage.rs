//! What agents reported about their usage (`usage.get`): the opened session's in its header,
//! the total over every session in the status bar. Asked for when a connection is made, when
//! a session is opened and when a turn ends. Unknown stays unknown: a figure no agent reported
//! is not shown (never as 0).

use std::collections::HashMap;

use baton_protocol::{Cost, UsageGetResult, UsageSummary};

use crate::command::Request;

use super::App;

#[derive(Debug, Default)]
pub(crate) struct Usage {
    /// Per session, as last read.
    sessions: HashMap<String, UsageSummary>,
    total: Option<UsageSummary>,
}

impl App {
    /// Asks for the total, and for `session_id`'s usage when given.
    pub(super) fn request_usage(&mut self, session_id: Option<String>) {
        if self.is_connected() {
            self.send(Request::Usage { session_id });
        }
    }

    pub(super) fn on_usage(&mut self, result: UsageGetResult) {
        if let Some(session) = result.session {
            self.usage.sessions.insert(session.session_id, session.summary);
        }
        self.usage.total = Some(result.total);
    }

    /// "1.3k in · 80 out · $0.25" for the session; `None` when its agent reported nothing.
    pub fn session_usage(&self, session_id: &str) -> Option<String> {
        usage_text(self.usage.sessions.get(session_id)?)
    }

    /// The same over every session.
    pub fn total_usage(&self) -> Option<String> {
        usage_text(self.usage.total.as_ref()?)
    }
}

/// Tokens in and out and the cost, each only when reported; `None` when nothing was.
pub fn usage_text(summary: &UsageSummary) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(tokens) = summary.input_tokens {
        parts.push(format!("{} in", tokens_text(tokens)));
    }
    if let Some(tokens) = summary.output_tokens {
        parts.push(format!("{} out", tokens_text(tokens)));
    }
    if summary.input_tokens.is_none() && summary.output_tokens.is_none() {
        if let Some(tokens) = summary.total_tokens {
            parts.push(format!("{} tokens", tokens_text(tokens)));
        }
    }
    parts.extend(summary.cost.iter().map(cost_text));
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// "812", "12.4k", "3.1M".
fn tokens_text(tokens: u64) -> String {
    match tokens {
        0..1000 => tokens.to_string(),
        1000..1_000_000 => format!("{:.1}k", tokens as f64 / 1000.0),
        _ => format!("{:.1}M", tokens as f64 / 1_000_000.0),
    }
}

/// "$0.25" for US dollars; "3 credits" for another unit, as the agent named it.
fn cost_text(cost: &Cost) -> String {
    match cost.currency.as_str() {
        "USD" => format!("${:.2}", cost.amount),
        unit => format!("{} {unit}", trim_amount(cost.amount)),
    }
}

fn trim_amount(amount: f64) -> String {
    let text = format!("{amount:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_stays_unknown() {
        assert_eq!(usage_text(&UsageSummary { turns_unreported: 3, sessions: 1, ..Default::default() }), None);
        let only_out = UsageSummary { output_tokens: Some(80), sessions: 1, ..Default::default() };
        assert_eq!(usage_text(&only_out).as_deref(), Some("80 out"));
    }

    #[test]
    fn tokens_and_costs_are_short() {
        let summary = UsageSummary {
            input_tokens: Some(1250),
            output_tokens: Some(80),
            cost: vec![Cost { amount: 0.25, currency: "USD".into() }, Cost { amount: 3.0, currency: "credits".into() }],
            sessions: 1,
            ..Default::default()
        };
        assert_eq!(usage_text(&summary).as_deref(), Some("1.2k in · 80 out · $0.25 · 3 credits"));
        assert_eq!(tokens_text(3_100_000), "3.1M");
    }
}
