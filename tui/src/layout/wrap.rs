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
    let mut rows: Vec<Vec<(char, Style)>> = Vec::new();
    let mut row: Vec<(char, Style)> = Vec::new();
    let mut row_width = 0;
    for (c, style) in cells {
        let w = c.width().unwrap_or(0);
        if row_width + w > width && !row.is_empty() {
            let break_at = row.iter().rposition(|(c, _)| *c == ' ').filter(|&i| i > 0);
            let rest = match break_at {
                Some(space) => {
                    let rest = row.split_off(space + 1);
                    row.pop();
                    rest
                }
                None => Vec::new(),
            };
            rows.push(std::mem::replace(&mut row, rest));
            row_width = row.iter().map(|(c, _)| c.width().unwrap_or(0)).sum();
        }
        // A wrapped row does not start with the space it was broken at.
        if c == ' ' && row.is_empty() && !rows.is_empty() {
            continue;
        }
        row.push((c, style));
        row_width += w;
    }
    rows.push(row);
    rows.into_iter().map(|r| to_line(r, line.style)).collect()
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
    fn wide_characters_count_double() {
        let line = Line::from("日本語テキスト");
        assert_eq!(plain(wrap(&line, 6)), vec!["日本語", "テキス", "ト"]);
    }
}
