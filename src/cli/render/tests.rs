use std::collections::BTreeMap;

use serde_json::json;

use super::*;

const INGRESS: &str = include_str!("../../../examples/ingress-per-pool.yaml");
const EDGEX: &str = include_str!("../../../examples/edgex-per-pool.yaml");
const POOLS: &str = include_str!("../../../examples/pools.yaml");
const CANARY: &str = include_str!("../../../examples/edgex-canary.yaml");
const BY_NODEGROUP: &str = include_str!("../../../examples/ingress-per-nodegroup.yaml");
const NODEGROUPS: &str = include_str!("../../../examples/pools-kubeedge.yaml");
const BY_NODEUNIT: &str = include_str!("../../../examples/ingress-per-nodeunit.yaml");
const NODEUNITS: &str = include_str!("../../../examples/pools-superedge.yaml");
const BY_ZONE: &str = include_str!("../../../examples/ingress-per-zone.yaml");
const ZONES: &str = include_str!("../../../examples/nodes-zones.yaml");

fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple(yaml).unwrap()
}

fn for_pool<'a>(docs: &'a [Value], pool: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["metadata"]["annotations"]["apps.fanout.dev/pool-name"] == pool)
        .unwrap_or_else(|| panic!("no release for {pool}"))
}

#[test]
fn example_pools_parse() {
    let pools = parse_pools(POOLS, &Pools::default()).unwrap();
    let names: Vec<_> = pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["hangzhou", "shanghai", "beijing"]);
    assert_eq!(pools[2].labels.get("region").unwrap(), "north");
}

/// Each pool's release, by pool, with its nodeSelector and region.
fn pinned(app: &str, pools: &str) -> BTreeMap<String, (Value, Value)> {
    let rendered = render(app, pools, "edge", None).unwrap();
    assert!(rendered.errors.is_empty() && rendered.warnings.is_empty(), "{rendered:?}");
    documents(&rendered.yaml)
        .iter()
        .map(|d| {
            let pool = d["metadata"]["annotations"]["apps.fanout.dev/pool-name"]
                .as_str()
                .unwrap()
                .to_string();
            let values = &d["spec"]["values"]["controller"];
            (pool, (values["nodeSelector"].clone(), values["config"]["region"].clone()))
        })
        .collect()
}

#[test]
fn every_kind_of_pool_renders_pinned_by_its_own_node_label() {
    let groups = pinned(BY_NODEGROUP, NODEGROUPS);
    assert_eq!(groups.len(), 2);
    assert_eq!(
        groups["factory-a"],
        (json!({ "apps.kubeedge.io/belonging-to": "factory-a" }), json!("east"))
    );
    let units = pinned(BY_NODEUNIT, NODEUNITS);
    assert_eq!(units["store-40"], (json!({ "store-40": "nodeunits.superedge.io" }), json!("north")));
    assert_eq!(units.len(), 2);
    // zone-a by the selector (its nodes share region east), zone-b by name.
    let zones = pinned(BY_ZONE, ZONES);
    assert_eq!(zones.keys().collect::<Vec<_>>(), ["zone-a", "zone-b"]);
    assert_eq!(zones["zone-b"], (json!({ "topology.kubernetes.io/zone": "zone-b" }), json!("west")));
}

#[test]
fn a_pools_file_of_another_kind_gives_no_pools() {
    // NodePools for a KubeEdge application: nothing matches, and says so.
    let rendered = render(BY_NODEGROUP, POOLS, "edge", None).unwrap();
    assert!(rendered.yaml.is_empty());
    assert_eq!(rendered.warnings, ["no node pool matches spec.pools"]);
}

#[test]
fn kubectl_list_form_parses() {
    let list = "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: a, labels: {region: east}}\n- metadata: {name: b}\n";
    let names: Vec<_> = parse_pools(list, &Pools::default()).unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(parse_pools("---\n", &Pools::default()).unwrap().is_empty());
}

