//! The HelmRelease one pool gets: values merged and rendered for that pool,
//! the pool's nodeSelector injected, and a post-renderer that pins every
//! workload of the chart to the pool's nodes.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::api::naming;
use crate::api::{NodePoolApplicationSpec, PoolKind, ValuesReference};
use crate::chart::schema::Chart;
use crate::chart::shared::ChartRef;
use crate::pools::{self, Pool};
use crate::values::merge as values;
use crate::values::template::{self, Renderer, Scope, TemplateContext, TemplateError};
use crate::values::values_from::UnseenValues;

pub const HELMRELEASE_API_VERSION: &str = "helm.toolkit.fluxcd.io/v2";
pub const HELMRELEASE_KIND: &str = "HelmRelease";

/// The application a release is built for.
#[derive(Debug, Clone, Copy)]
pub struct AppInfo<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// Without a uid (a file not yet applied) the release gets no owner reference.
    pub uid: Option<&'a str>,
    pub spec: &'a NodePoolApplicationSpec,
    /// The shared HelmChart every release points at; `None` writes the
    /// application's `chart.spec` into each release instead.
    pub chart_ref: Option<&'a ChartRef>,
    /// The chart, when known: each pool's values are checked against its
    /// `values.schema.json` before anything is written.
    pub chart: Option<&'a Chart>,
    /// The application's `sharding.fluxcd.io/key` label, passed on.
    pub shard: Option<&'a str>,
    /// Flux's request annotations on the application (`requestedAt`,
    /// `forceAt`, `resetAt`), passed on to every release as they are.
    pub requests: &'a [(&'a str, &'a str)],
}

/// A field of the application that could not be turned into this pool's release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl ToString) -> Self {
        Self {
            field: field.into(),
            message: message.to_string(),
        }
    }
}

impl From<TemplateError> for FieldError {
    fn from(e: TemplateError) -> Self {
        Self {
            field: e.field,
            message: e.message,
        }
    }
}

/// One pool's HelmRelease, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltRelease {
    pub name: String,
    pub release_name: String,
    pub object: Value,
    pub spec_hash: String,
    /// The bytes of its spec and labels as JSON, against the application's
    /// budget ([`MAX_APPLICATION_BYTES`]).
    pub size: usize,
}

/// All the releases of one application together, as JSON: the controller
/// holds an application's releases while it plans and writes them, and
/// reconciles several applications at once within one pod's memory (256
/// MiB in `deploy/`). 10,000 pools of an ordinary chart take about 15 MiB.
pub const MAX_APPLICATION_BYTES: usize = 32 * 1024 * 1024;

/// Builds the HelmRelease for one pool. `written_hash` is the spec hash of
/// the pool's existing release: a spec that hashes the same was checked
/// against the chart's schema when it was written (the chart reference is
/// part of the spec), so only a changed spec is checked again.
pub fn release(
    app: &AppInfo,
    pool: &Pool,
    renderer: &Renderer,
    written_hash: Option<&str>,
) -> Result<BuiltRelease, FieldError> {
    let ctx = TemplateContext::new(app.name, app.namespace, pool);
    let scope = renderer.scope(&ctx);
    let name = naming::release_name(app.name, &pool.name);
    let release_name = release_name(app, &scope, &name)?;
    let spec = spec(app, pool, &scope, &release_name)?;
    let mut labels = json!({
        naming::LABEL_APPLICATION: naming::label_value(app.name),
        naming::LABEL_POOL: naming::label_value(&pool.name),
        naming::LABEL_MANAGED_BY: naming::MANAGER,
    });
    if let Some(shard) = app.shard {
        labels[naming::LABEL_SHARD] = json!(shard);
    }
    let requests: serde_json::Map<String, Value> =
        app.requests.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let canonical = canonical_json(&spec, &labels, &requests);
    // The strings were counted as they were rendered; this also counts
    // the structure around them.
    if canonical.len() > template::MAX_RELEASE_BYTES {
        return Err(FieldError::new(
            "spec",
            format!(
                "this pool's HelmRelease spec is {} KiB, over the {} KiB limit for one release (a \
                 HelmRelease must fit the API server's object limit); render less per pool",
                canonical.len() / 1024,
                template::MAX_RELEASE_BYTES / 1024
            ),
        ));
    }
    let spec_hash = hash_hex(&canonical);
    if let Some(chart) = app.chart.filter(|_| written_hash != Some(spec_hash.as_str())) {
        check_schema(chart, &spec)?;
    }
    let mut metadata = json!({
        "name": name,
        "namespace": app.namespace,
        "labels": labels,
        "annotations": {
            naming::ANNOTATION_POOL_NAME: pool.name,
            naming::ANNOTATION_SPEC_HASH: spec_hash,
            naming::ANNOTATION_POOL_INPUTS: pool_inputs(pool),
        },
    });
    for (key, token) in requests {
        metadata["annotations"][key] = token;
    }
    if let Some(uid) = app.uid {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "apps.fanout.dev/v1alpha1",
            "kind": "NodePoolApplication",
            "name": app.name,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
    }
    let object = json!({
        "apiVersion": HELMRELEASE_API_VERSION,
        "kind": HELMRELEASE_KIND,
        "metadata": metadata,
        "spec": spec,
    });
    Ok(BuiltRelease {
        name,
        release_name,
        object,
        spec_hash,
        size: canonical.len(),
    })
}

