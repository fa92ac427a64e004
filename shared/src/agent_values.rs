//! Values an agent reports that the protocol passes on: why a turn stopped and where a tool
//! call stands. Each is a string on the wire; the spellings ACP defines today are variants, and
//! any other spelling (a newer agent, a reason Baton adds later) is kept as sent in `Other`, so
//! nothing an agent says is lost or refused.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A string enum whose unknown spellings are kept: one table gives serde, [`as_str`] and
/// [`parse`] the same spelling (the `Other` variant is serde's untagged fallback).
macro_rules! open_string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
            /// Any other value, kept as sent (a newer agent or server may add values).
            #[serde(untagged)]
            Other(String),
        }

        impl $name {
            /// Every value this version knows, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The value's spelling on the wire (for `Other`, the text as sent).
            pub fn as_str(&self) -> &str {
                match self { $($name::$variant => $text,)+ $name::Other(text) => text }
            }

            /// The value spelled `text`: a known variant, or `Other` keeping the text.
            pub fn parse(text: &str) -> Self {
                match text { $($text => $name::$variant,)+ other => $name::Other(other.to_string()) }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                $name::parse(text)
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                $name::parse(&text)
            }
        }
    };
}

pub(crate) use open_string_enum;

open_string_enum! {
    /// Why a turn ended: an ACP stop reason, or one the server sets (`interrupted`, `error`).
    StopReason {
        /// The agent finished the turn.
        EndTurn => "end_turn",
        /// The agent reached its token limit.
        MaxTokens => "max_tokens",
        /// The agent reached its limit of model requests for one turn.
        MaxTurnRequests => "max_turn_requests",
        /// The agent refused to go on.
        Refusal => "refusal",
        /// The turn was cancelled (`message.cancel`, or the agent said so).
        Cancelled => "cancelled",
        /// The turn was cut short: the agent exited, or the server restarted, mid-turn.
        Interrupted => "interrupted",
        /// The agent answered the prompt with an error.
        Error => "error",
    }
}

impl StopReason {
    /// The line the folded view shows for a turn that ended this way, if any: a cancelled turn,
    /// or one that stopped for a reason other than finishing (`max_tokens`, `refusal`...).
    /// Interrupted and failed turns are explained by their own status or error line.
    pub fn turn_end_note(&self) -> Option<String> {
        match self {
            StopReason::EndTurn | StopReason::Interrupted | StopReason::Error => None,
            StopReason::Cancelled => Some("Turn cancelled.".to_string()),
            StopReason::Refusal => Some("Turn ended: the agent refused.".to_string()),
            StopReason::MaxTokens => Some("Turn ended: the agent reached its token limit.".to_string()),
            StopReason::MaxTurnRequests => Some("Turn ended: the agent reached its request limit.".to_string()),
            StopReason::Other(other) => Some(format!("Turn ended: {other}.")),
        }
    }
}

open_string_enum! {
    /// Where a tool call stands (ACP `ToolCallStatus`).
    ToolCallStatus {
        /// Not started yet (e.g. waiting for a permission or for its input to stream).
        Pending => "pending",
        /// Running.
        InProgress => "in_progress",
        /// Finished successfully.
        Completed => "completed",
        /// Finished with an error.
        Failed => "failed",
    }
}

impl ToolCallStatus {
    /// The tool call is over (completed or failed).
    pub fn is_finished(&self) -> bool {
        matches!(self, ToolCallStatus::Completed | ToolCallStatus::Failed)
    }
}

open_string_enum! {
    /// Where a step of an agent's plan stands (ACP `PlanEntryStatus`); `""` when the agent
    /// said nothing.
    #[derive(Default)]
    PlanEntryStatus {
        /// The agent gave no status.
        #[default]
        Unspecified => "",
        /// Not started.
        Pending => "pending",
        /// Being worked on.
        InProgress => "in_progress",
        /// Done.
        Completed => "completed",
    }
}

open_string_enum! {
    /// How much a step of an agent's plan matters (ACP `PlanEntryPriority`); `""` when the agent
    /// said nothing.
    #[derive(Default)]
    PlanEntryPriority {
        /// The agent gave no priority.
        #[default]
        Unspecified => "",
        /// Most important.
        High => "high",
        /// Ordinary.
        Medium => "medium",
        /// Least important.
        Low => "low",
    }
}
