//! The API reference, `docs/reference/api.md`: the CRD's OpenAPI schema
//! rendered as Markdown, one section per object with a row per field
//! (path, type, whether it is required, its default, and its description:
//! the doc comment of the Rust field, then the schema's constraints and
//! CEL rules). A pure function of the CRD, so the page is regenerated from
//! the same types as `crds/` (`nodepool-fanout crd --reference`) and a test
//! fails when the committed page drifts.
//!
//! An object whose schema is the same as one documented already (the label
//! selector of every pool selection) links to that section rather than
//! repeating it.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps, JSONSchemaPropsOrArray,
    JSONSchemaPropsOrBool, ValidationRule,
};
use kube::CustomResourceExt;

use super::NodePoolApplication;

mod markdown_text;
pub use markdown_text::slug;
use markdown_text::{cell, code, code_list, compact, lower_first, paragraph, plural};

/// The command that writes the page, named in its header and by the test
/// that finds it stale.
pub const REGENERATE: &str = "make api-reference";

/// The reference of the `NodePoolApplication` CRD, as committed in
/// `docs/reference/api.md`.
pub fn api_reference() -> String {
    markdown(&NodePoolApplication::crd())
}

/// Renders a CRD's schema as Markdown: a header naming the kind, then for
/// each version the columns `kubectl get` prints and a section per object.
pub fn markdown(crd: &CustomResourceDefinition) -> String {
    let names = &crd.spec.names;
    let mut page = Page::default();
    page.line(format!("# API reference: {}", names.kind));
    page.blank();
    page.line(format!(
        "Generated from the Rust types by `nodepool-fanout crd --reference` (`{REGENERATE}`), \
         from the same schema as the CustomResourceDefinition in `crds/`: do not edit it by hand."
    ));
    page.blank();
    let short = names.short_names.as_deref().unwrap_or_default();
    page.line(format!(
        "Group `{}`, kind `{}`, plural `{}`{}, {}.",
        crd.spec.group,
        names.kind,
        names.plural,
        match short {
            [] => String::new(),
            short => format!(", short name{} {}", plural(short.len()), code_list(short)),
        },
        match crd.spec.scope.as_str() {
            "Namespaced" => "namespaced",
            _ => "cluster-scoped",
        }
    ));
    for version in &crd.spec.versions {
        page.version(crd, version);
    }
    page.finish()
}

/// The Markdown being written, and the anchors its headings have taken.
#[derive(Default)]
struct Page {
    lines: Vec<String>,
    anchors: BTreeSet<String>,
}

/// An object of the schema that gets a section of its own.
struct Section<'a> {
    /// The dotted path of the object, `spec.rollout.steps[]`.
    path: String,
    schema: &'a JSONSchemaProps,
    anchor: String,
}

impl Page {
    fn line(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    fn blank(&mut self) {
        self.lines.push(String::new());
    }

    fn finish(mut self) -> String {
        while self.lines.last().is_some_and(String::is_empty) {
            self.lines.pop();
        }
        let mut text = self.lines.join("\n");
        text.push('\n');
        text
    }

    /// Takes the anchor GitHub gives a heading of this text, numbered as
    /// GitHub numbers a repeated one.
    fn anchor(&mut self, heading: &str) -> String {
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while !self.anchors.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchor
    }

    fn version(&mut self, crd: &CustomResourceDefinition, version: &CustomResourceDefinitionVersion) {
        let api_version = format!("{}/{}", crd.spec.group, version.name);
        self.blank();
        let heading = format!("Version `{}`", version.name);
        self.anchor(&heading);
        self.line(format!("## {heading}"));
        self.blank();
        self.line(format!(
            "`apiVersion: {api_version}`{}{}.",
            if version.served {
                ", served"
            } else {
                ", not served"
            },
            if version.storage { " and stored" } else { "" }
        ));
        self.printer_columns(version);
        let Some(root) = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()) else {
            self.blank();
            self.line("This version has no schema.");
            return;
        };
        let top = format!("{} {}", crd.spec.names.kind, version.name);
        let sections = self.sections(&top, root);
        self.contents(&sections);
        for (i, section) in sections.iter().enumerate() {
            let top_fields = (i == 0).then(|| top_fields(&api_version, &crd.spec.names.kind));
            self.section(section, &sections, top_fields.unwrap_or_default());
        }
    }

