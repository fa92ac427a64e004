//! Narrow terminals: the key hints shrink instead of vanishing, agent names are cut at one
//! column on every row, and the transcript keeps at least half the width.

mod common;

use baton_tui::app::App;
use baton_tui::command::{Reply, Request};

use common::*;

/// The three sessions, with a long agent name on the one row without a NEEDS RESUME badge.
fn long_agent_names() -> App {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    app.take_commands();
    let mut rows = session_rows();
    rows[0].status.agent = "mock".into();
    rows[1].status.agent = "gemini-cli-experimental".into();
    rows[2].status.agent = "claude-code".into();
    reply(&mut app, 1, Request::ListSessions, Reply::Sessions(rows));
    app
}

/// The column (in characters) where `needle` starts in `line`.
fn column_of(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|at| line[..at].chars().count())
}

#[test]
fn at_80_columns_the_hints_shrink_to_what_fits() {
    let app = listed_app();
    let screen = render_sized(&app, 80, 24);
    let status = screen.lines().last().unwrap_or_default();
    assert!(status.contains("? help"), "{screen}");
    // Wide enough, the keys for the highlighted session's state (it needs resuming) are all there.
    let screen = render_sized(&app, 120, 24);
    let status = screen.lines().last().unwrap_or_default();
    assert!(status.contains("NEEDS RESUME │ Enter open and resume · r resume · ? help · q quit"), "{screen}");
    // Very narrow: still "? help", on a row of its own when the last one is full.
    for width in [36, 24] {
        let screen = render_sized(&app, width, 24);
        assert!(screen.contains("? help"), "{screen}");
    }
}

#[test]
fn agent_names_are_cut_at_one_column_so_ages_line_up() {
    let app = long_agent_names();
    let screen = render_sized(&app, 80, 24);
    let ages: Vec<Option<usize>> = [("mock", "5m"), ("gemini", "2h"), ("claude", "40s")]
        .iter()
        .map(|(agent, age)| {
            let line = screen.lines().find(|line| line.contains(agent)).unwrap_or_default();
            column_of(line, age).map(|start| start + age.chars().count())
        })
        .collect();
    assert!(ages.iter().all(|end| end.is_some() && *end == ages[0]), "ages end at {ages:?}:\n{screen}");
    assert!(screen.contains("gemini-cli…"), "{screen}");
}

#[test]
fn the_transcript_keeps_at_least_half_of_a_narrow_screen() {
    let app = long_agent_names();
    let screen = render_sized(&app, 50, 24);
    let top = screen.lines().next().unwrap_or_default().trim_matches('"');
    let list_width = column_of(top, "┐┌").map(|at| at + 1).unwrap_or_default();
    assert!(list_width > 0 && list_width <= 25, "the list takes {list_width} of 50 columns:\n{screen}");
}
