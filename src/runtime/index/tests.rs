use super::*;
use kube::runtime::reflector;

fn interest(kind: PoolKind) -> Interest {
    Interest {
        kind,
        namespace: "edge".into(),
        selection: PoolSelection::default(),
        membership: Membership::Label("pool".into()),
        chart_source: None,
    }
}

#[test]
fn a_reconcile_of_an_application_it_forgot_is_not_recorded() {
    let (store, _writer) = served(&["a"]);
    let index = AppIndex::new(Arc::default(), store);
    let app = ObjectRef::<AppMeta>::new("a").within("ns");
    assert!(!index.reconciled(&app, Duration::from_secs(2)), "never read");
    index.read(app.clone(), interest(PoolKind::OpenYurt));
    assert!(index.reconciled(&app, Duration::from_secs(2)));
    assert_eq!(index.wake_window(&app), Duration::from_secs(20));
    index.read(app.clone(), interest(PoolKind::KubeEdge));
    assert_eq!(index.wake_window(&app), Duration::from_secs(20), "a new read keeps the time");
    index.forget(&app);
    assert!(!index.reconciled(&app, Duration::from_secs(2)));
    assert_eq!(index.wake_window(&app), wake_window(None));
}

fn served(apps: &[&str]) -> (Store<AppMeta>, reflector::store::Writer<AppMeta>) {
    let (store, mut writer) = reflector::store::<AppMeta>();
    for name in apps {
        writer.apply_watcher_event(&watcher::Event::Apply(meta(name)));
    }
    (store, writer)
}

fn meta(name: &str) -> AppMeta {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": name, "namespace": "ns", "uid": format!("uid-{name}") }
    }))
    .unwrap()
}

/// Everything kept of `name`: a memo, a failure streak, a chart wait,
/// and its metric series.
fn remember_everything(index: &AppIndex, name: &str) -> ObjectRef<AppMeta> {
    let app = ObjectRef::<AppMeta>::new(name).within("ns");
    index.read(app.clone(), interest(PoolKind::OpenYurt));
    let memo = crate::reconcile::plan::Memo::for_tests(3);
    index.keep_memo(&app, &format!("uid-{name}"), memo);
    assert_eq!(index.failed(&app), 1);
    assert_eq!(index.chart_waited(&app), 1);
    index.set_pools(
        &app,
        PoolCounts {
            selected: 3,
            ready: 2,
            offline: 0,
        },
    );
    index.set_info(&app, "True", false);
    assert!(index.reconciled(&app, Duration::from_secs(2)));
    app
}

