//! Narrow terminals: the key hints shrink instead of vanishing, agent names are cut at one
//! column on every row, and the transcript keeps at least half the width.

use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Reply, Request};

use crate::common::*;

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
    let screen = render_sized(&app, 100, 24);
    let ages: Vec<Option<usize>> = [("mock", "5m"), ("gemini", "2h"), ("claude", "40s")]
        .iter()
        .map(|(agent, age)| {
            let line = screen.lines().find(|line| line.contains(agent)).unwrap_or_default();
            column_of(line, age).map(|start| start + age.chars().count())
        })
        .collect();
    assert!(ages.iter().all(|end| end.is_some() && *end == ages[0]), "ages end at {ages:?}:\n{screen}");
    assert!(screen.contains("gemini-cli-e…"), "the longest name is cut: {screen}");
}

/// Draws on a `width` x `height` terminal and gives the app the frame's sizes, as the event loop does.
fn draw_sized(app: &mut App, width: u16, height: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut terminal = ratatui::Terminal::new(backend).expect("test terminal");
    let ctx = baton_tui::ui::ViewContext { now: now(), instant: std::time::Instant::now() };
    let mut metrics = Default::default();
    terminal.draw(|frame| metrics = baton_tui::ui::draw(frame, app, &ctx)).expect("draw");
    app.set_frame_metrics(metrics);
    terminal.backend().to_string()
}

/// Below 70 columns the list and the session take turns, each with the whole width: Enter
/// shows the session, Esc the list again.
#[test]
fn a_narrow_screen_shows_the_list_or_the_session_whole() {
    for (width, height) in [(60, 20), (40, 12)] {
        let mut app = long_agent_names();
        let list = draw_sized(&mut app, width, height);
        let top = list.lines().next().unwrap_or_default().trim_matches('"');
        assert!(top.starts_with("┌ Sessions") && !top.contains("┐┌"), "the list alone:\n{list}");
        insta::assert_snapshot!(format!("list_{width}x{height}"), list);

        app.handle_action(Action::OpenSelected);
        let opened = app.opened_session().expect("opened").to_string();
        let empty = baton_protocol::MessageListResult { messages: vec![], has_more: false, cut: Vec::new() };
        reply(&mut app, 1, Request::LoadMessages { session_id: opened.clone() }, Reply::Messages(empty));
        let session = draw_sized(&mut app, width, height);
        assert!(!session.contains("┌ Sessions"), "the session alone:\n{session}");
        insta::assert_snapshot!(format!("session_{width}x{height}"), session);

        app.handle_action(Action::Escape);
        let back = draw_sized(&mut app, width, height);
        assert!(back.contains("┌ Sessions"), "Esc shows the list again:\n{back}");
        assert_eq!(app.opened_session(), Some(opened.as_str()), "and the session stays open");
    }
}

/// The help on a 40x12 terminal: it scrolls, and its title says which rows are shown.
#[test]
fn the_help_scrolls_on_a_small_terminal() {
    let mut app = long_agent_names();
    draw_sized(&mut app, 40, 12);
    app.handle_action(Action::ToggleHelp);
    let first = draw_sized(&mut app, 40, 12);
    assert!(first.contains("Help 1-"), "{first}");
    assert!(first.contains("move in the session list"), "{first}");
    for _ in 0..200 {
        app.handle_action(Action::ScrollLineDown);
    }
    let last = draw_sized(&mut app, 40, 12);
    assert!(last.contains("Esc or ? closes this help"), "scrolled to the end:\n{last}");
    assert!(!last.contains("move in the session list"), "{last}");
    insta::assert_snapshot!("help_40x12_scrolled_to_the_end", last);
}

/// At 80 columns the list is as wide as its rows need (not half the screen), a permission
/// request takes the state's column rather than widening it, and the options of a request
/// never wrap in the middle of a label.
#[test]
fn at_80x24_the_list_fits_its_rows_and_options_keep_their_labels_whole() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = listed_app();
        open(&mut app, "s-1");
        state(&mut app, "s-1", "t-1", baton_protocol::SessionState::Running);
        let option = |id: &str, name: &str, kind: &str| baton_protocol::PermissionOption {
            option_id: id.into(),
            name: name.into(),
            kind: kind.into(),
        };
        let ask = baton_protocol::SessionEvent::PermissionRequest {
            request_id: "p-1".into(),
            tool_call: serde_json::json!({"title": "Run the whole test suite"}),
            options: vec![
                option("allow", "Allow once", "allow_once"),
                option("allow-always", "Always allow this command", "allow_always"),
                option("reject", "Reject once", "reject_once"),
                option("reject-always", "Always reject this command", "reject_always"),
            ],
        };
        app.on_notification(baton_protocol::Notification::Event(record("s-1", 1, ask)));
        let screen = crate::common::draw_sized(&mut app, width, height);
        for label in
            ["[1] Allow once", "[2] Always allow this command", "[3] Reject once", "[4] Always reject this command"]
        {
            assert!(screen.iter().any(|row| row.contains(label)), "{label} cut: {screen:#?}");
        }
        if width == 80 {
            let list = app.frame_metrics().panes.list.expect("the list is drawn");
            assert!(list.width <= 36, "the list takes {} of 80 columns", list.width);
            assert!(screen.iter().any(|row| row.contains("PERMISSION")), "{screen:#?}");
        }
        insta::assert_snapshot!(format!("list_and_options_{width}x{height}"), screen.join("\n"));
    }
}
