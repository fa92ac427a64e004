//! The lenient decoding of what an agent sends: one line of its output to an [`Incoming`]
//! message. The common line (a streamed chunk) is read in one pass without a tree of values;
//! anything else is read carefully: broken text is repaired (the character is lost, not the
//! line), values nested deeper than the bound are cut, and what serde_json refuses still
//! yields the `id` (and `method`) of a request that must be answered. Never panics.

use serde_json::Value;

use super::RpcError;
use crate::agent::translate::{ChunkParams, Translated};

/// A notification's params as the agent sent them (JSON text, already checked to be JSON and
/// nested no deeper than the bound): the handler decodes them straight into its own types.
pub type RawParams = Box<serde_json::value::RawValue>;

/// A notification's params as the handler gets them.
// Not boxed: a chunk is nearly every line of a stream, and a box would be one allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Params {
    /// As the agent sent them.
    Text(RawParams),
    /// A `session/update` with a chunk of text, translated in the same pass that read its line
    /// (nearly every line of a streamed answer).
    Chunk(Translated),
}

impl Params {
    /// The params read as a `session/update`'s, translated for the journal.
    pub fn into_update(self) -> Translated {
        match self {
            Params::Chunk(translated) => translated,
            Params::Text(params) => crate::agent::translate::translate_update_text(params.get()),
        }
    }
}

/// One message from the agent, as decoded from its line.
#[derive(Debug)]
pub enum Incoming {
    Notification {
        method: String,
        params: Params,
    },
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Response {
        id: i64,
        result: Result<Value, RpcError>,
    },
    /// A line that is not JSON even after repair, but from which an `id` (and maybe a
    /// `method`) could be recovered: a request to answer with an error, or an answer to one of
    /// ours that cannot be read.
    Unreadable {
        id: Value,
        method: Option<String>,
        answer: bool,
        reason: String,
    },
}

/// Decodes one line from the agent. `None` for anything that is not a JSON-RPC message we can
/// use (not JSON, not an object, an answer with an id that is not ours); never panics.
pub fn parse_incoming(line: &[u8]) -> Option<Incoming> {
    if let Some(notification) = parse_notification(line) {
        return Some(notification);
    }
    let mut value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        // Text cut mid-character (invalid UTF-8, or a lone surrogate escape such as the
        // `\ud83d` JavaScript writes for half an emoji) costs that character, not the line.
        Err(first) => match repair_text(line).map(|text| serde_json::from_str(&text)) {
            Some(Ok(value)) => value,
            Some(Err(error)) => return salvage(line, &error),
            None => return salvage(line, &first),
        },
    };
    // Values from the agent are cut at MAX_NESTING levels (the line's object is one more), so
    // that every frame that carries them later decodes in the typed client.
    let cut = baton_protocol::bound_nesting(&mut value, baton_protocol::MAX_NESTING + 1);
    if cut > 0 {
        tracing::warn!(cut, "cut values from the agent nested deeper than {} levels", baton_protocol::MAX_NESTING);
    }
    let object = value.as_object_mut()?;
    let method = object.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = object.get("id").cloned().filter(|id| !id.is_null());
    match (method, id) {
        (Some(method), Some(id)) => {
            let params = object.remove("params").unwrap_or(Value::Null);
            Some(Incoming::Request { id, method, params })
        }
        (Some(method), None) => {
            let params = object.remove("params").unwrap_or(Value::Null);
            let params = serde_json::value::to_raw_value(&params).ok()?;
            Some(Incoming::Notification { method, params: Params::Text(params) })
        }
        (None, Some(id)) => {
            // Our ids are integers; an answer to anything else is not ours.
            let id = id.as_i64()?;
            let result = match object.get("error") {
                Some(error) => Err(RpcError {
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                    message: error.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
                    data: error.get("data").cloned().filter(|d| !d.is_null()),
                }),
                None => Ok(object.get("result").cloned().unwrap_or(Value::Null)),
            };
            Some(Incoming::Response { id, result })
        }
        (None, None) => None,
    }
}