#[test]
fn ingress_example_renders_one_release_per_pool() {
    let rendered = render(INGRESS, POOLS, "edge", None).unwrap();
    assert_eq!(rendered.errors, Vec::<String>::new());
    let docs = documents(&rendered.yaml);
    assert_eq!(docs.len(), 3);
    let sh = for_pool(&docs, "shanghai");
    assert_eq!(sh["kind"], "HelmRelease");
    assert_eq!(sh["metadata"]["namespace"], "edge");
    assert!(sh["metadata"].get("ownerReferences").is_none());
    let controller = &sh["spec"]["values"]["controller"];
    assert_eq!(
        controller["ingressClass"],
        serde_json::json!({ "name": "gateway-shanghai", "default": true })
    );
    assert_eq!(controller["replicas"], 3);
    assert_eq!(controller["config"]["region"], "east");
    assert_eq!(controller["nodeSelector"]["apps.openyurt.io/nodepool"], "shanghai");
    let bj = &for_pool(&docs, "beijing")["spec"]["values"]["controller"];
    assert_eq!(bj["config"]["log-level"], "debug");
    assert!(bj.get("replicas").is_none());
    // An exact version needs no index: the releases point at the shared
    // HelmChart of that version, beside the source.
    assert_eq!(sh["spec"]["chartRef"]["kind"], "HelmChart");
    assert_eq!(sh["spec"]["chartRef"]["namespace"], "flux-system");
    assert!(sh["spec"].get("chart").is_none());
}

#[test]
fn a_version_range_without_a_chart_keeps_chart_spec() {
    let app = INGRESS.replace("version: \"1.0.0\"", "version: \"^1.0\"");
    let rendered = render(&app, POOLS, "edge", None).unwrap();
    let docs = documents(&rendered.yaml);
    assert_eq!(docs[0]["spec"]["chart"]["spec"]["version"], "^1.0");
    assert!(docs[0]["spec"].get("chartRef").is_none());
}

#[test]
fn a_chart_checks_every_pools_values_against_its_schema() {
    let chart_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts-fixtures/strict-schema");
    let chart = Chart::load(&chart_dir).unwrap();
    let app = r#"
apiVersion: apps.fanout.dev/v1alpha1
kind: NodePoolApplication
metadata: { name: strict, namespace: edge }
spec:
  pools: { names: [hangzhou, shanghai] }
  chart: { spec: { chart: strict-schema, version: "2.x", sourceRef: { kind: HelmRepository, name: fixtures, namespace: flux-system } } }
  interval: 10m
  values: { message: "hi {{pool.name}}" }
  overrides:
    - pools: { names: [shanghai] }
      values: { mode: orbit }
"#;
    let rendered = render(app, POOLS, "edge", Some(&chart)).unwrap();
    assert_eq!(rendered.errors.len(), 1, "{:?}", rendered.errors);
    let error = &rendered.errors[0];
    assert!(error.contains("shanghai") && error.contains("/mode") && error.contains("enum"), "{error}");
    let docs = documents(&rendered.yaml);
    assert_eq!(docs.len(), 1, "the good pool is still printed");
    assert_eq!(
        docs[0]["spec"]["chartRef"]["kind"], "HelmChart",
        "the chart's version pins the shared chart"
    );
}

