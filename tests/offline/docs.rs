//! Every command and manifest in README.md and docs/ is one a test runs or
//! applies, so the docs cannot drift from the code. Without a cluster:
//! each YAML block parses, each NodePoolApplication in them deserialises
//! into the crate's type and passes the generated CRD's schema and CEL
//! rules, each `nodepool-fanout` command parses with the CLI's own clap
//! definition (and `nodepool-fanout-check`'s with its binary's), each
//! `make` target exists, each usage synopsis names flags that exist, each
//! JSON block parses, and each relative link leads to a file and a heading.
//! `tests/e2e/docs.rs` applies the manifests to the local control plane.
//!
//! What each info string means is in `tests/support/docs.rs`.

#[path = "../support/docs.rs"]
mod blocks;

use std::collections::{BTreeMap, BTreeSet};

use clap::{CommandFactory, Parser};
use kube::CustomResourceExt;
use nodepool_fanout::api::NodePoolApplication;
use nodepool_fanout::cli::Cli;
use serde_json::{json, Value};

use blocks::{blocks, manifests, Block, KINDS};

mod links;

/// Programs of other projects the docs run (`kubectl`, `helm`, …): their
/// commands are not ours to parse, so they are named here, and a command
/// of any other program fails the test.
const OTHER_PROGRAMS: [&str; 6] = ["kubectl", "helm", "docker", "curl", "grep", "export"];

/// The folders of the repository a command may name a path in; the path
/// must exist.
const REPO_FOLDERS: [&str; 7] = [
    "examples/",
    "deploy/",
    "charts/",
    "hack/",
    "crds/",
    "docs/",
    "tests/",
];

fn fail_on(errors: Vec<String>) {
    assert!(errors.is_empty(), "{} broken in the docs:\n{}", errors.len(), errors.join("\n"));
}

#[test]
fn every_block_says_what_it_is() {
    let all = blocks();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut errors = Vec::new();
    for block in &all {
        match KINDS.iter().find(|k| **k == block.info) {
            Some(kind) => *by_kind.entry(kind).or_default() += 1,
            None => errors.push(format!(
                "{}: info string {:?} is none of {KINDS:?}: a block that is not run says so (`text`, `console`)",
                block.place(),
                block.info
            )),
        }
    }
    fail_on(errors);
    for kind in ["yaml", "yaml fragment", "sh", "console", "json", "text synopsis"] {
        assert!(by_kind.contains_key(kind), "no `{kind}` block: its check would judge nothing");
    }
    eprintln!("{} blocks in {} files: {by_kind:?}", all.len(), blocks::markdown_files().len());
}

/// Every manifest of the docs, failing the test on a block that holds none.
fn all_manifests(all: &[Block]) -> Vec<(String, Value)> {
    manifests(all).unwrap_or_else(|errors| {
        fail_on(errors);
        Vec::new()
    })
}

#[test]
fn every_yaml_block_is_manifests_or_fragments_of_an_application() {
    let all = blocks();
    let found = all_manifests(&all);
    let yaml = all.iter().filter(|b| b.info.starts_with("yaml")).count();
    assert!(yaml > 0 && found.len() >= yaml, "{} manifests from {yaml} YAML blocks", found.len());
}

/// The CRD's structural schema as a JSON Schema the `jsonschema` crate
/// reads: a nullable field also takes `null`, and an object with declared
/// fields takes no others (the API server prunes them, or refuses them
/// under `fieldValidation=Strict`: either way a field the docs spell
/// wrongly would be lost).
fn crd_json_schema() -> Value {
    let crd = serde_json::to_value(NodePoolApplication::crd()).expect("the CRD serializes");
    let mut schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    assert!(schema.is_object(), "the CRD has no schema");
    strict(&mut schema);
    let properties = schema["properties"].as_object_mut().expect("the schema has properties");
    properties.insert("apiVersion".into(), json!({ "const": "apps.fanout.dev/v1alpha1" }));
    properties.insert("kind".into(), json!({ "const": "NodePoolApplication" }));
    properties.insert("metadata".into(), json!({ "type": "object" }));
    schema
}

fn strict(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if object.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(kind)) = object.get("type").cloned() {
            object.insert("type".into(), json!([kind, "null"]));
        }
    }
    let open = object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if object.contains_key("properties") && !open && !object.contains_key("additionalProperties") {
        object.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "items", "additionalProperties"] {
        match object.get_mut(key) {
            Some(Value::Object(children)) if key == "properties" => children.values_mut().for_each(strict),
            Some(child) => strict(child),
            None => {}
        }
    }
}

