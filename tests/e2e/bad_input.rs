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

impl Vars {
    fn substitute(&self, text: &str, app: &str) -> Result<String, String> {
        let out = text
            .replace("${NAMESPACE}", &self.namespace)
            .replace("${APP}", app)
            .replace("${PREFIX}", &self.prefix)
            .replace("${POOL_A}", &self.pool_a)
            .replace("${POOL_B}", &self.pool_b)
            .replace("${CHART_VERSION}", CHART_VERSION);
        let leftover = out.replace("${GENERATED}", "");
        match leftover.find("${") {
            Some(at) => {
                let rest: String = leftover[at..].chars().take(30).collect();
                Err(format!("unknown placeholder at {rest:?}"))
            }
            None => Ok(out),
        }
    }
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad-input")
}

/// Reads every case file; a file that cannot be parsed is a failure, not a skip.
fn load_corpus(vars: &Vars, failures: &mut Vec<String>) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/bad-input exists")
        .map(|e| e.expect("a readable directory entry").path())
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut numbers = BTreeSet::new();
    for path in files {
        let file = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|text| parse_case(&file, &text, vars));
        match parsed {
            Ok(case) if numbers.insert(case.app.clone()) => cases.push(case),
            Ok(case) => failures.push(format!("{file}: its number is taken by another case ({})", case.app)),
            Err(e) => failures.push(format!("{file}: {e}")),
        }
    }
    cases
}

fn parse_case(file: &str, text: &str, vars: &Vars) -> Result<Case, String> {
    let stem = file
        .strip_suffix(".yaml")
        .ok_or("a case file must be named NN-short-description.yaml")?;
    let number = stem.split('-').next().unwrap_or_default();
    if number.len() != 2 || !number.chars().all(|c| c.is_ascii_digit()) || stem.len() < 4 {
        return Err("a case file must be named NN-short-description.yaml".into());
    }
    let app = format!("case-{number}");
    let text = vars.substitute(text, &app)?;

    let mut expect = None;
    let mut case = Case {
        file: file.to_string(),
        app: app.clone(),
        expect: Expect::Admission,
        messages: Vec::new(),
        reason: None,
        pool: None,
        healthy: Vec::new(),
        no_release: Vec::new(),
        release_fields: Vec::new(),
        last: false,
        extra: Vec::new(),
        body: String::new(),
    };
    let mut generate = None;
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let line = line.trim_start_matches('#').trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            continue; // description
        }
        let value = value.trim().to_string();
        if value.is_empty() {
            return Err(format!("header key {key:?} has no value"));
        }
        let once = |slot: &Option<String>| match slot {
            Some(_) => Err(format!("header key {key:?} is given twice")),
            None => Ok(Some(value.clone())),
        };
        match key {
            "expect" => {
                expect = Some(match value.as_str() {
                    "admission" => Expect::Admission,
                    "condition" => Expect::Condition,
                    other => return Err(format!("expect: {other:?} is not admission or condition")),
                })
            }
            "message" => case.messages.push(value),
            "reason" => case.reason = once(&case.reason)?,
            "pool" => case.pool = once(&case.pool)?,
            "healthy" => case.healthy.push(value),
            "no-release" => case.no_release.push(value),
            "release-field" => {
                let (pointer, json) = value
                    .split_once(" = ")
                    .ok_or("release-field must be `<JSON pointer> = <JSON value>`")?;
                let json = serde_json::from_str(json.trim())
                    .map_err(|e| format!("release-field value is not JSON: {e}"))?;
                case.release_fields.push((pointer.trim().to_string(), json));
            }
            "generate" => generate = Some(parse_generate(&value)?),
            "order" if value == "last" => case.last = true,
            "order" => return Err(format!("order: {value:?} is not `last`")),
            other => return Err(format!("unknown header key {other:?}")),
        }
    }
    case.expect = expect.ok_or("the header has no `# expect:` line")?;
    if case.messages.is_empty() {
        return Err("the header has no `# message:` line".into());
    }
    match case.expect {
        Expect::Condition if case.reason.is_none() => {
            return Err("expect: condition needs a `# reason:` line".into())
        }
        Expect::Admission
            if case.reason.is_some()
                || case.pool.is_some()
                || !case.healthy.is_empty()
                || !case.no_release.is_empty()
                || !case.release_fields.is_empty() =>
        {
            return Err("reason, pool, healthy, no-release and release-field are for expect: condition".into())
        }
        _ => {}
    }

    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| format!("the documents are not YAML: {e}"))?;
    let mut apps = Vec::new();
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        if document["kind"] == "NodePoolApplication" {
            apps.push(document);
        } else if document["kind"].is_string() && document["apiVersion"].is_string() {
            case.extra.push(document);
        } else {
            return Err("every document needs apiVersion and kind".into());
        }
    }
    let [app_doc] = apps.as_slice() else {
        return Err(format!("{} NodePoolApplications; a case has exactly one", apps.len()));
    };
    let body = serde_json::to_string(app_doc).map_err(|e| e.to_string())?;
    let placeholder = "\"${GENERATED}\"";
    case.body = match (generate, body.matches(placeholder).count()) {
        (Some(generate), 1) => body.replace(placeholder, &generated(generate)),
        (None, 0) => body,
        (Some(_), n) => return Err(format!("generate needs exactly one \"${{GENERATED}}\", found {n}")),
        (None, _) => return Err("\"${GENERATED}\" without a `# generate:` line".into()),
    };
    Ok(case)
}

