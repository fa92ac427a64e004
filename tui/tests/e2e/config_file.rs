//! `tui.toml`: a rebound key works and its old key no longer does, a conflict is refused with
//! its line, the light theme and `NO_COLOR` recolour the screen, `--print-config` writes the
//! defaults, and the real `baton` refuses a bad file naming the line.

use std::process::{Command, Stdio};

use baton_tui::app::Overlay;
use baton_tui::config::{parse, Theme, ThemeName};
use crossterm::event::KeyCode;
use ratatui::style::Color;

use crate::common::*;

#[test]
fn a_rebound_key_acts_and_the_old_one_no_longer_does() {
    let mut app = listed_app();
    let config = parse("[keys]\nnew_task = \"+\"\narchived = [\"z\", \"Z\"]\n", false).expect("the file parses");
    app.set_config(config);
    press(&mut app, KeyCode::Char('n'));
    assert!(app.overlay().is_none(), "n is no longer the new task");
    press(&mut app, KeyCode::Char('+'));
    assert!(matches!(app.overlay(), Some(Overlay::NewTask(_))));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('Z'));
    assert!(matches!(app.overlay(), Some(Overlay::Archived(_))));
}

/// A view's own keys (`[archived_keys]`) are rebound there, and the help lists what the file
/// changed.
#[test]
fn a_views_rebound_key_acts_there_and_the_help_lists_it() {
    let mut app = listed_app();
    let config = parse("[archived_keys]\nclose = \"x\"\n", false).expect("the file parses");
    app.set_config(config);
    press(&mut app, KeyCode::Char('z'));
    assert!(matches!(app.overlay(), Some(Overlay::Archived(_))));
    press(&mut app, KeyCode::Char('q'));
    assert!(matches!(app.overlay(), Some(Overlay::Archived(_))), "q no longer closes the archived tasks");
    press(&mut app, KeyCode::Char('x'));
    assert!(app.overlay().is_none(), "x closes them");
    press(&mut app, KeyCode::Char('x'));
    assert!(matches!(app.overlay(), Some(Overlay::Export(_))), "x is still the list's export");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('?'));
    let help = draw_sized(&mut app, 100, 60).join("\n");
    assert!(help.contains("Your keys (tui.toml"), "{help}");
    assert!(help.contains("close in [archived_keys]"), "{help}");
}

#[test]
fn a_conflict_is_refused_with_its_line() {
    let (line, message) = parse("# mine\n[keys]\narchive = \"D\"\n", false).expect_err("D is delete's");
    assert_eq!(line, Some(3));
    assert!(message.contains("D is already delete's key"), "{message}");
}

/// The cell at `text`'s first character in a drawn frame.
fn cell_colors(app: &baton_tui::app::App, text: &str) -> (Color, Color) {
    let backend = ratatui::backend::TestBackend::new(80, 24);
    let mut terminal = ratatui::Terminal::new(backend).expect("test terminal");
    let ctx = baton_tui::ui::ViewContext { now: now(), instant: std::time::Instant::now() };
    terminal
        .draw(|frame| {
            baton_tui::ui::draw(frame, app, &ctx);
        })
        .expect("draw");
    let buffer = terminal.backend().buffer().clone();
    let symbols: Vec<&str> = buffer.content.iter().map(|c| c.symbol()).collect();
    let first = text.chars().next().expect("text").to_string();
    let at = (0..symbols.len())
        .find(|&i| {
            symbols[i] == first
                && text.chars().enumerate().all(|(k, c)| symbols.get(i + k).is_some_and(|s| *s == c.to_string()))
        })
        .unwrap_or_else(|| panic!("{text} is not drawn"));
    (buffer.content[at].fg, buffer.content[at].bg)
}

#[test]
fn the_light_theme_and_no_color_recolour_the_screen() {
    let mut app = listed_app();
    let dark = cell_colors(&app, "NEEDS RESUME");
    assert_eq!(dark.1, Color::Yellow, "the badge's background");
    let mut config = parse("[colors]\ntheme = \"light\"\n", false).expect("parses");
    app.set_config(config.clone());
    assert_eq!(cell_colors(&app, "NEEDS RESUME").1, Color::Indexed(130));
    config = parse("[colors]\nyellow = \"#b58900\"\n", false).expect("parses");
    app.set_config(config);
    assert_eq!(cell_colors(&app, "NEEDS RESUME").1, Color::Rgb(0xb5, 0x89, 0x00));
    let plain = baton_tui::config::Config { theme: Theme::new(ThemeName::Dark, true), ..Default::default() };
    app.set_config(plain);
    assert_eq!(cell_colors(&app, "NEEDS RESUME"), (Color::Reset, Color::Reset));
}

#[test]
fn print_config_writes_the_defaults_and_a_bad_file_is_refused_naming_its_line() {
    let baton = env!("CARGO_BIN_EXE_baton");
    let printed = Command::new(baton).arg("--print-config").output().expect("baton --print-config");
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).expect("UTF-8");
    assert!(text.contains("new_task = \"n\"") && text.contains("theme = \"dark\""), "{text}");
    parse(&text, false).expect("the printed defaults are a valid file");

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("tui.toml");
    std::fs::write(&file, "[keys]\nnew_task = \"+\"\nfork = \"+\"\n").expect("write");
    let refused = Command::new(baton)
        .args(["--config", &file.display().to_string(), "--server", "ws://127.0.0.1:9/ws", "--no-spawn"])
        .env("BATON_DATA_DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("baton --config");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("tui.toml, line 3: + is bound to both new_task (line 2) and fork"), "{said}");
    assert!(said.contains("baton --no-config"), "says how to start anyway: {said}");
}
