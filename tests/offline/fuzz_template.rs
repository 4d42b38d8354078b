//! Property-based fuzzing of the strict handlebars renderer in `src/values/template.rs`.
//!
//! Templates are generated three ways: soups of handlebars fragments
//! (`{{`, `}}`, `\{{`, raw blocks, block helpers, partials, subexpressions,
//! quotes, unicode) that must never panic; arbitrary text without a tag,
//! which must come back unchanged; and text mixed with known variables and
//! `\{{` escapes over a random pool, whose output is known exactly. Unknown
//! variables must fail naming the variable, raw blocks and escapes must stay
//! literal, and rendering must be deterministic.
//!
//! `cargo test` runs a few hundred cases per property. To fuzz longer:
//!
//! ```text
//! PROPTEST_CASES=100000 cargo test --test offline fuzz_template::
//! ```
//!
//! Add `--release` for many more cases a second, after a one-off release
//! build. A failure prints the shrunk input and saves it in
//! `tests/proptest-regressions/fuzz_template.txt`, replayed first on later
//! runs; commit that file with the fix.

mod generate;

use std::collections::BTreeMap;

use nodepool_fanout::pools::Pool;
use nodepool_fanout::values::template::{
    Renderer, TemplateContext, TemplateError, MAX_NESTING, MAX_TEMPLATE_TAGS,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

use generate::{assemble, context, known_variables, piece, soup, text, unknown_variable};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CASES;
    }
    config
}

/// A pool with a few labels the soup refers to.
fn fixed_context() -> TemplateContext {
    let pool = Pool {
        name: "hangzhou".into(),
        labels: nodepool_fanout::pools::Labels::from_iter([
            ("region".into(), "east".into()),
            ("topology.kubernetes.io/zone".into(), "cn-east-1a".into()),
        ]),
        annotations: [("owner".into(), "team-a".into())].into_iter().collect(),
        marks: nodepool_fanout::pools::nodes::Membership::OwnCluster,
        namespace: None,
        health: None,
        cluster_ids: Vec::new(),
    };
    TemplateContext::new("gateway", "edge", &pool)
}

fn render(template: &str, ctx: &TemplateContext) -> Result<String, TemplateError> {
    Renderer::new().render_str("values.x", template, ctx)
}

/// Checks what holds for every template: the error names the field, and a
/// second render, by a second renderer, gives the same result.
fn render_checked(
    template: &str,
    ctx: &TemplateContext,
) -> Result<Result<String, TemplateError>, TestCaseError> {
    let renderer = Renderer::new();
    let first = renderer.render_str("values.x", template, ctx);
    if let Err(err) = &first {
        prop_assert_eq!(&err.field, "values.x");
        prop_assert!(!err.message.is_empty());
    }
    prop_assert_eq!(&renderer.render_str("values.x", template, ctx), &first, "same renderer");
    prop_assert_eq!(&render(template, ctx), &first, "new renderer");
    let as_value = renderer.render_value("values.x", &Value::from(template), ctx);
    prop_assert_eq!(as_value, first.clone().map(Value::from), "render_value of a string");
    Ok(first)
}

