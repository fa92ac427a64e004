//! An agent's Markdown drawn for a terminal, parsed by `pulldown-cmark` (CommonMark with task
//! lists and strikethrough): headings, emphasis, inline code, links (the address after the text
//! when it differs), bullet and numbered lists, block quotes, rules and code blocks framed with
//! their language label. Drawn with the 16 standard colours and text attributes only (256-colour
//! and tmux safe). Line breaks inside a paragraph are kept (agents break lines on purpose) and
//! so are blank lines between blocks; wrapping to the pane is done afterwards.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Inline code and code blocks.
pub fn code_style() -> Style {
    Style::new().fg(Color::Yellow)
}

fn fence_style() -> Style {
    Style::new().fg(Color::DarkGray)
}

fn link_style(base: Style) -> Style {
    base.fg(Color::Blue).add_modifier(Modifier::UNDERLINED)
}

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(text, Options::ENABLE_TASKLISTS | Options::ENABLE_STRIKETHROUGH)
}

/// The logical lines of `text` (before wrapping), with `base` as the style of plain text.
pub fn lines(text: &str, base: Style) -> Vec<Line<'static>> {
    hung_lines(text, base).into_iter().map(|(line, _)| line).collect()
}

/// [`lines`], each with what its wrapped rows put in front (the list items' indent, the
/// quotes' bars), so that the text of an item or a quote keeps its column when it wraps.
pub fn hung_lines(text: &str, base: Style) -> Vec<(Line<'static>, Vec<Span<'static>>)> {
    let mut renderer = Renderer::new(text, base);
    for (event, range) in parser(text).into_offset_iter() {
        renderer.event(event, range.start);
    }
    renderer.finish()
}

/// The content of the last code block of `markdown` (without its fences), if any: the block
/// the transcript shows last, as the parser that draws it sees it.
pub fn last_code_block(markdown: &str) -> Option<String> {
    let mut last = None;
    let mut current: Option<String> = None;
    for event in parser(markdown) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => current = Some(String::new()),
            Event::Text(text) => {
                if let Some(code) = current.as_mut() {
                    code.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some(mut code) = current.take() {
                    if code.ends_with('\n') {
                        code.pop();
                    }
                    last = Some(code);
                }
            }
            _ => {}
        }
    }
    last
}

/// A block that puts something in front of each of its lines: a list item (its bullet on the
/// first line, as much space on the others) or a block quote.
struct Container {
    first: String,
    rest: String,
    style: Style,
    used: bool,
}

struct Renderer<'a> {
    source: &'a str,
    base: Style,
    /// Each line with the spans its wrapped rows start with.
    out: Vec<(Line<'static>, Vec<Span<'static>>)>,
    /// The line being built; `None` when no line is open.
    line: Option<Vec<Span<'static>>>,
    containers: Vec<Container>,
    /// Inline styles in force (emphasis inside a heading inside a link...); the last applies.
    styles: Vec<Style>,
    /// The next number of each open list (`None`: a bullet list).
    lists: Vec<Option<u64>>,
    /// The address and text so far of the link being read.
    link: Option<(String, String)>,
    /// Inside a code block: its text is drawn line by line in the frame.
    in_code: bool,
}

