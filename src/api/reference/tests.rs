//! Unit tests of the API reference: a small CRD rendered, and the real
//! one checked for coverage and links.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::*;

/// A CRD of one small kind, its schema given as JSON.
fn crd(schema: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "names": { "kind": "Widget", "plural": "widgets", "shortNames": ["wd"] },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": schema }
            }]
        }
    }))
    .unwrap()
}

fn selector() -> Value {
    json!({
        "type": "object",
        "description": "Which pools.",
        "properties": { "matchLabels": { "type": "object", "additionalProperties": { "type": "string" } } }
    })
}

fn widget() -> String {
    markdown(&crd(json!({
        "type": "object",
        "description": "A widget.",
        "properties": {
            "spec": {
                "type": "object",
                "description": "What the widget is.",
                "required": ["size"],
                "x-kubernetes-validations": [{ "rule": "self.size > 0", "message": "size must be positive" }],
                "properties": {
                    "size": { "type": "integer", "format": "int32", "minimum": 1.0, "maximum": 10.0,
                              "description": "How big, from <small>\nto <large>." },
                    "mode": { "type": "string", "enum": ["Fast", "Slow", null], "nullable": true,
                              "default": "Fast", "description": "`a|b` or c|d." },
                    "budget": { "x-kubernetes-int-or-string": true },
                    "values": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    "names": { "type": "array", "maxItems": 3,
                               "items": { "type": "string", "maxLength": 63 } },
                    "steps": { "type": "array", "items": {
                        "type": "object", "required": ["pools"],
                        "properties": { "pools": selector() } } },
                    "pools": selector()
                }
            }
        }
    })))
}

/// The rows of the table under a section's heading.
fn rows<'a>(page: &'a str, heading: &str) -> Vec<&'a str> {
    let start = page
        .find(&format!("### {heading}\n"))
        .unwrap_or_else(|| panic!("no {heading}:\n{page}"));
    page[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("### "))
        .filter(|l| l.starts_with("| `"))
        .collect()
}

fn row<'a>(page: &'a str, heading: &str, field: &str) -> &'a str {
    let prefix = format!("| `{field}` |");
    rows(page, heading)
        .into_iter()
        .find(|r| r.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no row {field} under {heading}:\n{page}"))
}

#[test]
fn the_header_names_the_kind_and_how_to_regenerate() {
    let page = widget();
    assert!(page.starts_with("# API reference: Widget\n"), "{page}");
    assert!(page.contains(REGENERATE), "{page}");
    assert!(
        page.contains("Group `example.com`, kind `Widget`, plural `widgets`, short name `wd`, namespaced.")
    );
    assert!(page.contains("`apiVersion: example.com/v1`, served and stored."), "{page}");
}

#[test]
fn each_object_has_a_section_with_a_row_per_field() {
    let page = widget();
    let top = rows(&page, "`Widget v1`");
    let fields: Vec<&str> = top.iter().map(|r| r.split('|').nth(1).unwrap().trim()).collect();
    assert_eq!(fields, ["`apiVersion`", "`kind`", "`metadata`", "`spec`"]);
    assert_eq!(rows(&page, "`spec`").len(), 7, "{page}");
    assert_eq!(row(&page, "`spec`", "spec.size"), "| `spec.size` | integer (int32) | yes |  | How big, from &lt;small&gt; to &lt;large&gt;. From 1 to 10. |");
    assert!(row(&page, "`spec.steps[]`", "spec.steps[].pools").contains("| [object](#specpools) | yes |"));
}

#[test]
fn defaults_enums_and_constraints_are_said() {
    let page = widget();
    let mode = row(&page, "`spec`", "spec.mode");
    assert!(mode.contains("| string | no | `\"Fast\"` |"), "{mode}");
    assert!(mode.contains("One of `Fast`, `Slow`."), "null is no choice: {mode}");
    assert!(mode.contains("`a\\|b` or c\\|d."), "pipes escaped: {mode}");
    let names = row(&page, "`spec`", "spec.names");
    assert!(names.contains("list of string"), "{names}");
    assert!(names.contains("At most 3 items. Each item: at most 63 characters."), "{names}");
    assert!(row(&page, "`spec`", "spec.budget").contains("integer or string"));
    assert!(row(&page, "`spec`", "spec.values").contains("object (any fields)"));
}

