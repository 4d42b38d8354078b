//! Per-pool templates in values and names, e.g. `{{pool.name}}` or
//! `{{pool.labels.region}}`.
//!
//! Strict mode makes a misspelt or missing variable an error: a release that
//! silently got an empty string where a pool label should be is worse than a
//! pool that reports the mistake. Output is not HTML-escaped because it is
//! YAML values, not HTML. A chart that needs a literal `{{` (a Go template in
//! its values) writes `\{{`.
//!
//! Partials and decorators (`{{> x}}`, `{{#*inline "x"}}`) are refused,
//! blocks and subexpressions may nest only [`MAX_NESTING`] deep, and a
//! template holds at most [`MAX_PARENS`] `(` after its first `{{`:
//! handlebars parses and renders these recursively, so an inline partial
//! that includes itself, or a few hundred nested `{{#if}}`s or
//! `(eq (eq ...))`, would overflow the stack and abort the controller
//! instead of failing the one release. `{{#each}}` blocks may not nest, as
//! each level multiplies the output: nested loops over a pool's labels
//! would exhaust the controller's memory.
//!
//! What rendering may produce is bounded while it is produced: one string
//! at most [`MAX_STRING_BYTES`], and all the strings of one pool's release
//! together at most [`MAX_RELEASE_BYTES`] ([`Scope`] keeps the count).
//! `{{app.name}}` is 12 bytes of spec and up to 253 of output, so without
//! the bound a spec far below the API server's object limit rendered to
//! hundreds of megabytes across a few dozen pools. Rendering stops at the
//! first byte past the bound, so refusing costs no more than the bound.
//! Each template is compiled once per plan, not once per pool.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use handlebars::template::{Parameter, Template, TemplateElement};
use handlebars::{Context, Handlebars, Output, RenderContext, RenderError, RenderErrorReason, Renderable};
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
                labels: pool.label_map(),
                annotations: pool.annotation_map(),
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

/// The most one rendered string may hold: far more than any name or
/// templated config file needs.
pub const MAX_STRING_BYTES: usize = 256 * 1024;

/// The most the strings of one pool's release may hold together (every
/// string of its values, names and references, templated or not). A
/// HelmRelease must fit the API server's 1.5 MiB object limit with its
/// metadata and managed fields; this leaves that room.
pub const MAX_RELEASE_BYTES: usize = 1024 * 1024;

/// Renders templates; build once per plan and reuse for every pool.
pub struct Renderer {
    engine: Handlebars<'static>,
    /// Every pool renders the same template strings: each is parsed once.
    /// Holds only what the one application's spec holds.
    compiled: RefCell<HashMap<String, Result<Rc<Template>, String>>>,
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
        Self {
            engine,
            compiled: RefCell::new(HashMap::new()),
        }
    }

    /// Starts rendering one pool's release: the templates' data, and a
    /// fresh [`MAX_RELEASE_BYTES`] budget.
    pub fn scope(&self, ctx: &TemplateContext) -> Scope<'_> {
        // The context serialises to plain strings and maps, which cannot
        // fail; were it to, every template using a variable fails on its own.
        let data = Context::wraps(ctx).unwrap_or_else(|_| Context::null());
        Scope {
            renderer: self,
            data,
            left: Cell::new(MAX_RELEASE_BYTES),
        }
    }

    /// Renders one string on its own budget; `field` names it in errors.
    pub fn render_str(
        &self,
        field: &str,
        template: &str,
        ctx: &TemplateContext,
    ) -> Result<String, TemplateError> {
        self.scope(ctx).render_str(field, template)
    }

    /// Renders every string inside `value` on its own budget.
    pub fn render_value(
        &self,
        field: &str,
        value: &Value,
        ctx: &TemplateContext,
    ) -> Result<Value, TemplateError> {
        self.scope(ctx).render_value(field, value)
    }

    fn compile(&self, template: &str, first_tag: usize) -> Result<Rc<Template>, String> {
        if let Some(known) = self.compiled.borrow().get(template) {
            return known.clone();
        }
        let compiled = compile_checked(template, first_tag);
        self.compiled.borrow_mut().insert(template.to_string(), compiled.clone());
        compiled
    }
}

