//! No Rust file of the repository over 500 lines: past that, a file holds
//! two concerns. Checked over every `.rs` file under `src/`, `tests/` and
//! `benches/`.

use std::path::{Path, PathBuf};

use crate::support::repo_root;

/// The most lines a file may have.
const MOST_LINES: usize = 500;

/// The folders whose Rust files are counted, from the repository's root.
const FOLDERS: [&str; 3] = ["src", "tests", "benches"];

/// Every `.rs` file under `dir`, at any depth.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display())).path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_rust_file_is_over_500_lines() {
    let root = repo_root();
    let mut files = Vec::new();
    for folder in FOLDERS {
        rust_files(&root.join(folder), &mut files);
    }
    // A walk that found nothing (a moved root, a renamed folder) would
    // pass over an empty list.
    assert!(
        files.iter().any(|f| f.starts_with(root.join("src"))),
        "no Rust file found under {}/src",
        root.display()
    );
    let mut too_long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&root).unwrap_or(path).to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let lines = text.lines().count();
            (lines > MOST_LINES).then(|| format!("{relative}: {lines} lines"))
        })
        .collect();
    too_long.sort();
    assert!(
        too_long.is_empty(),
        "{} files over {MOST_LINES} lines (of {} read); for each, split it by concern; tests go in their own file:\n{}",
        too_long.len(),
        files.len(),
        too_long.join("\n")
    );
}
