//! The examples in docs/PROTOCOL.md are real frames: every request parses as its action's params,
//! every response as its result, every notification, error and event kind as its type, with no
//! field the types do not have; and every action, notification and event kind has an example.

use std::collections::BTreeSet;

use baton_protocol::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROTOCOL.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Every line of every ```json block.
fn json_lines(doc: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        match line.trim() {
            "```json" => inside = true,
            "```" => inside = false,
            text if inside && !text.is_empty() => lines.push(text.to_string()),
            _ => {}
        }
    }
    lines
}

/// `example` says nothing the typed value does not: every key it has is a field of the type
/// (no misspelled or invented field slips through serde's leniency), with the same value.
fn assert_covered(example: &Value, typed: &Value, at: &str) {
    match (example, typed) {
        (Value::Object(e), Value::Object(t)) => {
            for (key, value) in e {
                let Some(typed_value) = t.get(key) else { panic!("{at}.{key} is not a field of the type") };
                assert_covered(value, typed_value, &format!("{at}.{key}"));
            }
        }
        (Value::Array(e), Value::Array(t)) => {
            assert_eq!(e.len(), t.len(), "{at}");
            for (i, (e, t)) in e.iter().zip(t).enumerate() {
                assert_covered(e, t, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(example, typed, "{at}"),
    }
}

fn typed<T: Serialize + DeserializeOwned>(payload: &Value, what: &str) -> Result<(), String> {
    let value: T = serde_json::from_value(payload.clone()).map_err(|e| format!("{what}: {e}"))?;
    let back = serde_json::to_value(&value).map_err(|e| e.to_string())?;
    assert_covered(payload, &back, what);
    Ok(())
}

/// Decodes a result payload as the result type of `action`.
fn check_result(action: &str, payload: &Value) -> Result<(), String> {
    macro_rules! by_action {
        ($($params:ty),+) => {
            match action {
                $(a if a == <$params as Request>::ACTION => typed::<<$params as Request>::Response>(payload, action),)+
                other => Err(format!("unknown action {other}")),
            }
        };
    }
    by_action!(
        AgentListParams,
        TaskCreateParams,
        TaskListParams,
        TaskUpdateParams,
        TaskArchiveParams,
        TaskUnarchiveParams,
        TaskDeleteParams,
        SessionListParams,
        SessionStatusParams,
        SessionResumeParams,
        SessionStartParams,
        SessionCancelParams,
        SessionStopParams,
        MessageAddParams,
        MessageListParams,
        MessageTextParams,
        SubscribeParams,
        UnsubscribeParams,
        PermissionRespondParams,
        PingParams,
        SessionForkParams,
        UsageGetParams,
        SessionExportParams,
        MessageSearchParams,
        PermissionListParams,
        PermissionRuleListParams,
        PermissionRuleRevokeParams,
        SessionOptionsParams,
        SessionSetModeParams,
        SessionSetOptionParams,
        QueueListParams,
        QueueEditParams,
        QueueRemoveParams,
        QueueReleaseParams,
        DevicePairParams,
        DeviceListParams,
        DeviceRevokeParams,
        PushKeyParams,
        PushSubscribeParams,
        PushUnsubscribeParams,
        TaskChangesParams,
        TaskDiffParams,
        TaskCommitParams,
        TaskMergeParams,
        TaskPullRequestParams,
        TaskShellParams
    )
}

#[test]
fn every_json_example_is_a_real_frame_and_every_action_has_one() {
    let doc = doc();
    let mut requests = BTreeSet::new();
    let mut responses = BTreeSet::new();
    let mut notifications = BTreeSet::new();
    let mut errors = 0;
    for line in json_lines(&doc) {
        let envelope: Envelope =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an envelope ({e}): {line}"));
        let raw: Value = serde_json::from_str(&line).expect("JSON");
        assert_covered(&raw, &serde_json::to_value(&envelope).expect("envelope"), "envelope");
        let action = envelope.action.clone();
        match envelope.kind {
            MessageType::Request => {
                let request = ClientRequest::parse(&action, envelope.payload.clone())
                    .unwrap_or_else(|e| panic!("request example does not parse: {e}\n{line}"));
                let payload = if envelope.payload.is_null() { serde_json::json!({}) } else { envelope.payload };
                assert_covered(&payload, &request.payload(), &action);
                requests.insert(action);
            }
            MessageType::Response => {
                check_result(&action, &envelope.payload).unwrap_or_else(|e| panic!("{e}\n{line}"));
                responses.insert(action);
            }
            MessageType::Notification => {
                Notification::from_envelope(&envelope).unwrap_or_else(|e| panic!("{e}\n{line}"));
                typed::<Envelope>(&raw, "notification").expect("notification");
                notifications.insert(action);
            }
            MessageType::Error => {
                typed::<ErrorPayload>(&envelope.payload, "error payload").unwrap_or_else(|e| panic!("{e}\n{line}"));
                errors += 1;
            }
        }
    }
    let actions: BTreeSet<String> = ClientRequest::ACTIONS.iter().map(|a| a.to_string()).collect();
    assert_eq!(requests, actions, "every action has a request example");
    assert_eq!(responses, actions, "every action has a response example");
    let every_notification: BTreeSet<String> = [
        Notification::HELLO,
        Notification::STATE_CHANGED,
        Notification::EVENT,
        Notification::TASK_UPDATED,
        Notification::TASK_DELETED,
        Notification::SHUTDOWN,
        Notification::ATTENTION_CHANGED,
        Notification::PERMISSION_QUEUE_CHANGED,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    assert_eq!(notifications, every_notification, "every notification has an example");
    assert!(errors > 0, "an error example");
}

#[test]
fn every_event_kind_has_a_real_example() {
    let doc = doc();
    let table = doc.split("### Event kinds").nth(1).expect("an Event kinds section");
    let table = table.split("\n## ").next().unwrap_or(table);
    let mut kinds = BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        // The last cell holds the example `event` object in backquotes.
        let cell = row.trim_end_matches('|').rsplit('|').next().unwrap_or("").trim();
        if !cell.starts_with("`{") {
            continue; // the header row
        }
        let example = cell.trim_matches('`');
        let value: Value = serde_json::from_str(example).unwrap_or_else(|e| panic!("not JSON ({e}): {row}"));
        typed::<SessionEvent>(&value, "event").unwrap_or_else(|e| panic!("{e}\n{row}"));
        let event: SessionEvent = serde_json::from_value(value).expect("event");
        let kind = event.kind().to_string();
        assert!(row.starts_with(&format!("| `{kind}`")), "the example of row {row} is a {kind}");
        kinds.insert(kind);
    }
    let schema = protocol_schema();
    let every_kind: BTreeSet<String> = schema["$defs"]["SessionEvent"]["oneOf"]
        .as_array()
        .expect("SessionEvent variants")
        .iter()
        .filter_map(|variant| variant["properties"]["kind"]["const"].as_str().map(str::to_string))
        .collect();
    assert_eq!(kinds, every_kind, "every event kind has an example");
}

#[test]
fn the_rust_walkthrough_is_the_crate_example() {
    let doc = doc();
    let start = doc.find("```rust\n").expect("a Rust example in PROTOCOL.md") + "```rust\n".len();
    let end = start + doc[start..].find("```\n").expect("its end");
    let walkthrough = &doc[start..end];
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).expect("read lib.rs");
    let example: String = lib
        .lines()
        .skip_while(|l| *l != "//! ```no_run")
        .skip(1)
        .take_while(|l| *l != "//! ```")
        .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or(l.trim_start_matches("//!"))))
        .collect();
    assert_eq!(walkthrough, example, "docs/PROTOCOL.md §8 and the crate example in shared/src/lib.rs differ");
}

