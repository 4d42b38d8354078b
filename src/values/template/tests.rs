//! Unit tests of `template`.

use super::*;
use serde_json::json;

fn ctx() -> TemplateContext {
    let pool = Pool {
        name: "hangzhou".into(),
        labels: crate::pools::Labels::from_iter([
            ("region".into(), "east".into()),
            ("topology.kubernetes.io/region".into(), "cn-east-1".into()),
        ]),
        annotations: [("owner".into(), "team-a".into())].into_iter().collect(),
        marks: crate::pools::nodes::Membership::OwnCluster,
        namespace: None,
        health: None,
        cluster_ids: Vec::new(),
    };
    TemplateContext::new("gateway", "edge", &pool)
}

fn render(template: &str) -> Result<String, TemplateError> {
    Renderer::new().render_str("releaseName", template, &ctx())
}

#[test]
fn renders_app_and_pool_fields() {
    assert_eq!(render("{{app.name}}-{{pool.name}}").unwrap(), "gateway-hangzhou");
    assert_eq!(render("{{app.namespace}}").unwrap(), "edge");
    assert_eq!(render("{{pool.labels.region}}/{{pool.annotations.owner}}").unwrap(), "east/team-a");
}

#[test]
fn plain_strings_pass_through() {
    assert_eq!(render("no templates } here \\ {").unwrap(), "no templates } here \\ {");
}

#[test]
fn keys_with_dots_and_slashes_use_segment_literals() {
    assert_eq!(render("{{pool.labels.[topology.kubernetes.io/region]}}").unwrap(), "cn-east-1");
}

#[test]
fn missing_label_is_an_error_naming_it() {
    let err = render("{{pool.labels.zone}}").unwrap_err();
    assert_eq!(err.field, "releaseName");
    assert!(err.message.starts_with("unknown variable pool.labels.zone;"), "{}", err.message);
}

#[test]
fn unknown_top_level_variable_is_an_error() {
    assert!(render("{{release.name}}").is_err());
    assert!(render("{{ .Release.Name }}").is_err());
}

#[test]
fn backslash_escape_yields_a_literal_go_template() {
    // YAML plain scalar: \{{ .Release.Name }}
    assert_eq!(render("\\{{ .Release.Name }}").unwrap(), "{{ .Release.Name }}");
    let yaml: Value =
        serde_saphyr::from_str("a: \\{{ .Release.Name }}-x\nb: \"\\\\{{ .Release.Name }}\"\n").unwrap();
    let out = Renderer::new().render_value("values", &yaml, &ctx()).unwrap();
    assert_eq!(out, json!({ "a": "{{ .Release.Name }}-x", "b": "{{ .Release.Name }}" }));
}

#[test]
fn raw_blocks_yield_literals() {
    let out = render("{{{{raw}}}}{{ .Release.Name }}-{{pool.name}}{{{{/raw}}}}").unwrap();
    assert_eq!(out, "{{ .Release.Name }}-{{pool.name}}");
}

#[test]
fn no_html_escaping() {
    let mut c = ctx();
    c.pool.annotations.insert("html".into(), "<a & 'b'>".into());
    let out = Renderer::new().render_str("f", "{{pool.annotations.html}}", &c).unwrap();
    assert_eq!(out, "<a & 'b'>");
}

#[test]
fn helpers_work_on_the_context() {
    assert_eq!(render("{{#if (eq pool.labels.region \"east\")}}e{{else}}w{{/if}}").unwrap(), "e");
}

#[test]
fn syntax_errors_are_reported_with_the_field() {
    let err = render("{{#if}}").unwrap_err();
    assert_eq!(err.field, "releaseName");
    let err = render("{{pool.name").unwrap_err();
    assert!(err.message.contains("bad template"), "{}", err.message);
}

#[test]
fn render_value_walks_nested_values() {
    let values = json!({
        "controller": {
            "ingressClass": { "name": "{{pool.name}}-gw", "default": false },
            "replicas": 3,
            "args": ["--region={{pool.labels.region}}", 7, null]
        }
    });
    let out = Renderer::new().render_value("values", &values, &ctx()).unwrap();
    assert_eq!(
        out,
        json!({
            "controller": {
                "ingressClass": { "name": "hangzhou-gw", "default": false },
                "replicas": 3,
                "args": ["--region=east", 7, null]
            }
        })
    );
}

