//! One application over thousands of pools, planned as the controller
//! plans it: observed from watch caches and planned, at its first fan-out,
//! at rest from scratch, at rest with the last plan's memo, and after one
//! release changed. The caches are filled in memory (a stand-in for the
//! API server's watch: the objects enter them as a watch would bring
//! them), so the figures are the controller's CPU alone.
//!
//! Then the resync again, from scratch and with the memo, with
//! maintenance windows: two of
//! the application's (one for a selector), and a pool annotation on a
//! tenth of the pools, in 24 distinct texts (sites of a few regions) and
//! in 1,000 (every annotated pool its own hours), beside the same resync
//! without windows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use nodepool_fanout::api::{naming, NodePoolApplication, PoolKind};
use nodepool_fanout::pools::kind;
use nodepool_fanout::reconcile::observe::{
    self, CachedPool, CachedRelease, Caches, PoolApi, PoolCache, PoolIndex, ReleaseWriter, WatchedRelease,
};
use nodepool_fanout::reconcile::plan::{self, Memo, Plan, PlanInput};
use serde_json::{json, Value};

use super::{peak_rss_kib, reset_peak_rss};

/// The caches a reconcile reads, and the writers of the pools' and the
/// releases' caches, through which they change as watch events would
/// change them.
struct Cluster {
    caches: Caches,
    pools: Writer<CachedPool>,
    /// The pools' label index, kept as the controller's pool writer keeps
    /// it (`runtime::changes`).
    pool_index: Arc<PoolIndex>,
    releases: ReleaseWriter,
}

impl Cluster {
    /// `pools` pools, pool `i` with the maintenance window `own(i)`.
    fn new(pools: usize, own: impl Fn(usize) -> Option<String>) -> Self {
        let objects = kind::objects(PoolKind::OpenYurt).expect("OpenYurt's pool objects");
        let api = PoolApi::new(ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps.openyurt.io", "v1beta2", "NodePool"),
            "nodepools",
        ));
        let pools: Vec<CachedPool> = (0..pools)
            .map(|i| {
                let mut pool = json!({
                    "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
                    "metadata": { "name": format!("site-{i:05}"), "resourceVersion": "1",
                                  "labels": { "region": "east" } },
                    "spec": { "type": "Edge" }
                });
                if let Some(window) = own(i) {
                    pool["metadata"]["annotations"][naming::ANNOTATION_MAINTENANCE_WINDOW] = json!(window);
                }
                let pool: DynamicObject = serde_json::from_value(pool).expect("a NodePool");
                CachedPool::from_object(objects, pool)
            })
            .collect();
        // Its one writer keeps the index with the cache, as the
        // controller's does.
        let mut releases = ReleaseWriter::default();
        releases.apply_watcher_event(&watcher::Event::Init);
        releases.apply_watcher_event(&watcher::Event::InitDone);
        let pool_writer = observe::listed(pools, api.clone());
        let pool_index = Arc::new(PoolIndex::of(pool_writer.as_reader().state()));
        let caches = Caches {
            pools: BTreeMap::from([(
                PoolKind::OpenYurt,
                PoolCache {
                    store: pool_writer.as_reader(),
                    api,
                    index: Some(Arc::clone(&pool_index)),
                },
            )]),
            unserved: BTreeMap::new(),
            nodes: observe::listed(Vec::new(), ()).as_reader(),
            releases: releases.store(),
            release_index: Some(releases.index()),
            history: observe::listed(Vec::new(), ()).as_reader(),
        };
        Self {
            caches,
            pools: pool_writer,
            pool_index,
            releases,
        }
    }

    /// A release as the watch brings it: into the cache, read as it enters.
    fn arrive(&mut self, release: Value) {
        let object: DynamicObject = serde_json::from_value(release).expect("a HelmRelease");
        let cached = CachedRelease::from_object(object);
        self.releases.apply_watcher_event(&watcher::Event::Apply(cached));
    }
}

