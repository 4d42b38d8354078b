//! Creating, editing and deleting an application from the console: its
//! YAML in an editor, a preview of what each pool's HelmRelease would be
//! (the `render` the CLI does, over the pools the cluster holds now), then
//! Copy YAML (for Git, the path we recommend) or Apply as the signed-in
//! user. Delete asks for the application's name to be typed, and says what
//! its `deletionPolicy` does to the releases.
//!
//! Every write is the acting user's own (impersonation: the API server's
//! RBAC decides), by server-side apply under the console's field manager,
//! never forced: a field Flux applies from Git is a conflict, and the
//! console says to change it there.

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::identity::{self, Actor};
use super::{html, pages, unavailable, Console, Controls};
use crate::api::{DeletionPolicy, NodePoolApplication};
use crate::cli::render;

/// What a new application starts from: the example of the front page
/// (README.md, explained in docs/concepts.md), shortened, to change.
const TEMPLATE: &str = r#"apiVersion: apps.fanout.dev/v1alpha1
kind: NodePoolApplication
metadata:
  name: ingress
  namespace: edge
spec:
  pools:
    selector:
      matchExpressions:
        - { key: region, operator: Exists }
  chart:
    spec:
      chart: ingress-gateway
      version: "1.0.0"
      sourceRef: { kind: HelmRepository, name: fixtures, namespace: flux-system }
  interval: 10m
  values:
    controller:
      ingressClass:
        name: gateway-{{pool.name}}
  placement:
    valuesPaths: [controller.nodeSelector]
"#;

/// How many pools' releases a preview shows whole; the rest by name.
const SHOWN_WHOLE: usize = 20;

/// What the editor page shows.
#[derive(Debug, Default)]
pub struct Editor {
    pub title: String,
    pub yaml: String,
    /// Why the YAML is not an application, or was not applied.
    pub error: Option<String>,
    pub preview: Option<Preview>,
}

