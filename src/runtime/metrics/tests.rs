use super::*;

#[test]
fn metrics_are_exposed_by_name_and_labels() {
    let m = Metrics::default();
    m.observe_reconcile("success", Duration::from_millis(20));
    m.observe_reconcile("ApiError", Duration::from_millis(20));
    m.set_pools(
        "edge",
        "ingress",
        PoolCounts {
            selected: 3,
            ready: 2,
            offline: 1,
        },
    );
    m.observe_object("edge", "ingress", Duration::from_millis(20));
    let was = Metrics::info_labels("edge", "ingress", "False", false);
    m.set_info(None, &was);
    let info = Metrics::info_labels("edge", "ingress", "True", false);
    m.set_info(Some(&was), &info);
    m.set_leader(true);
    m.observe_api_error("apply", "helmreleases.helm.toolkit.fluxcd.io", "409");
    m.observe_notification("delivered", "error");
    let within = ("error-rate".to_string(), "within");
    m.observe_answers("edge", "ingress", &[within.clone(), within, ("error-rate".into(), "unanswered")]);
    let text = m.encode().unwrap();
    assert!(
        text.contains(r#"nodepool_fanout_notifications_total{result="delivered",severity="error"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"nodepool_fanout_reconciles_total{result="success"} 1"#), "{text}");
    assert!(
    text.contains(
        r#"nodepool_fanout_analysis_answers_total{namespace="edge",application="ingress",check="error-rate",result="within"} 2"#
    ),
    "{text}"
);
    assert!(text.contains(r#"nodepool_fanout_reconciles_total{result="ApiError"} 1"#), "{text}");
    assert!(
        text.contains(r#"nodepool_fanout_pools{namespace="edge",application="ingress"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"nodepool_fanout_ready_pools{namespace="edge",application="ingress"} 2"#),
        "{text}"
    );
    assert!(text.contains("nodepool_fanout_reconcile_duration_seconds_count 2"), "{text}");
    assert!(
        text.contains(
            r#"nodepool_fanout_api_errors_total{verb="apply",resource="helmreleases.helm.toolkit.fluxcd.io",code="409"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"nodepool_fanout_offline_pools{namespace="edge",application="ingress"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"gotk_reconcile_duration_seconds_count{kind="NodePoolApplication",name="ingress",namespace="edge"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"gotk_resource_info{customresource_group="apps.fanout.dev",customresource_kind="NodePoolApplication",customresource_version="v1alpha1",exported_namespace="edge",name="ingress",ready="True",suspended="false"} 1"#),
        "{text}"
    );
    assert!(!text.contains(r#"ready="False""#), "the old info series is gone: {text}");
    assert!(text.contains(r#"leader_election_master_status{name="nodepool-fanout"} 1"#), "{text}");
    for process in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(text.lines().any(|l| l.starts_with(process)), "{process} in {text}");
    }
    m.forget("edge", "ingress", Some(&info));
    let after = m.encode().unwrap();
    assert!(!after.contains(r#"application="ingress""#), "{after}");
    assert!(!after.contains(r#"name="ingress""#), "{after}");
}

/// A HelmRelease in `edge`, as its watch brings it.
fn helm_release(name: &str) -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": name, "namespace": "edge" },
        "spec": { "chart": { "spec": { "chart": "gateway" } } }
    }))
    .unwrap()
}

/// What the watch caches hold is read at each scrape: nothing before the
/// caches are given, then each kind's count, a release cut down apart.
#[test]
fn cached_objects_count_each_cache_and_releases_cut_down_apart() {
    use crate::reconcile::observe::{CachedRelease, Caches};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    let m = Metrics::default();
    assert!(!m.encode().unwrap().contains("nodepool_fanout_cached_objects"));
    let mut releases = Writer::<CachedRelease>::default();
    for name in ["ours-1", "ours-2"] {
        releases.apply_watcher_event(&Event::Apply(CachedRelease::from_object(helm_release(name))));
    }
    releases.apply_watcher_event(&Event::Apply(CachedRelease::of_another_shard(helm_release("theirs"))));
    m.watch_caches(Caches {
        pools: Default::default(),
        unserved: Default::default(),
        nodes: Writer::default().as_reader(),
        releases: releases.as_reader(),
        release_index: None,
        history: Writer::default().as_reader(),
    });
    let text = m.encode().unwrap();
    for line in [
        r#"nodepool_fanout_cached_objects{kind="HelmRelease",held="whole"} 2"#,
        r#"nodepool_fanout_cached_objects{kind="HelmRelease",held="cut down"} 1"#,
        r#"nodepool_fanout_cached_objects{kind="Node",held="whole"} 0"#,
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

/// The releases cut down are counted as the cache's writer keeps its
/// index, not by copying the cache at each scrape: through releases that
/// come, go, are cut down in place (their application moved to another
/// shard) and a list that starts the cache again.
#[test]
fn cached_objects_count_releases_cut_down_from_the_writers_index() {
    use crate::reconcile::observe::{CachedRelease, Caches, ReleaseWriter};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    let whole = |name: &str| CachedRelease::from_object(helm_release(name));
    let theirs = |name: &str| CachedRelease::of_another_shard(helm_release(name));
    let m = Metrics::default();
    let mut writer = ReleaseWriter::default();
    m.watch_caches(Caches {
        pools: Default::default(),
        unserved: Default::default(),
        nodes: Writer::default().as_reader(),
        releases: writer.store(),
        release_index: Some(writer.index()),
        history: Writer::default().as_reader(),
    });
    let counted = |m: &Metrics, whole: usize, cut_down: usize| {
        let text = m.encode().unwrap();
        for line in [
            format!(r#"nodepool_fanout_cached_objects{{kind="HelmRelease",held="whole"}} {whole}"#),
            format!(r#"nodepool_fanout_cached_objects{{kind="HelmRelease",held="cut down"}} {cut_down}"#),
        ] {
            assert!(text.contains(&line), "{line} in\n{text}");
        }
    };
    for event in [
        Event::Apply(whole("ours-1")),
        Event::Apply(whole("ours-2")),
        Event::Apply(theirs("theirs-1")),
        Event::Apply(theirs("theirs-2")),
    ] {
        writer.apply_watcher_event(&event);
    }
    counted(&m, 2, 2);
    writer.apply_watcher_event(&Event::Delete(theirs("theirs-2")));
    writer.apply_watcher_event(&Event::Apply(theirs("ours-2")));
    counted(&m, 1, 2);
    writer.apply_watcher_event(&Event::Apply(whole("theirs-1")));
    counted(&m, 2, 1);
    for event in [
        Event::Init,
        Event::InitApply(theirs("theirs-3")),
        Event::InitApply(whole("ours-3")),
        Event::InitDone,
    ] {
        writer.apply_watcher_event(&event);
    }
    counted(&m, 1, 1);
}