/// The Markdown pages of the project: docs/*.md and the README.
fn pages() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(format!("{root}/docs"))
        .expect("docs/")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    paths.push(format!("{root}/README.md").into());
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path.file_name().unwrap_or_default().to_string_lossy().into_owned(), text)
        })
        .collect()
}

/// The lines of a page outside its code blocks, with their line numbers (from 1). As in
/// CommonMark, a line opens a block when it starts with ``` and the rest holds no backquote, and
/// only a bare ``` closes it.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let fence = line.trim().strip_prefix("```");
        match fence {
            Some(info) if inside && info.is_empty() => inside = false,
            Some(info) if !inside && !info.contains('`') => inside = true,
            _ if !inside => lines.push((number + 1, line)),
            _ => {}
        }
    }
    lines
}

/// The cells of a table row: split at every `|` that is not escaped (`\|`), as GitHub does
/// (code spans included); None when the row does not start and end with `|`.
fn row_cells(row: &str) -> Option<Vec<String>> {
    let row = row.trim_end();
    if !row.starts_with('|') || !row.ends_with('|') || row.ends_with("\\|") || row.len() < 2 {
        return None;
    }
    let mut cells = vec![String::new()];
    let mut escaped = false;
    for c in row[1..row.len() - 1].chars() {
        match c {
            '|' if !escaped => cells.push(String::new()),
            _ => cells.last_mut().expect("a cell").push(c),
        }
        escaped = c == '\\' && !escaped;
    }
    Some(cells.into_iter().map(|cell| cell.trim().to_string()).collect())
}