#[test]
fn render_with_a_chart_judges_values_from_as_the_controller_does() {
    let chart_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts-fixtures/strict-schema");
    let chart = Chart::load(&chart_dir).unwrap();
    // null drops the chart's default message: only a Secret can supply it.
    let app = |values_from: &str| {
        format!(
            r#"
apiVersion: apps.fanout.dev/v1alpha1
kind: NodePoolApplication
metadata: {{ name: strict, namespace: edge }}
spec:
  pools: {{ names: [hangzhou] }}
  chart: {{ spec: {{ chart: strict-schema, version: "2.x", sourceRef: {{ kind: HelmRepository, name: fixtures, namespace: flux-system }} }} }}
  interval: 10m
  values: {{ message: null }}
  {values_from}
"#
        )
    };
    let refused = render(&app(""), POOLS, "edge", Some(&chart)).unwrap();
    assert_eq!(refused.errors.len(), 1, "{:?}", refused.errors);
    assert!(refused.errors[0].contains("\"message\" is a required property"), "{:?}", refused.errors);
    let supplied = app("valuesFrom: [{ kind: Secret, name: strict-message }]");
    let rendered = render(&supplied, POOLS, "edge", Some(&chart)).unwrap();
    assert!(rendered.errors.is_empty(), "{:?}", rendered.errors);
    assert_eq!(documents(&rendered.yaml).len(), 1);
    // A value the Secret cannot override is still judged.
    let wrong = supplied.replace("message: null", "message: null, mode: orbit");
    let rendered = render(&wrong, POOLS, "edge", Some(&chart)).unwrap();
    assert_eq!(rendered.errors.len(), 1, "{:?}", rendered.errors);
    assert!(rendered.errors[0].contains("/mode") && !rendered.errors[0].contains("required"));
}

#[test]
fn edgex_example_renders_the_eastern_pools() {
    let rendered = render(EDGEX, POOLS, "edge", None).unwrap();
    assert!(rendered.errors.is_empty(), "{:?}", rendered.errors);
    let docs = documents(&rendered.yaml);
    assert_eq!(docs.len(), 2);
    let sh = for_pool(&docs, "shanghai");
    assert_eq!(sh["spec"]["releaseName"], "edgex-shanghai");
    assert_eq!(sh["spec"]["values"]["deviceProfile"], "shanghai-sensors");
    assert_eq!(sh["spec"]["values"]["database"]["storage"], "5Gi");
    assert_eq!(sh["spec"]["install"]["remediation"]["retries"], 3);
    let hz = for_pool(&docs, "hangzhou");
    assert!(hz["spec"]["values"].get("database").is_none());
    let patch = hz["spec"]["postRenderers"][0]["kustomize"]["patches"][0]["patch"].as_str().unwrap();
    assert!(patch.contains("apps.openyurt.io/nodepool: hangzhou"), "{patch}");
}

#[test]
fn the_canary_example_renders_for_every_pool() {
    let rendered = render(CANARY, POOLS, "edge", None).unwrap();
    assert!(rendered.errors.is_empty(), "{:?}", rendered.errors);
    let docs = documents(&rendered.yaml);
    assert_eq!(docs.len(), 3, "a first install goes to every pool");
    for doc in &docs {
        assert!(doc["metadata"]["annotations"]
            .get(crate::api::naming::ANNOTATION_WRITTEN_AT)
            .is_none());
    }
    assert_eq!(for_pool(&docs, "beijing")["spec"]["values"]["deviceProfile"], "beijing-sensors");
}

#[test]
fn rendered_yaml_round_trips_to_the_plan_objects() {
    let rendered = render(INGRESS, POOLS, "edge", None).unwrap();
    let docs = documents(&rendered.yaml);
    let again = documents(&render(INGRESS, POOLS, "edge", None).unwrap().yaml);
    assert_eq!(docs, again);
    let hash = docs[0]["metadata"]["annotations"]["apps.fanout.dev/spec-hash"].as_str().unwrap();
    assert_eq!(hash.len(), 16);
}

#[test]
fn render_refuses_a_template_that_multiplies_the_spec_as_the_controller_does() {
    let hostile = format!("gw{}", "-{{app.name}}".repeat(20_000));
    let app = INGRESS.replace("gateway-{{pool.name}}", &hostile);
    let rendered = render(&app, POOLS, "edge", None).unwrap();
    assert!(rendered.yaml.is_empty(), "nothing is printed for the failing pools");
    assert_eq!(rendered.errors.len(), 3, "{:?}", rendered.errors);
    for error in &rendered.errors {
        assert!(error.contains("values.controller.ingressClass.name: holds 20000 `{{`"), "{error}");
    }
}

