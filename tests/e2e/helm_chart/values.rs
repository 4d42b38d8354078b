//! Non-default values land where they should (flags, environment,
//! monitoring, sharding), and contradictory ones are refused.
use super::*;

/// The long flags `nodepool-fanout run` accepts, from its own help.
fn run_flags() -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_nodepool-fanout"))
        .args(["run", "--help"])
        .output()
        .expect("nodepool-fanout run --help");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

fn container(objects: &[Value]) -> &Value {
    &one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string argument").to_string())
        .collect()
}

fn assert_flags_known(objects: &[Value]) {
    let known = run_flags();
    for arg in args(objects).iter().skip(1) {
        let flag = arg.split('=').next().unwrap_or(arg);
        assert!(known.contains(flag), "`nodepool-fanout run` has no flag {flag} (the chart passes {arg})");
    }
}

fn env_value<'a>(container: &'a Value, name: &str) -> &'a Value {
    container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == name))
        .map(|e| &e["value"])
        .unwrap_or(&Value::Null)
}

#[test]
fn non_default_values_land() {
    let defaults = render_defaults();
    assert_flags_known(&defaults);
    let edge_rule = &one(&defaults, "Deployment")["spec"]["template"]["spec"]["affinity"];
    let terms =
        &edge_rule["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    assert_eq!(
        terms,
        &json!([{ "matchExpressions": [
            { "key": "openyurt.io/is-edge-worker", "operator": "NotIn", "values": ["true"] },
            { "key": "node-role.kubernetes.io/edge", "operator": "DoesNotExist" }
        ] }]),
        "by default the controller keeps off OpenYurt's and KubeEdge's edge nodes"
    );

    // A monitored shard, without the NetworkPolicy.
    let objects = render(RELEASE, NAMESPACE, &monitored_shard_values());
    assert_flags_known(&objects);
    assert_eq!(
        args(&objects),
        [
            "run",
            "--log-format=text",
            "--leader-election=true",
            "--no-cross-namespace-refs=false",
            "--watch-label-selector=sharding.fluxcd.io/key=shard1",
            "--watch-namespace=fleet-a",
            "--concurrent=8",
            "--resync=10m",
            "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
            "--kube-api-qps=100",
        ]
    );
    let deployment = one(&objects, "Deployment");
    let pod = &deployment["spec"]["template"];
    let c = container(&objects);
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(c["image"], "registry.example/edge/nodepool-fanout:9.9.9");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(env_value(c, "RUST_LOG"), "info,nodepool_fanout=debug");
    assert_eq!(env_value(c, "EXTRA"), "1");
    assert_eq!(c["resources"], monitored_shard_values()["resources"]);
    assert_eq!(pod["spec"]["nodeSelector"], json!({ "kubernetes.io/os": "linux" }));
    assert_eq!(pod["spec"]["tolerations"], monitored_shard_values()["tolerations"]);
    assert_eq!(
        pod["spec"]["affinity"],
        monitored_shard_values()["affinity"],
        "the given nodeSelectorTerms replace the default edge rule"
    );
    assert_eq!(pod["metadata"]["annotations"]["example.com/team"], "edge");
    assert_eq!(
        pod["metadata"]["annotations"]["prometheus.io/scrape"], "true",
        "podAnnotations add to the defaults"
    );
    assert!(of_kind(&objects, "NetworkPolicy").is_empty(), "networkPolicy.enabled=false");
    assert_eq!(one(&objects, "PodDisruptionBudget")["spec"]["minAvailable"], 1);

    // The ServiceMonitor scrapes the metrics Service, which serves the pods' metrics port.
    let monitor = one(&objects, "ServiceMonitor");
    let service = one(&objects, "Service");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert!(
        is_subset(&monitor["spec"]["selector"]["matchLabels"], &service["metadata"]["labels"]),
        "the ServiceMonitor selects the Service: {} against {}",
        monitor["spec"]["selector"],
        service["metadata"]["labels"]
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["interval"], "30s");
    assert_eq!(endpoint["path"], "/metrics");
    let service_port = &service["spec"]["ports"][0];
    assert_eq!(endpoint["port"], service_port["name"], "the endpoint names the Service's port");
    assert_eq!(service["spec"]["selector"], *pod_selector(deployment), "the Service selects the pods");
    let ports = c["ports"].as_array().expect("container ports");
    assert!(
        ports.iter().any(|p| p["name"] == service_port["targetPort"]),
        "the Service targets the container's port: {service_port} against {ports:?}"
    );

    // Another release in another namespace, Flux elsewhere, one replica
    // serving the unsharded rest, scheduled anywhere.
    let values = json!({
        "replicaCount": 1,
        "leaderElection": false,
        "watchLabelSelector": "!sharding.fluxcd.io/key",
        "fluxNamespace": "flux",
        "affinity": null
    });
    let objects = render("edge", "fanout", &values);
    assert_flags_known(&objects);
    assert_eq!(
        args(&objects),
        [
            "run",
            "--log-format=json",
            "--leader-election=false",
            "--no-cross-namespace-refs=true",
            "--watch-label-selector=!sharding.fluxcd.io/key"
        ]
    );
    let deployment = one(&objects, "Deployment");
    assert!(
        deployment["spec"]["template"]["spec"].get("affinity").is_none(),
        "affinity: null drops the edge rule"
    );
    assert!(of_kind(&objects, "PodDisruptionBudget").is_empty(), "no PDB for a single replica");
    assert!(of_kind(&objects, "ServiceMonitor").is_empty() && of_kind(&objects, "Service").is_empty());
    let policy = one(&objects, "NetworkPolicy");
    assert_eq!(policy["metadata"]["namespace"], "flux", "the policy is beside Flux");
    let peer = &policy["spec"]["ingress"][0]["from"][0];
    assert_eq!(peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], "fanout");
    assert_eq!(peer["podSelector"]["matchLabels"], *pod_selector(deployment));
    let service_account = one(&objects, "ServiceAccount");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        service_account["metadata"]["name"]
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let namespace = &object["metadata"]["namespace"];
        match kind {
            "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding" => {
                assert!(namespace.is_null(), "{kind} is cluster-scoped: {namespace}")
            }
            "NetworkPolicy" => {}
            _ => assert_eq!(
                namespace, "fanout",
                "{kind} {} is in the release's namespace",
                object["metadata"]["name"]
            ),
        }
        if kind.ends_with("Binding") {
            assert_eq!(
                object["subjects"],
                json!([{ "kind": "ServiceAccount", "name": service_account["metadata"]["name"], "namespace": "fanout" }]),
                "{kind} binds the release's ServiceAccount"
            );
        }
        if kind.starts_with("Cluster") {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            assert!(name.starts_with("edge-"), "cluster-wide names are the release's own: {name}");
        }
    }
}

#[test]
fn contradictory_values_are_refused() {
    for (values, expected) in [
        (json!({ "shard": "a", "watchLabelSelector": "x=y" }), "not both"),
        (json!({ "replicaCount": 2, "leaderElection": false }), "needs leaderElection"),
        (json!({ "logFormat": "yaml" }), "logFormat"),
    ] {
        match template_text(RELEASE, NAMESPACE, &values) {
            Ok(_) => panic!("helm template accepted {values}"),
            Err(e) => assert!(e.contains(expected), "{values}: {e}"),
        }
    }
}