/// Every table: its first line number and its rows (consecutive prose lines starting with `|`).
fn tables(text: &str) -> Vec<(usize, Vec<&str>)> {
    let mut tables: Vec<(usize, Vec<&str>)> = Vec::new();
    let mut previous = 0;
    for (number, line) in prose_lines(text) {
        if line.starts_with('|') {
            match tables.last_mut() {
                Some((_, rows)) if previous + 1 == number => rows.push(line),
                _ => tables.push((number, vec![line])),
            }
            previous = number;
        }
    }
    tables
}

#[test]
fn every_table_row_is_well_formed() {
    let mut broken = Vec::new();
    for (page, text) in pages() {
        for (first, rows) in tables(&text) {
            let header = row_cells(rows[0]).map_or(0, |cells| cells.len());
            let delimiter = rows.get(1).and_then(|row| row_cells(row));
            let is_delimiter = delimiter.as_ref().is_some_and(|cells| {
                cells.len() == header
                    && cells.iter().all(|c| !c.is_empty() && c.trim_matches(':').chars().all(|c| c == '-'))
            });
            if !is_delimiter {
                broken.push(format!("{page}:{first}: a table without its |---| row under the header"));
            }
            for (i, row) in rows.iter().enumerate() {
                let cells = row_cells(row).map(|cells| cells.len());
                if cells != Some(header) {
                    broken.push(format!(
                        "{page}:{}: {} cells where the header has {header} (an unescaped |, or a row cut short): {}",
                        first + i,
                        cells.map_or("not a row of".to_string(), |n| n.to_string()),
                        &row[..row.len().min(100)]
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn every_code_fence_names_its_language_and_is_closed() {
    let mut broken = Vec::new();
    for (page, text) in pages() {
        let mut open: Option<usize> = None;
        for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
            let trimmed = line.trim();
            if let Some(info) = trimmed.strip_prefix("```") {
                match open {
                    // Only a bare fence closes a block.
                    Some(_) if info.is_empty() => open = None,
                    Some(opened) => {
                        broken.push(format!("{page}:{number}: a fence inside the block opened at line {opened}"))
                    }
                    None if info.is_empty() || info.contains([' ', '`']) => broken.push(format!(
                        "{page}:{number}: a block opened without a language (a stray fence, or a fragment after a block?)"
                    )),
                    None => open = Some(number),
                }
            } else if open.is_none() && line.contains("```") {
                broken.push(format!("{page}:{number}: ``` inside a line (a block that starts mid-sentence?)"));
            }
        }
        if let Some(opened) = open {
            broken.push(format!("{page}:{opened}: this block is never closed"));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The actions of a `### ` heading of §4 (`### \`task.archive\`, \`task.unarchive\``).
fn heading_actions(heading: &str) -> Vec<String> {
    heading.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

#[test]
fn the_action_counts_and_lists_are_the_servers() {
    let doc = doc();
    let actions: Vec<String> = ClientRequest::ACTIONS.iter().map(|a| a.to_string()).collect();
    // Every action has its section in §4, and every section there is an action.
    let section = doc.split("\n## 4. Actions").nth(1).expect("§4").split("\n## ").next().unwrap_or("");
    let documented: BTreeSet<String> =
        section.lines().filter_map(|l| l.strip_prefix("### ")).flat_map(heading_actions).collect();
    let every: BTreeSet<String> = actions.iter().cloned().collect();
    assert_eq!(documented, every, "the `### ` sections of §4 are the actions (ClientRequest::ACTIONS)");
    // A number of actions said in words is the number there are.
    for (number, line) in prose_lines(&doc) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[1].trim_end_matches([',', '.', ')', ';', ':']) == "actions" {
                if let Ok(count) = pair[0].parse::<usize>() {
                    assert_eq!(count, actions.len(), "PROTOCOL.md:{number} says {count} actions: {line}");
                }
            }
        }
    }
    // The UNKNOWN_ACTION example lists every action, as the server does.
    let unknown = json_lines(&doc)
        .into_iter()
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .find(|frame| frame["payload"]["code"] == "UNKNOWN_ACTION")
        .expect("an UNKNOWN_ACTION example");
    assert_eq!(
        unknown["payload"]["details"]["actions"],
        serde_json::json!(actions),
        "the UNKNOWN_ACTION example of §2 lists ClientRequest::ACTIONS, in its order"
    );
}

/// The properties a schema of the protocol's has (following a `$ref`).
fn properties(schema: &Value, root: &Value) -> BTreeSet<String> {
    let schema = match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => &root["$defs"][name],
        None => schema,
    };
    schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
}

/// The field names a table documents: every `name` in backquotes in its first column.
fn documented_names(rows: &[&str]) -> BTreeSet<String> {
    rows.iter()
        .skip(2)
        .filter_map(|row| row_cells(row))
        .filter_map(|cells| cells.into_iter().next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>())
        .collect()
}

#[test]
fn documented_fields_and_params_are_the_schemas() {
    let doc = doc();
    let schema = protocol_schema();
    let lines: Vec<&str> = doc.lines().collect();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (first, rows) in tables(&doc) {
        let header = row_cells(rows[0]).unwrap_or_default();
        let names = documented_names(&rows);
        // What the table is about: the nearest heading above, or a `**Type**` label right above.
        let above = lines[..first - 1].iter().rev().map(|l| l.trim()).find(|l| !l.is_empty());
        let label = above.and_then(|l| l.strip_prefix("**")).and_then(|l| l.split("**").next());
        let heading = lines[..first - 1].iter().rev().find(|l| l.starts_with('#')).copied().unwrap_or("");
        match header.first().map(String::as_str) {
            // A `param` table under an action's heading: that action's params.
            Some("param") => {
                for action in heading_actions(heading) {
                    let params = &schema["x-actions"][action.as_str()]["params"];
                    assert!(!params.is_null(), "PROTOCOL.md:{first}: {action} is not an action");
                    let expected = properties(params, &schema);
                    // Under a heading of several actions, a row typed "(`ACTION` only)" is ACTION's.
                    let own = format!("(`{action}` only)");
                    let rows: Vec<&str> =
                        rows.iter().copied().filter(|row| !row.contains("` only)") || row.contains(&own)).collect();
                    let names = documented_names(&rows);
                    if names != expected {
                        wrong.push(format!(
                            "PROTOCOL.md:{first}: {action} params: documented {names:?}, schema {expected:?}"
                        ));
                    }
                    checked += 1;
                }
            }
            // A `field` table right under a `**Type**` label: that type's fields.
            Some("field") => {
                let Some(label) = label.filter(|l| schema["$defs"].get(*l).is_some()) else { continue };
                let expected = properties(&schema["$defs"][label], &schema);
                if names != expected {
                    wrong.push(format!(
                        "PROTOCOL.md:{first}: {label} fields: documented {names:?}, schema {expected:?}"
                    ));
                }
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 20, "only {checked} tables were checked");
}

/// The `### Typed Rust client` section of PROTOCOL.md.
fn rust_client_section(doc: &str) -> &str {
    let start = doc.find("### Typed Rust client").expect("the Rust client's section");
    let end = start + 3 + doc[start + 3..].find("\n### ").expect("a section after it");
    &doc[start..end]
}

/// Every public method, option and error of the typed client (`shared/src/client.rs`), read from
/// its source: `(what, name)`.
fn client_api() -> Vec<(String, String)> {
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/client.rs")).expect("read client.rs");
    let mut api = Vec::new();
    let mut block: Option<String> = None;
    for line in source.lines() {
        if line.starts_with('}') {
            block = None;
            continue;
        }
        if let Some(head) = line.strip_suffix(" {").filter(|_| !line.starts_with(' ')) {
            block = Some(head.to_string());
            continue;
        }
        let Some(head) = &block else { continue };
        let member = line.trim_start();
        let name = |text: &str| text.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("").to_string();
        if head.starts_with("impl ") && !head.contains(" for ") && line.starts_with("    pub ") {
            if let Some(rest) = member.strip_prefix("pub async fn ").or_else(|| member.strip_prefix("pub fn ")) {
                api.push((head.clone(), name(rest)));
            }
        } else if head == "pub struct ClientOptions" && line.starts_with("    pub ") {
            api.push((head.clone(), name(member.trim_start_matches("pub "))));
        } else if head == "pub enum ClientError" && line.starts_with("    ") && !line.starts_with("     ") {
            let variant = name(member);
            if variant.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                api.push((head.clone(), variant));
            }
        }
    }
    api
}

#[test]
fn the_rust_client_table_names_every_public_method_option_and_error() {
    let doc = doc();
    let section = rust_client_section(&doc);
    let api = client_api();
    for expected in ["connect_with", "wait_turn", "fingerprint", "NotSubscribed", "Decode"] {
        assert!(api.iter().any(|(_, name)| name == expected), "the source scan found no {expected}: {api:?}");
    }
    let words: BTreeSet<&str> =
        section.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect();
    let missing: Vec<String> = api
        .iter()
        .filter(|(_, name)| !words.contains(name.as_str()))
        .map(|(at, name)| format!("{at}: {name}"))
        .collect();
    assert!(missing.is_empty(), "PROTOCOL.md §8 (Typed Rust client) does not name: {missing:#?}");
}