fn parse_generate(value: &str) -> Result<Generate, String> {
    let bad = || format!("generate: {value:?} is not `huge-values <size>` or `deep-values <depth>`");
    let (what, amount) = value.split_once(' ').ok_or_else(bad)?;
    let amount = amount.trim();
    match what {
        "huge-values" => {
            let (digits, unit) =
                amount.split_at(amount.find(|c: char| !c.is_ascii_digit()).unwrap_or(amount.len()));
            let n: usize = digits.parse().map_err(|_| bad())?;
            let scale = match unit {
                "MiB" => 1024 * 1024,
                "KiB" => 1024,
                "" | "B" => 1,
                _ => return Err(bad()),
            };
            Ok(Generate::HugeValues(n * scale))
        }
        "deep-values" => Ok(Generate::DeepValues(amount.parse().map_err(|_| bad())?)),
        _ => Err(bad()),
    }
}

/// The generated values, as JSON text.
fn generated(generate: Generate) -> String {
    match generate {
        // Text a compressor cannot shrink, as certificates or encoded blobs
        // in values are: 1 KiB strings of pseudo-random characters.
        Generate::HugeValues(bytes) => {
            let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
            let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
            let entries: Vec<String> = (0..bytes.div_ceil(1024))
                .map(|i| {
                    let text: String = (0..1024 - 16)
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            char::from(alphabet[(state % 64) as usize])
                        })
                        .collect();
                    format!("\"blob-{i:05}\":\"{text}\"")
                })
                .collect();
            format!("{{{}}}", entries.join(","))
        }
        Generate::DeepValues(depth) => {
            format!("{}\"bottom\"{}", "{\"level\":".repeat(depth), "}".repeat(depth))
        }
    }
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

/// Whether an accepted case shows what it expects: `Ok` with the matching
/// reason and message, or `Err` with what it shows instead.
fn check_condition(
    case: &Case,
    view: Option<&AppView>,
    releases: &BTreeMap<(String, String), String>,
) -> Result<String, String> {
    let view = view.ok_or("the application is gone")?;
    let status = &view.status;
    let observed = status.get("observedGeneration").and_then(Value::as_i64);
    if observed.is_none() || observed != view.metadata.generation {
        return Err(format!("no status for generation {:?} (status: {status})", view.metadata.generation));
    }
    let reason = case.reason.as_deref().unwrap_or_default();
    let reasons: Vec<&str> = reason.split('|').map(str::trim).collect();
    let matches = |entry: &Value| {
        reasons.contains(&text(entry, "reason"))
            && case.messages.iter().all(|m| text(entry, "message").contains(m.as_str()))
    };
    let found = match &case.pool {
        Some(pool) => status
            .get("pools")
            .and_then(Value::as_array)
            .and_then(|pools| pools.iter().find(|p| text(p, "pool") == pool))
            .filter(|p| matches(p)),
        None => conditions(status).into_iter().find(|c| matches(c)),
    };
    let Some(found) = found else {
        return Err(format!(
            "no reason {reason:?} with message containing {:?}; status: {status}",
            case.messages
        ));
    };
    let label = naming::label_value(&case.app);
    for pool in &case.healthy {
        if !releases.contains_key(&(label.clone(), pool.clone())) {
            return Err(format!("healthy pool {pool} got no HelmRelease; status: {status}"));
        }
        let entry = status
            .get("pools")
            .and_then(Value::as_array)
            .and_then(|pools| pools.iter().find(|p| text(p, "pool") == pool));
        match entry {
            Some(p) if p["ready"] != "False" => {}
            other => return Err(format!("healthy pool {pool} has status {other:?}")),
        }
    }
    for pool in &case.no_release {
        if let Some(name) = releases.get(&(label.clone(), pool.clone())) {
            return Err(format!("pool {pool} got HelmRelease {name}, but must get none"));
        }
    }
    Ok(format!("{}: {}", text(found, "reason"), text(found, "message")))
}

