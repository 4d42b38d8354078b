//! Sites that are clusters: each release installs into its own cluster
//! through the kubeconfig Secret its site names, and nothing pins its pods.

use super::*;

/// An application over the site clusters of `region: east`, without a
/// placement (admission refuses one for sites that are clusters).
fn sites(extra: Value) -> NodePoolApplication {
    let mut app = app(json!({
        "pools": { "kind": "ClusterProfile", "selector": { "matchLabels": { "region": "east" } } }
    }));
    app.spec.placement = Default::default();
    for (k, v) in extra.as_object().unwrap() {
        match k.as_str() {
            "kubeConfig" => app.spec.pools.kube_config = Some(serde_json::from_value(v.clone()).unwrap()),
            other => panic!("no such field in this helper: {other}"),
        }
    }
    app
}

/// ClusterProfiles of the application's namespace.
fn clusters() -> Vec<Pool> {
    pools()
        .into_iter()
        .map(|p| Pool {
            namespace: Some("edge".into()),
            node_selector: BTreeMap::new(),
            ..p
        })
        .collect()
}

#[test]
fn each_site_cluster_gets_a_release_naming_its_own_kubeconfig() {
    let a = sites(json!({}));
    let plan = Scenario::of(&a).over(&clusters()).plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
    for pool in ["hangzhou", "shanghai"] {
        let release = desired(&plan, pool);
        assert_eq!(
            release["spec"]["kubeConfig"],
            json!({ "secretRef": { "name": format!("{pool}-kubeconfig") } }),
            "Cluster API's convention, Flux's default key"
        );
        // Its pods run anywhere in its own cluster: nothing pins them.
        assert!(release["spec"].get("postRenderers").is_none(), "{release:#}");
        assert!(release["spec"]["values"]["controller"].get("nodeSelector").is_none(), "{release:#}");
        // Templates read the site as they read a pool.
        assert_eq!(release["spec"]["values"]["controller"]["ingressClass"]["name"], pool);
    }
}

#[test]
fn the_kubeconfig_secret_may_be_named_by_a_template_and_a_key() {
    let a = sites(
        json!({ "kubeConfig": { "secretRef": { "name": "{{pool.labels.region}}-{{pool.name}}", "key": "value.yaml" } } }),
    );
    let plan = Scenario::of(&a).over(&clusters()).plan();
    assert_eq!(
        desired(&plan, "hangzhou")["spec"]["kubeConfig"],
        json!({ "secretRef": { "name": "east-hangzhou", "key": "value.yaml" } })
    );
}

#[test]
fn a_kubeconfig_name_that_is_no_secret_name_fails_that_site_naming_the_field() {
    let a = sites(json!({ "kubeConfig": { "secretRef": { "name": "{{pool.name}}_Admin" } } }));
    let plan = Scenario::of(&a).over(&clusters()).plan();
    match outcome(&plan, "hangzhou") {
        Outcome::Failed { field, message } => {
            assert_eq!(field, "pools.kubeConfig.secretRef.name");
            assert!(message.contains("\"hangzhou_Admin\""), "{message}");
        }
        other => panic!("expected a failed site, got {other:?}"),
    }
    assert!(plan.apply.is_empty(), "every site fails alike: {:?}", applied_pools(&plan));
}

#[test]
fn a_pool_applications_releases_keep_their_placement_and_no_kubeconfig() {
    let a = app(json!({}));
    let plan = Scenario::of(&a).over(&pools()).plan();
    let release = desired(&plan, "hangzhou");
    assert!(release["spec"].get("kubeConfig").is_none(), "{release:#}");
    assert!(release["spec"]["postRenderers"].is_array(), "{release:#}");
}
