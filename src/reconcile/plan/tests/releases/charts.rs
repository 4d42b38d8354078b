//! Plan: which chart a release names: an OCI chart's pinned
//! OCIRepository, the user's own, or none.
use super::*;

/// An application of an OCI chart: `spec.chartRef` instead of `spec.chart`.
fn oci_app() -> NodePoolApplication {
    let mut a = app(
        json!({ "chartRef": { "kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system" } }),
    );
    a.spec.chart = None;
    a
}

#[test]
fn releases_of_an_oci_chart_name_its_pinned_ocirepository() {
    let a = oci_app();
    let pinned = crate::chart::shared::chart_ref(&a.spec, "gw", "edge", "6.1.0@sha256:abc");
    let planned = plan(&PlanInput {
        history: None,
        nodes: None,
        app: &a,
        pools: &pools().iter().collect::<Vec<_>>(),
        owned: vec![],
        others: &ListedReleases::default(),
        now: now(),
        chart_ref: Some(&pinned),
        chart: None,
        hold: None,
        unserved: None,
        clock_since: None,
        memo: None,
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    });
    assert_eq!(applied_pools(&planned), ["hangzhou", "shanghai"]);
    for pool in ["hangzhou", "shanghai"] {
        let hr = desired(&planned, pool);
        assert_eq!(
            hr["spec"]["chartRef"],
            json!({ "kind": "OCIRepository", "name": pinned.name, "namespace": "flux-system" })
        );
        assert!(hr["spec"].get("chart").is_none(), "chart and chartRef are exclusive");
    }
    // The release's chartRef reads back as the pinned chart, so the copy
    // is kept while a release still uses it.
    let hr = desired(&planned, "hangzhou");
    assert_eq!(super::super::observed::chart_ref_of(&hr), Some(pinned));
}

#[test]
fn without_shared_charts_releases_name_the_users_ocirepository() {
    let planned = Scenario::of(&oci_app()).over(&pools()).plan();
    let hr = desired(&planned, "hangzhou");
    assert_eq!(
        hr["spec"]["chartRef"],
        json!({ "kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system" })
    );
}

#[test]
fn an_application_with_no_chart_fails_every_pool_with_what_to_set() {
    let mut a = app(json!({}));
    a.spec.chart = None;
    let planned = Scenario::of(&a).over(&pools()).plan();
    assert!(planned.apply.is_empty(), "{planned:#?}");
    let Outcome::Failed { message, .. } = outcome(&planned, "hangzhou") else {
        panic!("{planned:#?}")
    };
    assert!(message.contains("spec.chartRef"), "{message}");
}
