//! Word wrapping of styled lines. The transcript wraps its lines itself (rather than letting
//! `Paragraph` do it) so that it knows how many rows it has and can scroll from the bottom.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

const TAB: &str = "    ";

/// Wraps `line` to rows of at most `width` columns, breaking after spaces when it can. Control
/// characters from agent output are dropped: they would corrupt the terminal.
pub fn wrap(line: &Line<'_>, width: usize) -> Vec<Line<'static>> {
    let cells = cells_of(line);
    if width == 0 {
        return vec![to_line(cells, line.style)];
    }
    break_rows(cells, width, width, 0).into_iter().map(|r| to_line(r, line.style)).collect()
}

/// [`wrap`], with `hang` in front of every row after the first (the indent of a list item, the
/// bar of a quote), the text wrapping in the narrower column that leaves. A hang wider than half
/// the width is left out: the text keeps the room.
pub fn wrap_hanging(line: &Line<'_>, hang: &[Span<'static>], width: usize) -> Vec<Line<'static>> {
    let hang_width: usize = hang.iter().map(Span::width).sum();
    if hang_width == 0 || hang_width * 2 > width {
        return wrap(line, width);
    }
    // The first row's own prefix (a bullet, a bar) is as wide: never broken inside.
    let rows = break_rows(cells_of(line), width, width - hang_width, hang_width);
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| {
            let row = to_line(row, line.style);
            if i == 0 {
                return row;
            }
            Line::from([hang.to_vec(), row.spans].concat()).style(line.style)
        })
        .collect()
}

/// [`row_count`] of [`wrap_hanging`].
pub fn row_count_hanging(line: &Line<'_>, hang: &[Span<'static>], width: usize) -> usize {
    if hang.iter().all(|span| span.width() == 0) {
        return row_count(line, width);
    }
    wrap_hanging(line, hang, width).len()
}

/// Cells into rows: the first at most `first` columns wide, the others `rest`. A row that would
/// overflow ends after its last space (not its first cell); what followed the space starts the
/// next row and is laid out again in that row's width. The first `keep` cells of the first row
/// hold no break.
fn break_rows(cells: Vec<(char, Style)>, first: usize, rest: usize, keep: usize) -> Vec<Vec<(char, Style)>> {
    let mut rows: Vec<Vec<(char, Style)>> = Vec::new();
    let mut row: Vec<(char, Style)> = Vec::new();
    let mut row_width = 0;
    let mut input: std::collections::VecDeque<(char, Style)> = cells.into();
    while let Some((c, style)) = input.pop_front() {
        let limit = if rows.is_empty() { first } else { rest };
        let w = c.width().unwrap_or(0);
        if row_width + w > limit && !row.is_empty() {
            let after = if rows.is_empty() { keep.max(1) } else { 1 };
            let carried = match row.iter().rposition(|(c, _)| *c == ' ').filter(|&i| i >= after) {
                Some(space) => {
                    let carried = row.split_off(space + 1);
                    row.pop();
                    carried
                }
                None => Vec::new(),
            };
            rows.push(std::mem::take(&mut row));
            row_width = 0;
            input.push_front((c, style));
            for cell in carried.into_iter().rev() {
                input.push_front(cell);
            }
            continue;
        }
        // A wrapped row does not start with the space it was broken at.
        if c == ' ' && row.is_empty() && !rows.is_empty() {
            continue;
        }
        row.push((c, style));
        row_width += w;
    }
    rows.push(row);
    rows
}

/// How many rows [`wrap`] makes of `line`, without making them: the same breaks, counted.
pub fn row_count(line: &Line<'_>, width: usize) -> usize {
    if width == 0 {
        return 1;
    }
    let mut rows = 1;
    // The row being filled: its cells, width, and where its last space (not its first cell)
    // is, with the width of the cells after it.
    let mut row_len = 0usize;
    let mut row_width = 0usize;
    let mut last_space: Option<usize> = None;
    let mut after_space = 0usize;
    let chars = line.spans.iter().flat_map(|span| span.content.chars());
    // A tab is TAB's spaces, as in `cells_of`.
    let cells =
        chars.flat_map(|c| if c == '\t' { std::iter::repeat_n(' ', TAB.len()) } else { std::iter::repeat_n(c, 1) });
    for c in cells {
        if c.is_control() {
            continue;
        }
        let w = c.width().unwrap_or(0);
        if row_width + w > width && row_len > 0 {
            rows += 1;
            match last_space {
                Some(space) => {
                    row_len -= space + 1;
                    row_width = after_space;
                }
                None => {
                    row_len = 0;
                    row_width = 0;
                }
            }
            last_space = None;
            after_space = 0;
        }
        if c == ' ' && row_len == 0 && rows > 1 {
            continue;
        }
        if c == ' ' && row_len > 0 {
            last_space = Some(row_len);
            after_space = 0;
        } else {
            after_space += w;
        }
        row_len += 1;
        row_width += w;
    }
    rows
}

