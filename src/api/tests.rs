//! Unit tests of `api`.

use serde_json::Value;

use super::schema::DURATION_PATTERN;
use super::*;
use serde_json::json;

fn crd_json() -> Value {
    serde_json::to_value(NodePoolApplication::crd()).unwrap()
}

fn spec_schema() -> Value {
    crd_json()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

fn minimal_app() -> Value {
    json!({
        "apiVersion": "apps.fanout.dev/v1alpha1",
        "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge" },
        "spec": {
            "pools": { "names": ["hangzhou"] },
            "chart": { "spec": { "chart": "ingress-gateway",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures" } } },
            "interval": "10m"
        }
    })
}

#[test]
fn crd_names_group_and_scope() {
    let crd = crd_json();
    assert_eq!(crd["metadata"]["name"], "nodepoolapplications.apps.fanout.dev");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["npa"]));
    assert_eq!(crd["spec"]["versions"][0]["name"], "v1alpha1");
    assert_eq!(crd["spec"]["versions"][0]["subresources"]["status"], json!({}));
}

#[test]
fn printer_columns_in_order() {
    let crd = crd_json();
    let columns = crd["spec"]["versions"][0]["additionalPrinterColumns"].as_array().unwrap();
    let names: Vec<_> = columns.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Ready", "Chart", "Version", "Rollout", "Status", "Age"]);
    assert_eq!(columns[0]["jsonPath"], ".status.ready");
    assert_eq!(columns[3]["jsonPath"], ".status.rollout.progress");
    assert_eq!(columns[4]["jsonPath"], ".status.conditions[?(@.type==\"Ready\")].message");
}

#[test]
fn spec_schema_requires_the_essentials() {
    let mut required: Vec<String> = serde_json::from_value(spec_schema()["required"].clone()).unwrap();
    required.sort();
    // `chart` or `chartRef`: exactly one, by a CEL rule of the spec.
    assert_eq!(required, ["interval", "pools"]);
    let rules = spec_schema()["x-kubernetes-validations"].to_string();
    assert!(rules.contains("has(self.chart) != has(self.chartRef)"), "{rules}");
}

#[test]
fn opaque_values_keep_unknown_fields() {
    let spec = spec_schema();
    let values = &spec["properties"]["values"];
    assert_eq!(values["type"], "object");
    assert_eq!(values["x-kubernetes-preserve-unknown-fields"], true);
    let install = &spec["properties"]["helmRelease"]["properties"]["install"];
    assert_eq!(install["x-kubernetes-preserve-unknown-fields"], true);
}