/// Values from ConfigMaps and Secrets are Flux's to read, not ours: the
/// inline values are checked, and with `valuesFrom` only what no unseen
/// value could mend fails the pool (a missing required key does not).
fn check_schema(chart: &Chart, spec: &Value) -> Result<(), FieldError> {
    let values = spec.get("values").cloned().unwrap_or_else(|| json!({}));
    chart
        .validate_with(&values, &UnseenValues::of_release_spec(spec))
        .map_err(|violations| {
            FieldError::new(
                "values",
                format!("chart {} {} rejects them: {violations}", chart.name, chart.version),
            )
        })
}

fn release_name(app: &AppInfo, scope: &Scope, default: &str) -> Result<String, FieldError> {
    let Some(template) = &app.spec.release_name else {
        return Ok(default.to_string());
    };
    let rendered = scope.render_str("releaseName", template)?;
    if naming::is_dns1123_subdomain(&rendered, naming::MAX_RELEASE_NAME) {
        Ok(rendered)
    } else {
        Err(FieldError::new(
            "releaseName",
            format!(
                "renders to {rendered:?}, which Helm rejects: use lowercase letters, digits, '-' and '.', \
                 at most {} characters",
                naming::MAX_RELEASE_NAME
            ),
        ))
    }
}

fn target_namespace(app: &AppInfo, scope: &Scope) -> Result<Option<String>, FieldError> {
    let Some(template) = &app.spec.target_namespace else {
        return Ok(None);
    };
    let rendered = scope.render_str("targetNamespace", template)?;
    if naming::is_dns1123_label(&rendered) {
        Ok(Some(rendered))
    } else {
        let message = format!(
            "renders to {rendered:?}, which is not a namespace name: use lowercase letters, digits and '-', \
             at most 63 characters"
        );
        Err(FieldError::new("targetNamespace", message))
    }
}

fn spec(app: &AppInfo, pool: &Pool, scope: &Scope, release_name: &str) -> Result<Value, FieldError> {
    let layers = values_for(app.spec, pool, scope)?;
    let mut spec = Map::new();
    spec.insert("releaseName".into(), json!(release_name));
    if let Some(ns) = target_namespace(app, scope)? {
        spec.insert("targetNamespace".into(), json!(ns));
    }
    spec.insert("interval".into(), json!(app.spec.interval));
    match (app.chart_ref, &app.spec.chart_ref) {
        (Some(r), _) => spec.insert(
            "chartRef".into(),
            json!({ "kind": r.kind.as_str(), "name": r.name, "namespace": r.namespace }),
        ),
        // Without shared charts, every release names the user's
        // OCIRepository itself, as a HelmRelease written by hand would.
        (None, Some(reference)) => spec.insert("chartRef".into(), to_json("chartRef", reference)?),
        (None, None) => spec.insert("chart".into(), json!({ "spec": chart_spec(app.spec)? })),
    };
    passthrough(app.spec, scope, &mut spec)?;
    refuse_takeover(&mut spec);
    if let Some(suspend) = layers.suspend {
        spec.insert("suspend".into(), json!(suspend));
    }
    if layers.values.as_object().is_some_and(|v| !v.is_empty()) {
        spec.insert("values".into(), layers.values);
    }
    if !layers.values_from.is_empty() {
        spec.insert("valuesFrom".into(), to_json("valuesFrom", &layers.values_from)?);
    }
    match app.spec.pools.kind {
        // A cluster of its own: helm-controller installs there with its
        // kubeconfig, and its pods may run on any of its nodes. Helm keeps
        // its release records in the site, by default in the
        // HelmRelease's namespace, which the site need not have: in the
        // target namespace instead, as `helm install -n` does, unless the
        // application says where.
        PoolKind::ClusterProfile => {
            spec.insert("kubeConfig".into(), kube_config(app, scope)?);
            if let Some(target) = spec.get("targetNamespace").cloned() {
                spec.entry("storageNamespace").or_insert(target);
            }
        }
        _ => {
            spec.insert("postRenderers".into(), post_renderers(&app.spec.placement, pool)?);
        }
    };
    Ok(Value::Object(spec))
}

