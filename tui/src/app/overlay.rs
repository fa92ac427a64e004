//! What can cover the main screen: the help, a confirmation, the new-task form, the last error
//! in full, the approval queue and a session's standing answers.

use baton_protocol::{AgentInfo, TaskCreateParams};

use crate::action::EditOp;
use crate::text_field::TextField;

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help,
    Confirm(Confirmation),
    NewTask(NewTaskForm),
    Rename(RenameForm),
    /// The last error in full (`E`): the status line shows a long one cut to one row.
    ErrorDetails,
    /// Every pending permission request of every session (`A`).
    Approvals(super::ApprovalQueue),
    /// The standing answers of a session (`P`).
    Rules(super::RulesView),
    /// The modes and options of a session's agent (`M`).
    Options(super::OptionsView),
    /// The queued messages of the opened session (`u`).
    Queue(super::QueueView),
    /// The paired devices, and a pairing code (`p`).
    Devices(super::DevicesView),
    /// Full-text search over every session's messages (`f`).
    Search(super::SearchView),
    /// Where to export the opened session's transcript (`x`).
    Export(super::ExportForm),
    /// The archived tasks' sessions (`z`).
    Archived(super::ArchivedView),
    /// The agents to hand a session's conversation to (`H`).
    HandOver(super::HandOverView),
    /// A task's changes (`d`).
    Changes(Box<super::ChangesView>),
}

/// The title of a task, being edited.
#[derive(Debug, Clone, PartialEq)]
pub struct RenameForm {
    pub task_id: String,
    pub title: TextField,
    pub error: Option<String>,
}

/// An action that needs a second keypress because it cannot be undone (or starts an agent).
/// `label` names the session or task it acts on, since that need not be the one on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmation {
    /// Resume fresh: a new agent session, given the conversation so far.
    ResumeFresh { session_id: String, label: String },
    /// Stop the agent: the session becomes COMPLETED.
    Stop { session_id: String, label: String },
    /// A new session of a task, with the task's agent (`agent`, by name).
    StartSession { task_id: String, label: String, agent: String },
    /// Cancel the running turn: the agent stops what it is doing (it stays attached).
    CancelTurn { session_id: String, label: String },
    /// Stop the local server with all its agents (`batond stop --agents`).
    StopServer,
    /// Delete a task with its sessions; `working` says an agent of it runs (and is stopped).
    DeleteTask { task_id: String, label: String, sessions: usize, working: bool },
    /// Fork a session: a new session of its task from the conversation so far.
    Fork { session_id: String, label: String },
    /// Archive a task: it leaves the list; `running` of its `sessions` have an agent, which is
    /// stopped.
    ArchiveTask { task_id: String, label: String, sessions: usize, running: usize },
    /// Launch a FAILED session again, its cause (`error`) fixed.
    RetryFailed { session_id: String, label: String, error: String },
    /// Revoke a paired device: its token stops working, its connections are closed.
    RevokeDevice { device_id: String, label: String },
    /// Merge a task's branch into its base branch; with `remove_worktree`, its worktree and
    /// branch go after, and the task is archived. `force`: though its agent is in a turn.
    Merge { task_id: String, label: String, remove_worktree: bool, force: bool },
    /// Push a task's branch and open a pull request; `force`: though its agent is in a turn.
    PullRequest { task_id: String, label: String, force: bool },
    /// Commit though the task's agent is in a turn (its edits may land half done).
    ForceCommit { task_id: String, label: String, message: String, paths: Option<Vec<String>> },
}