proptest! {
    #![proptest_config(config())]

    /// Fragment soups never panic or overflow; errors name the field, and
    /// rendering is deterministic.
    #[test]
    fn soup_never_panics(template in soup()) {
        let _rendered = render_checked(&template, &fixed_context())?;
    }

    /// Nor does any string at all, control characters included.
    #[test]
    fn any_string_never_panics(template in any::<String>(), ctx in context()) {
        let _rendered = render_checked(&template, &ctx)?;
    }

    /// A string without `{{` comes back exactly as it was, whatever `}}`,
    /// `\` or unicode it holds.
    #[test]
    fn text_without_tags_is_unchanged(text in text(), ctx in context()) {
        prop_assert_eq!(render_checked(&text, &ctx)?, Ok(text));
    }

    /// Text, known variables and `\{{` escapes render exactly: each variable
    /// to its value verbatim (no HTML escaping, no second pass over values
    /// that look like templates), each `\{{` to `{{`, text unchanged.
    #[test]
    fn known_variables_and_escapes_render_exactly(
        ctx in context(),
        pieces in prop::collection::vec(piece(), 0..8),
    ) {
        let known = known_variables(&ctx);
        let (template, expected) = assemble(&pieces, &known);
        prop_assert_eq!(render_checked(&template, &ctx)?, Ok(expected), "template {:?}", template);
    }

    /// An unknown variable anywhere in an otherwise good template is an
    /// error that names it as written.
    #[test]
    fn unknown_variables_are_errors_naming_them(
        ((ctx, path), before, after, spaced) in (
            context().prop_flat_map(unknown_variable),
            prop::collection::vec(piece(), 0..4),
            prop::collection::vec(piece(), 0..4),
            any::<bool>(),
        )
    ) {
        let known = known_variables(&ctx);
        let (mut template, _) = assemble(&before, &known);
        if template.ends_with(['{', '\\']) {
            template.push('.');
        }
        if spaced {
            template.push_str(&format!("{{{{ {path} }}}}"));
        } else {
            template.push_str(&format!("{{{{{path}}}}}"));
        }
        let (rest, _) = assemble(&after, &known);
        template.push_str(&rest);
        let err = render_checked(&template, &ctx)?;
        prop_assert!(err.is_err(), "{:?} rendered {:?}", template, err);
        let message = err.unwrap_err().message;
        let expected = format!("unknown variable {path}; ");
        prop_assert!(message.starts_with(&expected), "{:?}: {}", template, message);
    }

    /// `\{{` makes the rest up to the next `{{` literal, `}}` included;
    /// `\{{{{` likewise, four braces kept.
    #[test]
    fn escaped_tags_stay_literal(inner in text(), four in any::<bool>(), ctx in context()) {
        let open = if four { "{{{{" } else { "{{" };
        let template = format!("\\{open}{inner}}}}}");
        let expected = format!("{open}{inner}}}}}");
        prop_assert_eq!(render_checked(&template, &ctx)?, Ok(expected));
    }

    /// Before a tag, one `\` escapes it; a run of two or more is itself
    /// escaped: one `\` fewer is printed and the tag renders.
    #[test]
    fn backslash_runs_before_a_tag(run in 1usize..6, ctx in context()) {
        let template = format!("{}{{{{pool.name}}}}", "\\".repeat(run));
        let expected = if run == 1 {
            "{{pool.name}}".to_string()
        } else {
            format!("{}{}", "\\".repeat(run - 1), ctx.pool.name)
        };
        prop_assert_eq!(render_checked(&template, &ctx)?, Ok(expected));
    }

    /// A raw block's content comes out as written: tags, quotes and unicode
    /// are not interpreted.
    #[test]
    fn raw_blocks_stay_literal(
        parts in prop::collection::vec(prop_oneof![
            text(),
            Just("{{pool.name}}".to_string()),
            Just("{{ .Release.Name }}".to_string()),
            Just("{{#if}}".to_string()),
            Just("{{".to_string()),
        ], 0..6),
        prefix in text(),
        ctx in context(),
    ) {
        // Inside a raw block `\{{` is still an escape and `{{{{` ends it. Line
        // breaks are left out, as handlebars' standalone-line rules trim
        // around raw tags, and so is leading whitespace, which handlebars
        // drops: `.{{{{raw}}}} a{{{{/raw}}}}` renders as `.a`.
        let mut inner = parts.concat().replace('\\', "/").replace(['\n', '\r'], " ");
        while inner.contains("{{{{") {
            inner = inner.replace("{{{{", "{{ {{");
        }
        let inner = inner.trim_start_matches([' ', '\t']).trim_end_matches('{').to_string();
        let prefix = format!("{}.", prefix.replace('\\', "/"));
        let template = format!("{prefix}{{{{{{{{raw}}}}}}}}{inner}{{{{{{{{/raw}}}}}}}}");
        prop_assert_eq!(render_checked(&template, &ctx)?, Ok(format!("{prefix}{inner}")), "{:?}", template);
    }

    /// Partials and decorators are refused wherever they are; handlebars
    /// would recurse on an inline partial that includes itself until the
    /// stack overflowed.
    #[test]
    fn partials_and_decorators_are_refused(
        ctx in context(),
        before in prop::collection::vec(piece(), 0..4),
        after in prop::collection::vec(piece(), 0..4),
        partial in prop::sample::select(vec![
            "{{> a}}",
            "{{~> a~}}",
            "{{#> a}}x{{/a}}",
            "{{#*inline \"a\"}}{{> a}}{{/inline}}{{> a}}",
            "{{#*inline \"a\"}}x{{/inline}}",
            "{{*inline \"a\"}}",
            "{{#if true}}{{> a}}{{/if}}",
            "{{#if false}}{{else}}{{#> a}}{{/a}}{{/if}}",
        ]),
    ) {
        let known = known_variables(&ctx);
        let (mut template, _) = assemble(&before, &known);
        if template.ends_with(['{', '\\']) {
            template.push('.');
        }
        template.push_str(partial);
        template.push_str(&assemble(&after, &known).0);
        let result = render_checked(&template, &ctx)?;
        prop_assert!(
            result.as_ref().is_err_and(|e| e.message.starts_with("partials and decorators")),
            "{:?}: {:?}",
            template,
            result
        );
    }

    /// `render_value` leaves trees without tags as they are.
    #[test]
    fn values_without_tags_are_unchanged(
        value in text().prop_map(Value::from).prop_recursive(4, 32, 4, |inner| prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]),
        ctx in context(),
    ) {
        prop_assert_eq!(Renderer::new().render_value("values", &value, &ctx), Ok(value));
    }
}

