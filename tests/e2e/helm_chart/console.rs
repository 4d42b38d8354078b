//! The chart's console: off by default, and when on, what
//! `deploy/console` installs, with each identity it offers.
use super::*;

fn is_console(object: &Value) -> bool {
    object["metadata"]["name"].as_str().is_some_and(|n| n.contains("-console"))
}

#[test]
fn the_console_is_off_by_default_and_renders_what_deploy_console_installs() {
    let defaults = render_defaults();
    assert!(!defaults.iter().any(is_console), "the default render has a console");
    assert!(!deploy_objects().iter().any(is_console), "deploy/ installs a console");

    let read_only = kustomize(&repo_root().join("deploy/console"));
    let chart: Vec<Value> = render(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true } }))
        .into_iter()
        .filter(is_console)
        .collect();
    differences(&read_only, &chart, "deploy/console").assert_none("console.enabled against deploy/console");

    // With the proxy component, as its kustomization says to include it.
    let with_proxy = console_with("proxy");
    let chart: Vec<Value> =
        render(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true, "identity": "proxy" } }))
            .into_iter()
            .filter(is_console)
            .collect();
    differences(&kustomize(&with_proxy), &chart, "deploy/console with proxy/")
        .assert_none("console.identity=proxy against deploy/console with proxy/");
    // Behind the proxy, only the proxy is reachable: the console on the
    // Pod's loopback with no port of its own, the Pod admitting the
    // proxy's port alone.
    let pod = &one(&chart, "Deployment")["spec"]["template"]["spec"];
    let console = &pod["containers"][0];
    assert!(
        console["args"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("--address=127.0.0.1:8090"))),
        "{console}"
    );
    assert!(console.get("ports").is_none(), "the console's own port is open: {console}");
    assert_eq!(pod["containers"][1]["ports"], json!([{ "name": "http", "containerPort": 4180 }]));
    let policy = one(&chart, "NetworkPolicy");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(policy["spec"]["ingress"], json!([{ "ports": [{ "protocol": "TCP", "port": "http" }] }]));
    assert_eq!(one(&chart, "Service")["spec"]["ports"][0]["targetPort"], "http");

    // Its own identity, never the controller's, and no write but Events.
    let deployment = one(&chart, "Deployment");
    assert_eq!(deployment["spec"]["template"]["spec"]["serviceAccountName"], "nodepool-fanout-console");
    assert_runs_as_image_user(&deployment["spec"]["template"]["spec"], "the console's Deployment");
    let reads = of_kind(&read_only, "ClusterRole");
    assert_eq!(reads.len(), 1);
    for rule in reads[0]["rules"].as_array().expect("rules") {
        let verbs: BTreeSet<&str> =
            rule["verbs"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let resources = &rule["resources"];
        let allowed: BTreeSet<&str> = match resources[0].as_str() {
            Some("events") => ["create", "patch", "list", "watch"].into(),
            Some("selfsubjectreviews") => ["create"].into(),
            _ => ["get", "list", "watch"].into(),
        };
        assert!(verbs.is_subset(&allowed), "the console may {verbs:?} {resources}");
    }
}

/// deploy/console with one of its components, as a kustomization of the
/// user's own includes it.
fn console_with(component: &str) -> std::path::PathBuf {
    let dir = scratch().join(format!("console-{component}"));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    // Kustomize takes only relative paths.
    let depth = dir
        .strip_prefix(repo_root())
        .expect("scratch is in the repository")
        .components()
        .count();
    let console = format!("{}deploy/console", "../".repeat(depth));
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!("resources: [{console}]\ncomponents: [{console}/{component}]\n"),
    )
    .expect("a kustomization");
    dir
}

#[test]
fn the_console_that_signs_people_in_renders_what_deploy_console_oidc_installs() {
    let chart: Vec<Value> =
        render(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true, "identity": "oidc" } }))
            .into_iter()
            .filter(is_console)
            .collect();
    differences(&kustomize(&console_with("oidc")), &chart, "deploy/console with oidc/")
        .assert_none("console.identity=oidc against deploy/console with oidc/");
    // One container, serving its own port, its settings from the Secret;
    // allowed to act as the people it signs in.
    let pod = &one(&chart, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1), "{pod}");
    let console = &pod["containers"][0];
    assert_eq!(console["args"], json!(["ui", "--address=0.0.0.0:8090", "--identity=oidc"]));
    assert_eq!(console["envFrom"], json!([{ "secretRef": { "name": "nodepool-fanout-console-oidc" } }]));
    assert_eq!(of_kind(&chart, "ClusterRole").len(), 2, "reads, and impersonation");
    assert!(
        of_kind(&chart, "NetworkPolicy").is_empty(),
        "it signs people in itself: no proxy to guard"
    );

    // The values are the flags, in the API server's words.
    let values = json!({ "console": { "enabled": true, "identity": "oidc", "oidc": {
        "issuerURL": "https://dex.example.test", "clientID": "fleet", "redirectURL": "https://fleet.example.test/auth/callback",
        "usernameClaim": "email", "groupsClaim": "roles", "groupsPrefix": "oidc:", "extraScopes": ["groups", "email"],
        "sessionLifetime": "4h" } } });
    let chart: Vec<Value> = render(RELEASE, NAMESPACE, &values).into_iter().filter(is_console).collect();
    let args = &one(&chart, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"];
    for flag in [
        "--oidc-issuer-url=https://dex.example.test",
        "--oidc-client-id=fleet",
        "--oidc-redirect-url=https://fleet.example.test/auth/callback",
        "--oidc-username-claim=email",
        "--oidc-groups-claim=roles",
        "--oidc-groups-prefix=oidc:",
        "--oidc-extra-scope=groups,email",
        "--session-lifetime=4h",
    ] {
        assert!(args.as_array().is_some_and(|a| a.contains(&json!(flag))), "{flag} in {args}");
    }
    assert!(!args.to_string().contains("username-prefix"), "an empty value is no flag: {args}");
}

#[test]
fn a_console_identity_that_is_not_known_is_refused() {
    let refused =
        template_text(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true, "identity": "kerberos" } }));
    let message = refused.expect_err("rendered an unknown identity");
    assert!(message.contains("console.identity must be none, proxy or oidc"), "{message}");
}