    fn printer_columns(&mut self, version: &CustomResourceDefinitionVersion) {
        let columns = version.additional_printer_columns.as_deref().unwrap_or_default();
        if columns.is_empty() {
            return;
        }
        self.blank();
        self.line("The columns `kubectl get` prints:");
        let rows = columns.iter().map(|c| vec![cell(&c.name), cell(&c.type_), code(&c.json_path)]);
        self.table(&["Column", "Type", "From"], rows);
    }

    /// Every object of the schema that gets a section, the root first,
    /// then depth first in field order; an object equal to one before it
    /// gets none.
    fn sections<'a>(&mut self, top: &str, root: &'a JSONSchemaProps) -> Vec<Section<'a>> {
        let mut sections = Vec::new();
        let mut seen = BTreeSet::new();
        self.collect(top.to_string(), root, &mut sections, &mut seen);
        sections
    }

    fn collect<'a>(
        &mut self,
        path: String,
        schema: &'a JSONSchemaProps,
        sections: &mut Vec<Section<'a>>,
        seen: &mut BTreeSet<String>,
    ) {
        if !seen.insert(fingerprint(schema)) {
            return;
        }
        let anchor = self.anchor(&format!("`{path}`"));
        sections.push(Section {
            path: path.clone(),
            schema,
            anchor,
        });
        let prefix = if sections.len() == 1 {
            String::new()
        } else {
            format!("{path}.")
        };
        for (name, field) in schema.properties.iter().flatten() {
            if let Some((object, suffix)) = object_of(field) {
                self.collect(format!("{prefix}{name}{suffix}"), object, sections, seen);
            }
        }
    }

    fn contents(&mut self, sections: &[Section<'_>]) {
        self.blank();
        self.line("Objects:");
        self.blank();
        for section in sections {
            self.line(format!("- [`{}`](#{})", section.path, section.anchor));
        }
    }

    fn section(&mut self, section: &Section<'_>, all: &[Section<'_>], mut rows: Vec<Row>) {
        let schema = section.schema;
        self.blank();
        self.line(format!("### `{}`", section.path));
        if let Some(description) = &schema.description {
            self.blank();
            self.line(paragraph(description));
        }
        let rules = schema.x_kubernetes_validations.as_deref().unwrap_or_default();
        if !rules.is_empty() {
            self.blank();
            self.line("Rules of this object, checked at admission:");
            self.blank();
            for rule in rules {
                self.line(format!("- {}", rule_text(rule)));
            }
        }
        let required: BTreeSet<&str> = schema.required.iter().flatten().map(String::as_str).collect();
        let prefix = if std::ptr::eq(section, &all[0]) {
            String::new()
        } else {
            format!("{}.", section.path)
        };
        for (name, field) in schema.properties.iter().flatten() {
            rows.push(Row {
                path: format!("{prefix}{name}"),
                kind: type_of(field, all),
                required: required.contains(name.as_str()),
                default: field.default.as_ref().map(|d| code(&compact(&d.0))),
                description: describe(field),
            });
        }
        if rows.is_empty() {
            self.blank();
            self.line("No fields of its own: any object is kept as it is.");
            return;
        }
        let rows = rows.into_iter().map(|row| {
            let required = if row.required { "yes" } else { "no" };
            vec![
                code(&row.path),
                row.kind,
                required.into(),
                row.default.unwrap_or_default(),
                row.description,
            ]
        });
        self.table(&["Field", "Type", "Required", "Default", "Description"], rows);
    }

    /// A table after a blank line: its header, then a line per row.
    fn table(&mut self, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
        self.blank();
        self.line(format!("| {} |", header.join(" | ")));
        self.line(format!("|{}", "---|".repeat(header.len())));
        for row in rows {
            self.line(format!("| {} |", row.join(" | ")));
        }
    }
}

/// One field's row.
struct Row {
    path: String,
    kind: String,
    required: bool,
    default: Option<String>,
    description: String,
}

/// The fields every object of the kind has beside its schema's.
fn top_fields(api_version: &str, kind: &str) -> Vec<Row> {
    vec![
        Row {
            path: "apiVersion".into(),
            kind: "string".into(),
            required: true,
            default: None,
            description: format!("{}.", code(api_version)),
        },
        Row {
            path: "kind".into(),
            kind: "string".into(),
            required: true,
            default: None,
            description: format!("{}.", code(kind)),
        },
        Row {
            path: "metadata".into(),
            kind: "object".into(),
            required: true,
            default: None,
            description: "The object's metadata: `name`, `namespace`, `labels`, `annotations`, as of any \
                          Kubernetes object."
                .into(),
        },
    ]
}

