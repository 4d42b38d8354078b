//! Per-pool templates in values and names, e.g. `{{pool.name}}` or
//! `{{pool.labels.region}}`.
//!
//! Strict mode makes a misspelt or missing variable an error: a release that
//! silently got an empty string where a pool label should be is worse than a
//! pool that reports the mistake. Output is not HTML-escaped because it is
//! YAML values, not HTML. A chart that needs a literal `{{` (a Go template in
//! its values) writes `\{{`.

use std::collections::BTreeMap;

use handlebars::{Handlebars, RenderError, RenderErrorReason};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::pools::Pool;

/// What a template can read.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TemplateContext {
    pub app: AppContext,
    pub pool: PoolContext,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AppContext {
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PoolContext {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl TemplateContext {
    pub fn new(app_name: &str, app_namespace: &str, pool: &Pool) -> Self {
        Self {
            app: AppContext {
                name: app_name.to_string(),
                namespace: app_namespace.to_string(),
            },
            pool: PoolContext {
                name: pool.name.clone(),
                labels: pool.labels.clone(),
                annotations: pool.annotations.clone(),
            },
        }
    }
}

/// A template that failed, and where it is.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {message}")]
pub struct TemplateError {
    /// Path of the failing string, e.g. `overrides[1].values.controller.image`.
    pub field: String,
    pub message: String,
}

/// Renders templates; build once and reuse.
pub struct Renderer {
    engine: Handlebars<'static>,
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new()
    }
}

impl Renderer {
    pub fn new() -> Self {
        let mut engine = Handlebars::new();
        engine.set_strict_mode(true);
        engine.register_escape_fn(handlebars::no_escape);
        Self { engine }
    }

    /// Renders one string; `field` names it in errors.
    pub fn render_str(
        &self,
        field: &str,
        template: &str,
        ctx: &TemplateContext,
    ) -> Result<String, TemplateError> {
        // Strings without a tag come back as they are, so values never meant
        // as templates cannot trip over handlebars syntax such as a lone `\`.
        if !template.contains("{{") {
            return Ok(template.to_string());
        }
        self.engine.render_template(template, ctx).map_err(|e| TemplateError {
            field: field.to_string(),
            message: describe(&e),
        })
    }

    /// Renders every string inside `value`; keys, numbers and booleans are
    /// left as they are. `field` is the path of `value` itself.
    pub fn render_value(
        &self,
        field: &str,
        value: &Value,
        ctx: &TemplateContext,
    ) -> Result<Value, TemplateError> {
        match value {
            Value::String(s) => Ok(Value::String(self.render_str(field, s, ctx)?)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.render_value(&format!("{field}[{i}]"), item, ctx))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| Ok((k.clone(), self.render_value(&child_path(field, k), v, ctx)?)))
                .collect::<Result<Map<_, _>, _>>()
                .map(Value::Object),
            other => Ok(other.clone()),
        }
    }
}

/// Keys that would read ambiguously in a dotted path are bracketed.
fn child_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{key:?}]")
    }
}

fn describe(error: &RenderError) -> String {
    match error.reason() {
        RenderErrorReason::MissingVariable(Some(path)) => format!(
            "unknown variable {path}; templates can use app.name, app.namespace, pool.name, \
             pool.labels.<key> and pool.annotations.<key> (write pool.labels.[a.b/c] for keys \
             with dots or slashes)"
        ),
        RenderErrorReason::TemplateError(e) => {
            format!("bad template: {e}; write \\{{{{ for a literal {{{{")
        }
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> TemplateContext {
        let pool = Pool {
            name: "hangzhou".into(),
            labels: BTreeMap::from([
                ("region".into(), "east".into()),
                ("topology.kubernetes.io/region".into(), "cn-east-1".into()),
            ]),
            annotations: BTreeMap::from([("owner".into(), "team-a".into())]),
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
    fn keys_are_not_templates() {
        let values = json!({ "{{pool.name}}": "v" });
        assert_eq!(Renderer::new().render_value("values", &values, &ctx()).unwrap(), values);
    }
}
