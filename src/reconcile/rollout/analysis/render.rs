//! A check's query with its placeholders filled in: for a pool
//! (`{{pool.name}}`, `{{pool.labels.<key>}}`), for a wave (`{{wave.name}}`,
//! `{{wave.pools}}`) and for the revision (`{{revision}}`), each escaped
//! for a PromQL string literal; and whether a query is PromQL at all.

use handlebars::Handlebars;
use serde_json::json;

use super::Wave;
use crate::pools::Pool;

/// The engine that fills a query's placeholders in: `{{pool.name}}`,
/// `{{pool.labels.<key>}}` and `{{revision}}`, each escaped for a PromQL
/// string literal (a quote or a backslash in a label cannot end it early).
/// Made once: every pool's every ask renders through it.
fn engine() -> &'static Handlebars<'static> {
    static ENGINE: std::sync::LazyLock<Handlebars<'static>> = std::sync::LazyLock::new(|| {
        let mut engine = Handlebars::new();
        engine.register_escape_fn(promql_escape);
        engine
    });
    &ENGINE
}

/// `text` as it may stand in a PromQL string literal.
fn promql_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// An engine that escapes nothing, for a query whose values were escaped
/// already and whose `{{pools}}` is kept for later.
fn plain() -> &'static Handlebars<'static> {
    static PLAIN: std::sync::LazyLock<Handlebars<'static>> = std::sync::LazyLock::new(|| {
        let mut engine = Handlebars::new();
        engine.register_escape_fn(handlebars::no_escape);
        engine
    });
    &PLAIN
}

/// `query` for `pool` at `revision`. A placeholder that names nothing
/// (a label the pool lacks) reads as empty, as Prometheus reads a label
/// that is not there. `{{pools}}` is the pool's own name as a regular
/// expression.
pub fn render(query: &str, pool: &Pool, revision: &str) -> String {
    let data = json!({
        "pool": { "name": pool.name, "labels": pool.labels },
        "pools": regex::escape(&pool.name),
        "revision": revision,
    });
    engine().render_template(query, &data).unwrap_or_else(|_| query.to_string())
}

/// The query of a check asked once for many pools (`by`), at `revision`,
/// with `{{pools}}` left as it is for [`render_pools`].
pub fn render_batched(query: &str, revision: &str) -> String {
    let data = json!({ "pools": "{{pools}}", "revision": promql_escape(revision) });
    plain().render_template(query, &data).unwrap_or_else(|_| query.to_string())
}

/// A batched query (see [`render_batched`]) for `pools`: `{{pools}}` is a
/// regular expression that matches each of their names and nothing else.
pub fn render_pools(query: &str, pools: &[&str]) -> String {
    let data = json!({ "pools": names_regex(pools) });
    engine().render_template(query, &data).unwrap_or_else(|_| query.to_string())
}

/// `query` for the pools of `wave` at `revision`: `{{wave.pools}}` is a
/// regular expression that matches each of their names and nothing else.
pub fn render_wave(query: &str, wave: Wave, revision: &str) -> String {
    let data = json!({
        "wave": { "name": wave.name, "pools": names_regex(wave.pools) },
        "revision": revision,
    });
    engine().render_template(query, &data).unwrap_or_else(|_| query.to_string())
}

/// A regular expression that matches each of `names` and nothing else.
fn names_regex(names: &[&str]) -> String {
    let escaped: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
    escaped.join("|")
}

/// Whether `query` is PromQL, with its placeholders filled in.
pub(super) fn parse_query(query: &str) -> Result<(), String> {
    let data = json!({
        "pool": { "name": "pool", "labels": {} },
        "wave": { "name": "wave", "pools": "pool" },
        "pools": "pool",
        "revision": "revision",
    });
    let rendered = engine()
        .render_template(query, &data)
        .map_err(|e| format!("its placeholders do not read: {e}"))?;
    promql_parser::parser::parse(&rendered)
        .map(|_| ())
        .map_err(|e| format!("not PromQL: {e}"))
}