#[test]
fn pool_selection_carries_its_cel_rule() {
    let pools = &spec_schema()["properties"]["pools"];
    let rule = &pools["x-kubernetes-validations"][0]["rule"];
    assert_eq!(rule, "has(self.selector) || (has(self.names) && size(self.names) > 0)");
    assert_eq!(pools["properties"]["names"]["items"]["maxLength"], 253);
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    let crd = crd_json();
    let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
    let conditions = &status["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    assert_eq!(conditions["items"]["properties"]["type"]["type"], "string");
    assert_eq!(status["properties"]["pools"]["x-kubernetes-list-map-keys"], json!(["pool"]));
}

#[test]
fn enums_are_closed_string_sets() {
    let spec = spec_schema();
    let kind =
        &spec["properties"]["chart"]["properties"]["spec"]["properties"]["sourceRef"]["properties"]["kind"];
    assert_eq!(kind["enum"], json!(["HelmRepository", "GitRepository", "Bucket"]));
}

#[test]
fn interval_has_the_flux_duration_pattern() {
    let interval = &spec_schema()["properties"]["interval"];
    assert_eq!(interval["pattern"], DURATION_PATTERN);
}

#[test]
fn pools_default_to_openyurt_and_placement_to_the_kinds_own_label() {
    let app: NodePoolApplication = serde_json::from_value(minimal_app()).unwrap();
    assert_eq!(app.spec.pools.kind, PoolKind::OpenYurt);
    assert_eq!(app.spec.placement.node_label, None);
    assert!(app.spec.placement.values_paths.is_empty());
    // No schema default: the API server would store OpenYurt's label in
    // every application, whatever its kind.
    let node_label = &spec_schema()["properties"]["placement"]["properties"]["nodeLabel"];
    assert!(node_label.get("default").is_none(), "{node_label}");
    let kind = &spec_schema()["properties"]["pools"]["properties"]["kind"];
    assert_eq!(
        kind["enum"],
        json!(["OpenYurt", "KubeEdge", "SuperEdge", "NodeLabel", "ClusterProfile"]),
        "{kind}"
    );
}

#[test]
fn a_node_label_is_given_with_kind_node_label_and_only_then() {
    let check = |pools: Value| Pools::validate_cel(&pools, None);
    for good in [
        json!({ "names": ["a"] }),
        json!({ "kind": "KubeEdge", "names": ["a"] }),
        json!({ "kind": "NodeLabel", "nodeLabel": "topology.kubernetes.io/zone", "names": ["a"] }),
        json!({ "kind": "NodeLabel", "nodeLabel": "site", "selector": {} }),
    ] {
        assert!(check(good.clone()).is_ok(), "{good}");
    }
    for bad in [
        json!({ "kind": "NodeLabel", "names": ["a"] }),
        json!({ "kind": "SuperEdge", "nodeLabel": "site", "names": ["a"] }),
        json!({ "nodeLabel": "site", "names": ["a"] }),
    ] {
        let err = check(bad.clone()).unwrap_err().to_string();
        assert!(err.contains("nodeLabel is set with kind NodeLabel"), "{bad}: {err}");
    }
    let err = check(json!({ "kind": "NodeLabel", "nodeLabel": "not a label!", "names": ["a"] })).unwrap_err();
    assert!(err.to_string().contains("must be a label key"), "{err}");
    let err = check(json!({ "kind": "KubeEdge" })).unwrap_err();
    assert!(err.to_string().contains("give pool names, a selector, or both"), "{err}");
}

#[test]
fn the_kind_of_pools_cannot_change() {
    let old = json!({ "kind": "OpenYurt", "names": ["a"] });
    let err = Pools::validate_cel(&json!({ "kind": "KubeEdge", "names": ["a"] }), Some(&old)).unwrap_err();
    assert!(err.to_string().contains("spec.pools.kind cannot change"), "{err}");
    assert!(Pools::validate_cel(&json!({ "kind": "OpenYurt", "names": ["b"] }), Some(&old)).is_ok());
}

#[test]
fn spec_round_trips_in_camel_case() {
    let mut value = minimal_app();
    value["spec"]["releaseName"] = json!("{{pool.name}}-gw");
    value["spec"]["valuesFrom"] = json!([{ "kind": "Secret", "name": "creds", "valuesKey": "v.yaml" }]);
    value["spec"]["helmRelease"] = json!({ "maxHistory": 3, "dependsOn": [{ "name": "crds" }] });
    let app: NodePoolApplication = serde_json::from_value(value.clone()).unwrap();
    let back = serde_json::to_value(&app).unwrap();
    assert_eq!(back["spec"]["releaseName"], "{{pool.name}}-gw");
    assert_eq!(back["spec"]["valuesFrom"], value["spec"]["valuesFrom"]);
    assert_eq!(back["spec"]["helmRelease"], value["spec"]["helmRelease"]);
}

#[test]
fn cel_accepts_names_or_selector() {
    assert!(PoolSelection::validate_cel(&json!({ "names": ["a"] }), None).is_ok());
    assert!(PoolSelection::validate_cel(&json!({ "selector": {} }), None).is_ok());
    let both = json!({ "names": ["a"], "selector": { "matchLabels": { "x": "y" } } });
    assert!(PoolSelection::validate_cel(&both, None).is_ok());
}

#[test]
fn cel_rejects_an_empty_selection() {
    let err = PoolSelection::validate_cel(&json!({}), None).unwrap_err();
    assert!(err.to_string().contains("give pool names, a selector, or both"), "{err}");
    assert!(PoolSelection::validate_cel(&json!({ "names": [] }), None).is_err());
}

#[test]
fn rollout_amounts_are_counts_or_percentages() {
    let check = |field: &str, value: Value| Rollout::validate_cel(&json!({ field: value }), None);
    for good in [json!(1), json!(40), json!("25%"), json!("100%"), json!("0%")] {
        assert!(check("maxUnavailable", good.clone()).is_ok(), "maxUnavailable {good}");
        assert!(check("maxFailures", good.clone()).is_ok(), "maxFailures {good}");
    }
    assert!(check("maxFailures", json!(0)).is_ok());
    let err = check("maxUnavailable", json!(0)).unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
    let err = check("maxFailures", json!(-1)).unwrap_err();
    assert!(err.to_string().contains("at least 0"), "{err}");
    for bad in ["lots", "%", "1000%", "2.5%", "-1"] {
        for field in ["maxUnavailable", "maxFailures"] {
            let err = check(field, json!(bad)).unwrap_err();
            assert!(err.to_string().contains("a percentage such as"), "{field} {bad}: {err}");
        }
    }
    assert!(Rollout::validate_cel(&json!({}), None).is_ok());
}

#[test]
fn cel_checks_whole_resources_too() {
    let app: NodePoolApplication = serde_json::from_value(minimal_app()).unwrap();
    assert!(kube::core::cel::validate_cel(&app).is_ok());
    let mut bad = minimal_app();
    bad["spec"]["overrides"] = json!([{ "pools": {}, "values": {} }]);
    let bad: NodePoolApplication = serde_json::from_value(bad).unwrap();
    assert!(kube::core::cel::validate_cel(&bad).is_err());
}

#[test]
fn service_account_names_must_be_dns_subdomains() {
    let check = |name: &str| HelmReleaseOptions::validate_cel(&json!({ "serviceAccountName": name }), None);
    for good in ["deployer", "tenant-a.deployer", "a", "0-bot", &"a".repeat(253)] {
        assert!(check(good).is_ok(), "{good:?} is a ServiceAccount name");
    }
    for bad in [
        "Deployer Bot",
        "Deployer",
        "bot-",
        "-bot",
        "a..b",
        ".a",
        "a_b",
        "a/b",
        "",
    ] {
        let err = check(bad).expect_err(bad).to_string();
        assert!(err.contains("must be a ServiceAccount name"), "{bad:?}: {err}");
    }
    assert!(HelmReleaseOptions::validate_cel(&json!({}), None).is_ok(), "optional");
    let field = &spec_schema()["properties"]["helmRelease"]["properties"]["serviceAccountName"];
    assert_eq!(field["maxLength"], 253, "longer names are refused by the schema itself");
}

#[test]
fn node_labels_must_be_label_keys() {
    let check = |key: &str| Placement::validate_cel(&json!({ "nodeLabel": key }), None);
    let prefix = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61)].join(".");
    assert_eq!(prefix.len(), 253);
    for good in [
        "apps.openyurt.io/nodepool".to_string(),
        "pool".into(),
        "topology.kubernetes.io/zone".into(),
        "example.com/Pool_Name.v1".into(),
        "a".repeat(63),
        format!("{prefix}/{}", "n".repeat(63)),
    ] {
        assert!(check(&good).is_ok(), "{good:?} is a label key");
    }
    for bad in [
        "node pool!".to_string(),
        "".into(),
        "/pool".into(),
        "pool/".into(),
        "a/b/c".into(),
        "Example.com/pool".into(),
        "example.com/-pool".into(),
        "example.com/pool.".into(),
        "a".repeat(64),
        format!("example.com/{}", "n".repeat(64)),
        format!("{prefix}e/pool"),
    ] {
        let err = check(&bad).expect_err(&bad).to_string();
        assert!(err.contains("must be a label key"), "{bad:?}: {err}");
    }
}

