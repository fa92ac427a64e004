//! Usage as agents report it: recorded when a turn ends, read by `usage.get`.

use std::sync::Arc;

use baton_protocol::UsageGetResult;

use super::execution::Execution;
use super::{store_logged, ApiResult, Orchestrator};
use crate::store::ReportedTokens;

impl Orchestrator {
    /// Records the ending turn's usage: `tokens` from the prompt's answer (None when the agent
    /// reported none: the turn's usage stays unknown), cost and context from its last
    /// `usage_update`. A failed write is logged; the turn ends either way.
    pub(super) async fn record_turn_usage(
        &self,
        execution: &Arc<Execution>,
        turn_id: Option<String>,
        tokens: Option<ReportedTokens>,
    ) {
        let session_id = execution.session_id();
        let recorded = self.store.record_turn_usage(session_id, turn_id, tokens).await;
        store_logged(session_id, "the turn's usage", recorded);
    }

    pub async fn usage(&self, session_id: Option<&str>) -> ApiResult<UsageGetResult> {
        let (session, total) = self.store.usage(session_id.map(str::to_owned)).await?;
        Ok(UsageGetResult { session, total })
    }
}
