//! The bad-input corpus: every file in `tests/bad-input/` is one broken
//! NodePoolApplication (plus any objects it needs), and this runner applies
//! them all to one controller beside a healthy *bystander* application.
//!
//! Each case is either refused at admission with a clear message, or lands
//! on the application's status as a condition naming the field. Whatever the
//! cases do, the controller must not crash, the bystander's HelmReleases must
//! stay exactly as they were and Ready, pools that a case does not break
//! must still get their release, and an application created after all the
//! cases must still be served, also by a controller restarted with every
//! accepted case in place.
//!
//! # A case file
//!
//! `NN-short-description.yaml`: a header of `# key: value` comment lines,
//! then the YAML documents. Exactly one document is the NodePoolApplication
//! under test; any others (a NodePool without labels, a NodePool with an
//! overlong name, a Secret) are created first, in order, and cluster-scoped
//! ones are deleted at the end.
//!
//! ```yaml
//! # A pool lacks the label an override's template reads.
//! # expect: condition
//! # reason: InvalidPoolConfig
//! # pool: ${POOL_B}
//! # message: overrides[0].values.controller.config.zone
//! # healthy: ${POOL_A}
//! apiVersion: apps.fanout.dev/v1alpha1
//! kind: NodePoolApplication
//! metadata: { name: "${APP}", namespace: "${NAMESPACE}" }
//! spec: ...
//! ```
//!
//! Header keys (the header is the comment block at the top of the file; a
//! comment line that does not start with a lowercase `key:` is description):
//!
//! | key | meaning |
//! |---|---|
//! | `expect` | `admission`: creating the application must be refused; `condition`: it is accepted and its status must report the problem |
//! | `message` | a substring the refusal, or the reported message, must contain; at least one; repeat it for more |
//! | `reason` | (condition) the reason: of a condition in `status.conditions`, or with `pool`, of that pool's entry in `status.pools`; `A \| B` accepts either, for failures Flux reports in two steps |
//! | `pool` | (condition) look at this pool's entry in `status.pools` rather than at the conditions |
//! | `healthy` | (condition, repeatable) this pool is not broken by the case: it must still get its HelmRelease, and its status must not be `ready: "False"` |
//! | `no-release` | (condition, repeatable) this pool must get no HelmRelease |
//! | `release-field` | (condition, repeatable) `<JSON pointer> = <JSON value>`: every HelmRelease of the application has this value there |
//! | `generate` | `huge-values <size>` (`1MiB`, `512KiB`): a values map of that many bytes of incompressible text; `deep-values <depth>`: maps nested that deep. The generated JSON replaces the string `"${GENERATED}"` of the application |
//! | `order` | `last`: applied only once every other case has settled, for cases whose failure could stall the whole controller and so hide the others |
//!
//! Placeholders, substituted in the header and the documents:
//! `${NAMESPACE}` (this run's namespace), `${APP}` (`case-NN`, the
//! application's name), `${PREFIX}` (the prefix of this run's cluster-scoped
//! names, and the value of the `e2e` label of its pools), `${POOL_A}`
//! (labels `region: east`, `zone: a`) and `${POOL_B}` (labels
//! `region: west`, no `zone`), `${CHART_VERSION}` (the fixture chart's
//! version). An unknown placeholder, an unknown header key, a missing
//! `expect` or `message`, a key that does not fit the `expect`, or a file
//! without exactly one NodePoolApplication fails the run: no case is ever
//! skipped.
//!
//! Applications are created as `kubectl create` does it (`POST` with
//! `fieldValidation=Strict`), from the JSON text, so that generated values
//! deeper than any client-side parser allows still reach the API server.
//! Statuses are read from the raw JSON with the spec skipped, for the same
//! reason. Every case is checked and every failure is reported at the end,
//! each with its file name.

mod cases;
mod checks;
mod corpus;
mod header;

use crate::support;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Api, Client, Resource};
use nodepool_fanout::api::naming;
use nodepool_fanout::api::NodePoolApplication;
use serde::Deserialize;
use serde_json::{json, Value};
use support::apps::{app_named, READY_TIMEOUT};
use support::{ensure_crd, helmchart_resource, helmrelease_resource, wait_for, RunningController, TestEnv};

use cases::{delete_cluster_objects, run_cases};
use checks::{bystander_checks, canary_checks, controller_checks};
use corpus::load_corpus;