#[test]
fn failures_name_pool_and_field_and_keep_good_pools() {
    let broken = INGRESS.replace("gateway-{{pool.name}}", "gateway-{{pool.labels.zone}}");
    let broken = broken.replace("names: [beijing]", "names: [beijing, atlantis]");
    let pools = POOLS.replacen("city: hangzhou", "city: hangzhou\n    zone: a", 1);
    let rendered = render(&broken, &pools, "edge", None).unwrap();
    assert_eq!(documents(&rendered.yaml).len(), 1);
    assert_eq!(rendered.errors.len(), 2, "{:?}", rendered.errors);
    assert!(rendered.errors[0].starts_with(
        "pool \"beijing\": values.controller.ingressClass.name: unknown variable pool.labels.zone"
    ));
    assert!(rendered.warnings.is_empty(), "override names are not selection: {:?}", rendered.warnings);
}

#[test]
fn missing_pools_are_warnings() {
    let app = INGRESS.replace(
        "selector:\n      matchExpressions:\n        - key: region\n          operator: Exists",
        "names: [hangzhou, atlantis]",
    );
    let rendered = render(&app, POOLS, "edge", None).unwrap();
    assert!(rendered.errors.is_empty(), "{:?}", rendered.errors);
    assert_eq!(rendered.warnings, ["node pool \"atlantis\" is listed but does not exist"]);
}

#[test]
fn cel_violations_are_errors() {
    let app =
        INGRESS.replace("    - pools:\n        names: [hangzhou]", "    - pools: {}\n      x: [hangzhou]");
    let rendered = render(&app, POOLS, "edge", None).unwrap();
    assert!(
        rendered.errors.iter().any(|e| e.contains("give pool names, a selector, or both")),
        "{:?}",
        rendered.errors
    );
}

#[test]
fn bad_manifests_are_clear_errors() {
    assert!(matches!(render("a: [", POOLS, "edge", None), Err(CliError::Yaml { .. })));
    let err = render(
        "apiVersion: apps.fanout.dev/v1alpha1\nkind: NodePoolApplication\nmetadata: {name: x}\nspec: {}\n",
        POOLS,
        "edge",
        None,
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("the application manifest: missing field"), "{err}");
    let unnamed = INGRESS.replace("  name: ingress\n", "  labels: {}\n");
    assert!(matches!(render(&unnamed, POOLS, "edge", None), Err(CliError::MissingName)));
}

#[test]
fn clap_definition_is_consistent() {
    use clap::{CommandFactory, Parser};

    use crate::cli::{Cli, Command};
    Cli::command().debug_assert();
    let cli =
        Cli::try_parse_from(["nodepool-fanout", "render", "-f", "a.yaml", "--pools", "p.yaml"]).unwrap();
    let Command::Render(args) = cli.command else {
        panic!()
    };
    assert_eq!(args.namespace, "default");
}

/// What a `valuesFrom` ConfigMap or Secret holds is no part of the
/// revision: a Progressive application that reads one is warned that an
/// edit of it goes around the rollout (fourth review, item 5).
#[test]
fn a_progressive_application_reading_values_from_is_warned_it_bypasses_the_rollout() {
    let mut app: Value = documents(CANARY).into_iter().find(|d| d["kind"] == "NodePoolApplication").unwrap();
    assert!(render(&app.to_string(), POOLS, "edge", None).unwrap().warnings.is_empty());
    app["spec"]["valuesFrom"] = json!([{ "kind": "ConfigMap", "name": "edgex-settings" }]);
    let rendered = render(&app.to_string(), POOLS, "edge", None).unwrap();
    assert_eq!(rendered.warnings.len(), 1, "{:?}", rendered.warnings);
    for said in [
        "ConfigMap edgex-settings",
        "every pool at once",
        "new valuesFrom name",
    ] {
        assert!(rendered.warnings[0].contains(said), "{said} in {}", rendered.warnings[0]);
    }
    app["spec"]["rollout"]["strategy"] = json!("AllAtOnce");
    assert!(
        render(&app.to_string(), POOLS, "edge", None).unwrap().warnings.is_empty(),
        "no rollout to go around"
    );
}