/// Refuses, before parsing, what handlebars would parse too slowly or by
/// too deep a recursion.
///
/// Its parser looks up the line and column of every element by scanning
/// the text from its start, so parsing costs the number of tags times the
/// length: 20,000 tags in 240 KB took seconds. Hence at most
/// [`MAX_TEMPLATE_TAGS`] tags in at most [`MAX_STRING_BYTES`] (a longer
/// template could not render within the limit anyway). Handlebars also
/// parses subexpressions recursively, before `check_structure` can see
/// them; every one needs a `(` in a tag.
fn compile_checked(template: &str, first_tag: usize) -> Result<Rc<Template>, String> {
    if template.len() > MAX_STRING_BYTES {
        return Err(format!(
            "is a template of {} KiB, over the {} KiB a templated string may hold; keep long text \
             without templates in a value of its own",
            template.len() / 1024,
            MAX_STRING_BYTES / 1024
        ));
    }
    let tags = template[first_tag..].matches("{{").count();
    if tags > MAX_TEMPLATE_TAGS {
        return Err(format!(
            "holds {tags} `{{{{`, more than the {MAX_TEMPLATE_TAGS} one templated string may hold; \
             split it into several values"
        ));
    }
    if template[first_tag..].matches('(').count() > MAX_PARENS {
        return Err(format!(
            "more than {MAX_PARENS} `(` after the first `{{{{`, too many to parse safely; \
             keep long text without templates in a value of its own"
        ));
    }
    let compiled = Template::compile(template).map_err(|e| describe(&e.into()))?;
    check_structure(&compiled)?;
    Ok(Rc::new(compiled))
}

/// Rendering for one pool: its data, and what its release may still hold.
pub struct Scope<'r> {
    renderer: &'r Renderer,
    data: Context,
    left: Cell<usize>,
}

impl Scope<'_> {
    /// Renders one string; `field` names it in errors.
    pub fn render_str(&self, field: &str, template: &str) -> Result<String, TemplateError> {
        let error = |message| TemplateError {
            field: field.to_string(),
            message,
        };
        // Strings without a tag come back as they are, so values never meant
        // as templates cannot trip over handlebars syntax such as a lone `\`.
        // They still count towards the release.
        let Some(first_tag) = template.find("{{") else {
            self.charge(template.len()).map_err(error)?;
            return Ok(template.to_string());
        };
        let compiled = self.renderer.compile(template, first_tag).map_err(error)?;
        let left = self.left.get();
        let mut out = CappedOutput {
            text: String::new(),
            cap: left.min(MAX_STRING_BYTES),
            overflowed: false,
        };
        let mut rc = RenderContext::new(None);
        match compiled.render(&self.renderer.engine, &self.data, &mut rc, &mut out) {
            Ok(()) => {}
            Err(_) if out.overflowed && out.cap < MAX_STRING_BYTES => {
                return Err(error(release_too_large()));
            }
            Err(_) if out.overflowed => {
                return Err(error(format!(
                    "renders to more than {} KiB, the limit for one string; a template that repeats \
                     a variable many times multiplies the spec: render less, or write the text \
                     without templates",
                    MAX_STRING_BYTES / 1024
                )));
            }
            Err(e) => return Err(error(describe(&e))),
        }
        self.charge(out.text.len()).map_err(error)?;
        Ok(out.text)
    }

    /// Renders every string inside `value`; keys, numbers and booleans are
    /// left as they are. `field` is the path of `value` itself.
    pub fn render_value(&self, field: &str, value: &Value) -> Result<Value, TemplateError> {
        match value {
            Value::String(s) => Ok(Value::String(self.render_str(field, s)?)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.render_value(&format!("{field}[{i}]"), item))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| {
                    self.charge(k.len()).map_err(|message| TemplateError {
                        field: child_path(field, k),
                        message,
                    })?;
                    Ok((k.clone(), self.render_value(&child_path(field, k), v)?))
                })
                .collect::<Result<Map<_, _>, _>>()
                .map(Value::Object),
            other => Ok(other.clone()),
        }
    }

    /// What the release may still hold, in bytes.
    pub fn left(&self) -> usize {
        self.left.get()
    }

    fn charge(&self, bytes: usize) -> Result<(), String> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(release_too_large()),
        }
    }
}