/// How long an accepted case may take to report its problem.
const CASE_TIMEOUT: Duration = Duration::from_secs(90);
const CHART_VERSION: &str = "1.0.0";
const BYSTANDER: &str = "bystander";
const CANARY: &str = "canary";
const CANARY_AFTER_RESTART: &str = "canary-after-restart";
/// How long a healthy application may take to get its release.
const CANARY_TIMEOUT: Duration = Duration::from_secs(60);
const FIELD_MANAGER: &str = "bad-input";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Admission,
    Condition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generate {
    HugeValues(usize),
    DeepValues(usize),
}

/// One file of the corpus, parsed and with its placeholders substituted.
#[derive(Debug, Clone)]
struct Case {
    file: String,
    app: String,
    expect: Expect,
    messages: Vec<String>,
    reason: Option<String>,
    pool: Option<String>,
    healthy: Vec<String>,
    no_release: Vec<String>,
    release_fields: Vec<(String, Value)>,
    last: bool,
    /// Objects created before the application, in order.
    extra: Vec<Value>,
    /// The application as JSON text, generated values included.
    body: String,
}

/// This run's names, for the placeholders.
struct Vars {
    namespace: String,
    prefix: String,
    pool_a: String,
    pool_b: String,
}

/// The parts of an application this runner reads; the spec, which may be
/// nested deeper than serde_json parses, is skipped unread.
#[derive(Debug, Deserialize)]
struct AppView {
    metadata: ViewMeta,
    #[serde(default)]
    status: Value,
}

#[derive(Debug, Deserialize)]
struct ViewMeta {
    name: String,
    #[serde(default)]
    generation: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct AppViewList {
    items: Vec<AppView>,
}

fn apps_path(namespace: &str) -> String {
    NodePoolApplication::url_path(&(), Some(namespace))
}

/// `kubectl create`: POST with strict field validation.
async fn create_app(client: &Client, namespace: &str, body: &str) -> Result<(), kube::Error> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let mut request = Request::new(apps_path(namespace))
        .create(&params, body.as_bytes().to_vec())
        .map_err(kube::Error::BuildRequest)?;
    let uri = format!("{}&fieldValidation=Strict", request.uri());
    *request.uri_mut() = uri.parse().expect("a valid URI");
    client.request_text(request).await.map(|_| ())
}

async fn list_apps(client: &Client, namespace: &str) -> Result<BTreeMap<String, AppView>, String> {
    let request = Request::new(apps_path(namespace))
        .list(&ListParams::default())
        .map_err(|e| e.to_string())?;
    let text = client.request_text(request).await.map_err(|e| e.to_string())?;
    let list: AppViewList = serde_json::from_str(&text).map_err(|e| format!("cannot read the list: {e}"))?;
    Ok(list.items.into_iter().map(|a| (a.metadata.name.clone(), a)).collect())
}

/// Every HelmRelease of the namespace, metadata only: (application label, pool) -> name.
async fn release_index(
    client: &Client,
    namespace: &str,
) -> Result<BTreeMap<(String, String), String>, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &helmrelease_resource());
    let list = api.list_metadata(&ListParams::default()).await.map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|hr| {
            let app = hr.metadata.labels.as_ref()?.get(naming::LABEL_APPLICATION)?.clone();
            let pool = hr.metadata.annotations.as_ref()?.get(naming::ANNOTATION_POOL_NAME)?.clone();
            Some(((app, pool), hr.metadata.name.clone().unwrap_or_default()))
        })
        .collect())
}

fn conditions(status: &Value) -> Vec<&Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default()
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn ingress_app(name: &str, vars: &Vars, spec: Value) -> Value {
    app_named(name, &vars.namespace, "ingress-gateway", CHART_VERSION, spec)
}

/// The bystander's releases as they must stay: name -> (generation, spec).
async fn bystander_releases(client: &Client, namespace: &str) -> BTreeMap<String, (Value, Value)> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &helmrelease_resource());
    let selector = format!("{}={BYSTANDER}", naming::LABEL_APPLICATION);
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list the bystander's releases");
    list.items
        .into_iter()
        .map(|hr| {
            let generation = json!(hr.metadata.generation);
            (hr.metadata.name.clone().unwrap_or_default(), (generation, hr.data["spec"].clone()))
        })
        .collect()
}

