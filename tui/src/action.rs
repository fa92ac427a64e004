//! What the user asked for, independent of the key that asked. The keymap produces these; the
//! app interprets them in its current mode.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// Ctrl-C: clears the prompt being written, or quits when there is none (so a draft is
    /// never lost to one keypress).
    Interrupt,
    /// Hides the message in the status bar.
    Dismiss,
    /// Esc in the list: cancels the running turn of the highlighted session; with no turn
    /// running there, hides the message, then clears the filter.
    Escape,
    ToggleHelp,
    /// Closes the help, a confirmation or the new-task form without acting.
    CloseOverlay,

    /// Moves the cursor in the session list.
    MoveUp,
    MoveDown,
    /// Opens the session under the cursor: shows it, subscribes, runs the auto-resume.
    OpenSelected,

    FocusInput,
    LeaveInput,
    /// `/`: type to filter the session list (by title, agent or state).
    StartFilter,
    /// Enter in the filter: keep it and go back to the list.
    KeepFilter,
    /// Esc in the filter: clear it and go back to the list.
    ClearFilter,
    /// Shows or folds the agent's thoughts in the transcript.
    ToggleThoughts,
    /// `w`: opens the next session that needs the user, the one waiting longest first.
    NextNeedingYou,
    /// `W`: shows only the sessions that need the user, or every session again.
    ToggleNeedsYouOnly,
    /// Sends the prompt, or submits the new-task form.
    Submit,
    Edit(EditOp),
    /// Up/Down in the prompt: a line up or down, or past the first or last line, the previous or
    /// next prompt sent.
    PromptUp,
    PromptDown,
    /// Ctrl-P/Ctrl-N in the prompt: the previous or next prompt sent, wherever the cursor is.
    HistoryPrev,
    HistoryNext,

    /// These act on the session under the list cursor, opened or not.
    CancelTurn,
    Resume,
    /// Resume fresh (a new agent session, given the conversation so far); asks first.
    ResumeFresh,
    /// Stops the agent; asks for confirmation first.
    Stop,
    NewTask,
    /// A new session of the highlighted session's task; asks for confirmation first.
    StartSession,
    /// Edits the title of the highlighted session's task.
    RenameTask,
    /// Archives the highlighted session's task after a question: it leaves the list, its data
    /// is kept, its running agents are stopped.
    ArchiveTask,
    /// `z`: the archived tasks' sessions.
    OpenArchived,
    /// `O`: the web page's address (with the token), shown and copied.
    ShowPageAddress,
    /// `u` in the archived view: the highlighted session's task is shown in the list again.
    Unarchive,
    /// Deletes the highlighted session's task with its sessions; asks for confirmation first.
    DeleteTask,

    AllowPermission,
    RejectPermission,
    /// Picks a permission option by its position (0-based).
    ChooseOption(usize),
    /// The approval queue: every session's pending permission requests.
    OpenApprovals,
    /// The standing answers of the session.
    OpenRules,
    RevokeRule,
    /// `M`: the modes and options (model, effort...) of the session's agent.
    OpenOptions,
    /// In that list: switch to the value under the cursor.
    PickOption,
    /// `p`: the paired devices (phones), and pairing a new one.
    OpenDevices,
    /// In that list: a one-time pairing code, shown as a QR code and an address.
    PairDevice,
    /// In that list: revoke the device under the cursor (asks first).
    RevokeDevice,
    /// `u`: the opened session's queued messages.
    OpenQueue,
    /// `d`: the changes of the highlighted session's task.
    OpenChanges,
    /// `!`: a shell where the highlighted session's agent works (the TUI steps aside until it
    /// exits).
    OpenShell,
    /// In the changes: the next or previous hunk of the diff (past the last one, the next
    /// file).
    NextHunk,
    PrevHunk,
    /// In the changes: keep the uncommitted file under the cursor in the next commit, or leave
    /// it out.
    ToggleKeep,
    RefreshChanges,
    /// In the changes: write the commit message (the chosen files are committed).
    Commit,
    /// In the changes: merge into the base branch (asks first); `remove_worktree` also removes
    /// the worktree and branch after.
    Merge {
        remove_worktree: bool,
    },
    /// In the changes: push and open a pull request (asks first).
    PullRequest,
    /// In that list: take the message under the cursor out of the queue.
    RemoveQueued,
    /// In that list: send the next message of a held queue.
    ReleaseQueue,
    /// In that list: edit the message under the cursor in the prompt box (Enter saves it).
    EditQueued,

    /// Stops the local server and its agents; asks first.
    StopServer,
    /// Copies the opened session's last answer to the terminal's clipboard (OSC 52).
    CopyAnswer,
    /// Copies the last fenced code block of that answer.
    CopyCodeBlock,
    /// `E`: the last error in full, in a popup that scrolls.
    ShowError,
    /// `m`: mouse capture on or off (off by default, so the terminal's own selection works).
    ToggleMouse,
    /// `x`: exports the opened session's transcript to a file; asks where first.
    Export,
    /// `f`: full-text search over every session's messages (`message.search`).
    Search,
    /// `F`: forks the highlighted session (a new session of its task from the conversation so
    /// far); asks first.
    Fork,
    /// Ctrl-S in the prompt: sends the message first, cancelling the running turn for it.
    Steer,
    /// `H`: hands the highlighted session's conversation to another agent (a list of agents to
    /// pick from; Enter starts the new session).
    HandOver,
    /// In the export form: Markdown or JSON Lines.
    ToggleExportFormat,
    /// In the export form: with or without the agent's thoughts.
    ToggleExportThoughts,

    /// By a page.
    ScrollUp,
    ScrollDown,
    /// By one line.
    ScrollLineUp,
    ScrollLineDown,
    ScrollTop,
    ScrollBottom,

    /// Gives the transcript the focus (`v` in the list, Ctrl-O in the prompt), or hands it back
    /// to where it came from (Esc, `v`).
    FocusTranscript,
    LeaveTranscript,
    /// In the focused transcript: selects the entry above or below the selected one, scrolling
    /// it into view.
    PrevEntry,
    NextEntry,
    /// The same, skipping to the previous or next tool call.
    PrevToolCall,
    NextToolCall,
    /// Shows or hides the selected tool call's input and output.
    ToggleExpand,

    NextField,
    PrevField,
    /// Accepts the confirmation dialog.
    Confirm,
}

impl Action {
    /// The action does something to a session, the server or the form, rather than move,
    /// scroll, edit or show help: what it says (or its silence) replaces the message shown.
    pub fn acts(&self) -> bool {
        matches!(
            self,
            Action::OpenSelected
                | Action::Submit
                | Action::CancelTurn
                | Action::Resume
                | Action::ResumeFresh
                | Action::Stop
                | Action::NewTask
                | Action::StartSession
                | Action::RenameTask
                | Action::ArchiveTask
                | Action::Unarchive
                | Action::DeleteTask
                | Action::CopyAnswer
                | Action::CopyCodeBlock
                | Action::Export
                | Action::Fork
                | Action::HandOver
                | Action::Steer
                | Action::AllowPermission
                | Action::RejectPermission
                | Action::ChooseOption(_)
                | Action::RevokeRule
                | Action::PickOption
                | Action::Confirm
        )
    }
}

/// An edit of a text field (the prompt or a form field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditOp {
    Insert(char),
    /// Pasted text, inserted as is.
    InsertText(String),
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    /// A line up or down in multi-line text, keeping the column as far as the line allows.
    Up,
    Down,
    Clear,
}
