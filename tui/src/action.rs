//! What the user asked for, independent of the key that asked. The keymap produces these; the
//! app interprets them in its current mode.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Quit,
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
    /// Sends the prompt, or submits the new-task form.
    Submit,
    Edit(EditOp),

    CancelTurn,
    Resume,
    /// Resume without the saved conversation; asks for confirmation first.
    ResumeFresh,
    /// Stops the agent; asks for confirmation first.
    Stop,
    NewTask,

    AllowPermission,
    RejectPermission,
    /// Picks a permission option by its position (0-based).
    ChooseOption(usize),

    ScrollUp,
    ScrollDown,
    ScrollTop,
    ScrollBottom,

    NextField,
    PrevField,
    /// Accepts the confirmation dialog.
    Confirm,
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
    Clear,
}
