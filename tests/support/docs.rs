//! The fenced code blocks of README.md and docs/**/*.md, for the test that
//! checks them without a cluster (tests/offline/docs.rs) and the one that
//! applies their manifests to the local control plane (tests/e2e/docs.rs).
//!
//! A block's info string says what it is, and so what is checked of it:
//! - `yaml`: whole manifests, one or more documents, each with its
//!   `apiVersion`, `kind` and `metadata.name`: parsed, NodePoolApplications
//!   deserialised and validated, every document applied (dry run);
//! - `yaml fragment`: a part of a NodePoolApplication's `spec`, each
//!   document completed by [`complete_fragment`] and then checked as a
//!   manifest;
//! - `sh`: commands, every line;
//! - `console`: a session: its `$ ` lines are commands, the rest output;
//! - `json`: JSON, as a whole or a document a line;
//! - `text synopsis`: a command's usage, whose flags must exist;
//! - `text`: output or a drawing, deliberately not checked.
//!
//! A block with any other info string, or none, fails the offline test:
//! nothing is left out without saying so.
//!
//! Included by path (`#[path = "../support/docs.rs"]`) by the two tests
//! that read the docs, so that no other test binary carries it unused.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The info strings a block may have.
pub const KINDS: [&str; 7] = [
    "yaml",
    "yaml fragment",
    "sh",
    "console",
    "json",
    "text synopsis",
    "text",
];

/// One fenced code block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The file, relative to the repository's root.
    pub file: String,
    /// The line of its opening fence, from 1.
    pub line: usize,
    /// Its info string, trimmed.
    pub info: String,
    /// Its lines, the fence's indentation taken off.
    pub text: String,
}

impl Block {
    /// Where it is, as an editor opens it: `docs/rollouts.md:7`.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, in a stable order.
pub fn markdown_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() > 1, "no Markdown file under docs/");
    files
}

/// The path of a file from the repository's root, with `/`.
pub fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// Every block of every file; fails when there is none at all.
pub fn blocks() -> Vec<Block> {
    let mut all = Vec::new();
    for path in markdown_files() {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        all.extend(extract(&relative(&path), &text));
    }
    assert!(
        !all.is_empty(),
        "no fenced code block in README.md or docs/: the docs tests would check nothing"
    );
    all
}

/// The fenced blocks of one Markdown text: a fence of three or more
/// backticks, indented or not (a block in a list item), closed by a fence
/// at least as long.
pub fn extract(file: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(Block, usize, usize)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let fence = line.trim_start().chars().take_while(|c| *c == '`').count();
        match &mut open {
            None if fence >= 3 => {
                let info = line.trim_start()[fence..].trim().to_string();
                let block = Block {
                    file: file.into(),
                    line: i + 1,
                    info,
                    text: String::new(),
                };
                open = Some((block, indent, fence));
            }
            None => {}
            Some((_, _, length)) if fence >= *length && line.trim() == "`".repeat(fence) => {
                let (block, _, _) = open.take().expect("a block is open");
                blocks.push(block);
            }
            Some((block, indent, _)) => {
                let cut = line.len().min(*indent).min(line.len() - line.trim_start().len());
                block.text.push_str(&line[cut..]);
                block.text.push('\n');
            }
        }
    }
    if let Some((block, _, _)) = open {
        panic!("{}: a code block is never closed", block.place());
    }
    blocks
}

/// The documents of a YAML block, empty ones (comments only) left out.
pub fn yaml_documents(block: &Block) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(&block.text)
        .map_err(|e| format!("{}: not valid YAML: {e}", block.place()))?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// The application a fragment's documents are completed over: the least
/// a NodePoolApplication needs, which every fragment may override.
pub fn fragment_base() -> Value {
    json!({
        "apiVersion": "apps.fanout.dev/v1alpha1",
        "kind": "NodePoolApplication",
        "metadata": { "name": "docs-fragment" },
        "spec": {
            "pools": { "names": ["example"] },
            "chart": { "spec": { "chart": "ingress-gateway",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures" } } },
            "interval": "10m"
        }
    })
}

/// A fragment (a document holding `spec` and nothing else) merged over
/// [`fragment_base`]: maps merge, anything else replaces.
pub fn complete_fragment(fragment: &Value) -> Result<Value, String> {
    let keys: Vec<&String> = fragment.as_object().map(|m| m.keys().collect()).unwrap_or_default();
    if keys != ["spec"] {
        return Err(format!("a fragment holds `spec:` and nothing else, not {keys:?}"));
    }
    let mut app = fragment_base();
    merge(&mut app, fragment);
    Ok(app)
}

fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                merge(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, over) => *base = over.clone(),
    }
}

/// Every manifest of the docs with the place of its block: the documents
/// of `yaml` blocks, and those of `yaml fragment` blocks completed.
pub fn manifests(blocks: &[Block]) -> Result<Vec<(String, Value)>, Vec<String>> {
    let mut manifests = Vec::new();
    let mut errors = Vec::new();
    for block in blocks {
        let fragment = match block.info.as_str() {
            "yaml" => false,
            "yaml fragment" => true,
            _ => continue,
        };
        let documents = match yaml_documents(block) {
            Ok(documents) if documents.is_empty() => {
                errors.push(format!("{}: a YAML block with no document", block.place()));
                continue;
            }
            Ok(documents) => documents,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for (n, document) in documents.iter().enumerate() {
            let place = format!("{} (document {})", block.place(), n + 1);
            let manifest = match fragment {
                true => complete_fragment(document),
                false => whole(document),
            };
            match manifest {
                Ok(manifest) => manifests.push((place, manifest)),
                Err(e) => errors.push(format!("{place}: {e}")),
            }
        }
    }
    match errors.is_empty() {
        true => Ok(manifests),
        false => Err(errors),
    }
}

/// A document of a `yaml` block, which must be a whole object.
fn whole(document: &Value) -> Result<Value, String> {
    for field in ["/apiVersion", "/kind", "/metadata/name"] {
        if !document.pointer(field).is_some_and(Value::is_string) {
            return Err(format!(
                "no {} (a part of a manifest is a `yaml fragment` block)",
                &field[1..].replace('/', ".")
            ));
        }
    }
    Ok(document.clone())
}
