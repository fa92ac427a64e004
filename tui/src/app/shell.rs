//! `!`: a shell where a task's agent works. The server says where (`task.shell`): the task's
//! directory on this machine (the user's `$SHELL` there), its Docker container (`docker exec
//! -it`) or its ssh host (`ssh -t`); the event loop steps aside from the terminal while the
//! shell runs and draws the screen again when it exits.

use std::path::Path;

use baton_protocol::TaskShellResult;

use super::{App, Overlay};
use crate::command::{Command, Request};

impl App {
    /// `!` in the list: the highlighted session's task; in the changes: the task shown.
    pub(super) fn open_shell(&mut self) {
        let task_id = match &self.overlay {
            Some(Overlay::Changes(view)) => Some(view.task_id.clone()),
            _ => self.sessions.cursor().map(|row| row.status.task_id.clone()),
        };
        match task_id {
            Some(task_id) => self.send(Request::Shell { task_id }),
            None => self.flash("no session selected", true),
        }
    }

    /// `task.shell` answered: run it, unless it cannot run from here (a directory of another
    /// machine: the server's), then say what to run there.
    pub(super) fn shell_answered(&mut self, shell: TaskShellResult) {
        if shell.argv.is_empty() && !Path::new(&shell.workdir).is_dir() {
            self.flash(
                format!(
                    "the task's directory is not on this machine (the server runs elsewhere); there, run: {}",
                    shell.command
                ),
                true,
            );
            return;
        }
        self.commands.push(Command::Shell(shell));
    }

    /// The shell exited: said, with how.
    pub fn shell_ended(&mut self, outcome: Result<std::process::ExitStatus, String>) {
        match outcome {
            Ok(status) if status.success() => self.flash("back from the shell", false),
            Ok(status) => self.flash(format!("back from the shell ({status})"), false),
            Err(error) => self.flash(format!("could not open the shell: {error}"), true),
        }
        self.dirty = true;
    }
}