#[test]
fn crd_yaml_is_parseable_and_names_the_kind() {
    let yaml = crds_yaml().unwrap();
    let back: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(back, crd_json());
    assert!(yaml.contains("kind: NodePoolApplication"));
}

#[test]
fn exactly_one_of_chart_and_chart_ref() {
    let check = |app: Value| {
        let app: NodePoolApplication = serde_json::from_value(app).unwrap();
        kube::core::cel::validate_cel(&app)
    };
    assert!(check(minimal_app()).is_ok(), "chart alone");
    let mut oci = minimal_app();
    oci["spec"].as_object_mut().unwrap().remove("chart");
    oci["spec"]["chartRef"] = json!({ "kind": "OCIRepository", "name": "podinfo" });
    assert!(check(oci.clone()).is_ok(), "chartRef alone");
    let mut both = minimal_app();
    both["spec"]["chartRef"] = oci["spec"]["chartRef"].clone();
    let err = check(both).unwrap_err().to_string();
    assert!(err.contains("exactly one of spec.chart") && err.contains("spec.chartRef"), "{err}");
    let mut neither = oci;
    neither["spec"].as_object_mut().unwrap().remove("chartRef");
    assert!(check(neither).is_err(), "neither");
}

#[test]
fn a_chart_ref_names_only_an_oci_repository() {
    let reference =
        |kind: &str| serde_json::from_value::<ChartReference>(json!({ "kind": kind, "name": "podinfo" }));
    assert_eq!(reference("OCIRepository").unwrap().kind, ChartReferenceKind::OciRepository);
    assert!(reference("HelmChart").is_err());
    assert!(reference("GitRepository").is_err());
}