/// Deep values (far deeper than the JSON and YAML parsers let in) render
/// without overflowing the stack.
#[test]
fn deep_values_render() {
    let ctx = fixed_context();
    let leaf = Value::from("{{pool.name}}");
    let deep = (0..256).fold(leaf, |inner, i| {
        if i % 2 == 0 {
            Value::Array(vec![inner])
        } else {
            Value::Object(Map::from_iter([("k".to_string(), inner)]))
        }
    });
    let out = Renderer::new().render_value("values", &deep, &ctx).unwrap();
    let mut v = &out;
    while let Some(inner) = v.as_array().and_then(|a| a.first()).or_else(|| v.get("k")) {
        v = inner;
    }
    assert_eq!(v, "hangzhou");
}

/// Blocks nest up to `MAX_NESTING` deep and no deeper (every depth is
/// tried, so this needs no random cases); a few hundred levels overflowed
/// the stack while rendering.
#[test]
fn block_nesting_is_bounded() {
    let ctx = fixed_context();
    for depth in (0..=MAX_NESTING + 2).chain([100, 1000]) {
        let template =
            format!("{}{{{{pool.name}}}}{}", "{{#if true}}".repeat(depth), "{{/if}}".repeat(depth));
        let result = render(&template, &ctx);
        if depth < MAX_NESTING {
            assert_eq!(result, Ok("hangzhou".to_string()), "depth {depth}");
        } else {
            let message = result.unwrap_err().message;
            // So many tags are refused before they are parsed.
            let expected = match 2 * depth + 1 > MAX_TEMPLATE_TAGS {
                true => format!("more than the {MAX_TEMPLATE_TAGS} one templated string may hold"),
                false => format!("nest more than {MAX_NESTING} deep"),
            };
            assert!(message.contains(&expected), "{depth}: {message}");
        }
    }
}