#[test]
fn an_objects_rules_are_listed_in_its_section_not_on_its_row() {
    let page = widget();
    assert!(
        page.contains("Rules of this object, checked at admission:\n\n- size must be positive.\n"),
        "{page}"
    );
    assert!(!row(&page, "`Widget v1`", "spec").contains("size must be positive"));
}

#[test]
fn an_object_like_one_before_links_to_its_section() {
    let page = widget();
    assert!(page.contains("### `spec.pools`"), "{page}");
    assert!(!page.contains("### `spec.steps[].pools`"), "the same selector again: {page}");
    assert!(row(&page, "`spec.steps[]`", "spec.steps[].pools").contains("[object](#specpools)"));
    assert!(row(&page, "`spec.pools`", "spec.pools.matchLabels").contains("map of string"));
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug("`spec.rollout.steps[]`"), "specrolloutsteps");
    assert_eq!(slug("Version `v1alpha1`"), "version-v1alpha1");
    assert_eq!(slug("One instance per pool, really"), "one-instance-per-pool-really");
    assert_eq!(
        slug("The fault soak: `make soak SEED=… DURATION=…`"),
        "the-fault-soak-make-soak-seed-duration"
    );
}

/// Every field of the real schema has its row, and every link of the
/// page leads to one of its headings.
#[test]
fn the_reference_covers_every_field_and_its_links_resolve() {
    let page = api_reference();
    let headings: BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| slug(h.trim_start_matches('#').trim()))
        .collect();
    let links: Vec<&str> = page.split("](#").skip(1).filter_map(|rest| rest.split(')').next()).collect();
    assert!(links.len() > 30, "{} links", links.len());
    for link in links {
        assert!(headings.contains(link), "#{link} leads to no heading");
    }
    let crd = serde_json::to_value(NodePoolApplication::crd()).unwrap();
    let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut paths = Vec::new();
    field_paths(root, "", &mut paths);
    assert!(paths.len() > 100, "{} fields", paths.len());
    for path in paths {
        assert!(covered(&page, &path), "no row for {path}");
    }
}

/// Whether a field has its row: under its own path, or under the section
/// that an object on its path links to when that object is documented
/// once for all its places.
fn covered(page: &str, path: &str) -> bool {
    if page.contains(&format!("| `{path}` |")) {
        return true;
    }
    let ends = path.match_indices(['.', '[']).map(|(i, _)| i);
    ends.into_iter().any(|end| {
        let (object, rest) = path.split_at(end);
        let own = if rest.starts_with("[]") {
            format!("{object}[]")
        } else {
            object.to_string()
        };
        let Some(section) = linked_section(page, object) else {
            return false;
        };
        section != own && covered(page, &format!("{section}{}", &path[own.len()..]))
    })
}

/// The path of the section a field's type links to.
fn linked_section(page: &str, field: &str) -> Option<String> {
    let row = page.lines().find(|l| l.starts_with(&format!("| `{field}` |")))?;
    let anchor = row.split("](#").nth(1)?.split(')').next()?;
    page.lines()
        .filter_map(|l| l.strip_prefix("### "))
        .find(|h| slug(h) == anchor)
        .map(|h| h.trim_matches('`').to_string())
}

/// The paths of every field of a schema, as the page names them.
fn field_paths(schema: &Value, prefix: &str, paths: &mut Vec<String>) {
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        let path = format!("{prefix}{name}");
        paths.push(path.clone());
        field_paths(field, &format!("{path}."), paths);
        field_paths(&field["items"], &format!("{path}[]."), paths);
    }
}