fn release_too_large() -> String {
    format!(
        "this pool's release renders to more than {} KiB of values and names, the limit for one \
         release (a HelmRelease must fit the API server's object limit); render less per pool",
        MAX_RELEASE_BYTES / 1024
    )
}

/// Collects rendered text and stops the render at the first byte past `cap`.
struct CappedOutput {
    text: String,
    cap: usize,
    overflowed: bool,
}

impl Output for CappedOutput {
    fn write(&mut self, seg: &str) -> Result<(), std::io::Error> {
        if self.text.len() + seg.len() > self.cap {
            self.overflowed = true;
            return Err(std::io::Error::other("rendered output over its limit"));
        }
        self.text.push_str(seg);
        Ok(())
    }
}

/// How many `{{` one templated string may hold; see `compile_checked`.
pub const MAX_TEMPLATE_TAGS: usize = 256;

/// How deep blocks, subexpressions and literal lists or maps may nest.
pub const MAX_NESTING: usize = 32;

/// How many `(` a template may hold after its first `{{`. Handlebars
/// overflows an ordinary 2 MiB thread stack parsing about 300 nested
/// subexpressions in a debug build.
pub const MAX_PARENS: usize = 128;

/// Refuses what handlebars would render by unbounded recursion: partials and
/// decorators, and nesting deeper than [`MAX_NESTING`]. Walks with its own
/// stack, so the check itself cannot overflow.
fn check_structure(template: &Template) -> Result<(), String> {
    enum Node<'a> {
        Template(&'a Template),
        Element(&'a TemplateElement),
        Param(&'a Parameter),
        Literal(&'a Value),
    }
    // (node, nesting depth, `each` blocks around it)
    let mut stack = vec![(Node::Template(template), 0, 0)];
    while let Some((node, depth, each)) = stack.pop() {
        if each > 1 {
            // Each level multiplies the output by the length of what it
            // walks: six `each` over ten labels render a megabyte, nine a
            // gigabyte.
            return Err("{{#each}} blocks may not nest: each level multiplies the output".to_string());
        }
        if depth > MAX_NESTING {
            return Err(format!(
                "blocks and subexpressions nest more than {MAX_NESTING} deep; flatten the template"
            ));
        }
        match node {
            Node::Template(t) => stack.extend(t.elements.iter().map(|e| (Node::Element(e), depth, each))),
            Node::Element(TemplateElement::RawString(_) | TemplateElement::Comment(_)) => {}
            Node::Element(
                TemplateElement::Expression(h)
                | TemplateElement::HtmlExpression(h)
                | TemplateElement::HelperBlock(h),
            ) => {
                let inner = depth + 1;
                let is_each = matches!(&h.name, Parameter::Name(n) if n == "each") && h.block;
                let body_each = each + usize::from(is_each);
                let params = std::iter::once(&h.name).chain(&h.params).chain(h.hash.values());
                stack.extend(params.map(|p| (Node::Param(p), inner, each)));
                stack.extend(h.template.iter().map(|t| (Node::Template(t), inner, body_each)));
                stack.extend(h.inverse.iter().map(|t| (Node::Template(t), inner, each)));
            }
            Node::Element(_) => {
                return Err("partials and decorators ({{> ...}}, {{#> ...}}, {{* ...}}, {{#* ...}}) are \
                     not supported; write \\{{ for a literal {{"
                    .to_string())
            }
            Node::Param(Parameter::Subexpression(sub)) => {
                stack.push((Node::Element(&sub.element), depth, each))
            }
            Node::Param(Parameter::Literal(value)) => stack.push((Node::Literal(value), depth, each)),
            Node::Param(_) => {}
            Node::Literal(Value::Array(items)) => {
                stack.extend(items.iter().map(|v| (Node::Literal(v), depth + 1, each)))
            }
            Node::Literal(Value::Object(map)) => {
                stack.extend(map.values().map(|v| (Node::Literal(v), depth + 1, each)))
            }
            Node::Literal(_) => {}
        }
    }
    Ok(())
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
mod tests;
