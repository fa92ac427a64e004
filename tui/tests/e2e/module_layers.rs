//! The layering the crate documents: the state (`app`) and what it owns (`layout`,
//! `transcript`) never reach into the drawing (`ui`), which only reads them.

use std::fs;
use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            out.push((path.display().to_string(), text));
        }
    }
    out
}

#[test]
fn the_state_and_its_layout_never_import_the_drawing() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    for module in ["app", "layout", "transcript"] {
        for (path, text) in sources(&src.join(module)) {
            for (number, line) in text.lines().enumerate() {
                if line.contains("crate::ui") || line.contains("super::ui") {
                    offenders.push(format!("{path}:{}: {}", number + 1, line.trim()));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "modules below `ui` refer to it:\n{}", offenders.join("\n"));
}