impl Cluster {
    /// Sites of other shards' applications beside the application's,
    /// `count` in all, each a pool it does not select (another region)
    /// with a release of its own application and Helm release, cut down
    /// as an instance keeps it (`written`: a release of the application,
    /// their model).
    /// Says how much the process's resident memory grew (KiB) as their
    /// pools entered the cache, then as their releases did.
    fn others_up_to(&mut self, written: &Value, count: usize) -> (u64, u64) {
        let objects = kind::objects(PoolKind::OpenYurt).expect("OpenYurt's pool objects");
        let had = self.caches.releases.state().len();
        let added = had.saturating_sub(self.owned())..count;
        let before = super::proc_status_kib("VmRSS:");
        for i in added.clone() {
            let pool = json!({
                "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
                "metadata": { "name": format!("other-{i:06}"), "resourceVersion": "1",
                              "labels": { "region": "west" } },
                "spec": { "type": "Edge" }
            });
            let pool: DynamicObject = serde_json::from_value(pool).expect("a NodePool");
            let pool = CachedPool::from_object(objects, pool);
            let store = self.pools.as_reader();
            let at = kube::runtime::reflector::ObjectRef::from_obj_with(
                &pool,
                self.caches.pools[&PoolKind::OpenYurt].api.clone(),
            );
            let old = store.get(&at);
            self.pools.apply_watcher_event(&watcher::Event::Apply(pool));
            self.pool_index.replace(old.as_ref(), store.get(&at).as_ref());
        }
        let pooled = super::proc_status_kib("VmRSS:");
        for i in added {
            let mut release = ready(written.clone(), 100_000 + i, 2_000_000 + i);
            let name = format!("other-{}-other-{i:06}", i / 1000);
            release["metadata"]["name"] = json!(name);
            release["metadata"]["ownerReferences"][0]["name"] = json!(format!("other-{}", i / 1000));
            release["metadata"]["ownerReferences"][0]["uid"] = json!(format!("other-uid-{}", i / 1000));
            release["spec"]["releaseName"] = json!(name);
            let object: DynamicObject = serde_json::from_value(release).expect("a HelmRelease");
            let cached = CachedRelease::of_another_shard(object);
            self.releases.apply_watcher_event(&watcher::Event::Apply(cached));
        }
        let released = super::proc_status_kib("VmRSS:");
        (pooled.saturating_sub(before), released.saturating_sub(pooled))
    }

    /// How many releases the application owns in the cache.
    fn owned(&self) -> usize {
        let state = self.caches.releases.state();
        state.iter().filter(|r| !r.cut_down).count()
    }
}

/// One reconcile's observe and plan, as the controller runs them (no
/// nodes, no chart), timed apart.
fn reconcile(
    cluster: &Cluster,
    app: &NodePoolApplication,
    memo: Option<&Memo>,
) -> (Plan, Duration, Duration) {
    let (planned, observing, planning) = reconcile_reading(cluster, app, memo, true);
    (planned.expect("with no rest to compare, every reconcile plans"), observing, planning)
}

/// One reconcile as [`reconcile`] runs it, with the revision history read
/// or not; ended without a plan when `memo` holds the rest of a plan made
/// from the same input ([`plan::at_rest`]), as the controller ends it.
fn reconcile_reading(
    cluster: &Cluster,
    app: &NodePoolApplication,
    memo: Option<&Memo>,
    read_history: bool,
) -> (Option<Plan>, Duration, Duration) {
    let start = Instant::now();
    let observed = observe::observe(&cluster.caches, app);
    let history = read_history.then(|| cluster.caches.history_of(app));
    let observing = start.elapsed();
    let start = Instant::now();
    let pools: Vec<_> = observed.pools.iter().map(|p| &p.pool).collect();
    let input = PlanInput {
        history: history.as_ref(),
        nodes: Some(&BTreeMap::new()),
        app,
        pools: &pools,
        owned: observed.owned,
        others: &observed.others,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref: None,
        chart: None,
        hold: None,
        unserved: observed.unserved.as_deref(),
        clock_since: None,
        memo,
        // Building and deciding every pool, as an installed fleet does.
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    };
    let rest = memo.and_then(Memo::rest);
    if rest.and_then(|rest| plan::at_rest(&input, rest)).is_some() {
        return (None, observing, start.elapsed());
    }
    (Some(plan::plan(&input)), observing, start.elapsed())
}