/// What applying the YAML would write.
#[derive(Debug, Default)]
pub struct Preview {
    /// Each selected pool and its release: (pool, release name, YAML, or
    /// none past the first [`SHOWN_WHOLE`]).
    pub pools: Vec<(String, String, Option<String>)>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// The application as one writes it: what the API server adds (status,
/// uid, resource version, managed fields and the like) left out.
pub fn editable(app: &NodePoolApplication) -> String {
    let mut value = serde_json::to_value(app).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("status");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
        for added in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "finalizers",
        ] {
            meta.remove(added);
        }
        if let Some(annotations) = meta.get_mut("annotations").and_then(serde_json::Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            if annotations.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    serde_saphyr::to_string(&value).unwrap_or_default()
}

/// The controls of a reader who may act; none on a read-only console or
/// for nobody signed in.
fn controls_or_refusal(console: &Console, headers: &HeaderMap) -> Result<Controls, Box<Response>> {
    if let Err(why) = console.reader(headers) {
        return Err(Box::new(super::signed_out(&why)));
    }
    console.controls(headers).ok_or_else(|| {
        Box::new(
            (StatusCode::NOT_FOUND, html(pages::not_found("This console is read-only."))).into_response(),
        )
    })
}

/// The reader's controls and the application, when they may act and it is
/// visible to them.
async fn visible(
    console: &Console,
    headers: &HeaderMap,
    namespace: &str,
    name: &str,
) -> Result<(Controls, super::view::AppView), Box<Response>> {
    let controls = controls_or_refusal(console, headers)?;
    let viewer = console.reader(headers).map_err(|why| Box::new(super::signed_out(&why)))?;
    let app = console.find(&viewer, namespace, name).await.map_err(Box::new)?;
    Ok((controls, app))
}

pub(super) async fn new_application(State(console): State<Console>, headers: HeaderMap) -> Response {
    let controls = match controls_or_refusal(&console, &headers) {
        Ok(controls) => controls,
        Err(response) => return *response,
    };
    let editor = Editor {
        title: "New application".into(),
        yaml: TEMPLATE.into(),
        ..Editor::default()
    };
    html(pages::editor(&editor, &controls)).into_response()
}

pub(super) async fn edit_application(
    State(console): State<Console>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let controls = match visible(&console, &headers, &namespace, &name).await {
        Ok((controls, _)) => controls,
        Err(response) => return *response,
    };
    let yaml = match console.source.object(&namespace, &name).await {
        Ok(Some(app)) => editable(&app),
        Ok(None) => {
            return (StatusCode::NOT_FOUND, html(pages::not_found("No such application."))).into_response()
        }
        Err(e) => return unavailable(e),
    };
    let editor = Editor {
        title: format!("Edit {namespace}/{name}"),
        yaml,
        ..Editor::default()
    };
    html(pages::editor(&editor, &controls)).into_response()
}

/// The editor's form: the YAML, and which button was pressed.
#[derive(Debug, Deserialize)]
pub(super) struct EditorForm {
    csrf: String,
    yaml: String,
    #[serde(default)]
    action: String,
}

/// Checks who asks and that the form is the console's own.
fn actor_of(console: &Console, headers: &HeaderMap, csrf: &str) -> Result<(Actor, Controls), Box<Response>> {
    let refuse =
        |status: StatusCode, why: &str| Box::new((status, html(pages::refused(why, "/"))).into_response());
    let Some(steering) = &console.steering else {
        return Err(refuse(StatusCode::NOT_FOUND, "This console is read-only."));
    };
    if identity::cross_site(headers) {
        return Err(refuse(StatusCode::FORBIDDEN, "Refused: the request came from another site."));
    }
    let actor = match steering.identity.actor(headers) {
        Ok(actor) => actor,
        Err(e @ identity::NoActor::NotSignedIn) => {
            return Err(refuse(StatusCode::UNAUTHORIZED, &e.to_string()))
        }
        Err(e) => return Err(refuse(StatusCode::FORBIDDEN, &e.to_string())),
    };
    if !steering.tokens.check(&actor, csrf) {
        let why = "Refused: the form is stale or not the console's own. Reload the page.";
        return Err(refuse(StatusCode::FORBIDDEN, why));
    }
    let controls = console
        .controls(headers)
        .ok_or_else(|| refuse(StatusCode::UNAUTHORIZED, "Sign in first."))?;
    Ok((actor, controls))
}

/// Preview or Apply, as the button says.
pub(super) async fn submit(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<EditorForm>,
) -> Response {
    let (actor, controls) = match actor_of(&console, &headers, &form.csrf) {
        Ok(acting) => acting,
        Err(response) => return *response,
    };
    let mut editor = Editor {
        title: "Application".into(),
        yaml: form.yaml.clone(),
        ..Editor::default()
    };
    let app = match render::parse_app(&form.yaml, "default") {
        Ok(app) => app,
        Err(e) => {
            editor.error = Some(e.to_string());
            return (StatusCode::UNPROCESSABLE_ENTITY, html(pages::editor(&editor, &controls)))
                .into_response();
        }
    };
    let namespace = app.metadata.namespace.clone().unwrap_or_default();
    let name = app.metadata.name.clone().unwrap_or_default();
    editor.title = format!("{namespace}/{name}");
    let Some(steering) = &console.steering else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if form.action == "apply" {
        return match steering.actions.apply_application(&actor, &app).await {
            Ok(done) => {
                tracing::info!(user = %actor.name, "{done}");
                let notice = serde_urlencoded::to_string([("notice", done.as_str())]).unwrap_or_default();
                Redirect::to(&format!("{}?{notice}", pages::app_path(&namespace, &name))).into_response()
            }
            Err(e) => {
                editor.error = Some(format!("Not applied: {e}"));
                (StatusCode::CONFLICT, html(pages::editor(&editor, &controls))).into_response()
            }
        };
    }
    editor.preview = Some(match preview(&console, &app, &namespace).await {
        Ok(preview) => preview,
        Err(response) => return *response,
    });
    html(pages::editor(&editor, &controls)).into_response()
}

/// What each pool's release would be, over the pools the cluster holds.
async fn preview(
    console: &Console,
    app: &NodePoolApplication,
    namespace: &str,
) -> Result<Preview, Box<Response>> {
    let pools = console.source.pools_of(app).await.map_err(|e| Box::new(unavailable(e)))?;
    let rendered = match render::render_over(app, &pools, namespace, None) {
        Ok(rendered) => rendered,
        Err(e) => {
            return Ok(Preview {
                errors: vec![e.to_string()],
                ..Preview::default()
            })
        }
    };
    let pools = (rendered.releases.iter().enumerate())
        .map(|(i, release)| {
            let pool = release
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(crate::api::naming::ANNOTATION_POOL_NAME))
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string();
            let name = release
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let whole = (i < SHOWN_WHOLE).then(|| serde_saphyr::to_string(release).unwrap_or_default());
            (pool, name.to_string(), whole)
        })
        .collect();
    Ok(Preview {
        pools,
        errors: rendered.errors,
        warnings: rendered.warnings,
    })
}