#[test]
fn a_workloads_pod_template_path_may_not_lead_into_its_identity() {
    let check = |path: &str| {
        WorkloadKind::validate_cel(
            &json!({ "apiVersion": "v1", "kind": "Edge", "podTemplatePath": path }),
            None,
        )
    };
    assert!(check("spec.template").is_ok());
    assert!(check("spec.metadata.template").is_ok());
    assert!(check("kindred.template").is_ok(), "a key that only starts with one");
    for path in ["metadata.template", "metadata", "kind", "apiVersion.x"] {
        let err = check(path).expect_err(path);
        assert!(err.to_string().contains("must lead below"), "{path}: {err}");
    }
    assert!(WorkloadKind::validate_cel(&json!({ "apiVersion": "v1", "kind": "Edge" }), None).is_ok());
}

/// An application over site clusters, as `minimal_app` is over pools.
fn cluster_app(pools: Value) -> Value {
    let mut app = minimal_app();
    app["spec"]["pools"] = pools;
    app
}

#[test]
fn a_kubeconfig_is_given_with_kind_cluster_profile_and_only_then() {
    let check = |pools: Value| Pools::validate_cel(&pools, None);
    let secret = json!({ "secretRef": { "name": "{{pool.name}}-admin", "key": "value.yaml" } });
    assert!(check(json!({ "kind": "ClusterProfile", "selector": {} })).is_ok(), "the default Secret");
    assert!(check(json!({ "kind": "ClusterProfile", "names": ["store-1"], "kubeConfig": secret })).is_ok());
    for kind in ["OpenYurt", "NodeLabel"] {
        let err = check(json!({ "kind": kind, "names": ["a"], "kubeConfig": secret, "nodeLabel": "x" }))
            .unwrap_err()
            .to_string();
        assert!(err.contains("kubeConfig is set with kind ClusterProfile"), "{kind}: {err}");
    }
    let err = SecretKeyTemplate::validate_cel(&json!({ "name": "s", "key": "a/b" }), None).unwrap_err();
    assert!(err.to_string().contains("must be a Secret key"), "{err}");
}