/// The application over `pools` pools: its first fan-out, then resyncs.
pub fn at_scale(pools: usize) {
    let app = super::named_application(
        "fleet",
        json!({ "controller": { "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" } } }),
    );
    let mut cluster = Cluster::new(pools, |_| None);
    println!("one application over {pools} pools, observed from watch caches filled in memory, then planned");
    println!("(release build, best of 3)");
    println!();
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>12} {:>9}",
        "case", "observe", "plan", "total", "peak RSS +", "written"
    );
    // Best of three, as the cases above: on a shared 2-core machine one
    // run of a 100 ms plan moves by half.
    let measure = |label: &str, cluster: &Cluster, app: &NodePoolApplication, memo: Option<&Memo>| {
        reset_peak_rss();
        let before = peak_rss_kib();
        let (mut planned, mut observing, mut planning) = reconcile(cluster, app, memo);
        for _ in 1..3 {
            drop(planned);
            let (again, observed, planned_in) = reconcile(cluster, app, memo);
            (planned, observing, planning) = (again, observing.min(observed), planning.min(planned_in));
        }
        let peak = peak_rss_kib().saturating_sub(before);
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
        println!(
            "{label:<44} {:>9} {:>9} {:>9} {:>12} {:>9}",
            ms(observing),
            ms(planning),
            ms(observing + planning),
            format!("{:.1} MiB", peak as f64 / 1024.0),
            planned.apply.len()
        );
        planned
    };
    let first = measure("first fan-out", &cluster, &app, None);
    // Every release as helm-controller leaves it: written, Ready. Read as
    // it enters the cache, once (the cost of a release's watch event).
    let start = Instant::now();
    settle(&mut cluster, &first);
    let entered = start.elapsed();
    let changed = first.apply.first().map(|d| ready(d.object(), 0, 999_999));
    let first_written = first.apply.first().map(|d| d.object()).expect("a release was written");
    drop(first);
    let resync = measure("resync, every release in place, from scratch", &cluster, &app, None);
    let rest = measure("resync, with the last plan's memo", &cluster, &app, Some(&resync.memo));
    // One release turns Ready again (a new resourceVersion): that pool
    // alone is read again.
    cluster.arrive(changed.expect("a release was written"));
    let changed = measure("one release changed, with the memo", &cluster, &app, Some(&rest.memo));
    // Other shards' sites: their pools, and their releases in the same
    // namespace, cut down as an instance keeps them. What a reconcile
    // reads should not grow with them.
    let mut memo = changed.memo;
    let mut held = Vec::new();
    for others in [pools, 9 * pools] {
        held.push(cluster.others_up_to(&first_written, others));
        let label = format!("the same, {others} other shards' sites beside");
        memo = measure(&label, &cluster, &app, Some(&memo)).memo;
    }
    // Read from the second step, 8 × pools sites: the first can fill
    // memory the fan-out's plans freed, which the process's size does not
    // show.
    if let Some((pools_kib, releases_kib)) = held.last() {
        let each = |kib: u64| kib as f64 * 1024.0 / (8 * pools) as f64;
        println!(
            "(what a shard holds of another shard's site, as its resident memory grew from {} to {} of \
             them: its pool {:.0} bytes, its release, cut down, {:.0} bytes)",
            pools,
            9 * pools,
            each(*pools_kib),
            each(*releases_kib)
        );
    }
    println!(
        "(each release read as it entered the cache: {:.1} µs, once per watch event)",
        entered.as_secs_f64() * 1e6 / pools as f64
    );
    let (shallow, whole, another) = decode(&ready(first_written.clone(), 0, 1), pools);
    println!(
        "(each watch event's text decoded into the cache, its managed fields' field sets \
         skipped: {shallow:.1} µs; read whole: {whole:.1} µs; another shard's release, cut down \
         as it is read: {another:.1} µs)"
    );
    // At rest as the controller finds it: the status the plan reports
    // written back, so that the next plan over the same input is at rest
    // and leaves its rest in the memo. The bench writes no revision
    // history, so none is read here: a plan that reads an empty one
    // always has a record to write.
    let mut written = app.clone();
    let (settled, _, _) = reconcile_reading(&cluster, &written, Some(&memo), false);
    written.status = settled.map(|p| p.status());
    let (with_rest, _, _) = reconcile_reading(&cluster, &written, Some(&memo), false);
    let with_rest = with_rest.map(|p| p.memo).expect("a plan");
    assert!(with_rest.rest().is_some(), "the plan with its status written back is at rest");
    let best = |memo: &Memo| {
        let mut best = (Duration::MAX, Duration::MAX, false);
        for _ in 0..3 {
            let (planned, observing, planning) = reconcile_reading(&cluster, &written, Some(memo), false);
            best = (best.0.min(observing), best.1.min(planning), planned.is_none());
        }
        best
    };
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
    let mut no_rest = with_rest.clone();
    no_rest.take_rest();
    for (label, memo) in [
        ("the same, status written, history not read", &no_rest),
        ("the same, the last plan at rest: not planned", &with_rest),
    ] {
        let (observing, planning, rested) = best(memo);
        println!(
            "{label:<44} {:>9} {:>9} {:>9} {:>12} {:>9}",
            ms(observing),
            ms(planning),
            ms(observing + planning),
            if rested { "at rest" } else { "planned" },
            0
        );
    }
    println!("(goal: a resync at rest, observe and plan with the memo or the comparison, within 50 ms in every run)");
    drop((cluster, resync, rest, memo, with_rest, no_rest));
    println!();
    println!("the resync with maintenance windows: two of the application's, one by selector,");
    println!("and a pool annotation on a tenth of the pools");
    println!();
    let windowed = with_windows(&app);
    let cases: [(&str, &NodePoolApplication, Option<usize>); 3] = [
        ("no windows", &app, None),
        ("windows, annotations of 24 texts", &windowed, Some(24)),
        ("windows, annotations of 1,000 texts", &windowed, Some(1_000)),
    ];
    for (label, app, distinct) in cases {
        let mut cluster = Cluster::new(pools, |i| distinct.and_then(|d| own_window(i, d)));
        let (first, _, _) = reconcile(&cluster, app, None);
        settle(&mut cluster, &first);
        drop(first);
        let resync = measure(&format!("{label}, scratch"), &cluster, app, None);
        measure(&format!("{label}, memo"), &cluster, app, Some(&resync.memo));
    }
}