/// The editor's form, field by field: what most applications need, made
/// into the YAML the editor then shows, previews and applies.
#[derive(Debug, Default, Deserialize)]
pub struct Fields {
    csrf: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub chart: String,
    #[serde(default)]
    pub version: String,
    /// `HelmRepository` or `OCIRepository`... as Flux's sourceRef kinds.
    #[serde(default)]
    pub source_kind: String,
    #[serde(default)]
    pub source_name: String,
    #[serde(default)]
    pub source_namespace: String,
    /// The pools' kind, as `spec.pools.kind` (empty: OpenYurt's NodePools).
    #[serde(default)]
    pub pool_kind: String,
    /// `key=value` pairs, comma-separated: the pools' labels to match.
    #[serde(default)]
    pub selector: String,
    /// YAML: the values every pool gets.
    #[serde(default)]
    pub values: String,
    /// YAML: the list of per-pool overrides.
    #[serde(default)]
    pub overrides: String,
}

/// The application the fields describe, as YAML; or which field is wrong.
pub fn compose(fields: &Fields) -> Result<String, String> {
    let yaml = |what: &str, text: &str| -> Result<serde_json::Value, String> {
        match text.trim() {
            "" => Ok(serde_json::Value::Null),
            text => serde_saphyr::from_str(text).map_err(|e| format!("{what} are not YAML: {e}")),
        }
    };
    let mut labels = serde_json::Map::new();
    for pair in fields.selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("the pools' labels take key=value pairs, not {pair:?}"))?;
        labels.insert(key.trim().into(), value.trim().into());
    }
    let mut spec = serde_json::json!({
        "pools": { "selector": { "matchLabels": labels } },
        "chart": { "spec": {
            "chart": fields.chart.trim(),
            "version": fields.version.trim(),
            "sourceRef": { "kind": fields.source_kind.trim(), "name": fields.source_name.trim() }
        } },
        "interval": "10m",
    });
    if !fields.pool_kind.trim().is_empty() {
        spec["pools"]["kind"] = fields.pool_kind.trim().into();
    }
    if !fields.source_namespace.trim().is_empty() {
        spec["chart"]["spec"]["sourceRef"]["namespace"] = fields.source_namespace.trim().into();
    }
    let values = yaml("the values", &fields.values)?;
    if !values.is_null() {
        spec["values"] = values;
    }
    let overrides = yaml("the overrides", &fields.overrides)?;
    if !overrides.is_null() {
        spec["overrides"] = overrides;
    }
    let app = serde_json::json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": fields.name.trim(), "namespace": fields.namespace.trim() },
        "spec": spec,
    });
    serde_saphyr::to_string(&app).map_err(|e| e.to_string())
}

