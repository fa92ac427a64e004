//! Performs the app's commands: each request runs in its own task on the typed client and sends
//! its outcome back over a channel, so the event loop never waits on the network.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::{
    AgentListParams, Client, ClientError, MessageAddParams, MessageListParams, Notifications, PermissionListParams,
    PermissionRespondParams, PermissionRuleListParams, PermissionRuleRevokeParams, SessionCancelParams,
    SessionListParams, SessionOrder, SessionResumeParams, SessionStartParams, SessionStatusParams, SessionStopParams,
    SubscribeParams, TaskArchiveParams, TaskDeleteParams, TaskUpdateParams, UnsubscribeParams, MAX_PERMISSION_PAGE,
};
use baton_protocol::{ArchivedFilter, TaskUnarchiveParams, MAX_SESSION_PAGE};
use baton_protocol::{MessageSearchParams, SessionExportParams, SessionForkParams, UsageGetParams};
use baton_protocol::{SessionOptionsParams, SessionSetModeParams, SessionSetOptionParams};
use tokio::sync::mpsc;

use crate::command::{Command, Outcome, Reply, Request, ServerRestart};
use crate::launcher::{restart_server, LaunchOptions};

/// What spawned tasks send back to the event loop.
pub enum Delivery {
    Outcome(Box<Outcome>),
    Connected(Client, Notifications),
    ConnectFailed(ClientError),
    /// What starting the local server again found and did; the error as one readable chain.
    ServerStarted(Result<ServerRestart, String>),
    /// What `batond stop` said, or why the local server could not be stopped.
    ServerStopped(Result<String, String>),
}

pub struct Runner {
    /// The server's URL and client options, and how to start it again.
    launch: Arc<LaunchOptions>,
    client: Option<Client>,
    epoch: u64,
    tx: mpsc::UnboundedSender<Delivery>,
}

impl Runner {
    pub fn new(launch: LaunchOptions, tx: mpsc::UnboundedSender<Delivery>) -> Self {
        Runner { launch: Arc::new(launch), client: None, epoch: 0, tx }
    }

    /// Takes a new connection and returns its epoch.
    pub fn attach(&mut self, client: Client) -> u64 {
        self.epoch += 1;
        self.client = Some(client);
        self.epoch
    }

    pub fn detach(&mut self) {
        self.client = None;
    }

    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    pub fn execute(&self, command: Command) {
        match command {
            Command::Send(request) => self.send(request),
            Command::Connect { after } => self.connect(after),
            Command::StartServer => self.start_server(),
            // The terminal's business: the event loop writes it (see `event_loop`).
            Command::Copy(_) => tracing::debug!("a copy reached the runner; nothing to do"),
            Command::Alert(_) => tracing::debug!("an alert reached the runner; nothing to do"),
            Command::Mouse(_) => tracing::debug!("a mouse switch reached the runner; nothing to do"),
            Command::Shell(_) => tracing::debug!("a shell reached the runner; nothing to do"),
            Command::StopServer => self.stop_server(),
        }
    }

    fn send(&self, request: Request) {
        let epoch = self.epoch;
        let tx = self.tx.clone();
        let Some(client) = self.client.clone() else {
            let result = Err(ClientError::Closed);
            let _ = tx.send(Delivery::Outcome(Box::new(Outcome { epoch, request, result })));
            return;
        };
        tokio::spawn(async move {
            let result = perform(&client, &request).await;
            if let Err(error) = &result {
                tracing::debug!(?request, "request failed: {error}");
            }
            let _ = tx.send(Delivery::Outcome(Box::new(Outcome { epoch, request, result })));
        });
    }

    fn connect(&self, after: Duration) {
        let launch = Arc::clone(&self.launch);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let delivery = match Client::connect_with(&launch.url, launch.client.clone()).await {
                Ok((client, notifications)) => Delivery::Connected(client, notifications),
                Err(error) => Delivery::ConnectFailed(error),
            };
            let _ = tx.send(delivery);
        });
    }

    /// Runs in its own task: `batond stop` waits until the server is gone.
    fn stop_server(&self) {
        let launch = Arc::clone(&self.launch);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = crate::launcher::stop_local_server(&launch).await.map_err(|error| format!("{error:#}"));
            let _ = tx.send(Delivery::ServerStopped(result));
        });
    }

    /// Runs in its own task: starting a server may take seconds, and the reconnect attempts
    /// go on meanwhile.
    fn start_server(&self) {
        let launch = Arc::clone(&self.launch);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = restart_server(&launch).await.map_err(|error| format!("{error:#}"));
            if let Err(error) = &result {
                tracing::warn!("could not restart the server: {error}");
            }
            let _ = tx.send(Delivery::ServerStarted(result));
        });
    }
}

/// Sessions per page of the list: a few screens' worth; further pages load as the cursor
/// nears the last row loaded.
const SESSION_PAGE: u32 = 200;