/// Every release `plan` wrote, in the cache as helm-controller leaves it.
fn settle(cluster: &mut Cluster, plan: &Plan) {
    for (i, desired) in plan.apply.iter().enumerate() {
        cluster.arrive(ready(desired.object(), i, 1000 + i));
    }
}

/// `app` with two maintenance windows: weeknights in Berlin for every
/// pool, weekend mornings for the pools of region east.
fn with_windows(app: &NodePoolApplication) -> NodePoolApplication {
    let mut app = app.clone();
    app.spec.rollout = Some(
        serde_json::from_value(json!({ "windows": [
            { "schedule": "0 22 * * 1-5", "duration": "4h", "timeZone": "Europe/Berlin" },
            { "schedule": "0 2 * * sat,sun", "duration": "6h", "timeZone": "Asia/Shanghai",
              "pools": { "selector": { "matchLabels": { "region": "east" } } } }
        ]}))
        .expect("rollout settings"),
    );
    app
}

/// Pool `i`'s own window: every tenth pool's, in one of `distinct` texts.
fn own_window(i: usize, distinct: usize) -> Option<String> {
    let k = (i / 10) % distinct;
    i.is_multiple_of(10).then(|| {
        format!(
            r#"{{"schedule": "{} {} * * *", "duration": "3h", "timeZone": "America/Chicago"}}"#,
            k % 60,
            (k / 60) % 24
        )
    })
}