#[test]
fn render_value_reports_the_json_path() {
    let values = json!({ "controller": { "args": ["ok", "{{pool.labels.zone}}"] } });
    let err = Renderer::new().render_value("overrides[1].values", &values, &ctx()).unwrap_err();
    assert_eq!(err.field, "overrides[1].values.controller.args[1]");
    let values = json!({ "podLabels": { "example.com/pool": "{{nope}}" } });
    let err = Renderer::new().render_value("values", &values, &ctx()).unwrap_err();
    assert_eq!(err.field, "values.podLabels[\"example.com/pool\"]");
    assert_eq!(err.to_string().split(':').next(), Some("values.podLabels[\"example.com/pool\"]"));
}

#[test]
fn numbers_and_booleans_are_untouched() {
    let values = json!({ "n": 1.5, "b": true, "i": -3 });
    assert_eq!(Renderer::new().render_value("values", &values, &ctx()).unwrap(), values);
}

#[test]
fn one_each_is_fine_nested_each_is_refused() {
    assert_eq!(
        render("{{#each pool.labels}}{{@key}}={{this}};{{/each}}").unwrap(),
        "region=east;topology.kubernetes.io/region=cn-east-1;"
    );
    // An `each` beside another, or in the `else` of one, multiplies nothing.
    assert!(render("{{#each pool.labels}}a{{/each}}{{#each pool.labels}}b{{/each}}").is_ok());
    assert!(render("{{#each pool.labels}}a{{else}}{{#each pool.labels}}b{{/each}}{{/each}}").is_ok());
    for template in [
        "{{#each pool.labels}}{{#each @root.pool.labels}}x{{/each}}{{/each}}",
        "{{#each pool.labels}}{{#if true}}{{#each @root.pool.labels}}x{{/each}}{{/if}}{{/each}}",
    ] {
        let err = render(template).unwrap_err();
        assert!(err.message.contains("{{#each}} blocks may not nest"), "{template}: {err}");
    }
}

#[test]
fn partials_and_decorators_are_refused_not_a_stack_overflow() {
    // An inline partial that includes itself recursed until the stack
    // overflowed, aborting the whole controller.
    for template in [
        "{{#*inline \"a\"}}{{> a}}{{/inline}}{{> a}}",
        "{{#*inline \"a\"}}{{> b}}{{/inline}}{{#*inline \"b\"}}{{> a}}{{/inline}}{{> a}}",
        "{{> missing}}",
        "{{#> layout}}x{{/layout}}",
        "{{#if true}}{{~> a}}{{/if}}",
        "{{*inline \"a\"}}",
    ] {
        let err = render(template).unwrap_err();
        assert_eq!(err.field, "releaseName");
        assert!(err.message.starts_with("partials and decorators"), "{template}: {}", err.message);
    }
    assert_eq!(render("\\{{> a}}").unwrap(), "{{> a}}");
}

#[test]
fn nesting_is_bounded_not_a_stack_overflow() {
    let ifs = |n: usize| format!("{}x{}", "{{#if true}}".repeat(n), "{{/if}}".repeat(n));
    assert_eq!(render(&ifs(MAX_NESTING)).unwrap(), "x");
    let subs = |n: usize| format!("{{{{#if {}true{}}}}}x{{{{/if}}}}", "(eq ".repeat(n), " true)".repeat(n));
    assert_eq!(render(&subs(MAX_NESTING - 1)).unwrap(), "x");
    let lists = |n: usize| format!("{{{{#if (eq {}1{} 1)}}}}x{{{{/if}}}}", "[".repeat(n), "]".repeat(n));
    assert_eq!(render(&lists(MAX_NESTING - 2)).unwrap(), "");
    // A few hundred levels overflowed the stack while parsing or rendering.
    for n in [MAX_NESTING + 1, 300, 600, 5000] {
        for template in [ifs(n), subs(n), lists(n)] {
            let err = render(&template).unwrap_err();
            assert!(
                err.message.contains("nest more than 32 deep")
                    || err.message.starts_with("more than 128 `(`")
                    || err.message.contains("more than the 256 one templated string may hold")
                    || err.message.starts_with("bad template"),
                "{n}: {}",
                err.message
            );
        }
    }
    assert!(render(&ifs(MAX_NESTING + 1)).unwrap_err().message.contains("nest more than 32 deep"));
    assert!(render(&subs(MAX_NESTING)).unwrap_err().message.contains("nest more than 32 deep"));
    assert!(render(&lists(MAX_NESTING)).unwrap_err().message.contains("nest more than 32 deep"));
    let err = render(&subs(MAX_PARENS + 1)).unwrap_err();
    assert!(err.message.starts_with("more than 128 `(` after the first `{{`"), "{}", err.message);
}