impl<'a> Renderer<'a> {
    fn new(source: &'a str, base: Style) -> Self {
        Renderer {
            source,
            base,
            out: Vec::new(),
            line: None,
            containers: Vec::new(),
            styles: vec![base],
            lists: Vec::new(),
            link: None,
            in_code: false,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or(self.base)
    }

    fn push_style(&mut self, change: impl FnOnce(Style) -> Style) {
        let next = change(self.style());
        self.styles.push(next);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    /// Opens a line with the prefixes of the containers it is in.
    fn open_line(&mut self) -> &mut Vec<Span<'static>> {
        if self.line.is_none() {
            let mut spans = Vec::new();
            for container in &mut self.containers {
                let prefix = if container.used { &container.rest } else { &container.first };
                spans.push(Span::styled(prefix.clone(), container.style));
                container.used = true;
            }
            self.line = Some(spans);
        }
        self.line.get_or_insert_with(Vec::new)
    }

    fn push(&mut self, text: &str, style: Style) {
        if let Some((_, link_text)) = self.link.as_mut() {
            link_text.push_str(text);
        }
        if !text.is_empty() {
            self.open_line().push(Span::styled(text.to_string(), style));
        }
    }

    /// Text in the current style; a newline in it ends the line.
    fn text(&mut self, text: &str) {
        let style = self.style();
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.end_line();
            }
            self.push(part, style);
        }
    }

    fn end_line(&mut self) {
        if let Some(spans) = self.line.take() {
            let hang = self.containers.iter().map(|c| Span::styled(c.rest.clone(), c.style)).collect();
            self.out.push((Line::from(spans), hang));
        }
    }

    /// Before a block that starts at `offset`: a blank line when the source has one above it.
    fn block_start(&mut self, offset: usize) {
        self.end_line();
        if self.out.is_empty() || self.out.last().is_some_and(|(line, _)| line.width() == 0) {
            return;
        }
        let Some(before) = self.source.get(..offset) else { return };
        let Some(before) = before.trim_end_matches([' ', '\t', '>']).strip_suffix('\n') else { return };
        let previous_line = before.rsplit('\n').next().unwrap_or("");
        if previous_line.trim_matches([' ', '\t', '>']).is_empty() {
            let quotes: Vec<Span<'static>> = self
                .containers
                .iter()
                .filter(|c| c.first == c.rest)
                .map(|c| Span::styled(c.rest.trim_end().to_string(), c.style))
                .collect();
            self.out.push((Line::from(quotes), Vec::new()));
        }
    }

    fn event(&mut self, event: Event<'_>, offset: usize) {
        match event {
            Event::Start(tag) => self.start(tag, offset),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.in_code => self.code_text(&text),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().patch(code_style());
                self.push(&code, style);
            }
            Event::InlineMath(text) | Event::DisplayMath(text) => self.text(&text),
            Event::Html(html) | Event::InlineHtml(html) => self.text(html.trim_end_matches('\n')),
            Event::SoftBreak | Event::HardBreak => self.end_line(),
            Event::Rule => {
                self.block_start(offset);
                let style = fence_style();
                self.push(&"─".repeat(20), style);
                self.end_line();
            }
            Event::TaskListMarker(done) => {
                let style = self.style();
                self.push(if done { "[x] " } else { "[ ] " }, style);
            }
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>, offset: usize) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.block_start(offset),
            Tag::Heading { level, .. } => {
                self.block_start(offset);
                let attributes = match level {
                    HeadingLevel::H1 | HeadingLevel::H2 => Modifier::BOLD | Modifier::UNDERLINED,
                    _ => Modifier::BOLD,
                };
                self.push_style(|style| style.add_modifier(attributes));
            }
            Tag::BlockQuote(_) => {
                self.block_start(offset);
                let bar = "▎ ".to_string();
                self.containers.push(Container { first: bar.clone(), rest: bar, style: fence_style(), used: false });
            }
            Tag::CodeBlock(kind) => {
                self.block_start(offset);
                let label = match &kind {
                    CodeBlockKind::Fenced(info) => info.split_whitespace().next().unwrap_or(""),
                    CodeBlockKind::Indented => "",
                };
                let edge = if label.is_empty() { "╭─".to_string() } else { format!("╭─ {label}") };
                self.push(&edge, fence_style());
                self.end_line();
                self.in_code = true;
            }
            Tag::List(start) => {
                self.block_start(offset);
                self.lists.push(start);
            }
            Tag::Item => {
                self.block_start(offset);
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                let rest = " ".repeat(marker.chars().count());
                self.containers.push(Container { first: marker, rest, style: self.base, used: false });
            }
            Tag::Emphasis => self.push_style(|style| style.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|style| style.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|style| style.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.link = Some((dest_url.to_string(), String::new()));
                self.push_style(link_style);
            }
            // Not enabled in the parser's options; their text still arrives as text.
            Tag::FootnoteDefinition(_)
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::TableRow
            | Tag::TableCell
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => self.end_line(),
            TagEnd::Heading(_) => {
                self.end_line();
                self.pop_style();
            }
            TagEnd::BlockQuote(_) | TagEnd::Item => {
                // An empty item (a bullet just streamed in) still shows its bullet.
                if self.containers.last().is_some_and(|c| !c.used) {
                    self.open_line();
                }
                self.end_line();
                self.containers.pop();
            }
            TagEnd::CodeBlock => {
                self.in_code = false;
                self.end_line();
                self.push("╰─", fence_style());
                self.end_line();
            }
            TagEnd::List(_) => {
                self.end_line();
                self.lists.pop();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link | TagEnd::Image => {
                self.pop_style();
                if let Some((url, text)) = self.link.take() {
                    let same = url == text || url.strip_prefix("mailto:") == Some(text.as_str());
                    if !same && !url.is_empty() {
                        self.push(&format!(" ({url})"), fence_style());
                    }
                }
            }
            _ => {}
        }
    }

    /// Code keeps its lines as written, each in the block's frame.
    fn code_text(&mut self, text: &str) {
        let text = text.strip_suffix('\n').unwrap_or(text);
        for line in text.split('\n') {
            self.push("│ ", fence_style());
            self.push(line, code_style());
            self.end_line();
        }
    }

    fn finish(mut self) -> Vec<(Line<'static>, Vec<Span<'static>>)> {
        self.end_line();
        if self.out.is_empty() {
            self.out.push((Line::from(Span::styled(String::new(), self.base)), Vec::new()));
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styled(line: &Line<'_>) -> Vec<(String, Style)> {
        line.spans.iter().map(|s| (s.content.to_string(), s.style)).collect()
    }

    fn text(markdown: &str) -> Vec<String> {
        lines(markdown, Style::new()).iter().map(Line::to_string).collect()
    }

    #[test]
    fn bold_italic_and_code_drop_their_markers() {
        let base = Style::new();
        let rendered = lines("a **bold** and *slanted* `x = 1` end", base);
        assert_eq!(rendered.len(), 1);
        assert_eq!(rendered[0].to_string(), "a bold and slanted x = 1 end");
        let spans = styled(&rendered[0]);
        assert_eq!(spans[1], ("bold".into(), base.add_modifier(Modifier::BOLD)));
        assert_eq!(spans[3], ("slanted".into(), base.add_modifier(Modifier::ITALIC)));
        assert_eq!(spans[5], ("x = 1".into(), code_style()));
    }

    #[test]
    fn markers_without_a_pair_or_inside_words_are_text() {
        for markdown in ["snake_case_name here", "a ** b", "unclosed `tick", "__"] {
            assert_eq!(text(markdown), vec![markdown.to_string()], "{markdown}");
        }
        assert_eq!(text("say _this_ now"), vec!["say this now"]);
        assert_eq!(text("*"), vec!["• "], "a bullet alone is an empty item");
    }

    #[test]
    fn fenced_code_is_framed_with_its_language_and_kept_verbatim() {
        let markdown = "Run:\n```sh\ncargo test **not bold**\n```\n# Done\n- item *one*";
        assert_eq!(text(markdown), vec!["Run:", "╭─ sh", "│ cargo test **not bold**", "╰─", "Done", "• item one"]);
        let code = &lines(markdown, Style::new())[2];
        assert_eq!(code.spans[1].style, code_style());
    }

    #[test]
    fn lists_nest_and_number_and_links_show_their_address() {
        let markdown = "1. first\n2. second\n   - inner *a*\n   - inner b\n\nSee [the docs](https://example.org/d) or <https://example.org>.";
        assert_eq!(
            text(markdown),
            vec![
                "1. first",
                "2. second",
                "   • inner a",
                "   • inner b",
                "",
                "See the docs (https://example.org/d) or https://example.org.",
            ]
        );
    }

    #[test]
    fn line_breaks_and_blank_lines_are_kept() {
        assert_eq!(text("one\ntwo\n\nthree"), vec!["one", "two", "", "three"]);
        assert_eq!(text("> quoted\n> more"), vec!["▎ quoted", "▎ more"]);
    }

    #[test]
    fn items_and_quotes_say_what_their_wrapped_rows_start_with() {
        let hangs: Vec<(String, String)> = hung_lines("- item\n  1. inner\n\n> quoted\n\nplain", Style::new())
            .iter()
            .map(|(line, hang)| (line.to_string(), Line::from(hang.clone()).to_string()))
            .collect();
        let expected =
            [("• item", "  "), ("  1. inner", "     "), ("", ""), ("▎ quoted", "▎ "), ("", ""), ("plain", "")];
        let expected: Vec<(String, String)> = expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(hangs, expected);
    }

    #[test]
    fn an_unclosed_fence_while_streaming_is_code_so_far() {
        assert_eq!(text("```rust\nfn main"), vec!["╭─ rust", "│ fn main", "╰─"]);
    }

    #[test]
    fn the_last_code_block_is_the_one_drawn_last() {
        let answer = "Try this:\n```rust\nfn main() {}\n```\nor this:\n~~~sh\ncargo run\necho ok\n~~~\nDone.";
        assert_eq!(last_code_block(answer).as_deref(), Some("cargo run\necho ok"));
        // A fence inside a longer fence is code, not the end of the block.
        let nested = "````md\n```rust\nx\n```\n````";
        assert_eq!(last_code_block(nested).as_deref(), Some("```rust\nx\n```"));
        assert_eq!(last_code_block("no code here"), None);
    }
}