/// The time to decode one watch event of `release` into the cache, as the
/// controller decodes it (field by field, the managed fields' field sets
/// skipped over), read whole first (as a plain decoder would), and cut
/// down as it is read (another shard's), in µs, over `times` events. The managed fields are those a release carries on
/// the cluster: our apply of its labels, owner and spec, and
/// helm-controller's finalizer and status.
fn decode(release: &Value, times: usize) -> (f64, f64, f64) {
    let mut release = release.clone();
    let manager = |manager: &str, operation: &str, subresource: Option<&str>, fields: Value| {
        let mut entry = json!({ "manager": manager, "operation": operation, "apiVersion": "helm.toolkit.fluxcd.io/v2",
                                "time": "2026-11-23T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields });
        if let Some(subresource) = subresource {
            entry["subresource"] = json!(subresource);
        }
        entry
    };
    let ours = json!({ "f:metadata": { "f:labels": field_set(&release["metadata"]["labels"]),
                                       "f:ownerReferences": { ".": {}, "k:{\"uid\":\"u\"}": {} } },
                       "f:spec": field_set(&release["spec"]) });
    let finalizer =
        json!({ "f:metadata": { "f:finalizers": { ".": {}, "v:\"finalizers.fluxcd.io\"": {} } } });
    let status = json!({ "f:status": field_set(&release["status"]) });
    release["metadata"]["managedFields"] = json!([
        manager("nodepool-fanout", "Apply", None, ours),
        manager("helm-controller", "Update", None, finalizer),
        manager("helm-controller", "Update", Some("status"), status),
    ]);
    let text = serde_json::to_string(&release).expect("a release as text");
    let start = Instant::now();
    for _ in 0..times {
        let cached: CachedRelease = serde_json::from_str(&text).expect("a release decoded");
        std::hint::black_box(cached);
    }
    let shallow = start.elapsed();
    let start = Instant::now();
    for _ in 0..times {
        let object: DynamicObject = serde_json::from_str(&text).expect("a release decoded");
        std::hint::black_box(CachedRelease::from_object(object));
    }
    let whole = start.elapsed();
    let start = Instant::now();
    for _ in 0..times {
        let read: WatchedRelease = serde_json::from_str(&text).expect("a release decoded");
        std::hint::black_box(CachedRelease::of_another_shard(read.0));
    }
    let another = start.elapsed();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / times as f64;
    (per(shallow), per(whole), per(another))
}

/// The field set server-side apply records for `value`: each field of an
/// object by name, down to its leaves.
fn field_set(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut set = serde_json::Map::from_iter([(".".to_string(), json!({}))]);
            for (key, value) in map {
                set.insert(format!("f:{key}"), field_set(value));
            }
            Value::Object(set)
        }
        _ => json!({}),
    }
}

/// A written release as the API server and helm-controller leave it.
fn ready(mut release: Value, i: usize, resource_version: usize) -> Value {
    release["metadata"]["uid"] = json!(format!("uid-{i:08}"));
    release["metadata"]["resourceVersion"] = json!(resource_version.to_string());
    release["metadata"]["generation"] = json!(1);
    release["metadata"]["creationTimestamp"] = json!("2026-11-23T10:00:00Z");
    release["status"] = json!({ "observedGeneration": 1, "conditions": [{
        "type": "Ready", "status": "True", "reason": "InstallSucceeded",
        "message": "Helm install succeeded", "observedGeneration": 1
    }]});
    release
}