#[test]
fn every_application_of_the_docs_deserialises_and_validates() {
    let schema = crd_json_schema();
    let validator = jsonschema::validator_for(&schema).expect("the CRD's schema compiles");
    let found = all_manifests(&blocks());
    let mut errors = Vec::new();
    let mut applications = 0;
    for (place, manifest) in found.iter().filter(|(_, m)| m["kind"] == "NodePoolApplication") {
        applications += 1;
        for e in validator.iter_errors(manifest) {
            errors.push(format!("{place}: {}: {e}", e.instance_path()));
        }
        match serde_json::from_value::<NodePoolApplication>(manifest.clone()) {
            Ok(app) => {
                if let Err(e) = kube::core::cel::validate_cel(&app) {
                    errors.push(format!("{place}: a CEL rule refuses it: {e}"));
                }
                // What only the controller checks: a metric check's query is PromQL.
                let analysis = app.spec.rollout.as_ref().and_then(|r| r.analysis.as_ref());
                if let Some(Err(e)) = analysis.map(nodepool_fanout::reconcile::rollout::analysis::Checks::new)
                {
                    errors.push(format!("{place}: the controller refuses it: {e}"));
                }
            }
            Err(e) => errors.push(format!("{place}: not a NodePoolApplication: {e}")),
        }
    }
    fail_on(errors);
    assert!(applications >= 5, "only {applications} NodePoolApplications found in the docs");
    eprintln!("{applications} NodePoolApplications among {} manifests", found.len());
}

/// The schema check itself refuses what it should, or it would pass
/// anything.
#[test]
fn the_schema_check_refuses_a_misspelt_field_and_a_wrong_type() {
    let validator = jsonschema::validator_for(&crd_json_schema()).expect("the CRD's schema compiles");
    let good = blocks::fragment_base();
    assert!(validator.is_valid(&good), "the fragments' base is an application");
    let mut misspelt = good.clone();
    misspelt["spec"]["rollout"] = json!({ "maxUnavialable": 1 });
    assert!(!validator.is_valid(&misspelt), "a misspelt field passes");
    let mut wrong = good.clone();
    wrong["spec"]["interval"] = json!(10);
    assert!(!validator.is_valid(&wrong), "a number for a duration passes");
    let mut nullable = good;
    nullable["spec"]["chart"]["spec"]["version"] = Value::Null;
    assert!(validator.is_valid(&nullable), "a nullable field refuses null");
}

/// One simple command of a block: its words, as a shell splits them.
#[derive(Debug)]
struct Command {
    place: String,
    words: Vec<String>,
}

/// The command lines of a `sh` or `console` block, continuation lines
/// joined, split into simple commands at `;`, `&&`, `||` and `|`.
fn commands(block: &Block) -> Result<Vec<Command>, String> {
    let mut lines: Vec<(usize, String)> = Vec::new();
    let mut continued = false;
    for (i, line) in block.text.lines().enumerate() {
        let text = match (block.info.as_str(), continued) {
            (_, true) => line.trim(),
            ("console", false) => match line.strip_prefix("$ ") {
                Some(command) => command,
                None => continue,
            },
            (_, false) => line.trim(),
        };
        if text.is_empty() || text.starts_with('#') {
            continued = false;
            continue;
        }
        let (text, more) = match text.strip_suffix('\\') {
            Some(text) => (text, true),
            None => (text, false),
        };
        match continued {
            true => lines.last_mut().expect("a line to continue").1.push_str(text),
            false => lines.push((block.line + i + 1, text.to_string())),
        }
        continued = more;
    }
    let mut commands = Vec::new();
    for (line, text) in lines {
        let place = format!("{}:{line}", block.file);
        for words in split(&text).map_err(|e| format!("{place}: {e}: {text}"))? {
            commands.push(Command {
                place: place.clone(),
                words,
            });
        }
    }
    Ok(commands)
}