fn ready_for_generation(view: &AppView, want: &str) -> Result<(), String> {
    let status = &view.status;
    let current = status.get("observedGeneration").and_then(Value::as_i64) == view.metadata.generation;
    let ready = conditions(status).into_iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
    if current && ready && text(status, "ready") == want {
        Ok(())
    } else {
        Err(format!("status: {status}"))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_or_reported_and_disturbs_nothing_else() -> support::TestResult {
    let started = Instant::now();
    let mut env = TestEnv::new("badinput").await;
    ensure_crd(&env.client).await;
    let client = env.client.clone();
    let namespace = env.namespace.clone();
    let tag = env.prefix.clone();
    let pool_a = env.create_pool("a", &[("e2e", &tag), ("region", "east"), ("zone", "a")], 1).await;
    let pool_b = env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    let vars = Vars {
        namespace: namespace.clone(),
        prefix: tag.clone(),
        pool_a: pool_a.clone(),
        pool_b: pool_b.clone(),
    };
    let mut failures = Vec::new();
    let cases = load_corpus(&vars, &mut failures);
    assert!(
        cases.len() + failures.len() >= 30,
        "the corpus has {} files, want at least 30",
        cases.len()
    );

    let controller = RunningController::start(&namespace);
    let bystander = ingress_app(
        BYSTANDER,
        &vars,
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": tag } } },
            "values": { "controller": {
                "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" },
                "config": { "region": "{{pool.labels.region}}" }
            }},
            "placement": { "valuesPaths": ["controller.nodeSelector"] }
        }),
    );
    create_app(&client, &namespace, &bystander.to_string()).await?;
    wait_for("the bystander READY 2/2", READY_TIMEOUT, || async {
        let apps = list_apps(&client, &namespace).await?;
        ready_for_generation(apps.get(BYSTANDER).ok_or("no bystander")?, "2/2")
    })
    .await;
    let bystander_ready = started.elapsed();
    let before = bystander_releases(&client, &namespace).await;
    assert_eq!(before.len(), 2, "the bystander has one release per pool: {:?}", before.keys());

    let first: Vec<&Case> = cases.iter().filter(|c| !c.last).collect();
    let last: Vec<&Case> = cases.iter().filter(|c| c.last).collect();
    failures.extend(run_cases(&client, &namespace, &first).await);
    failures.extend(run_cases(&client, &namespace, &last).await);
    let cases_done = started.elapsed();

    // The controller lives and never panicked; the bystander is untouched;
    // an application created now is still served.
    failures.extend(controller_checks(&controller, "the controller").await);
    failures.extend(bystander_checks(&client, &namespace, &before).await);
    failures.extend(canary_checks(&client, &vars, CANARY, &controller).await);

    // The same after a restart (a rollout, a new leader): a controller that
    // starts with every accepted case in place lists them all at once.
    drop(controller);
    let controller = RunningController::start_env(&namespace, &[], &[("POD_NAME", "restarted")]);
    failures.extend(canary_checks(&client, &vars, CANARY_AFTER_RESTART, &controller).await);
    failures.extend(controller_checks(&controller, "the restarted controller").await);
    failures.extend(bystander_checks(&client, &namespace, &before).await);
    let checks_done = started.elapsed();

    // Clean-up: the cases' applications first, while the controller still
    // runs to release their shared HelmCharts.
    let apps: Api<NodePoolApplication> = Api::namespaced(client.clone(), &namespace);
    let request = Request::new(apps_path(&namespace));
    for case in &cases {
        if let Ok(r) = request.delete(&case.app, &DeleteParams::default()) {
            let _ = client.request_text(r).await;
        }
    }
    let keep = [BYSTANDER, CANARY, CANARY_AFTER_RESTART];
    let gone = tokio::time::timeout(Duration::from_secs(60), async {
        while !list_apps(&client, &namespace)
            .await
            .unwrap_or_default()
            .keys()
            .all(|n| keep.contains(&n.as_str()))
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    if gone.is_err() {
        // A stalled controller leaves its finalizer: take it off by hand so
        // the namespace can go, and delete the shared charts it would have.
        for name in list_apps(&client, &namespace).await.unwrap_or_default().keys() {
            let patch = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
            if let Ok(r) = request.patch(name, &PatchParams::default(), &patch) {
                let _ = client.request_text(r).await;
            }
        }
        let charts: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "flux-system", &helmchart_resource());
        let selector = format!("apps.fanout.dev/application-namespace={}", naming::label_value(&namespace));
        let _ = charts
            .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
            .await;
    }
    for name in keep {
        let _ = apps.delete(name, &DeleteParams::default()).await;
    }
    delete_cluster_objects(&client, &cases).await;
    env.cleanup().await;
    drop(controller);

    eprintln!(
        "{} cases: bystander Ready after {bystander_ready:.1?}, cases settled after {cases_done:.1?}, \
         checks done after {checks_done:.1?}, clean-up done after {:.1?}",
        cases.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} failures over {} bad-input cases:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    Ok(())
}