/// The common line, a notification (every streamed update), read without a tree of JSON
/// values: its params are kept as their text for the handler to decode into its types.
/// `None` for anything else, and for a notification that needs the careful path (text to
/// repair, values nested deeper than the bound, a key given twice): [`parse_incoming`] reads
/// those as values.
fn parse_notification(line: &[u8]) -> Option<Incoming> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
        #[serde(default)]
        id: Option<serde::de::IgnoredAny>,
        #[serde(borrow, default)]
        params: Option<&'a serde_json::value::RawValue>,
    }
    /// The line of a text chunk, read in one pass (see `translate::ChunkParams`).
    #[derive(serde::Deserialize)]
    struct ChunkLine<'a> {
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
        #[serde(default)]
        id: Option<serde::de::IgnoredAny>,
        #[serde(borrow)]
        params: ChunkParams<'a>,
    }
    // Kept text is not unescaped here, so a surrogate escape (maybe a lone one, to repair)
    // takes the careful path.
    let surrogate = |at: usize| line.get(at + 1) == Some(&b'u') && line.get(at + 2).is_some_and(|&b| b | 0x20 == b'd');
    if memchr::memchr_iter(b'\\', line).any(surrogate) {
        return None;
    }
    // Deeper values than the bound cannot be in what a chunk keeps (its text and message id).
    if let Ok(chunk) = serde_json::from_slice::<ChunkLine>(line) {
        if chunk.id.is_none() && chunk.method == "session/update" {
            if let Some(translated) = chunk.params.translated() {
                return Some(Incoming::Notification {
                    method: chunk.method.into_owned(),
                    params: Params::Chunk(translated),
                });
            }
        }
    }
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.id.is_some() || baton_protocol::nests_deeper_than(line, baton_protocol::MAX_NESTING + 1) {
        return None;
    }
    let params = match envelope.params {
        Some(params) => params.to_owned(),
        None => serde_json::value::to_raw_value(&Value::Null).ok()?,
    };
    Some(Incoming::Notification { method: envelope.method.into_owned(), params: Params::Text(params) })
}

/// What a line serde_json refused still says: a request with an id must be answered even when
/// the rest of it is lost (cut short, a broken value in its params).
fn salvage(line: &[u8], error: &serde_json::Error) -> Option<Incoming> {
    let fields = top_level_fields(line);
    let id = fields.id?;
    Some(Incoming::Unreadable { id, method: fields.method, answer: fields.answer, reason: error.to_string() })
}

/// The top-level `id` and `method` of a JSON object, read as far as the text allows.
#[derive(Debug, Default, PartialEq)]
struct TopLevel {
    id: Option<Value>,
    method: Option<String>,
    /// A `result` or `error` member was seen: the line is an answer.
    answer: bool,
}

/// Reads the members of the object `line` starts with until the first thing that is not JSON.
/// Written by hand: serde_json stops at the first error and keeps nothing of what came before.
fn top_level_fields(line: &[u8]) -> TopLevel {
    let mut found = TopLevel::default();
    let mut at = skip_space(line, 0);
    if line.get(at) != Some(&b'{') {
        return found;
    }
    at += 1;
    loop {
        at = skip_space(line, at);
        let Some(key_end) = string_end(line, at) else { return found };
        let key = &line[at..key_end];
        at = skip_space(line, key_end);
        if line.get(at) != Some(&b':') {
            return found;
        }
        at = skip_space(line, at + 1);
        // An answer, even when its result is cut short.
        found.answer |= matches!(key, b"\"result\"" | b"\"error\"");
        let Some(value_end) = value_end(line, at) else {
            return found;
        };
        let value = || serde_json::from_slice::<Value>(&line[at..value_end]).ok();
        match key {
            b"\"id\"" => found.id = value().filter(|v| v.is_string() || v.is_number()),
            b"\"method\"" => found.method = value().and_then(|v| v.as_str().map(str::to_owned)),
            _ => {}
        }
        at = skip_space(line, value_end);
        match line.get(at) {
            Some(b',') => at += 1,
            _ => return found,
        }
    }
}

