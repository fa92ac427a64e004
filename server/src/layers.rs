//! The server's layers, kept by a test: the gateway calls the orchestrator, which calls the
//! agents and the store, which publish through the hub. No module calls up: the store and the
//! agents never name the orchestrator, the gateway or the server wiring; the store never names
//! the agents or the export writer either; the orchestrator never names the gateway; the hub,
//! the pure rules (`session_status`, `attention`) and the names both the store and the agents
//! share (`agent_runtime`) name none of them. Inside the store, `attention` (the recorded
//! attention and its count) never names `records`, which calls it. See docs/ARCHITECTURE.md.

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every `.rs` file under `path` (or `path` itself), with its text.
    fn sources(path: &Path) -> Vec<(String, String)> {
        if path.is_file() {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            return vec![(path.display().to_string(), text)];
        }
        let entries = std::fs::read_dir(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() || path.extension().is_some_and(|ext| ext == "rs") {
                out.extend(sources(&path));
            }
        }
        out
    }

    /// (module, the modules above it that it must never name)
    const RULES: &[(&str, &[&str])] = &[
        ("store", &["orchestrator", "gateway", "server", "agent", "export"]),
        ("agent", &["orchestrator", "gateway", "server", "store"]),
        ("orchestrator", &["gateway", "server"]),
        ("hub.rs", &["orchestrator", "gateway", "server", "store", "agent"]),
        ("session_status.rs", &["orchestrator", "gateway", "server", "store", "agent"]),
        ("attention.rs", &["orchestrator", "gateway", "server", "store", "agent"]),
        ("agent_runtime.rs", &["orchestrator", "gateway", "server", "store", "agent"]),
    ];

    #[test]
    fn no_layer_calls_up() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        for (module, above) in RULES {
            for (path, text) in sources(&src.join(module)) {
                for (number, line) in text.lines().enumerate() {
                    if let Some(upper) = above.iter().find(|upper| line.contains(&format!("crate::{upper}::"))) {
                        offenders.push(format!("{path}:{}: names {upper}: {}", number + 1, line.trim()));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "a lower layer names a higher one:\n{}", offenders.join("\n"));
    }

    /// Inside the store: (module, the store modules above it that it must never name).
    const STORE_RULES: &[(&str, &[&str])] = &[
        // The records derive a session's attention and record it through `attention`.
        ("attention.rs", &["records"]),
    ];

    #[test]
    fn no_store_module_calls_up() {
        let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
        let mut offenders = Vec::new();
        for (module, above) in STORE_RULES {
            for (path, text) in sources(&store.join(module)) {
                for (number, line) in text.lines().enumerate() {
                    let names = |upper: &str| {
                        [format!("super::{upper}"), format!("crate::store::{upper}")].iter().any(|prefix| {
                            line.match_indices(prefix.as_str()).any(|(at, _)| {
                                // `records` itself, not a longer name starting with it.
                                !line[at + prefix.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                            })
                        })
                    };
                    if let Some(upper) = above.iter().find(|upper| names(upper)) {
                        offenders.push(format!("{path}:{}: names {upper}: {}", number + 1, line.trim()));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "a store module names one above it:\n{}", offenders.join("\n"));
    }
}