/// The form made into YAML, shown in the editor with its preview.
pub(super) async fn from_fields(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Response {
    let (_, controls) = match actor_of(&console, &headers, &fields.csrf) {
        Ok(acting) => acting,
        Err(response) => return *response,
    };
    let mut editor = Editor {
        title: "New application".into(),
        ..Editor::default()
    };
    match compose(&fields) {
        Ok(yaml) => {
            editor.yaml = yaml;
            if let Ok(app) = render::parse_app(&editor.yaml, "default") {
                let namespace = app.metadata.namespace.clone().unwrap_or_default();
                editor.preview = match preview(&console, &app, &namespace).await {
                    Ok(preview) => Some(preview),
                    Err(response) => return *response,
                };
            }
            html(pages::editor(&editor, &controls)).into_response()
        }
        Err(why) => {
            editor.error = Some(why);
            editor.yaml = TEMPLATE.into();
            (StatusCode::UNPROCESSABLE_ENTITY, html(pages::editor(&editor, &controls))).into_response()
        }
    }
}

/// The pools the YAML would select now, as a fragment the editor swaps in
/// as one types (`console.js`), or why it cannot tell.
pub(super) async fn selected_pools(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<EditorForm>,
) -> Response {
    if let Err(response) = actor_of(&console, &headers, &form.csrf) {
        return *response;
    }
    let selected = match render::parse_app(&form.yaml, "default") {
        Ok(app) => match console.source.pools_of(&app).await {
            Ok(pools) => crate::pools::select(&app.spec.pools.selection(), &pools)
                .map(|selected| selected.pools.into_iter().map(|p| p.name.clone()).collect())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    html(pages::selected_pools(&selected)).into_response()
}

pub(super) async fn delete_page(
    State(console): State<Console>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let (controls, app) = match visible(&console, &headers, &namespace, &name).await {
        Ok(visible) => visible,
        Err(response) => return *response,
    };
    let policy = console.source.object(&namespace, &name).await.ok().flatten();
    let policy = match policy.and_then(|a| a.spec.deletion_policy) {
        Some(DeletionPolicy::Orphan) => format!(
            "Its deletionPolicy is Orphan: its {} HelmReleases are left in place, no longer ours, and keep \
             running until someone deletes them.",
            app.pools.len()
        ),
        _ => format!(
            "Its deletionPolicy is Delete: its {} HelmReleases are deleted, and helm-controller uninstalls \
             each release from its pool. If Flux applies it from Git, delete it there too, or Flux makes it \
             again.",
            app.pools.len()
        ),
    };
    html(pages::delete_confirm(&namespace, &name, &policy, &controls)).into_response()
}

#[derive(Debug, Deserialize)]
pub(super) struct DeleteForm {
    csrf: String,
    #[serde(default)]
    confirm: String,
}

pub(super) async fn delete(
    State(console): State<Console>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<DeleteForm>,
) -> Response {
    let (actor, _) = match actor_of(&console, &headers, &form.csrf) {
        Ok(acting) => acting,
        Err(response) => return *response,
    };
    let back = format!("{}/delete", pages::app_path(&namespace, &name));
    if form.confirm.trim() != name {
        let why = format!("Not deleted: type the application's name, {name}, to delete it.");
        return (StatusCode::UNPROCESSABLE_ENTITY, html(pages::refused(&why, &back))).into_response();
    }
    let Some(steering) = &console.steering else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match steering.actions.delete_application(&actor, &namespace, &name).await {
        Ok(done) => {
            tracing::info!(user = %actor.name, "{done}");
            html(pages::done(&done)).into_response()
        }
        Err(e) => {
            (StatusCode::CONFLICT, html(pages::refused(&format!("Not deleted: {e}"), &back))).into_response()
        }
    }
}
