//! The nesting bound: how deeply arrays and objects may nest in values that come from agents
//! (tool call inputs and outputs, plans, raw updates...).
//!
//! serde_json refuses JSON nested deeper than 128 levels, and the typed client decodes every
//! frame with it. A value nested 124 levels fits an agent's line but not a `message.list`
//! answer, which wraps it in several more levels. So the server cuts every value from an agent
//! at [`MAX_NESTING`] levels where it enters (the deeper part becomes the string
//! [`NESTING_MARKER`]), and checks what it reads back from its journal the same way: a frame
//! adds fewer than [`MAX_NESTING`] levels around such a value, so every frame the server sends
//! decodes.

use serde_json::Value;

/// Deepest nesting of arrays and objects kept in a value from an agent: a value at depth 1 is
/// the outermost array or object. Deeper parts are replaced by [`NESTING_MARKER`].
pub const MAX_NESTING: usize = 64;

/// What replaces an array or object nested deeper than [`MAX_NESTING`].
pub const NESTING_MARKER: &str = "[nested too deeply: cut at 64 levels]";

/// Cuts `value` at `max` levels of arrays and objects: every array or object deeper than that
/// becomes the string [`NESTING_MARKER`]. Returns how many were replaced (0: unchanged).
pub fn bound_nesting(value: &mut Value, max: usize) -> usize {
    if !(value.is_array() || value.is_object()) {
        return 0;
    }
    if max == 0 {
        *value = Value::String(NESTING_MARKER.to_string());
        return 1;
    }
    match value {
        Value::Array(items) => items.iter_mut().map(|item| bound_nesting(item, max - 1)).sum(),
        Value::Object(members) => members.values_mut().map(|member| bound_nesting(member, max - 1)).sum(),
        _ => 0,
    }
}

/// How deeply arrays and objects nest in the JSON `text` (0 for a scalar), read without
/// decoding it: to tell cheaply whether stored JSON needs [`bound_nesting`]. Malformed text
/// gives a number all the same (brackets are counted outside strings).
pub fn nesting_of(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whether arrays and objects nest deeper than `max` levels in the JSON `text`: what
/// [`nesting_of`] tells, read cheaply for the common text. Text with no more than `max` opening
/// brackets in all (inside strings too) cannot nest deeper, and counting them is a loop the
/// compiler vectorises; only text with more is scanned bracket by bracket.
pub fn nests_deeper_than(text: &[u8], max: usize) -> bool {
    let opening = text.iter().map(|&b| usize::from(b == b'[' || b == b'{')).sum::<usize>();
    opening > max && nesting_of(text) > max
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `[[[...[1]...]]]` with `levels` arrays.
    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!(1), |inner, _| json!([inner]))
    }

    #[test]
    fn values_are_cut_at_the_bound_and_no_deeper() {
        let mut shallow = json!({"a": nested(MAX_NESTING - 1), "b": "x"});
        assert_eq!(nesting_of(shallow.to_string().as_bytes()), MAX_NESTING);
        assert_eq!(bound_nesting(&mut shallow, MAX_NESTING), 0, "exactly at the bound: kept");

        let mut deep = json!({"input": nested(124), "title": "t", "other": [nested(3)]});
        assert_eq!(bound_nesting(&mut deep, MAX_NESTING), 1);
        assert_eq!(nesting_of(deep.to_string().as_bytes()), MAX_NESTING);
        assert_eq!(deep["title"], "t", "the rest is kept");
        assert_eq!(deep["other"], json!([nested(3)]));
        let mut cut = &deep["input"];
        for _ in 1..MAX_NESTING {
            cut = &cut[0];
        }
        assert_eq!(cut, &json!(NESTING_MARKER), "the level past the bound is the marker");
        assert!(NESTING_MARKER.contains(&MAX_NESTING.to_string()));
    }

    #[test]
    fn nesting_is_measured_outside_strings() {
        assert_eq!(nesting_of(b"1"), 0);
        assert_eq!(nesting_of(br#"{"a":[1,{"b":[]}],"c":"[[[[\"{{"}"#), 4);
        assert_eq!(nesting_of(nested(200).to_string().as_bytes()), 200);
        assert_eq!(nesting_of(b"]]]["), 1, "malformed text gives a number, never panics");
    }

    #[test]
    fn deeper_than_tells_what_the_full_scan_tells() {
        let brackets_in_strings = format!(r#"{{"a":"{}","b":[1]}}"#, "[{".repeat(100));
        let cases = [
            nested(MAX_NESTING).to_string(),
            nested(MAX_NESTING + 1).to_string(),
            json!({"a": nested(MAX_NESTING - 1)}).to_string(),
            json!({"a": nested(MAX_NESTING)}).to_string(),
            brackets_in_strings,
            "]]]][[[[".repeat(40),
            "1".to_string(),
        ];
        for text in &cases {
            for max in [0, 1, MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1] {
                let expected = nesting_of(text.as_bytes()) > max;
                assert_eq!(nests_deeper_than(text.as_bytes(), max), expected, "{max} levels in {text}");
            }
        }
    }
}