/// The Secret name that `{{pool.name}}-kubeconfig` renders to unless the
/// application names another: Cluster API's convention, under the key
/// `value` that Flux reads by default.
pub const DEFAULT_KUBECONFIG_SECRET: &str = "{{pool.name}}-kubeconfig";

/// A site cluster's `spec.kubeConfig`: the Secret of the application's
/// namespace that holds its kubeconfig. The Secret is Flux's to read; a
/// missing one is the site's failure, which helm-controller reports.
fn kube_config(app: &AppInfo, scope: &Scope) -> Result<Value, FieldError> {
    let field = "pools.kubeConfig.secretRef.name";
    let reference = app.spec.pools.kube_config.as_ref().map(|k| &k.secret_ref);
    let template = reference.map_or(DEFAULT_KUBECONFIG_SECRET, |r| r.name.as_str());
    let name = scope.render_str(field, template)?;
    if !naming::is_dns1123_subdomain(&name, 253) {
        return Err(FieldError::new(
            field,
            format!(
                "renders to {name:?}, which is not a Secret name: use lowercase letters, digits, '-' \
                 and '.', at most 253 characters"
            ),
        ));
    }
    let mut secret_ref = json!({ "name": name });
    if let Some(key) = reference.and_then(|r| r.key.as_ref()) {
        secret_ref["key"] = json!(key);
    }
    Ok(json!({ "secretRef": secret_ref }))
}

fn chart_spec(spec: &NodePoolApplicationSpec) -> Result<Value, FieldError> {
    let template = spec.chart.as_ref().ok_or_else(|| {
        FieldError::new("chart", "neither spec.chart nor spec.chartRef is set: set one, as in a HelmRelease")
    })?;
    let mut chart = to_json("chart.spec", &template.spec)?;
    // The API server defaults this; doing the same keeps files and cluster
    // objects hashing alike.
    if chart.get("version").is_none() {
        chart["version"] = json!("*");
    }
    Ok(chart)
}

/// The `spec.helmRelease` fields, copied; dependency names may be templates.
fn passthrough(
    spec: &NodePoolApplicationSpec,
    scope: &Scope,
    out: &mut Map<String, Value>,
) -> Result<(), FieldError> {
    let Some(options) = &spec.helm_release else {
        return Ok(());
    };
    let Value::Object(mut fields) = to_json("helmRelease", options)? else {
        return Ok(());
    };
    // Suspension is decided per pool, with the overrides; a site's
    // kubeconfig per site (see `kube_config`), never one for all.
    fields.remove("suspend");
    fields.remove("kubeConfig");
    if let Some(depends_on) = fields.get("dependsOn") {
        let rendered = scope.render_value("helmRelease.dependsOn", depends_on)?;
        fields.insert("dependsOn".into(), rendered);
    }
    out.extend(fields);
    Ok(())
}

/// helm-controller takes over objects that exist already unless told not to
/// (`disableTakeOwnership` is false by default, and server-side apply
/// conflicts are forced). A chart object with a fixed name, an IngressClass
/// or a ClusterRole, would then pass silently from pool to pool, owned by
/// whichever wrote last and deleted with whichever goes first. So every
/// release refuses it, for install and upgrade, unless the application sets
/// it in `helmRelease.install` or `helmRelease.upgrade`.
fn refuse_takeover(spec: &mut Map<String, Value>) {
    for action in ["install", "upgrade"] {
        let settings = spec.entry(action).or_insert_with(|| json!({}));
        if let Some(settings) = settings.as_object_mut() {
            settings.entry("disableTakeOwnership").or_insert(json!(true));
        }
    }
}

/// Values, valuesFrom and suspend after the base and every matching override.
struct Layers {
    values: Value,
    values_from: Vec<ValuesReference>,
    suspend: Option<bool>,
}