async fn perform(client: &Client, request: &Request) -> Result<Reply, ClientError> {
    let timeout = request.timeout();
    Ok(match request {
        Request::ListSessions | Request::MoreSessions { .. } => {
            let cursor = match request {
                Request::MoreSessions { cursor } => Some(cursor.clone()),
                _ => None,
            };
            let appended = cursor.is_some();
            let params = SessionListParams {
                order: Some(SessionOrder::Recent),
                limit: Some(SESSION_PAGE),
                cursor,
                ..Default::default()
            };
            let result = client.request_with_timeout(params, timeout).await?;
            Reply::SessionPage {
                rows: result.sessions,
                next_cursor: result.next_cursor,
                appended,
                attention_count: result.attention_count,
            }
        }
        Request::ListAgents => {
            let result = client.request_with_timeout(AgentListParams::default(), timeout).await?;
            Reply::Agents(result.agents)
        }
        Request::SessionStatus { session_id } => {
            let params = SessionStatusParams { session_id: session_id.clone() };
            Reply::Status(client.request_with_timeout(params, timeout).await?)
        }
        Request::Resume { session_id, fresh, retry_failed, .. } => {
            let params =
                SessionResumeParams { session_id: session_id.clone(), fresh: *fresh, retry_failed: *retry_failed };
            Reply::Resumed(client.request_with_timeout(params, timeout).await?)
        }
        Request::Cancel { session_id } => {
            let params = SessionCancelParams { session_id: session_id.clone() };
            client.request_with_timeout(params, timeout).await?;
            Reply::Cancelled
        }
        Request::Stop { session_id } => {
            let params = SessionStopParams { session_id: session_id.clone() };
            Reply::Stopped(client.request_with_timeout(params, timeout).await?)
        }
        Request::SendMessage { session_id, content, steer } => {
            let params = if *steer {
                MessageAddParams::steer(session_id.clone(), content.clone())
            } else {
                MessageAddParams::new(session_id.clone(), content.clone())
            };
            let added = client.request_with_timeout(params, timeout).await?;
            Reply::MessageSent { queued: added.queued.is_some() }
        }
        Request::LoadMessages { session_id } => {
            let params = MessageListParams::all(session_id.clone());
            Reply::Messages(client.request_with_timeout(params, timeout).await?)
        }
        Request::LoadOlderMessages { session_id, before_seq } => {
            let params =
                MessageListParams { before_seq: Some(*before_seq), ..MessageListParams::all(session_id.clone()) };
            Reply::Messages(client.request_with_timeout(params, timeout).await?)
        }
        Request::Subscribe { session_id, since_seq } => {
            let params = SubscribeParams { session_id: session_id.clone(), since_seq: *since_seq };
            Reply::Subscribed(client.request_with_timeout(params, timeout).await?)
        }
        Request::Unsubscribe { session_id } => {
            let params = UnsubscribeParams { session_id: session_id.clone() };
            client.request_with_timeout(params, timeout).await?;
            Reply::Unsubscribed
        }
        Request::RespondPermission { session_id, request_id, option_id } => {
            let params = PermissionRespondParams {
                session_id: session_id.clone(),
                request_id: request_id.clone(),
                option_id: option_id.clone(),
            };
            client.request_with_timeout(params, timeout).await?;
            Reply::PermissionAnswered
        }
        Request::CreateTask(params) => {
            let result = client.request_with_timeout(params.clone(), timeout).await?;
            Reply::TaskCreated(Box::new(result))
        }
        Request::StartSession { task_id } => {
            // An empty first prompt starts the agent idle: the description was the first
            // session's prompt, and sending it again would redo that work unasked.
            let params = SessionStartParams { task_id: task_id.clone(), agent: None, prompt: Some(String::new()) };
            let result = client.request_with_timeout(params, timeout).await?;
            Reply::SessionStarted(Box::new(result.session))
        }
        Request::RenameTask { task_id, title } => {
            let params = TaskUpdateParams { task_id: task_id.clone(), title: Some(title.clone()), description: None };
            Reply::TaskChanged(Box::new(client.request_with_timeout(params, timeout).await?.task))
        }
        Request::ArchiveTask { task_id } => {
            let params = TaskArchiveParams { task_id: task_id.clone(), stop_agents: true };
            Reply::TaskArchived(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::UnarchiveTask { task_id } => {
            let params = TaskUnarchiveParams { task_id: task_id.clone() };
            Reply::TaskChanged(Box::new(client.request_with_timeout(params, timeout).await?.task))
        }
        Request::ListArchived => {
            let params = SessionListParams {
                order: Some(SessionOrder::Recent),
                limit: Some(MAX_SESSION_PAGE),
                archived: Some(ArchivedFilter::Only),
                ..Default::default()
            };
            Reply::ArchivedSessions(client.request_with_timeout(params, timeout).await?.sessions)
        }
        Request::DeleteTask { task_id, stop_agents } => {
            let params = TaskDeleteParams { task_id: task_id.clone(), stop_agents: *stop_agents, ..Default::default() };
            Reply::TaskDeleted(client.request_with_timeout(params, timeout).await?)
        }
        Request::ListPermissions => {
            let params = PermissionListParams { limit: Some(MAX_PERMISSION_PAGE), cursor: None };
            Reply::Permissions(client.request_with_timeout(params, timeout).await?)
        }
        Request::ListRules { session_id } => {
            let params = PermissionRuleListParams { session_id: session_id.clone() };
            let rules = client.request_with_timeout(params, timeout).await?.rules;
            Reply::Rules { session_id: session_id.clone(), rules }
        }
        Request::RevokeRule { session_id, rule_id } => {
            let params = PermissionRuleRevokeParams { session_id: session_id.clone(), rule_id: rule_id.clone() };
            Reply::RuleRevoked(client.request_with_timeout(params, timeout).await?.rule)
        }
        Request::Options { session_id } => {
            let params = SessionOptionsParams { session_id: session_id.clone() };
            Reply::Options(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::SetMode { session_id, mode_id } => {
            let params = SessionSetModeParams { session_id: session_id.clone(), mode_id: mode_id.clone() };
            Reply::Options(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::SetOption { session_id, option_id, value } => {
            let params = SessionSetOptionParams {
                session_id: session_id.clone(),
                option_id: option_id.clone(),
                value: value.clone(),
            };
            Reply::Options(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::ListDevices => {
            let listed = client.request_with_timeout(baton_protocol::DeviceListParams {}, timeout).await?;
            Reply::Devices(listed.devices)
        }
        Request::PairDevice { server_url } => {
            let params = baton_protocol::DevicePairParams { name: Some("phone".into()), ..Default::default() };
            let result = client.request_with_timeout(params, timeout).await?;
            let pairing = crate::app::Pairing::new(server_url, result).map_err(ClientError::Decode)?;
            Reply::Paired(Box::new(pairing))
        }
        Request::RevokeDevice { device_id } => {
            let params = baton_protocol::DeviceRevokeParams { device_id: device_id.clone() };
            Reply::DeviceRevoked(client.request_with_timeout(params, timeout).await?)
        }
        Request::QueueList { session_id } => {
            let params = baton_protocol::QueueListParams { session_id: session_id.clone() };
            Reply::Queue(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::QueueEdit { session_id, id, content } => {
            let params = baton_protocol::QueueEditParams {
                session_id: session_id.clone(),
                id: id.clone(),
                content: content.clone(),
            };
            Reply::Queue(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::QueueRemove { session_id, id } => {
            let params = baton_protocol::QueueRemoveParams { session_id: session_id.clone(), id: id.clone() };
            Reply::Queue(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::QueueRelease { session_id } => {
            let params = baton_protocol::QueueReleaseParams { session_id: session_id.clone() };
            Reply::Queue(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::Export { session_id, format, thoughts, path, overwrite } => {
            let params = SessionExportParams { thoughts: *thoughts, ..SessionExportParams::new(session_id, *format) };
            return crate::export_file::export(client, params, path, *overwrite, timeout).await;
        }
        Request::Search { query, cursor } => {
            let params = MessageSearchParams { cursor: cursor.clone(), ..MessageSearchParams::new(query) };
            Reply::SearchHits(client.request_with_timeout(params, timeout).await?)
        }
        Request::Fork { session_id, agent } => {
            let params = SessionForkParams { session_id: session_id.clone(), agent: agent.clone() };
            Reply::Forked(Box::new(client.request_with_timeout(params, timeout).await?.session))
        }
        Request::Usage { session_id } => {
            let params = UsageGetParams { session_id: session_id.clone() };
            Reply::Usage(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::Changes { task_id, counts } => {
            let params = baton_protocol::TaskChangesParams {
                task_id: task_id.clone(),
                offset: 0,
                limit: Some(baton_protocol::MAX_CHANGES_PAGE),
                counts: *counts,
            };
            Reply::Changes(Box::new(client.request_with_timeout(params, timeout).await?))
        }
        Request::Diff { task_id, path, part } => {
            let params = baton_protocol::TaskDiffParams { task_id: task_id.clone(), path: path.clone(), part: *part };
            let result = client.request_with_timeout(params, timeout).await?;
            Reply::Diff { task_id: task_id.clone(), result: Box::new(result) }
        }
        Request::Commit { task_id, message, paths, force } => {
            let params = baton_protocol::TaskCommitParams {
                task_id: task_id.clone(),
                message: message.clone(),
                paths: paths.clone(),
                force: *force,
            };
            Reply::Committed(client.request_with_timeout(params, timeout).await?)
        }
        Request::Merge { task_id, remove_worktree, force } => {
            let params = baton_protocol::TaskMergeParams {
                task_id: task_id.clone(),
                remove_worktree: *remove_worktree,
                force: *force,
            };
            Reply::Merged(client.request_with_timeout(params, timeout).await?)
        }
        Request::PullRequest { task_id, force } => {
            let params = baton_protocol::TaskPullRequestParams {
                task_id: task_id.clone(),
                title: None,
                body: None,
                force: *force,
            };
            Reply::PullRequestOpened(client.request_with_timeout(params, timeout).await?)
        }
        Request::Shell { task_id } => {
            let params = baton_protocol::TaskShellParams { task_id: task_id.clone() };
            Reply::Shell(client.request_with_timeout(params, timeout).await?)
        }
    })
}