#[test]
fn parentheses_before_the_first_tag_or_within_the_limit_are_fine() {
    let text = "f(x) ".repeat(MAX_PARENS + 1);
    assert_eq!(render(&format!("{text}{{{{pool.name}}}}")).unwrap(), format!("{text}hangzhou"));
    let text = "(".repeat(MAX_PARENS);
    assert_eq!(render(&format!("{{{{pool.name}}}}{text}")).unwrap(), format!("hangzhou{text}"));
    let err = render(&format!("{{{{pool.name}}}}({text}")).unwrap_err();
    assert!(err.message.starts_with("more than 128 `(`"), "{}", err.message);
}

#[test]
fn keys_are_not_templates() {
    let values = json!({ "{{pool.name}}": "v" });
    assert_eq!(Renderer::new().render_value("values", &values, &ctx()).unwrap(), values);
}

fn with_annotation(bytes: usize) -> TemplateContext {
    let mut c = ctx();
    c.pool.annotations.insert("big".into(), "b".repeat(bytes));
    c
}

#[test]
fn a_string_stops_rendering_at_its_limit() {
    // 64 tags over a 100 KB annotation would render 6.4 MB.
    let template = "{{pool.annotations.big}}".repeat(64);
    let err = Renderer::new()
        .render_str("values.x", &template, &with_annotation(100_000))
        .unwrap_err();
    assert_eq!(err.field, "values.x");
    assert!(err.message.starts_with("renders to more than 256 KiB, the limit for one string"), "{err}");
    // Up to the limit it renders whole.
    let fits = "{{pool.annotations.big}}".repeat(2);
    let out = Renderer::new()
        .render_str("values.x", &fits, &with_annotation(MAX_STRING_BYTES / 2))
        .unwrap();
    assert_eq!(out.len(), MAX_STRING_BYTES);
}

#[test]
fn a_scope_counts_every_string_of_the_release() {
    let renderer = Renderer::new();
    let c = with_annotation(200 * 1024);
    let scope = renderer.scope(&c);
    for i in 0..5 {
        scope.render_str(&format!("values.k{i}"), "{{pool.annotations.big}}").unwrap();
    }
    assert_eq!(scope.left(), MAX_RELEASE_BYTES - 5 * 200 * 1024);
    let err = scope.render_str("values.k5", "{{pool.annotations.big}}").unwrap_err();
    assert_eq!(err.field, "values.k5");
    assert!(err.message.contains("more than 1024 KiB of values and names"), "{err}");
    // Plain text and keys count as well.
    let err = scope
        .render_value("values", &json!({ "plain": "p".repeat(MAX_RELEASE_BYTES) }))
        .unwrap_err();
    assert_eq!(err.field, "values.plain");
    // Another pool starts afresh.
    assert!(renderer.scope(&c).render_str("values.k0", "{{pool.annotations.big}}").is_ok());
}

#[test]
fn templates_with_too_many_tags_or_bytes_are_refused_before_parsing() {
    let many = "{{app.name}}".repeat(MAX_TEMPLATE_TAGS + 1);
    let err = render(&many).unwrap_err();
    assert!(err.message.starts_with("holds 257 `{{`, more than the 256"), "{err}");
    assert_eq!(render(&"{{app.name}}".repeat(MAX_TEMPLATE_TAGS)).unwrap().len(), 7 * MAX_TEMPLATE_TAGS);
    let long = format!("{{{{pool.name}}}}{}", "x".repeat(MAX_STRING_BYTES));
    let err = render(&long).unwrap_err();
    assert!(err.message.starts_with("is a template of 256 KiB, over the 256 KiB"), "{err}");
    // Plain text of any length is not a template.
    assert_eq!(render(&"x".repeat(MAX_STRING_BYTES + 1)).unwrap().len(), MAX_STRING_BYTES + 1);
}

#[test]
fn each_template_is_parsed_once_per_renderer() {
    let renderer = Renderer::new();
    for pool in ["a", "b", "c"] {
        let mut c = ctx();
        c.pool.name = pool.into();
        assert_eq!(renderer.render_str("f", "{{pool.name}}-x", &c).unwrap(), format!("{pool}-x"));
        assert!(renderer.render_str("f", "{{#if}}", &c).is_err());
    }
    assert_eq!(renderer.compiled.borrow().len(), 2, "one entry per template, errors included");
}