/// The object a field holds, directly, as the items of a list or as the
/// values of a map, with the path's suffix for it.
fn object_of(field: &JSONSchemaProps) -> Option<(&JSONSchemaProps, &'static str)> {
    if field.properties.as_ref().is_some_and(|p| !p.is_empty()) {
        return Some((field, ""));
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &field.items {
        return object_of(items).map(|(object, _)| (object, "[]"));
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &field.additional_properties {
        return object_of(values).map(|(object, _)| (object, "{}"));
    }
    None
}

/// What tells two objects' schemas apart.
fn fingerprint(schema: &JSONSchemaProps) -> String {
    serde_json::to_string(schema).unwrap_or_default()
}

/// A field's type: a link for an object with a section of its own.
fn type_of(field: &JSONSchemaProps, sections: &[Section<'_>]) -> String {
    if field.x_kubernetes_int_or_string == Some(true) {
        return "integer or string".into();
    }
    if field.properties.as_ref().is_some_and(|p| !p.is_empty()) {
        let print = fingerprint(field);
        return match sections.iter().find(|s| fingerprint(s.schema) == print) {
            Some(section) => format!("[object](#{})", section.anchor),
            None => "object".into(),
        };
    }
    match field.type_.as_deref() {
        Some("array") => match &field.items {
            Some(JSONSchemaPropsOrArray::Schema(items)) => format!("list of {}", type_of(items, sections)),
            _ => "list".into(),
        },
        Some("object") => match &field.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(values)) => format!("map of {}", type_of(values, sections)),
            _ if field.x_kubernetes_preserve_unknown_fields == Some(true) => "object (any fields)".into(),
            _ => "object".into(),
        },
        Some(scalar) => match &field.format {
            Some(format) => format!("{scalar} ({format})"),
            None => scalar.to_string(),
        },
        None => "any".into(),
    }
}

/// A field's description, then what the schema holds it to.
fn describe(field: &JSONSchemaProps) -> String {
    let mut parts = Vec::new();
    if let Some(description) = &field.description {
        parts.push(cell(description));
    }
    parts.extend(constraints(field));
    parts.join(" ")
}

/// Whether a field's own CEL rules are said in its object's section
/// rather than on its row.
fn rules_in_section(field: &JSONSchemaProps) -> bool {
    field.properties.as_ref().is_some_and(|p| !p.is_empty())
}

/// The constraints of a field, and of the items of a list, in words.
fn constraints(field: &JSONSchemaProps) -> Vec<String> {
    let mut said = Vec::new();
    let values: Vec<String> = field
        .enum_
        .iter()
        .flatten()
        .filter(|v| !v.0.is_null())
        .map(|v| code(v.0.as_str().map_or_else(|| compact(&v.0), str::to_string).as_str()))
        .collect();
    if !values.is_empty() {
        said.push(format!("One of {}.", values.join(", ")));
    }
    match (field.min_length, field.max_length) {
        (Some(min), Some(max)) => said.push(format!("{min} to {max} characters.")),
        (Some(min), None) => said.push(format!("At least {min} character{}.", plural(min))),
        (None, Some(max)) => said.push(format!("At most {max} characters.")),
        (None, None) => {}
    }
    match (field.minimum, field.maximum) {
        (Some(min), Some(max)) => said.push(format!("From {min} to {max}.")),
        (Some(min), None) => said.push(format!("At least {min}.")),
        (None, Some(max)) => said.push(format!("At most {max}.")),
        (None, None) => {}
    }
    if let Some(max) = field.max_items {
        said.push(format!("At most {max} item{}.", plural(max)));
    }
    if let Some(pattern) = &field.pattern {
        said.push(format!("Matches {}.", code(pattern)));
    }
    if let Some(keys) = &field.x_kubernetes_list_map_keys {
        said.push(format!("A list keyed by {}.", code_list(keys)));
    }
    if !rules_in_section(field) {
        for rule in field.x_kubernetes_validations.iter().flatten() {
            said.push(format!("Rule: {}", rule_text(rule)));
        }
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &field.items {
        if object_of(items).is_none() {
            said.extend(constraints(items).into_iter().map(|c| format!("Each item: {}", lower_first(&c))));
        }
    }
    said
}

/// A CEL rule, by the message it gives (its expression when it has none).
fn rule_text(rule: &ValidationRule) -> String {
    let text = match &rule.message {
        Some(message) => cell(message),
        None => code(&rule.rule),
    };
    match text.ends_with('.') {
        true => text,
        false => format!("{text}."),
    }
}

#[cfg(test)]
mod tests;
