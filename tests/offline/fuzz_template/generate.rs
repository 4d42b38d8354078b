//! The templates and contexts the properties draw: random pools, text
//! without a tag, text mixed with known variables and escapes (with the
//! output it must render to), and soups of handlebars fragments.
use super::*;

/// Names handlebars reads as something other than a context lookup:
/// built-in helpers, literals and keywords.
const RESERVED: &[&str] = &[
    "if", "unless", "each", "with", "lookup", "raw", "log", "eq", "ne", "gt", "gte", "lt", "lte", "and",
    "or", "not", "len", "true", "false", "null", "else", "as", "this",
];

/// A label or annotation key usable as a plain path segment.
fn plain_key() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_$:-][A-Za-z0-9_$:é漢-]{0,9}".prop_filter("reserved", |k| !RESERVED.contains(&k.as_str()))
}

/// A key that needs a segment literal (`[a.b/c]`): anything but `]` and
/// `this`, which handlebars reads as the current object even in brackets
/// (`{{pool.labels.[this]}}` renders `[object]`).
fn bracket_key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9]([a-z0-9./_-]{0,20}[a-z0-9])?", "[^\\]]{1,10}"].prop_filter("this", |k| k != "this")
}

fn metadata() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(prop_oneof![plain_key(), bracket_key()], "\\PC{0,12}", 0..5)
}

/// A pool and app with arbitrary names, labels and annotations, values
/// that look like templates included.
pub(super) fn context() -> impl Strategy<Value = TemplateContext> {
    ("\\PC{0,12}", "\\PC{0,12}", "\\PC{0,12}", metadata(), metadata()).prop_map(
        |(app, namespace, name, labels, annotations)| {
            TemplateContext::new(
                &app,
                &namespace,
                &Pool {
                    name,
                    labels: labels.into_iter().collect(),
                    annotations: annotations.into_iter().collect(),
                    marks: nodepool_fanout::pools::nodes::Membership::OwnCluster,
                    namespace: None,
                    health: None,
                    cluster_ids: Vec::new(),
                },
            )
        },
    )
}

fn is_plain(key: &str) -> bool {
    !key.is_empty()
        && !RESERVED.contains(&key)
        && key.chars().all(|c| c.is_alphanumeric() || "_$:-".contains(c))
}

/// Every variable the context defines, as template paths, with its value.
pub(super) fn known_variables(ctx: &TemplateContext) -> Vec<(String, String)> {
    let mut out = vec![
        ("app.name".to_string(), ctx.app.name.clone()),
        ("app.namespace".to_string(), ctx.app.namespace.clone()),
        ("pool.name".to_string(), ctx.pool.name.clone()),
    ];
    for (field, map) in [
        ("labels", &ctx.pool.labels),
        ("annotations", &ctx.pool.annotations),
    ] {
        for (key, value) in map {
            out.push((format!("pool.{field}.[{key}]"), value.clone()));
            if is_plain(key) {
                out.push((format!("pool.{field}.{key}"), value.clone()));
            }
        }
    }
    out
}

/// Text with `{`, `}`, `\`, quotes, newlines and unicode, but no `{{`.
pub(super) fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => "\\PC{1,4}",
            1 => prop::sample::select(vec![
                "{", "}", "}}", "\\", "\\\\", "\"", "'", "(", ")", "[", "]", "~", "#", "/", ">", "!", "\n", "\r\n",
                " ", "\t", "\u{0}", "\u{200b}", "é", "漢", "🦀",
            ])
            .prop_map(String::from),
        ],
        0..8,
    )
    .prop_map(|parts| without_tags(&parts.concat()))
}

fn without_tags(s: &str) -> String {
    let mut s = s.to_string();
    while s.contains("{{") {
        s = s.replace("{{", "{");
    }
    s
}

#[derive(Debug, Clone)]
pub(super) enum Piece {
    Text(String),
    /// A known variable, by index into `known_variables`; `spaced` writes
    /// `{{ x }}` rather than `{{x}}`.
    Var {
        pick: prop::sample::Index,
        spaced: bool,
    },
    /// `\{{`, which renders as `{{`.
    Escape,
}

pub(super) fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        3 => text().prop_map(Piece::Text),
        3 => (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(pick, spaced)| Piece::Var { pick, spaced }),
        1 => Just(Piece::Escape),
    ]
}

