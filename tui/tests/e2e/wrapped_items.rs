//! A list item or a quote of an agent's answer that wraps keeps its column: the rows after the
//! first start under the item's text (or behind the quote's bar), not at the pane's edge.

use baton_protocol::Notification;

use crate::common::*;

const ANSWER: &str = "Done:\n\n- the first item is long enough to wrap onto a second row and a third\n\n\
    > a quoted line that is long enough to wrap onto the next row too";

/// The transcript pane's text on each row of a 60x20 screen (right of the list's border).
fn transcript_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .map(|row| row.trim_matches('"'))
        .filter_map(|row| row.split_once("││").map(|(_, pane)| pane.trim_end_matches('│').trim_end().to_string()))
        .collect()
}

#[test]
fn wrapped_list_items_and_quotes_keep_their_indent() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.on_notification(Notification::Event(record("s-1", 1, chunk("m1", ANSWER))));
    app.take_commands();
    // 100 columns: the list and the transcript side by side (the pane is 56 wide inside).
    let screen = render(&app);
    let rows = transcript_rows(&screen);
    let item = rows.iter().position(|row| row.contains("• the first item")).expect("the item is shown");
    // "  • " puts the item's text at column 4: its further rows start there.
    assert!(rows[item + 1].starts_with("    ") && !rows[item + 1].starts_with("     "), "{screen}");
    assert!(rows[item + 1].trim_start().starts_with(|c: char| c.is_alphabetic()), "{screen}");
    let quote = rows.iter().position(|row| row.contains("▎ a quoted line")).expect("the quote is shown");
    assert!(rows[quote + 1].starts_with("  ▎ "), "the bar goes on: {screen}");
    insta::assert_snapshot!(screen);
}
