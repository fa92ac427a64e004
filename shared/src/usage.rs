//! What agents report about their usage (`usage.get`): per turn, per session, in total.
//! Every figure an agent did not report is absent: unknown is never estimated.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Token counts and cost of one finished turn, as the agent reported them: tokens from the
/// prompt's answer (ACP `PromptResponse.usage`), cost and context window from the last
/// `usage_update` it sent during the turn. A turn whose agent reported nothing has every field
/// absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnUsage {
    /// Sequence number of the turn's `turn_started` event.
    pub turn_seq: u64,
    /// The turn's id (as in its events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Input tokens of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the agent's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Input tokens written to the agent's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
    /// Thought (reasoning) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// All tokens of the turn, as the agent counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// The session's cumulative cost when the turn ended (ACP reports cost per session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Tokens in the agent's context window when the turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_used: Option<u64>,
    /// Size of the agent's context window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_size: Option<u64>,
    /// When the turn's usage was recorded (RFC 3339 UTC).
    #[schemars(extend("format" = "date-time"))]
    pub recorded_at: String,
}

impl TurnUsage {
    /// The agent reported token counts for this turn.
    pub fn has_tokens(&self) -> bool {
        self.input_tokens.is_some() || self.output_tokens.is_some() || self.total_tokens.is_some()
    }
}

/// An amount of money (or of another unit an agent bills in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cost {
    /// The amount.
    pub amount: f64,
    /// ISO 4217 currency code (`USD`) or another unit (`credits`), as the agent sent it.
    pub currency: String,
}

/// Usage summed over turns: of one session, or of every session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageSummary {
    /// Finished turns whose agent reported token counts.
    pub turns_reported: u64,
    /// Finished turns whose agent reported none: their tokens are unknown, not zero.
    pub turns_unreported: u64,
    /// Sum over the reported turns; absent when no turn reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Sum over the reported turns; absent when no turn reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Sum over the reported turns; absent when no turn reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Sum over the reported turns; absent when no turn reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
    /// Sum over the reported turns; absent when no turn reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// Sum over the reported turns; absent when no turn reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Cost per currency: for one session its latest cumulative cost, in total the sum of
    /// those. Empty when no agent reported a cost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cost: Vec<Cost>,
    /// Sessions counted (1 for a session's own summary).
    pub sessions: u64,
}

/// `usage.get`: usage of one session (its turns and their sum) and the total over every
/// session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageGetParams {
    /// The session whose usage to include; only the total without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The answer to `usage.get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageGetResult {
    /// The session's usage, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionUsage>,
    /// Usage summed over every session the server knows (archived tasks' included).
    pub total: UsageSummary,
}

/// One session's usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionUsage {
    /// The session.
    pub session_id: String,
    /// Its turns summed.
    pub summary: UsageSummary,
    /// Its finished turns, oldest first (the newest 500 at most).
    pub turns: Vec<TurnUsage>,
}