fn skip_space(line: &[u8], mut at: usize) -> usize {
    while line.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string starting at `at`, when there is one and it is closed.
fn string_end(line: &[u8], at: usize) -> Option<usize> {
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    while let Some(&b) = line.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end (exclusive) of the value starting at `at`: a string, a complete object or array
/// (brackets counted outside strings), or a scalar up to the next delimiter.
fn value_end(line: &[u8], at: usize) -> Option<usize> {
    match line.get(at)? {
        b'"' => string_end(line, at),
        b'{' | b'[' => {
            let (mut depth, mut i) = (0usize, at);
            while let Some(&b) = line.get(i) {
                match b {
                    b'"' => {
                        i = string_end(line, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = line[at..].iter().position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace());
            Some(at + len.unwrap_or(line.len() - at))
        }
    }
}

/// `line` as JSON text serde_json accepts, when it is not already: invalid UTF-8 becomes U+FFFD
/// and `\uXXXX` escapes of unpaired surrogates become `\ufffd`. None when there was nothing
/// to repair. Written by hand: serde_json has no lossy mode for either.
fn repair_text(line: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(line);
    let mut out = String::with_capacity(text.len());
    let mut repaired = matches!(text, std::borrow::Cow::Owned(_));
    let chars: Vec<char> = text.chars().collect();
    let hex = |at: usize| -> Option<u32> {
        let digits: String = chars.get(at..at + 4)?.iter().collect();
        u32::from_str_radix(&digits, 16).ok()
    };
    let is_escape_u = |at: usize| chars.get(at) == Some(&'\\') && chars.get(at + 1) == Some(&'u');
    let (mut i, mut in_string) = (0, false);
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            in_string = c == '"';
            out.push(c);
            i += 1;
            continue;
        }
        match c {
            '"' => {
                in_string = false;
                out.push(c);
                i += 1;
            }
            '\\' if chars.get(i + 1) == Some(&'u') => match hex(i + 2) {
                Some(0xD800..=0xDBFF) if is_escape_u(i + 6) && matches!(hex(i + 8), Some(0xDC00..=0xDFFF)) => {
                    out.extend(&chars[i..i + 12]);
                    i += 12;
                }
                Some(0xD800..=0xDFFF) => {
                    out.push_str("\\ufffd");
                    repaired = true;
                    i += 6;
                }
                _ => {
                    out.extend(&chars[i..(i + 6).min(chars.len())]);
                    i += 6;
                }
            },
            '\\' => {
                out.extend(&chars[i..(i + 2).min(chars.len())]);
                i += 2;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    repaired.then_some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// A notification's params reach the handler as the text the agent sent, for every shape
    /// of line: plain, escaped, without params, with a null id; a line with an id is a request;
    /// values nested deeper than the bound are cut as on the careful path. A text chunk's
    /// params arrive translated, as the handler would have translated their text.
    #[test]
    fn notifications_keep_their_params_as_sent() {
        let params_of = |line: &str| match parse_incoming(line.as_bytes()) {
            Some(Incoming::Notification { method, params: Params::Text(params) }) => (method, params.get().to_string()),
            other => panic!("not a notification with its text: {other:?}"),
        };
        let update =
            r#"{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"a \"b\" \n é"}}"#;
        let line = format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{update}}}"#);
        assert_eq!(params_of(&line), ("session/update".to_string(), update.to_string()));
        let chunk = r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"b\" \n é"}}}"#;
        for line in [
            format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{chunk}}}"#),
            format!(r#"{{"params":{chunk},"id":null,"method":"session/update"}}"#),
        ] {
            match parse_incoming(line.as_bytes()) {
                Some(Incoming::Notification { method, params: Params::Chunk(translated) }) => {
                    assert_eq!(method, "session/update");
                    assert_eq!(translated, crate::agent::translate::translate_update_text(chunk), "{line}");
                }
                other => panic!("not a translated chunk: {other:?}"),
            }
        }
        // The same chunk as a request, or under another method, is not taken for one.
        let request = format!(r#"{{"jsonrpc":"2.0","id":4,"method":"session/update","params":{chunk}}}"#);
        assert!(matches!(parse_incoming(request.as_bytes()), Some(Incoming::Request { .. })));
        assert_eq!(params_of(&format!(r#"{{"method":"other","params":{chunk}}}"#)).1, chunk);
        assert_eq!(params_of(r#"{"method":"m1","id":null}"#), ("m1".to_string(), "null".to_string()));
        assert!(matches!(parse_incoming(br#"{"method":"m","id":1,"params":{}}"#), Some(Incoming::Request { .. })));
        let deep = format!(r#"{{"method":"m","params":{}1{}}}"#, "[".repeat(100), "]".repeat(100));
        let (_, params) = params_of(&deep);
        let params: Value = serde_json::from_str(&params).expect("JSON");
        assert!(baton_protocol::nesting_of(params.to_string().as_bytes()) <= baton_protocol::MAX_NESTING);
    }

    #[test]
    fn lines_with_broken_text_lose_the_character_not_the_line() {
        // A permission request whose title was cut mid-emoji by a JavaScript agent.
        let lone =
            br#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"title":"fix \ud83d now"}}"#;
        let Some(Incoming::Request { id, method, params }) = parse_incoming(lone) else { panic!("dropped") };
        assert_eq!((id, method.as_str()), (json!(7), "session/request_permission"));
        assert_eq!(params["title"], "fix \u{fffd} now");
        // A lone low surrogate, and invalid UTF-8 bytes, in a chunk.
        let low = br#"{"method":"session/update","params":{"t":"a\udc00b"}}"#;
        let Some(Incoming::Notification { params: Params::Text(params), .. }) = parse_incoming(low) else {
            panic!("dropped")
        };
        let params: Value = serde_json::from_str(params.get()).expect("JSON");
        assert_eq!(params["t"], "a\u{fffd}b");
        let mut bytes = br#"{"method":"session/update","params":{"t":"caf"#.to_vec();
        bytes.extend_from_slice(b"\xc3\x28\"}}");
        let Some(Incoming::Notification { params: Params::Text(params), .. }) = parse_incoming(&bytes) else {
            panic!("dropped")
        };
        let params: Value = serde_json::from_str(params.get()).expect("JSON");
        assert_eq!(params["t"], "caf\u{fffd}(");
        // Pairs, escaped backslashes and other escapes are kept as they were.
        let fine = br#"{"method":"m","params":{"t":"\ud83d\ude00 \\ud83d \n"}}"#;
        let Some(Incoming::Notification { params: Params::Text(params), .. }) = parse_incoming(fine) else {
            panic!("dropped")
        };
        let params: Value = serde_json::from_str(params.get()).expect("JSON");
        assert_eq!(params["t"], "\u{1f600} \\ud83d \n");
        assert!(parse_incoming(b"not json \xff").is_none(), "garbage stays garbage");
    }

    #[test]
    fn unreadable_lines_keep_their_id_and_method() {
        let cut = br#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"toolCall":{"id":"x"#;
        let Some(Incoming::Unreadable { id, method, answer, reason }) = parse_incoming(cut) else { panic!("dropped") };
        assert_eq!((id, method.as_deref(), answer), (json!(7), Some("session/request_permission"), false));
        assert!(reason.contains("EOF"), "{reason}");
        // The members may come in any order, ids may be strings; a nested "id" is not the id.
        let late = br#"{"params":{"id":1,"s":"a\"}"},"method":"fs/read_text_file","id":"r-2","x":tru}"#;
        let Some(Incoming::Unreadable { id, method, .. }) = parse_incoming(late) else { panic!("dropped") };
        assert_eq!((id, method.as_deref()), (json!("r-2"), Some("fs/read_text_file")));
        let answer = br#"{"jsonrpc":"2.0","id":12,"result":{"stopReason":"#;
        let Some(Incoming::Unreadable { id, method: None, answer: true, .. }) = parse_incoming(answer) else {
            panic!("an answer")
        };
        assert_eq!(id, json!(12));
        // Without an id there is nobody to answer.
        assert!(parse_incoming(br#"{"jsonrpc":"2.0","method":"session/update","params":{"#).is_none());
        assert!(parse_incoming(br#"{"params":{"id":3},"method":"m","#).is_none(), "only a nested id");
        assert!(parse_incoming(br#"{"id":null,"method":"m","#).is_none());
    }

    #[test]
    fn incoming_messages_are_told_apart() {
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            Some(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file"}"#),
            Some(Incoming::Request { .. })
        ));
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            Some(Incoming::Response { id: 3, result: Ok(Value::Null) })
        ));
        let Some(Incoming::Response { result: Err(e), .. }) =
            parse_incoming(br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"nope","data":null}}"#)
        else {
            panic!("error response not parsed")
        };
        assert_eq!((e.code, e.data), (-32002, None));
        assert!(parse_incoming(b"not json").is_none());
        assert!(parse_incoming(b"[1,2]").is_none());
    }
}