async fn check_release_fields(client: &Client, namespace: &str, case: &Case) -> Result<(), String> {
    if case.release_fields.is_empty() {
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &helmrelease_resource());
    let selector = format!("{}={}", naming::LABEL_APPLICATION, naming::label_value(&case.app));
    let list = api.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?;
    if list.items.is_empty() {
        return Err("release-field: the application has no HelmRelease to look at".into());
    }
    for hr in &list.items {
        let value = serde_json::to_value(hr).map_err(|e| e.to_string())?;
        for (pointer, want) in &case.release_fields {
            let have = value.pointer(pointer);
            if have != Some(want) {
                return Err(format!(
                    "HelmRelease {}: {pointer} is {have:?}, want {want}",
                    hr.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    Ok(())
}

/// Creates a case's extra objects, then its application. `Ok(true)` when
/// the application was accepted.
async fn apply_case(client: &Client, namespace: &str, case: &Case) -> Result<bool, String> {
    for object in &case.extra {
        create_object(client, object).await?;
    }
    match (create_app(client, namespace, &case.body).await, case.expect) {
        (Ok(()), Expect::Condition) => Ok(true),
        (Ok(()), Expect::Admission) => {
            Err("the API server accepted the application; it must refuse it".into())
        }
        (Err(kube::Error::Api(status)), Expect::Admission) => {
            let missing: Vec<&String> =
                case.messages.iter().filter(|m| !status.message.contains(m.as_str())).collect();
            if missing.is_empty() {
                let shown: String = status.message.chars().take(160).collect();
                eprintln!("ok {}: refused at admission: {shown}", case.file);
                Ok(false)
            } else {
                Err(format!("refused, but the message lacks {missing:?}: {}", status.message))
            }
        }
        (Err(e), Expect::Admission) => Err(format!("refused without an API status: {e}")),
        (Err(e), Expect::Condition) => Err(format!("refused at admission, but must be accepted: {e}")),
    }
}

async fn create_object(client: &Client, object: &Value) -> Result<(), String> {
    let (group, version) = match text(object, "apiVersion").split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), text(object, "apiVersion").to_string()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, text(object, "kind"));
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("no API for {gvk:?}: {e}"))?;
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => {
            let ns = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            Api::namespaced_with(client.clone(), ns, &resource)
        }
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &dynamic)
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot create {} {:?}: {e}", text(object, "kind"), dynamic.metadata.name))
}

/// Deletes the cluster-scoped objects the cases made (namespaced ones go with the namespace).
async fn delete_cluster_objects(client: &Client, cases: &[Case]) {
    for object in cases.iter().flat_map(|c| &c.extra) {
        let (group, version) = text(object, "apiVersion").split_once('/').unwrap_or(("", ""));
        let gvk = GroupVersionKind::gvk(group, version, text(object, "kind"));
        if let Ok((resource, caps)) = kube::discovery::pinned_kind(client, &gvk).await {
            if caps.scope == kube::discovery::Scope::Cluster {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let _ = api.delete(text(&object["metadata"], "name"), &DeleteParams::default()).await;
            }
        }
    }
}

fn ingress_app(name: &str, vars: &Vars, spec: Value) -> Value {
    app_named(name, &vars.namespace, "ingress-gateway", CHART_VERSION, spec)
}

/// Applies the cases concurrently and waits until each has shown what it
/// expects or has run out of time; returns one line per failure.
async fn run_cases(client: &Client, namespace: &str, cases: &[&Case]) -> Vec<String> {
    let started = Instant::now();
    let applied = futures::future::join_all(cases.iter().map(|c| apply_case(client, namespace, c))).await;
    let mut failures = Vec::new();
    let mut pending: Vec<(&Case, Instant)> = Vec::new();
    for (case, result) in cases.iter().zip(applied) {
        match result {
            Ok(true) => pending.push((case, Instant::now() + CASE_TIMEOUT)),
            Ok(false) => {}
            Err(e) => failures.push(format!("{}: {e}", case.file)),
        }
    }
    // Shared with the polling closure, which runs again and again.
    let state = RefCell::new((pending, failures, BTreeMap::<String, String>::new()));
    wait_for("every accepted case to settle", CASE_TIMEOUT + Duration::from_secs(30), || async {
        let apps = list_apps(client, namespace).await;
        let releases = release_index(client, namespace).await;
        let pending = std::mem::take(&mut state.borrow_mut().0);
        let mut still = Vec::new();
        for (case, deadline) in pending {
            let verdict = match (&apps, &releases) {
                (Ok(apps), Ok(releases)) => check_condition(case, apps.get(&case.app), releases),
                (Err(e), _) | (_, Err(e)) => Err(format!("cannot read the namespace: {e}")),
            };
            let verdict = match verdict {
                Ok(found) => check_release_fields(client, namespace, case).await.map(|()| found),
                Err(e) => Err(e),
            };
            let mut state = state.borrow_mut();
            match verdict {
                Ok(found) => {
                    let shown: String = found.chars().take(160).collect();
                    eprintln!("ok {}: reported after {:.1?}: {shown}", case.file, started.elapsed())
                }
                Err(e) if Instant::now() < deadline => {
                    state.2.insert(case.file.clone(), e);
                    still.push((case, deadline));
                }
                Err(e) => state.1.push(format!("{}: after {CASE_TIMEOUT:?}: {e}", case.file)),
            }
        }
        let mut state = state.borrow_mut();
        let waiting: Vec<&str> = still.iter().map(|(c, _)| c.file.as_str()).collect();
        let report = format!("waiting for {waiting:?}: {:?}", state.2);
        state.0 = still;
        if state.0.is_empty() {
            Ok(())
        } else {
            Err(report)
        }
    })
    .await;
    let (_, failures, _) = state.into_inner();
    failures
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

/// The end of a controller's log, each line cut short: a client that cannot
/// decode a response logs all of it.
fn log_tail(controller: &RunningController) -> String {
    let text = std::fs::read_to_string(&controller.log).unwrap_or_default();
    let lines: Vec<String> = text.lines().map(|l| l.chars().take(400).collect()).collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The controller still answers /healthz and its log has no panic.
async fn controller_checks(controller: &RunningController, which: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let health = reqwest::get(format!("http://{}/healthz", controller.metrics_addr)).await;
    if !health.is_ok_and(|r| r.status().is_success()) {
        failures.push(format!("{which} no longer answers /healthz"));
    }
    let log = std::fs::read_to_string(&controller.log).unwrap_or_default();
    if log.contains("panicked") {
        failures.push(format!("{which} panicked; see {}", controller.log.display()));
    }
    failures
}

/// The bystander's releases are exactly as they were, and it is still READY 2/2.
async fn bystander_checks(
    client: &Client,
    namespace: &str,
    before: &BTreeMap<String, (Value, Value)>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let after = bystander_releases(client, namespace).await;
    if &after != before {
        failures.push(format!("the bystander's releases changed:\nbefore {before:?}\nafter {after:?}"));
    }
    match list_apps(client, namespace).await {
        Ok(apps) => match apps.get(BYSTANDER).map(|v| ready_for_generation(v, "2/2")) {
            Some(Ok(())) => {}
            other => failures.push(format!("the bystander is no longer READY 2/2: {other:?}")),
        },
        Err(e) => failures.push(format!("cannot read the applications: {e}")),
    }
    failures
}

/// A healthy application created now gets its release and a status.
async fn canary_checks(
    client: &Client,
    vars: &Vars,
    name: &str,
    controller: &RunningController,
) -> Vec<String> {
    let canary = ingress_app(
        name,
        vars,
        json!({ "pools": { "names": [vars.pool_a] }, "helmRelease": { "suspend": true } }),
    );
    if let Err(e) = create_app(client, &vars.namespace, &canary.to_string()).await {
        return vec![format!("cannot create the application {name}: {e}")];
    }
    let deadline = Instant::now() + CANARY_TIMEOUT;
    loop {
        let releases = release_index(client, &vars.namespace).await.unwrap_or_default();
        let apps = list_apps(client, &vars.namespace).await.unwrap_or_default();
        let observed = apps.get(name).is_some_and(|v| {
            v.status.get("observedGeneration").and_then(Value::as_i64) == v.metadata.generation
        });
        if observed && releases.contains_key(&(name.to_string(), vars.pool_a.clone())) {
            return Vec::new();
        }
        if Instant::now() > deadline {
            return vec![format!(
                "the healthy application {name}, created after the cases, got no release or no status \
                 within {CANARY_TIMEOUT:?}: the controller is stalled; its log ends:\n{}",
                log_tail(controller)
            )];
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The header format itself, without a cluster: every file of the corpus
/// parses, and a header that cannot be understood is an error, never a skip.
mod header {
    use super::*;

    fn vars() -> Vars {
        Vars {
            namespace: "ns".into(),
            prefix: "pre".into(),
            pool_a: "pre-a".into(),
            pool_b: "pre-b".into(),
        }
    }

    const APP: &str = "apiVersion: apps.fanout.dev/v1alpha1\nkind: NodePoolApplication\n\
                       metadata: { name: \"${APP}\", namespace: \"${NAMESPACE}\" }\n\
                       spec: { values: \"${GENERATED}\" }\n";

    #[test]
    fn every_corpus_file_parses() {
        let mut failures = Vec::new();
        let cases = load_corpus(&vars(), &mut failures);
        assert!(failures.is_empty(), "{failures:#?}");
        assert!((40..=60).contains(&cases.len()), "{} cases", cases.len());
        assert!(cases.iter().any(|c| c.expect == Expect::Admission));
        assert!(cases.iter().any(|c| !c.healthy.is_empty()));
    }

    #[test]
    fn a_full_header_is_read_and_substituted() {
        let text = format!(
            "# A description line: with a colon.\n# expect: condition\n# reason: A | B\n\
             # pool: ${{POOL_B}}\n# message: one\n# message: two\n# healthy: ${{POOL_A}}\n\
             # no-release: ${{POOL_B}}\n# release-field: /spec/x = {{\"a\": 1}}\n# order: last\n\
             # generate: deep-values 3\n{APP}"
        );
        let case = parse_case("07-something.yaml", &text, &vars()).unwrap();
        assert_eq!(case.app, "case-07");
        assert_eq!((case.expect, case.reason.as_deref()), (Expect::Condition, Some("A | B")));
        assert_eq!(case.pool.as_deref(), Some("pre-b"));
        assert_eq!(case.messages, ["one", "two"]);
        assert_eq!((case.healthy, case.no_release), (vec!["pre-a".into()], vec!["pre-b".into()]));
        assert_eq!(case.release_fields, [("/spec/x".to_string(), json!({ "a": 1 }))]);
        assert!(case.last);
        let body: Value = serde_json::from_str(&case.body).unwrap();
        assert_eq!(body["metadata"], json!({ "name": "case-07", "namespace": "ns" }));
        assert_eq!(body["spec"]["values"], json!({ "level": { "level": { "level": "bottom" } } }));
    }

    #[test]
    fn huge_values_have_the_size_asked_for() {
        let text = format!("# expect: admission\n# message: m\n# generate: huge-values 64KiB\n{APP}");
        let case = parse_case("01-huge.yaml", &text, &vars()).unwrap();
        assert!((64 * 1024..66 * 1024).contains(&case.body.len()), "{}", case.body.len());
    }

    #[test]
    fn headers_that_cannot_be_understood_are_errors() {
        let plain = APP.replace("\"${GENERATED}\"", "{}");
        for (header, why) in [
            ("# message: m\n", "no `# expect:`"),
            ("# expect: admission\n", "no `# message:`"),
            ("# expect: sometimes\n# message: m\n", "is not admission or condition"),
            ("# expect: admission\n# mesage: m\n", "unknown header key \"mesage\""),
            ("# expect: condition\n# message: m\n", "needs a `# reason:`"),
            ("# expect: admission\n# message: m\n# pool: p\n", "are for expect: condition"),
            ("# expect: admission\n# message: ${POOL_C}\n", "unknown placeholder"),
            ("# expect: admission\n# message: m\n# generate: wide-values 3\n", "is not `huge-values"),
            ("# expect: admission\n# message: m\n# order: first\n", "is not `last`"),
        ] {
            let err = parse_case("01-x.yaml", &format!("{header}{plain}"), &vars()).unwrap_err();
            assert!(err.contains(why), "{header:?}: {err}");
        }
        let ok = "# expect: admission\n# message: m\n";
        let err = parse_case("1-x.yaml", &format!("{ok}{plain}"), &vars()).unwrap_err();
        assert!(err.contains("NN-short-description"), "{err}");
        let err = parse_case("01-x.yaml", &format!("{ok}{APP}"), &vars()).unwrap_err();
        assert!(err.contains("without a `# generate:`"), "{err}");
        let err = parse_case("01-x.yaml", &format!("{ok}{plain}---\n{plain}"), &vars()).unwrap_err();
        assert!(err.contains("2 NodePoolApplications"), "{err}");
    }
}
