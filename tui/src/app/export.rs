//! `x`: the opened session's transcript to a file. A form asks where (the server's file name
//! in the directory `baton` runs in, by default), in which format, with or without thoughts;
//! the runner fetches the pages and writes the file (`export_file.rs`); the status bar says
//! where it went. An existing file is never replaced without a second Enter.

use baton_protocol::ExportFormat;

use crate::action::Action;
use crate::command::{Reply, Request};
use crate::text_field::TextField;

use super::{App, Overlay};

/// The export form.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportForm {
    pub session_id: String,
    /// The task's title, for the default file name when the format changes.
    title: String,
    pub path: TextField,
    pub format: ExportFormat,
    pub thoughts: bool,
    /// The file named is there: Enter again replaces it.
    pub overwrite: bool,
    /// Sent and not answered yet: the form stays open to show an error with what was typed.
    pub submitting: bool,
    pub error: Option<String>,
}

impl ExportForm {
    fn new(session_id: String, title: String) -> Self {
        let path = TextField::with_text(default_path(&title, &session_id, ExportFormat::Markdown));
        ExportForm {
            session_id,
            title,
            path,
            format: ExportFormat::Markdown,
            thoughts: false,
            overwrite: false,
            submitting: false,
            error: None,
        }
    }

    /// Markdown ↔ JSON Lines; a path left at its default follows the format's extension.
    fn toggle_format(&mut self) {
        let old_default = default_path(&self.title, &self.session_id, self.format);
        self.format = match self.format {
            ExportFormat::Markdown => ExportFormat::Jsonl,
            ExportFormat::Jsonl => ExportFormat::Markdown,
        };
        if self.path.text() == old_default {
            self.path = TextField::with_text(default_path(&self.title, &self.session_id, self.format));
        }
        self.overwrite = false;
        self.error = None;
    }
}

/// `./<the server's file name>`: the title made safe, the session id, the extension.
fn default_path(title: &str, session_id: &str, format: ExportFormat) -> String {
    format!("./{}", format.file_name(title, session_id))
}

impl App {
    /// `x`: asks where to write the highlighted session's transcript (opened first, so that
    /// the transcript on screen is the one written).
    pub(super) fn open_export_form(&mut self) {
        self.show_key_target();
        let Some(session_id) = self.opened.clone() else {
            self.flash("open a session (Enter) to export its transcript", true);
            return;
        };
        let title = self.sessions.get(&session_id).map(|row| row.task_title.clone()).unwrap_or_default();
        self.overlay = Some(Overlay::Export(ExportForm::new(session_id, title)));
    }

    /// What the form does with an action; false when the form is not open.
    pub(super) fn export_form_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::Export(form)) = &mut self.overlay else {
            return false;
        };
        match action {
            Action::Edit(op) => {
                form.path.apply(op);
                form.overwrite = false;
                form.error = None;
            }
            Action::ToggleExportFormat => form.toggle_format(),
            Action::ToggleExportThoughts => form.thoughts = !form.thoughts,
            Action::Submit if form.submitting => {}
            Action::Submit => {
                let typed = form.path.text().trim();
                if typed.is_empty() {
                    form.error = Some("a file name is required".into());
                    return true;
                }
                let request = Request::Export {
                    session_id: form.session_id.clone(),
                    format: form.format,
                    thoughts: form.thoughts,
                    path: crate::export_file::expand_home(typed),
                    overwrite: form.overwrite,
                };
                form.submitting = true;
                form.error = None;
                self.send(request);
            }
            // Closing is the app's (Esc); anything else does nothing over the form.
            _ => return false,
        }
        true
    }

    pub(super) fn on_export_reply(&mut self, reply: Reply) {
        let form = match &mut self.overlay {
            Some(Overlay::Export(form)) if form.submitting => Some(form),
            _ => None,
        };
        match reply {
            Reply::Exported { path, bytes } => {
                if form.is_some() {
                    self.overlay = None;
                }
                self.flash(format!("exported the transcript to {} ({})", path.display(), size(bytes)), false);
            }
            Reply::ExportNotWritten { reason, exists } => match form {
                Some(form) => {
                    form.submitting = false;
                    form.overwrite = exists;
                    form.error = Some(if exists {
                        "the file exists: Enter again replaces it, or change the name".to_string()
                    } else {
                        format!("could not write the file: {reason}")
                    });
                }
                None => self.flash(format!("could not write the export: {reason}"), true),
            },
            _ => {}
        }
    }

    /// The export failed at the server (or the connection): said in the form, kept open.
    pub(super) fn export_failed(&mut self, text: String) -> bool {
        match &mut self.overlay {
            Some(Overlay::Export(form)) if form.submitting => {
                form.submitting = false;
                form.error = Some(text);
                true
            }
            _ => false,
        }
    }
}

/// "812 B", "12.4 KB", "3.1 MB".
pub(super) fn size(bytes: usize) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_path_follows_the_format_until_edited() {
        let mut form = ExportForm::new("sess-1".into(), "Fix the Bug".into());
        assert_eq!(form.path.text(), "./fix-the-bug-sess-1.md");
        form.toggle_format();
        assert_eq!((form.format, form.path.text()), (ExportFormat::Jsonl, "./fix-the-bug-sess-1.jsonl"));
        form.path = TextField::with_text("notes.txt");
        form.toggle_format();
        assert_eq!(form.path.text(), "notes.txt");
    }

    #[test]
    fn sizes_are_short() {
        assert_eq!(size(812), "812 B");
        assert_eq!(size(12_700), "12.4 KB");
        assert_eq!(size(3_250_000), "3.1 MB");
    }
}