fn values_for(spec: &NodePoolApplicationSpec, pool: &Pool, scope: &Scope) -> Result<Layers, FieldError> {
    // Rendering each source before merging keeps error paths pointing at
    // what the user wrote.
    let base = match &spec.values {
        Some(v) => scope.render_value("values", not_too_deep("values", v)?)?,
        None => json!({}),
    };
    let mut layers = Layers {
        values: values::merge(&json!({}), &base, "values").map_err(|e| FieldError::new("values", e))?,
        values_from: render_refs("valuesFrom", &spec.values_from, scope)?,
        // The application's own `spec.suspend` is not a field of the
        // release's spec: it stops the fan-out, and the plan suspends the
        // releases apart (see `plan::Plan::suspend`).
        suspend: spec.helm_release.as_ref().and_then(|h| h.suspend),
    };
    for (i, o) in spec.overrides.iter().enumerate() {
        let field = format!("overrides[{i}]");
        if !pools::contains(&o.pools, pool).map_err(|e| FieldError::new(format!("{field}.pools"), e))? {
            continue;
        }
        if let Some(v) = &o.values {
            let field = format!("{field}.values");
            let rendered = scope.render_value(&field, not_too_deep(&field, v)?)?;
            layers.values =
                values::merge(&layers.values, &rendered, &field).map_err(|e| FieldError::new(&field, e))?;
        }
        layers
            .values_from
            .extend(render_refs(&format!("{field}.valuesFrom"), &o.values_from, scope)?);
        layers.suspend = o.suspend.or(layers.suspend);
    }
    let selector: Map<String, Value> = pool
        .placed_by(spec.placement.node_label.as_deref())
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    // A site cluster's pods run anywhere in it (admission refuses a
    // placement for one).
    let paths = match spec.pools.kind {
        PoolKind::ClusterProfile => &[][..],
        _ => spec.placement.values_paths.as_slice(),
    };
    for (i, path) in paths.iter().enumerate() {
        let field = format!("placement.valuesPaths[{i}]");
        values::set_path(&mut layers.values, path, &selector).map_err(|e| FieldError::new(&field, e))?;
        // Each value added is checked too: what is written must read back.
        not_too_deep(&field, &layers.values)?;
    }
    Ok(layers)
}

/// Values deeper than [`values::MAX_DEPTH`] are refused before anything
/// walks them.
fn not_too_deep<'a>(field: &str, values: &'a Value) -> Result<&'a Value, FieldError> {
    match values::depth(values) {
        depth if depth > values::MAX_DEPTH => Err(FieldError::new(
            field,
            format!(
                "values nest {depth} levels deep, more than the {} allowed; flatten them",
                values::MAX_DEPTH
            ),
        )),
        _ => Ok(values),
    }
}

fn render_refs(
    field: &str,
    refs: &[ValuesReference],
    scope: &Scope,
) -> Result<Vec<ValuesReference>, FieldError> {
    refs.iter()
        .enumerate()
        .map(|(i, r)| {
            let name = scope.render_str(&format!("{field}[{i}].name"), &r.name)?;
            Ok(ValuesReference { name, ..r.clone() })
        })
        .collect()
}

/// The first 16 hex digits of the SHA-256 of the spec and labels, in
/// canonical JSON (keys sorted at every level) so that field order never
/// causes a write.
pub fn spec_hash(spec: &Value, labels: &Value) -> String {
    hash_hex(&canonical_json(spec, labels, &serde_json::Map::new()))
}

/// Flux's request annotations count as part of what is written: a new
/// token is a write of every release (as the rollout lets it), which is
/// how helm-controller hears of it. Without any, the text (and so every
/// hash already stored) is as before they counted.
fn canonical_json(spec: &Value, labels: &Value, requests: &serde_json::Map<String, Value>) -> String {
    let mut text = String::new();
    let mut whole = json!({ "labels": labels, "spec": spec });
    if !requests.is_empty() {
        whole["requests"] = Value::Object(requests.clone());
    }
    canonical(&whole, &mut text);
    text
}

fn to_json<T: Serialize>(field: &str, value: &T) -> Result<Value, FieldError> {
    serde_json::to_value(value).map_err(|e| FieldError::new(field, format!("cannot be written as JSON: {e}")))
}

mod hash;
mod placement;
pub use hash::pool_inputs;
use hash::{canonical, hash_hex};
pub use placement::post_renderers;

#[cfg(test)]
mod tests;