/// Wraps every line, in order.
pub fn wrap_all(lines: &[Line<'_>], width: usize) -> Vec<Line<'static>> {
    lines.iter().flat_map(|line| wrap(line, width)).collect()
}

fn cells_of(line: &Line<'_>) -> Vec<(char, Style)> {
    let mut cells = Vec::new();
    for span in &line.spans {
        for c in span.content.chars() {
            match c {
                '\t' => cells.extend(TAB.chars().map(|c| (c, span.style))),
                c if c.is_control() => {}
                c => cells.push((c, span.style)),
            }
        }
    }
    cells
}

/// Joins cells back into spans, one span per run of equal style.
fn to_line(cells: Vec<(char, Style)>, line_style: Style) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut text = String::new();
    let mut current: Option<Style> = None;
    for (c, style) in cells {
        if current.is_some_and(|s| s != style) {
            spans.push(Span::styled(std::mem::take(&mut text), current.unwrap_or_default()));
        }
        current = Some(style);
        text.push(c);
    }
    if let Some(style) = current {
        spans.push(Span::styled(text, style));
    }
    Line::from(spans).style(line_style)
}

#[cfg(test)]
mod tests {
    use ratatui::style::Stylize;

    use super::*;

    fn plain(lines: Vec<Line<'static>>) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn breaks_after_spaces() {
        let line = Line::from("the quick brown fox jumps");
        assert_eq!(plain(wrap(&line, 10)), vec!["the quick", "brown fox", "jumps"]);
    }

    #[test]
    fn cuts_words_longer_than_the_width() {
        let line = Line::from("abcdefghij");
        assert_eq!(plain(wrap(&line, 4)), vec!["abcd", "efgh", "ij"]);
    }

    #[test]
    fn keeps_span_styles_across_rows() {
        let line = Line::from(vec!["you: ".bold(), "hello world".into()]);
        let rows = wrap(&line, 8);
        assert_eq!(plain(rows.clone()), vec!["you:", "hello", "world"]);
        assert_eq!(rows[0].spans[0].style, Style::new().bold());
    }

    #[test]
    fn drops_control_characters_and_expands_tabs() {
        let line = Line::from("a\u{1b}[31mb\tc");
        assert_eq!(plain(wrap(&line, 40)), vec!["a[31mb    c"]);
    }

    #[test]
    fn row_count_agrees_with_wrap() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let alphabet = ['a', 'b', ' ', ' ', '日', '\t', 'x', '\u{1b}', 'é', '-'];
        for _ in 0..3000 {
            let text: String = (0..next() % 90).map(|_| alphabet[next() % alphabet.len()]).collect();
            let line = Line::from(vec!["label: ".bold(), text.clone().into()]);
            for width in [1, 2, 3, 5, 8, 13, 40] {
                assert_eq!(row_count(&line, width), wrap(&line, width).len(), "{text:?} at {width}");
            }
        }
    }

    #[test]
    fn hanging_rows_keep_the_column_of_the_text() {
        let line = Line::from("• the quick brown fox jumps");
        let hang = [Span::raw("  ")];
        assert_eq!(plain(wrap_hanging(&line, &hang, 12)), vec!["• the quick", "  brown fox", "  jumps"]);
        // A word too long for the narrower column is cut there.
        let line = Line::from("▎ abcdefghijklmn");
        let bar = [Span::raw("▎ ")];
        assert_eq!(plain(wrap_hanging(&line, &bar, 8)), vec!["▎ abcdef", "▎ ghijkl", "▎ mn"]);
        // Too narrow for the hang: plain wrapping.
        assert_eq!(plain(wrap_hanging(&Line::from("ab cd"), &[Span::raw("   ")], 4)), vec!["ab", "cd"]);
        for width in [1, 3, 4, 5, 8, 12, 40] {
            let line = Line::from("• the quick brown fox jumps over a lazy dog");
            assert_eq!(row_count_hanging(&line, &hang, width), wrap_hanging(&line, &hang, width).len());
            assert!(wrap_hanging(&line, &hang, width).iter().all(|row| row.width() <= width.max(1)), "{width}");
        }
    }

    #[test]
    fn wide_characters_count_double() {
        let line = Line::from("日本語テキスト");
        assert_eq!(plain(wrap(&line, 6)), vec!["日本語", "テキス", "ト"]);
    }
}
