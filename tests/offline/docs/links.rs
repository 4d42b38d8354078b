//! The docs' links: each relative link leads to a file and a heading, and
//! each invariant of the checker names a section of the docs.

use std::collections::BTreeSet;
use std::path::Path;

use super::*;

/// The anchors of a Markdown file's headings, as GitHub makes them.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut fence = false;
    for line in markdown.lines() {
        fence ^= line.trim_start().starts_with("```");
        if let (false, Some(heading)) = (fence, line.strip_prefix('#')) {
            let heading = heading.trim_start_matches('#');
            if heading.starts_with(' ') {
                anchors.insert(nodepool_fanout::api::reference::slug(heading.trim()));
            }
        }
    }
    anchors
}

/// The text of a Markdown file outside code blocks and code spans.
fn prose(markdown: &str) -> String {
    let mut fence = false;
    let mut text = String::new();
    for line in markdown.lines() {
        fence ^= line.trim_start().starts_with("```");
        if !fence && !line.trim_start().starts_with("```") {
            let mut in_code = false;
            for part in line.split('`') {
                if !in_code {
                    text.push_str(part);
                }
                in_code = !in_code;
            }
            text.push('\n');
        }
    }
    text
}

/// Whether a link from a file leads somewhere: a file that exists and,
/// with an anchor, a heading of it.
fn resolve(from: &Path, link: &str) -> Result<(), String> {
    let (path, anchor) = link.split_once('#').unwrap_or((link, ""));
    let target = match path {
        "" => from.to_path_buf(),
        path => from.parent().expect("a file's folder").join(path),
    };
    let text = match target.is_file() {
        true => std::fs::read_to_string(&target).unwrap_or_default(),
        false if target.is_dir() && anchor.is_empty() => return Ok(()),
        false => return Err(format!("{link}: no such file")),
    };
    match anchor.is_empty() || anchors(&text).contains(anchor) {
        true => Ok(()),
        false => Err(format!("{link}: no heading #{anchor} in {}", blocks::relative(&target))),
    }
}

#[test]
fn every_relative_link_leads_to_a_file_and_a_heading() {
    let mut errors = Vec::new();
    let mut links = 0;
    for file in blocks::markdown_files() {
        let text = prose(&std::fs::read_to_string(&file).expect("the file reads"));
        for target in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            links += 1;
            if let Err(e) = resolve(&file, target) {
                errors.push(format!("{}: {e}", blocks::relative(&file)));
            }
        }
    }
    fail_on(errors);
    assert!(links > 50, "only {links} relative links found");
}

/// The checker names the docs section of each promise it judges; each
/// must lead to a heading.
#[test]
fn every_invariant_names_a_section_of_the_docs() {
    let root = blocks::repo_root();
    let errors: Vec<String> = nodepool_fanout::check::Invariant::ALL
        .iter()
        .filter_map(|i| {
            resolve(&root.join("README.md"), i.docs_section())
                .err()
                .map(|e| format!("{}: {e}", i.name()))
        })
        .collect();
    fail_on(errors);
}