/// The template the pieces spell and what it must render to. A `.` goes
/// between pieces where the first ends in `{` or `\`, which would otherwise
/// change how the second parses (`{{{`, `\{{`, `\\{{`).
pub(super) fn assemble(pieces: &[Piece], known: &[(String, String)]) -> (String, String) {
    let (mut template, mut expected) = (String::new(), String::new());
    for piece in pieces {
        if template.ends_with(['{', '\\']) {
            template.push('.');
            expected.push('.');
        }
        match piece {
            Piece::Text(text) => {
                template.push_str(text);
                expected.push_str(text);
            }
            Piece::Var { pick, spaced } => {
                let (path, value) = &known[pick.index(known.len())];
                if *spaced {
                    template.push_str(&format!("{{{{ {path} }}}}"));
                } else {
                    template.push_str(&format!("{{{{{path}}}}}"));
                }
                expected.push_str(value);
            }
            Piece::Escape => {
                template.push_str("\\{{");
                expected.push_str("{{");
            }
        }
    }
    (template, expected)
}

/// Handlebars fragments, valid and not, to be strung together at random.
#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    "{{", "}}", "{{{", "}}}", "{{{{", "}}}}", "\\{{", "\\\\{{", "\\", "{{{{raw}}}}", "{{{{/raw}}}}",
    "{{pool.name}}", "{{app.name}}", "{{app.namespace}}", "{{pool.labels.region}}",
    "{{pool.labels.[topology.kubernetes.io/zone]}}", "{{pool.annotations.owner}}", "{{nope}}",
    "{{pool.labels.", "pool.name", "app", ".", "/", "..", "../", "@root", "@key", "@index", "this",
    "{{#if ", "{{#unless ", "{{#each pool.labels}}", "{{/each}}", "{{#with pool}}", "{{/with}}", "{{/if}}",
    "{{/unless}}", "{{else}}", "{{else if ", "{{^}}", "{{!-- ", " --}}", "{{! ", "{{> a}}", "{{#> a}}",
    "{{/a}}", "{{#*inline \"a\"}}", "{{/inline}}", "{{*log}}", "{{&pool.name}}", "{{{pool.name}}}",
    "{{~", "~}}", "(", ")", "(eq ", "(lookup pool.labels ", "[", "]", "\"", "'", "=", " ", "\n", "\t",
    "true", "1", "-1.5e3", "null", "{\"a\":", "as |x|", "{{log pool.name}}", "{{len pool.labels}}",
    "é", "漢", "🦀", "\u{0}", "\u{200b}",
];

/// Soups of `FRAGMENTS` and random characters.
pub(super) fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(FRAGMENTS).prop_map(String::from),
            1 => "\\PC{1,3}",
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

/// `key`, lengthened until `map` does not have it.
fn missing_key(map: &BTreeMap<String, String>, mut key: String) -> String {
    while map.contains_key(&key) {
        key.push('x');
    }
    key
}

/// An unknown variable path, by kind.
pub(super) fn unknown_variable(ctx: TemplateContext) -> impl Strategy<Value = (TemplateContext, String)> {
    let ident = "[a-z_][a-z0-9_-]{0,8}".prop_filter("reserved", |k| !RESERVED.contains(&k.as_str()));
    let (labels, bracketed) = (ctx.pool.labels.clone(), ctx.pool.labels.clone());
    let annotations = ctx.pool.annotations.clone();
    let path = prop_oneof![
        ident.clone().prop_filter("known", |k| k != "app" && k != "pool"),
        ident
            .clone()
            .prop_filter("known", |k| k != "name" && k != "namespace")
            .prop_map(|k| format!("app.{k}")),
        ident
            .clone()
            .prop_filter("known", |k| !["name", "labels", "annotations"].contains(&k.as_str()))
            .prop_map(|k| format!("pool.{k}")),
        ident.clone().prop_map(move |k| format!("pool.labels.{}", missing_key(&labels, k))),
        bracket_key().prop_map(move |k| format!("pool.labels.[{}]", missing_key(&bracketed, k))),
        ident
            .clone()
            .prop_map(move |k| format!("pool.annotations.{}", missing_key(&annotations, k))),
        ident.clone().prop_map(|k| format!("pool.name.{k}")),
        ident.prop_map(|k| format!("app.namespace.{k}")),
    ];
    (Just(ctx), path)
}