/// Splits a command line into simple commands of words: quotes and
/// backslashes as a shell reads them, `$(…)` kept whole, a word that
/// starts with `#` ending the line.
fn split(line: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    let mut depth = 0;
    while let Some(c) = chars.next() {
        if depth > 0 {
            depth += usize::from(c == '(');
            depth -= usize::from(c == ')');
            word.get_or_insert_with(String::new).push(c);
            continue;
        }
        match c {
            '#' if word.is_none() => break,
            ' ' | '\t' => commands.last_mut().expect("a command").extend(word.take()),
            ';' | '|' | '&' => {
                commands.last_mut().expect("a command").extend(word.take());
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                if c == '&' && commands.last().is_some_and(|c| c.is_empty()) {
                    return Err("a command runs in the background or starts with &&".into());
                }
                commands.push(Vec::new());
            }
            '\'' => {
                let quoted: String = chars.by_ref().take_while(|c| *c != '\'').collect();
                word.get_or_insert_with(String::new).push_str(&quoted);
            }
            '"' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.extend(chars.next()),
                        Some(c) => word.push(c),
                        None => return Err("an unclosed double quote".into()),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            '$' if chars.peek() == Some(&'(') => {
                depth = 1;
                chars.next();
                word.get_or_insert_with(String::new).push_str("$(");
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if depth > 0 {
        return Err("an unclosed $(".into());
    }
    commands.last_mut().expect("a command").extend(word);
    Ok(commands.into_iter().filter(|c| !c.is_empty()).collect())
}

#[test]
fn the_splitter_reads_words_as_a_shell_does() {
    let words = |line: &str| split(line).expect("it splits");
    assert_eq!(words("make demo   # a comment"), [["make", "demo"]]);
    assert_eq!(
        words(r#"kubectl annotate npa x a="$(date +%s)"; nodepool-fanout get -n 'e dge'"#),
        vec![
            vec!["kubectl", "annotate", "npa", "x", "a=$(date +%s)"],
            vec!["nodepool-fanout", "get", "-n", "e dge"]
        ]
    );
    assert_eq!(
        words("curl -s x | grep -v _bucket && echo a\\ b"),
        [
            vec!["curl", "-s", "x"],
            vec!["grep", "-v", "_bucket"],
            vec!["echo", "a b"]
        ]
    );
    assert_eq!(
        words("export PATH=$(hack/x.sh 2>/dev/null):$PATH"),
        [["export", "PATH=$(hack/x.sh 2>/dev/null):$PATH"]]
    );
    assert!(split("echo \"open").is_err());
    assert!(split("echo $(open").is_err());
}

/// The targets the Makefile declares.
fn make_targets() -> BTreeSet<String> {
    let makefile = std::fs::read_to_string(blocks::repo_root().join("Makefile")).expect("the Makefile reads");
    makefile
        .lines()
        .filter_map(|line| line.split_once(':').map(|(target, _)| target))
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .map(str::to_string)
        .collect()
}

/// Whether every target a `make` command names is one of the Makefile's.
fn make_targets_exist(args: &[String], targets: &BTreeSet<String>) -> Result<(), String> {
    let named: Vec<&String> = args.iter().filter(|a| !a.contains('=') && !a.starts_with('-')).collect();
    if named.is_empty() {
        return Err("`make` with no target".into());
    }
    match named.into_iter().find(|t| !targets.contains(t.as_str())) {
        Some(target) => Err(format!("the Makefile has no target {target}")),
        None => Ok(()),
    }
}

/// Whether `nodepool-fanout-check`, run with these arguments, got past
/// its command line: with no cluster to reach it then says so and exits.
fn check_command_parses(args: &[String]) -> Result<(), String> {
    let missing = std::env::temp_dir().join("nodepool-fanout-docs-test-no-kubeconfig");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nodepool-fanout-check"))
        .args(args)
        .env("KUBECONFIG", &missing)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .map_err(|e| format!("nodepool-fanout-check could not be run: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    match stderr.contains("no cluster to watch") {
        true => Ok(()),
        false => Err(stderr.trim().to_string()),
    }
}

#[test]
fn every_command_of_the_docs_parses() {
    let targets = make_targets();
    assert!(
        targets.contains("test") && targets.contains("demo"),
        "the Makefile's targets: {targets:?}"
    );
    let mut errors = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for block in blocks().iter().filter(|b| b.info == "sh" || b.info == "console") {
        let commands = commands(block).unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        });
        for Command { place, words } in commands {
            let program = words[0].as_str();
            *counts.entry(program.into()).or_default() += 1;
            errors.extend(missing_paths(&words).into_iter().map(|p| format!("{place}: {p} does not exist")));
            let result = match program {
                "nodepool-fanout" => Cli::try_parse_from(&words).map(drop).map_err(|e| e.to_string()),
                "nodepool-fanout-check" => check_command_parses(&words[1..]),
                "make" => make_targets_exist(&words[1..], &targets),
                other if OTHER_PROGRAMS.contains(&other) => Ok(()),
                other if other.contains('=') => Ok(()),
                other => Err(format!("{other} is neither ours nor one of {OTHER_PROGRAMS:?}")),
            };
            if let Err(e) = result {
                errors.push(format!("{place}: `{}`: {e}", words.join(" ")));
            }
        }
    }
    fail_on(errors);
    for ours in ["nodepool-fanout", "nodepool-fanout-check", "make"] {
        assert!(counts.get(ours).is_some_and(|n| *n > 0), "no `{ours}` command in the docs: {counts:?}");
    }
    eprintln!("commands by program: {counts:?}");
}

/// The paths of the repository a command names that do not exist.
fn missing_paths(words: &[String]) -> Vec<String> {
    let mut missing = Vec::new();
    for word in words {
        for folder in REPO_FOLDERS {
            for (at, _) in word.match_indices(folder) {
                let starts_word = at == 0 || !word[..at].ends_with(|c: char| c.is_alphanumeric() || c == '-');
                let path: String = word[at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || "-_./".contains(*c))
                    .collect();
                if starts_word && !blocks::repo_root().join(&path).exists() {
                    missing.push(path);
                }
            }
        }
    }
    missing
}

#[test]
fn every_flag_of_a_synopsis_exists() {
    let cli = Cli::command();
    let mut errors = Vec::new();
    let mut documented = BTreeSet::new();
    for block in blocks().iter().filter(|b| b.info == "text synopsis") {
        let mut usage: Vec<String> = Vec::new();
        for line in block.text.lines().map(|l| l.split(" #").next().unwrap_or(l).trim()) {
            match (line.strip_prefix("nodepool-fanout "), usage.last_mut()) {
                (Some(command), _) => usage.push(command.into()),
                (None, Some(last)) if !line.is_empty() => last.push_str(&format!(" {line}")),
                _ => {}
            }
        }
        for command in usage {
            let name = command.split_whitespace().next().unwrap_or_default().to_string();
            let Some(sub) = cli.find_subcommand(&name) else {
                errors.push(format!("{}: no subcommand `{name}`", block.place()));
                continue;
            };
            documented.insert(name.clone());
            let longs: BTreeSet<&str> = sub.get_arguments().filter_map(|a| a.get_long()).collect();
            let shorts: BTreeSet<char> = sub.get_arguments().filter_map(|a| a.get_short()).collect();
            for flag in command.split(|c: char| c.is_whitespace() || "[]|".contains(c)) {
                let known = match flag.strip_prefix("--") {
                    Some(long) => {
                        let long = long.split('=').next().unwrap_or(long);
                        match long.strip_suffix('…') {
                            Some(prefix) => longs.iter().any(|l| l.starts_with(prefix)),
                            None => longs.contains(long),
                        }
                    }
                    None => match flag.strip_prefix('-').map(|s| s.chars().collect::<Vec<_>>()).as_deref() {
                        Some([short]) => shorts.contains(short),
                        _ => true,
                    },
                };
                if !known {
                    errors.push(format!("{}: `nodepool-fanout {name}` has no flag {flag}", block.place()));
                }
            }
        }
    }
    let all: BTreeSet<String> = cli.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for missing in all.difference(&documented) {
        errors.push(format!("the synopsis leaves out `nodepool-fanout {missing}`"));
    }
    fail_on(errors);
}

#[test]
fn every_json_block_parses() {
    let mut errors = Vec::new();
    let json: Vec<Block> = blocks().into_iter().filter(|b| b.info == "json").collect();
    assert!(!json.is_empty(), "no JSON block");
    for block in json {
        if serde_json::from_str::<Value>(&block.text).is_ok() {
            continue;
        }
        for (i, line) in block.text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            if let Err(e) = serde_json::from_str::<Value>(line) {
                errors.push(format!("{}:{}: not JSON: {e}", block.file, block.line + i + 1));
            }
        }
    }
    fail_on(errors);
}