fn series_of(metrics: &Metrics, name: &str) -> Vec<String> {
    let text = metrics.encode().unwrap();
    let labels = [format!(r#"application="{name}""#), format!(r#"name="{name}""#)];
    text.lines()
        .filter(|l| labels.iter().any(|s| l.contains(s)))
        .map(String::from)
        .collect()
}

#[test]
fn a_delete_event_forgets_everything_kept_of_the_application() {
    let metrics = Arc::new(Metrics::default());
    let (store, mut writer) = served(&["gone", "stays"]);
    let index = AppIndex::new(metrics.clone(), store);
    let gone = remember_everything(&index, "gone");
    let stays = remember_everything(&index, "stays");
    assert!(!series_of(&metrics, "gone").is_empty(), "its series are there");
    // Deleted without our finalizer: no reconcile finalizes it, and the
    // watch's delete event is all that says it went.
    let deleted = watcher::Event::Delete(meta("gone"));
    writer.apply_watcher_event(&deleted);
    index.watched(&deleted);
    assert!(index.memo(&gone, "uid-gone").is_none(), "the memo");
    assert_eq!(index.failed(&gone), 0, "the failure streak, and no new one for what is gone");
    assert_eq!(index.chart_waited(&gone), 0, "the chart's waits");
    assert!(!index.reconciled(&gone, Duration::from_secs(2)), "the index entry");
    assert_eq!(series_of(&metrics, "gone"), Vec::<String>::new(), "its metric series");
    assert_eq!(index.len(), 1);
    // The other application keeps all of it.
    assert!(index.memo(&stays, "uid-stays").is_some());
    assert_eq!(index.failed(&stays), 2);
    assert!(!series_of(&metrics, "stays").is_empty());
}

#[test]
fn a_relist_forgets_what_left_while_the_watch_was_down() {
    let metrics = Arc::new(Metrics::default());
    let (store, mut writer) = served(&["left", "stays"]);
    let index = AppIndex::new(metrics.clone(), store);
    remember_everything(&index, "left");
    remember_everything(&index, "stays");
    // Deleted, or out of this shard, while the watch was down: the
    // relist does not list it, and no delete event says so.
    for event in [
        watcher::Event::Init,
        watcher::Event::InitApply(meta("stays")),
        watcher::Event::InitDone,
    ] {
        writer.apply_watcher_event(&event);
        index.watched(&event);
    }
    assert_eq!(index.len(), 1);
    assert_eq!(series_of(&metrics, "left"), Vec::<String>::new());
    assert!(!series_of(&metrics, "stays").is_empty());
}

#[test]
fn a_reconcile_under_way_when_its_application_went_leaves_nothing_behind() {
    let metrics = Arc::new(Metrics::default());
    let (store, mut writer) = served(&["gone"]);
    let index = AppIndex::new(metrics.clone(), store);
    let app = ObjectRef::<AppMeta>::new("gone").within("ns");
    let deleted = watcher::Event::Delete(meta("gone"));
    writer.apply_watcher_event(&deleted);
    index.watched(&deleted);
    // What the reconcile does after the delete event: nothing is kept.
    index.read(app.clone(), interest(PoolKind::OpenYurt));
    index.keep_memo(&app, "uid-gone", crate::reconcile::plan::Memo::for_tests(1));
    index.set_pools(
        &app,
        PoolCounts {
            selected: 1,
            ready: 1,
            offline: 0,
        },
    );
    index.set_info(&app, "True", false);
    assert!(!index.reconciled(&app, Duration::from_secs(1)));
    assert_eq!(index.failed(&app), 0);
    assert_eq!(index.len(), 0);
    assert_eq!(series_of(&metrics, "gone"), Vec::<String>::new());
}

#[test]
fn finalize_forgets_as_a_delete_does() {
    let metrics = Arc::new(Metrics::default());
    let (store, _writer) = served(&["done"]);
    let index = AppIndex::new(metrics.clone(), store);
    let app = remember_everything(&index, "done");
    index.forget(&app);
    assert_eq!(index.len(), 0);
    assert!(index.memo(&app, "uid-done").is_none());
    assert_eq!(series_of(&metrics, "done"), Vec::<String>::new());
}

#[test]
fn a_memo_is_of_one_object_not_of_a_name() {
    let (store, _writer) = served(&["a"]);
    let index = AppIndex::new(Arc::default(), store);
    let app = remember_everything(&index, "a");
    assert!(index.memo(&app, "uid-a").is_some());
    assert!(index.memo(&app, "uid-of-a-new-a").is_none(), "deleted and made again under its name");
}

#[test]
fn any_reconcile_without_error_ends_the_failure_streak() {
    let (store, _writer) = served(&["a"]);
    let index = AppIndex::new(Arc::default(), store);
    let app = ObjectRef::<AppMeta>::new("a").within("ns");
    assert_eq!((index.failed(&app), index.failed(&app)), (1, 2));
    index.settle(&app, false);
    assert_eq!(index.failed(&app), 3, "an error keeps the streak");
    index.settle(&app, true);
    assert_eq!(index.failed(&app), 1, "the next starts over");
    assert_eq!((index.chart_waited(&app), index.chart_waited(&app)), (1, 2));
    index.chart_ready(&app);
    assert_eq!(index.chart_waited(&app), 1);
}

#[test]
fn creates_are_waited_for_until_the_cache_shows_them_and_no_longer() {
    let (store, _writer) = served(&["a"]);
    let index = AppIndex::new(Arc::default(), store);
    let app = ObjectRef::<AppMeta>::new("a").within("ns");
    index.read(app.clone(), interest(PoolKind::OpenYurt));
    let nothing_seen = |_: &str| false;
    assert_eq!(index.creates_unseen(&app, &nothing_seen), None, "nothing created yet");
    index.created(&app, vec!["r1".into(), "r2".into()]);
    assert_eq!(index.creates_unseen(&app, &nothing_seen), Some(2));
    assert_eq!(index.creates_unseen(&app, &|name: &str| name == "r1"), Some(1));
    // r1, seen once, is not looked up again.
    assert_eq!(index.creates_unseen(&app, &|name: &str| name == "r2"), None, "all seen");
    assert_eq!(index.creates_unseen(&app, &nothing_seen), None, "forgotten once seen");
    index.created(&app, Vec::new());
    assert_eq!(index.creates_unseen(&app, &nothing_seen), None, "a reconcile that created nothing");
    // Past the bound, planning goes ahead whatever the cache shows.
    index.created(&app, vec!["r3".into()]);
    index.update(&app, |entry| {
        if let Some((since, _)) = entry.creates_unseen.as_mut() {
            *since -= CREATES_SEEN_WITHIN + Duration::from_secs(1);
        }
    });
    assert_eq!(index.creates_unseen(&app, &nothing_seen), None, "waited long enough");
    assert_eq!(index.creates_unseen(&app, &nothing_seen), None);
}
