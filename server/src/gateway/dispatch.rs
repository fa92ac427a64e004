//! Requests to orchestrator calls. Subscriptions are per connection and live in `connection`.

use std::sync::Arc;

use baton_protocol::{ClientRequest, ErrorPayload};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::orchestrator::Orchestrator;

/// Serialises a result straight to JSON text: a large result (10,000 sessions) never becomes a
/// tree of JSON values on its way to the socket.
fn to_value<T: Serialize>(result: Result<T, ErrorPayload>) -> Result<Box<RawValue>, ErrorPayload> {
    result.and_then(|value| serde_json::value::to_raw_value(&value).map_err(|e| ErrorPayload::internal(e.to_string())))
}

/// Runs one request that is not about this connection's subscriptions.
pub async fn dispatch(orchestrator: Arc<Orchestrator>, request: ClientRequest) -> Result<Box<RawValue>, ErrorPayload> {
    match request {
        ClientRequest::AgentList(_) => to_value(Ok(orchestrator.agent_list())),
        ClientRequest::Ping(_) => to_value(Ok(baton_protocol::PingResult { time: baton_protocol::now_timestamp() })),
        ClientRequest::TaskCreate(p) => to_value(orchestrator.create_task(p).await),
        ClientRequest::TaskList(p) => to_value(orchestrator.list_tasks(p.archived).await),
        ClientRequest::TaskUpdate(p) => to_value(orchestrator.update_task(p).await),
        ClientRequest::TaskArchive(p) => to_value(orchestrator.archive_task(&p.task_id, true, p.stop_agents).await),
        ClientRequest::TaskUnarchive(p) => to_value(orchestrator.archive_task(&p.task_id, false, false).await),
        ClientRequest::TaskDelete(p) => to_value(orchestrator.delete_task(p).await),
        ClientRequest::SessionList(p) => to_value(orchestrator.list_sessions(p).await),
        ClientRequest::SessionStatus(p) => to_value(orchestrator.session_status(&p.session_id).await),
        ClientRequest::SessionResume(p) => to_value(orchestrator.resume(&p.session_id, p.fresh, p.retry_failed).await),
        ClientRequest::SessionStart(p) => to_value(orchestrator.start_session(p).await),
        ClientRequest::SessionCancel(p) => to_value(orchestrator.cancel(&p.session_id).await),
        ClientRequest::SessionStop(p) => to_value(orchestrator.stop(&p.session_id).await),
        ClientRequest::MessageAdd(p) => to_value(orchestrator.add_message(&p.session_id, &p.content, p.steer).await),
        ClientRequest::MessageList(p) => to_value(orchestrator.list_messages(p).await),
        ClientRequest::MessageText(p) => to_value(orchestrator.message_text(p).await),
        ClientRequest::PermissionRespond(p) => to_value(orchestrator.permission_respond(p).await),
        ClientRequest::SessionFork(p) => to_value(orchestrator.fork_session(&p.session_id, p.agent.as_deref()).await),
        ClientRequest::UsageGet(p) => to_value(orchestrator.usage(p.session_id.as_deref()).await),
        ClientRequest::SessionExport(p) => to_value(orchestrator.export_session(p).await),
        ClientRequest::MessageSearch(p) => to_value(orchestrator.search_messages(p).await),
        ClientRequest::PermissionList(p) => to_value(orchestrator.permission_list(p).await),
        ClientRequest::PermissionRuleList(p) => to_value(orchestrator.permission_rules(&p.session_id).await),
        ClientRequest::PermissionRuleRevoke(p) => to_value(orchestrator.revoke_permission_rule(p).await),
        ClientRequest::SessionOptions(p) => to_value(orchestrator.session_options(&p.session_id).await),
        ClientRequest::QueueList(p) => to_value(orchestrator.queue_list(&p.session_id).await),
        ClientRequest::QueueEdit(p) => to_value(orchestrator.queue_edit(&p.session_id, &p.id, &p.content).await),
        ClientRequest::QueueRemove(p) => to_value(orchestrator.queue_remove(&p.session_id, &p.id).await),
        ClientRequest::QueueRelease(p) => to_value(orchestrator.queue_release(&p.session_id).await),
        ClientRequest::SessionSetMode(p) => to_value(orchestrator.set_mode(&p.session_id, &p.mode_id).await),
        ClientRequest::SessionSetOption(p) => {
            to_value(orchestrator.set_option(&p.session_id, &p.option_id, &p.value).await)
        }
        ClientRequest::TaskChanges(p) => to_value(orchestrator.task_changes(p).await),
        ClientRequest::TaskDiff(p) => to_value(orchestrator.task_diff(p).await),
        ClientRequest::TaskCommit(p) => to_value(orchestrator.task_commit(p).await),
        ClientRequest::TaskMerge(p) => to_value(orchestrator.task_merge(p).await),
        ClientRequest::TaskPullRequest(p) => to_value(orchestrator.task_pull_request(p).await),
        ClientRequest::TaskShell(p) => to_value(orchestrator.task_shell(&p.task_id).await),
        ClientRequest::Subscribe(_)
        | ClientRequest::Unsubscribe(_)
        | ClientRequest::DevicePair(_)
        | ClientRequest::DeviceList(_)
        | ClientRequest::DeviceRevoke(_)
        | ClientRequest::PushKey(_)
        | ClientRequest::PushSubscribe(_)
        | ClientRequest::PushUnsubscribe(_) => {
            Err(ErrorPayload::internal("subscriptions, devices and push are handled by the connection"))
        }
    }
}
