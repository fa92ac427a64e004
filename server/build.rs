//! Embeds the numbered `.sql` files of `../migrations` into the binary, in order.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(u32, String, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("migrations directory") {
        let path = entry.expect("migrations entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !name.ends_with(".sql") {
            continue;
        }
        let number = name.split('_').next().and_then(|n| n.parse::<u32>().ok());
        let number = number.unwrap_or_else(|| panic!("migration {name} must start with a number"));
        println!("cargo:rerun-if-changed={}", path.display());
        files.push((number, name, path));
    }
    files.sort();
    for pair in files.windows(2) {
        assert!(pair[0].0 != pair[1].0, "two migrations numbered {}", pair[0].0);
    }
    let mut code = String::from("pub static MIGRATIONS: &[Migration] = &[\n");
    for (number, name, path) in &files {
        let _ = writeln!(
            code,
            "    Migration {{ version: {number}, name: {name:?}, sql: include_str!({:?}) }},",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("migrations.rs");
    std::fs::write(out, code).expect("write migrations.rs");
}