#[test]
fn a_kubeconfig_through_helm_release_is_refused_saying_why() {
    let err =
        HelmReleaseOptions::validate_cel(&json!({ "kubeConfig": { "secretRef": { "name": "hub" } } }), None)
            .unwrap_err()
            .to_string();
    assert!(err.contains("spec.pools.kubeConfig"), "{err}");
    // Declared in the schema, so that it is refused rather than pruned.
    let field = &spec_schema()["properties"]["helmRelease"]["properties"]["kubeConfig"];
    assert!(field.is_object(), "{field}");
}

#[test]
fn a_placement_is_refused_for_sites_that_are_clusters() {
    let check = |app: Value| {
        let app: NodePoolApplication = serde_json::from_value(app).unwrap();
        kube::core::cel::validate_cel(&app)
    };
    let sites = json!({ "kind": "ClusterProfile", "selector": {} });
    assert!(check(cluster_app(sites.clone())).is_ok());
    let mut placed = cluster_app(sites);
    placed["spec"]["placement"] = json!({ "valuesPaths": ["nodeSelector"] });
    let err = check(placed).unwrap_err().to_string();
    assert!(err.contains("a cluster of its own"), "{err}");
    // Pools of this cluster keep their placement.
    let mut pools = minimal_app();
    pools["spec"]["placement"] = json!({ "valuesPaths": ["nodeSelector"] });
    assert!(check(pools).is_ok());
}

#[test]
fn window_schedules_are_five_fields_or_a_macro_at_admission() {
    let check = |schedule: &str| {
        MaintenanceWindow::validate_cel(&json!({ "schedule": schedule, "duration": "1h" }), None)
    };
    for good in [
        "0 22 * * 1-5",
        "*/15 0-6 1,15 jan-mar mon-fri",
        " 0 0 13 * 5 ",
        "@daily",
        "@midnight",
        "0 0 29 2 *",
        "0 0 30 2 1",
    ] {
        assert!(check(good).is_ok(), "{good:?}: {:?}", check(good));
    }
    for bad in [
        "0 0 22 * * *",
        "0 0 22 * * * 2027",
        "0 22 * *",
        "0 22 ? * 1",
        "CRON_TZ=UTC 0 22 * * *",
        "@reboot",
        "every night",
    ] {
        let e = check(bad).expect_err(bad);
        assert!(e.to_string().contains("five fields"), "{bad:?}: {e}");
    }
    // What never fires, where a pattern can tell: the 30th or 31st of
    // February, the 31st of the months of 30 days.
    for never in [
        "0 0 30 2 *",
        "0 0 30,31 feb *",
        "0 0 31 4,6,9,11 *",
        "0 0 31 Apr */2",
    ] {
        let e = check(never).expect_err(never);
        assert!(e.to_string().contains("never fires"), "{never:?}: {e}");
    }
}

#[test]
fn a_check_by_a_label_names_its_pools_and_is_no_wave_check() {
    use crate::api::{Analysis, MetricCheck};
    let check = |query: &str, by: Value| json!({ "name": "errors", "query": query, "max": 1, "by": by });
    let batched = r#"sum by (site) (errors{site=~"{{pools}}"})"#;
    assert!(MetricCheck::validate_cel(&check(batched, json!("site")), None).is_ok());
    let one_pool = r#"sum by (site) (errors{site="{{pool.name}}"})"#;
    let err = MetricCheck::validate_cel(&check(one_pool, json!("site")), None).unwrap_err();
    assert!(err.to_string().contains("{{pools}}"), "{err}");
    assert!(
        MetricCheck::validate_cel(&json!({ "name": "errors", "query": one_pool, "max": 1 }), None).is_ok(),
        "without by, a query names its one pool"
    );
    let analysis = json!({
        "prometheus": { "address": "http://prometheus:9090" },
        "waveChecks": [check(batched, json!("site"))],
    });
    let err = Analysis::validate_cel(&analysis, None).unwrap_err();
    assert!(err.to_string().contains("answers for its whole wave"), "{err}");
}