impl Confirmation {
    pub fn question(&self) -> String {
        match self {
            Confirmation::ResumeFresh { label, .. } => {
                format!(
                    "Resume {label} fresh? A new agent session gets the conversation so far with your next message."
                )
            }
            Confirmation::RetryFailed { label, error, .. } => {
                let error = if error.is_empty() { String::new() } else { format!(" It failed: {error}.") };
                format!(
                    "Retry {label}?{error} Its agent is launched again with the conversation so far; \
                     do this once the cause is fixed (F forks it instead)."
                )
            }
            Confirmation::Merge { label, remove_worktree, force, .. } => {
                let after = if *remove_worktree {
                    " Then its worktree and branch are removed and the task is archived."
                } else {
                    " Its worktree stays (M merges and removes it)."
                };
                let busy = if *force { " Its agent is in a turn: merge anyway?" } else { "" };
                format!("Merge the branch of {label} into its base branch?{after}{busy}")
            }
            Confirmation::PullRequest { label, force, .. } => {
                let busy = if *force { " Its agent is in a turn: go ahead anyway?" } else { "" };
                format!("Push the branch of {label} to origin and open a pull request (gh)?{busy}")
            }
            Confirmation::ForceCommit { label, .. } => {
                format!("The agent of {label} is in a turn: its edits may land half done. Commit anyway?")
            }
            Confirmation::RevokeDevice { label, .. } => format!(
                "Revoke the device {label}? Its connections are closed at once and its token opens nothing any \
                 more; pair it again (p, n) to use it."
            ),
            Confirmation::Stop { label, .. } => {
                format!("Stop {label}? Its agent is stopped for good (S starts a new session of the task).")
            }
            Confirmation::StartSession { label, .. } => {
                format!("Start a new session of {label}? Its agent starts idle; write to it with i.")
            }
            Confirmation::StopServer => {
                "Stop the local server and every agent it runs, hosted, Docker and ssh ones too? \
                Sessions keep their state and resume when the server is started again (baton starts it)."
                    .to_string()
            }
            Confirmation::CancelTurn { label, .. } => {
                format!("Cancel the running turn of {label}? The agent stops what it is doing and waits for you.")
            }
            Confirmation::Fork { label, .. } => format!(
                "Fork {label}? A new session of its task starts from the conversation so far; this one stays as it is."
            ),
            Confirmation::ArchiveTask { label, sessions, running, .. } => {
                let agents = match running {
                    0 => String::new(),
                    1 => " Its running agent is stopped (the conversation is kept).".to_string(),
                    n => format!(" Its {n} running agents are stopped (the conversations are kept)."),
                };
                format!(
                    "Archive the task {label} with its {sessions} session(s)? It leaves the list; z lists the \
                     archived tasks and u there brings it back.{agents}"
                )
            }
            Confirmation::DeleteTask { label, sessions, working, .. } => {
                let stopping = if *working {
                    " Its running agent is stopped first."
                } else {
                    " A running agent of it would be stopped first."
                };
                format!(
                    "Delete the task {label} with its {sessions} session(s), their conversations and its worktree? \
                     This cannot be undone.{stopping} A worktree with uncommitted changes is kept (the server refuses)."
                )
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormField {
    Title,
    Description,
    Agent,
    Workdir,
    /// Whether the task gets a git branch and worktree of its own (Space toggles).
    Worktree,
}

impl FormField {
    pub const ALL: [FormField; 5] =
        [FormField::Title, FormField::Description, FormField::Agent, FormField::Workdir, FormField::Worktree];

    pub fn label(self) -> &'static str {
        match self {
            FormField::Title => "Title",
            FormField::Description => "Description",
            FormField::Agent => "Agent",
            FormField::Workdir => "Workdir",
            FormField::Worktree => "Worktree",
        }
    }
}

/// The new-task form: title, description (the first prompt), an agent from `agent.list`, and
/// the directory the agent works in (empty: the server's).
#[derive(Debug, Clone, PartialEq)]
pub struct NewTaskForm {
    pub title: TextField,
    pub description: TextField,
    pub workdir: TextField,
    /// A branch and worktree of its own, made from the repository `workdir` names: its changes
    /// can then be merged or sent as a pull request (`d`).
    pub worktree: bool,
    /// Index into the app's agent list.
    pub agent: usize,
    /// The user picked the agent (←/→): a list arriving later keeps the choice.
    pub agent_chosen: bool,
    pub focus: FormField,
    pub error: Option<String>,
    /// The agent (index) the user was told is not installed: Enter again creates the task
    /// with it anyway.
    pub missing_agent_warned: Option<usize>,
    /// `task.create` was sent and has not been answered: the form stays open so that an error
    /// can be shown with what was typed.
    pub submitting: bool,
    /// The agent to start with when the server has it (`tui.toml`).
    preferred: Option<String>,
}

impl NewTaskForm {
    /// A blank form choosing the first installed agent.
    pub fn new(agents: &[AgentInfo], workdir: Option<String>) -> Self {
        NewTaskForm {
            title: TextField::default(),
            description: TextField::default(),
            workdir: TextField::with_text(workdir.unwrap_or_default()),
            worktree: false,
            agent: first_installed(agents),
            agent_chosen: false,
            focus: FormField::Title,
            error: None,
            missing_agent_warned: None,
            submitting: false,
            preferred: None,
        }
    }

    /// `agent.list` arrived while the form is open: choose the first installed agent (or the
    /// configured one), unless the user chose one.
    pub fn agents_arrived(&mut self, agents: &[AgentInfo]) {
        if !self.agent_chosen {
            self.agent = first_installed(agents);
            self.prefer_agent(agents, self.preferred.clone().as_deref());
        }
    }

    /// Starts with `name` (`tui.toml`'s default agent) when the server has it.
    pub fn prefer_agent(&mut self, agents: &[AgentInfo], name: Option<&str>) {
        self.preferred = name.map(str::to_string);
        if let Some(at) = name.and_then(|name| agents.iter().position(|a| a.name == name)) {
            self.agent = at;
        }
    }

    pub fn move_focus(&mut self, forward: bool) {
        let fields = FormField::ALL;
        let at = fields.iter().position(|f| *f == self.focus).unwrap_or(0);
        let next = if forward { (at + 1) % fields.len() } else { (at + fields.len() - 1) % fields.len() };
        self.focus = fields[next];
    }

    /// Edits the focused field; on the agent field, Left and Right choose the agent.
    pub fn edit(&mut self, op: &EditOp, agent_count: usize) {
        match self.focus {
            FormField::Title => self.title.apply(op),
            FormField::Description => self.description.apply(op),
            FormField::Workdir => self.workdir.apply(op),
            FormField::Agent if agent_count > 0 => match op {
                EditOp::Left => {
                    self.agent = (self.agent + agent_count - 1) % agent_count;
                    self.agent_chosen = true;
                }
                EditOp::Right | EditOp::Insert(' ') => {
                    self.agent = (self.agent + 1) % agent_count;
                    self.agent_chosen = true;
                }
                _ => {}
            },
            FormField::Agent => {}
            FormField::Worktree => {
                if matches!(op, EditOp::Left | EditOp::Right | EditOp::Insert(' ')) {
                    self.worktree = !self.worktree;
                }
            }
        }
    }

    /// The `task.create` request, or what is missing. An agent the server did not find is
    /// refused once, with the reason: it can still be chosen (the server may be wrong about
    /// PATH), but not by accident.
    pub fn params(&mut self, agents: &[AgentInfo]) -> Result<TaskCreateParams, String> {
        let title = self.title.text().trim();
        if title.is_empty() {
            return Err("a title is required".into());
        }
        let agent = agents.get(self.agent).ok_or("no agent to choose from (agent.list is empty)")?;
        if !agent.installed && self.missing_agent_warned != Some(self.agent) {
            self.missing_agent_warned = Some(self.agent);
            return Err(format!(
                "{} is not installed on the server: Enter again to create the task anyway, or ←/→ for another agent",
                agent.display_name
            ));
        }
        let mut params = TaskCreateParams::new(title, self.description.text().trim(), &agent.name);
        let workdir = self.workdir.text().trim();
        if self.worktree {
            if workdir.is_empty() {
                return Err("a worktree is made from a repository: give its directory in Workdir".into());
            }
            params.repository = Some(workdir.to_string());
            params.worktree = true;
        } else if !workdir.is_empty() {
            params.workdir = Some(workdir.to_string());
        }
        params.start = true;
        Ok(params)
    }
}

fn first_installed(agents: &[AgentInfo]) -> usize {
    agents.iter().position(|a| a.installed).unwrap_or(0)
}
