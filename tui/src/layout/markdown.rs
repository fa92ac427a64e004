//! Enough Markdown to read an agent's answer in a terminal: `**bold**`, `*italic*` (and
//! `_italic_` between words), `` `code` ``, headings, bullets and fenced code blocks, drawn with
//! the 16 standard colours and text attributes only (256-colour and tmux safe). Anything else is
//! shown as written; nothing is hidden but the markers themselves.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Inline code and code blocks.
pub fn code_style() -> Style {
    Style::new().fg(Color::Yellow)
}

fn fence_style() -> Style {
    Style::new().fg(Color::DarkGray)
}

/// The logical lines of `text` (before wrapping), with `base` as the style of plain text.
pub fn lines(text: &str, base: Style) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut in_code = false;
    for raw in text.trim_end_matches('\n').split('\n') {
        let trimmed = raw.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            in_code = !in_code;
            let edge = match (in_code, info.trim()) {
                (true, "") => "╭─".to_string(),
                (true, language) => format!("╭─ {language}"),
                (false, _) => "╰─".to_string(),
            };
            out.push(Line::from(Span::styled(edge, fence_style())));
            continue;
        }
        if in_code {
            out.push(Line::from(vec![Span::styled("│ ", fence_style()), Span::styled(raw.to_string(), code_style())]));
            continue;
        }
        out.push(prose_line(raw, base));
    }
    out
}

/// One line outside code blocks: a heading, a bullet, or plain text, with inline emphasis.
fn prose_line(raw: &str, base: Style) -> Line<'static> {
    let trimmed = raw.trim_start();
    let hashes = trimmed.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        let heading = base.add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
        return Line::from(inline(trimmed[hashes..].trim_start(), heading));
    }
    let indent = &raw[..raw.len() - trimmed.len()];
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = trimmed.strip_prefix(bullet) {
            let mut spans = vec![Span::styled(format!("{indent}• "), base)];
            spans.extend(inline(rest, base));
            return Line::from(spans);
        }
    }
    Line::from(inline(raw, base))
}

/// Spans of one line with `**bold**`, `*italic*`, `_italic_` and `` `code` `` applied. A marker
/// without its closing pair is text.
pub fn inline(text: &str, base: Style) -> Vec<Span<'static>> {
    let chars: Vec<char> = text.chars().collect();
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut plain = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let found = match c {
            '`' => closing(&chars, i + 1, &['`']).map(|end| (i + 1, end, end + 1, code_style())),
            '*' | '_' if chars.get(i + 1) == Some(&c) => closing(&chars, i + 2, &[c, c])
                .filter(|&end| end > i + 2)
                .map(|end| (i + 2, end, end + 2, base.add_modifier(Modifier::BOLD))),
            '*' | '_' if opens_emphasis(&chars, i) => closing(&chars, i + 1, &[c])
                .filter(|&end| end > i + 1 && closes_emphasis(&chars, end))
                .map(|end| (i + 1, end, end + 1, base.add_modifier(Modifier::ITALIC))),
            _ => None,
        };
        match found {
            Some((start, end, next, style)) => {
                if !plain.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut plain), base));
                }
                let inner: String = chars[start..end].iter().collect();
                spans.push(Span::styled(inner, style));
                i = next;
            }
            None => {
                plain.push(c);
                i += 1;
            }
        }
    }
    if !plain.is_empty() || spans.is_empty() {
        spans.push(Span::styled(plain, base));
    }
    spans
}

/// Where `marker` next starts at or after `from`.
fn closing(chars: &[char], from: usize, marker: &[char]) -> Option<usize> {
    (from..chars.len().saturating_sub(marker.len() - 1)).find(|&j| chars[j..].starts_with(marker))
}

/// A single `*` or `_` opens emphasis before a word, not inside one (`snake_case`, `2*3`).
fn opens_emphasis(chars: &[char], at: usize) -> bool {
    let before_ok = at == 0 || !chars[at - 1].is_alphanumeric();
    let after_ok = chars.get(at + 1).is_some_and(|c| !c.is_whitespace());
    before_ok && after_ok
}

fn closes_emphasis(chars: &[char], at: usize) -> bool {
    let before_ok = at > 0 && !chars[at - 1].is_whitespace();
    let after_ok = chars.get(at + 1).is_none_or(|c| !c.is_alphanumeric());
    before_ok && after_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styled(line: &Line<'_>) -> Vec<(String, Style)> {
        line.spans.iter().map(|s| (s.content.to_string(), s.style)).collect()
    }

    #[test]
    fn bold_italic_and_code_drop_their_markers() {
        let base = Style::new();
        let line = Line::from(inline("a **bold** and *slanted* `x = 1` end", base));
        assert_eq!(line.to_string(), "a bold and slanted x = 1 end");
        let spans = styled(&line);
        assert_eq!(spans[1], ("bold".into(), base.add_modifier(Modifier::BOLD)));
        assert_eq!(spans[3], ("slanted".into(), base.add_modifier(Modifier::ITALIC)));
        assert_eq!(spans[5], ("x = 1".into(), code_style()));
    }

    #[test]
    fn markers_without_a_pair_or_inside_words_are_text() {
        let base = Style::new();
        for text in ["snake_case_name and 2*3*4", "a ** b", "unclosed `tick", "*", "__"] {
            assert_eq!(Line::from(inline(text, base)).to_string(), text, "{text}");
        }
        let italic = Line::from(inline("say _this_ now", base));
        assert_eq!(italic.to_string(), "say this now");
    }

    #[test]
    fn fenced_code_is_framed_and_kept_verbatim() {
        let text = "Run:\n```sh\ncargo test **not bold**\n```\n# Done\n- item *one*";
        let rendered: Vec<String> = lines(text, Style::new()).iter().map(Line::to_string).collect();
        assert_eq!(rendered, vec!["Run:", "╭─ sh", "│ cargo test **not bold**", "╰─", "Done", "• item one"]);
        let code = &lines(text, Style::new())[2];
        assert_eq!(code.spans[1].style, code_style());
    }
}
