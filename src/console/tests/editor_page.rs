//! The editor: what it previews and what it says is wrong.

use super::*;

#[tokio::test]
async fn the_editor_previews_what_it_can_and_says_what_is_wrong() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(kubeconfig_user()));
    let (status, _, page) = send(console.clone(), Request::get("/new").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("kind: NodePoolApplication") && page.contains("Copy YAML"), "{page}");
    let token = token_in(&page);
    // The template is an application as it stands.
    let template = page
        .split("name=\"yaml\"")
        .nth(1)
        .and_then(|t| t.split_once('>'))
        .map(|(_, t)| t)
        .unwrap();
    let template = template.split("</textarea>").next().unwrap().replace("&quot;", "\"");
    assert!(crate::cli::render::parse_app(&template, "default").is_ok(), "{template}");
    let form = |yaml: &str, action: &str| {
        serde_urlencoded::to_string([("csrf", token.as_str()), ("yaml", yaml), ("action", action)]).unwrap()
    };
    // Not an application: said, and the YAML kept to fix.
    let (status, _, page) = send(console.clone(), post("/editor", &form("kind: [", "preview"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("role=\"alert\"") && page.contains("kind: ["), "{page}");
    // An application over no pool: the preview says so.
    let yaml = super::editor::editable(
        &serde_json::from_value::<NodePoolApplication>(json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "gw", "namespace": "edge", "uid": "u1", "resourceVersion": "7" },
            "spec": { "interval": "10m", "pools": { "selector": { "matchLabels": { "region": "east" } } },
                      "chart": { "spec": { "chart": "gw", "version": "1.0.0",
                                 "sourceRef": { "kind": "HelmRepository", "name": "charts" } } } }
        }))
        .unwrap(),
    );
    assert!(!yaml.contains("uid") && !yaml.contains("resourceVersion"), "{yaml}");
    let (status, _, page) = send(console.clone(), post("/editor", &form(&yaml, "preview"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Preview: 0 pools") && page.contains("no node pool matches"), "{page}");
    // As one types: what it selects, or why that cannot be told.
    let pools = |yaml: &str| serde_urlencoded::to_string([("csrf", token.as_str()), ("yaml", yaml)]).unwrap();
    let (status, _, fragment) = send(console.clone(), post("/editor/pools", &pools(&yaml))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(fragment.contains("selects no pool"), "{fragment}");
    let (_, _, fragment) = send(console.clone(), post("/editor/pools", &pools("kind: ["))).await;
    assert!(fragment.contains("class=\"error\""), "{fragment}");
    // From the form, field by field: the YAML of the same object.
    let fields = serde_urlencoded::to_string([
        ("csrf", token.as_str()),
        ("name", "gw"),
        ("namespace", "edge"),
        ("chart", "gw"),
        ("version", "1.0.0"),
        ("source_kind", "HelmRepository"),
        ("source_name", "charts"),
        ("selector", "region=east, tier = edge"),
        ("values", "controller: { replicas: 2 }"),
        ("overrides", "- { pools: { names: [hangzhou] }, values: { controller: { replicas: 3 } } }"),
    ])
    .unwrap();
    let (status, _, page) = send(console.clone(), post("/editor/form", &fields)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let yaml = page
        .split("name=\"yaml\"")
        .nth(1)
        .and_then(|t| t.split_once('>'))
        .map(|(_, t)| t)
        .unwrap();
    let yaml = yaml.split("</textarea>").next().unwrap().replace("&quot;", "\"");
    let app = crate::cli::render::parse_app(&yaml, "default").expect("the form makes an application");
    let values = serde_json::to_value(&app.spec.values).unwrap();
    assert_eq!(values["controller"]["replicas"], json!(2), "{yaml}");
    assert!(yaml.contains("tier: edge") && yaml.contains("hangzhou"), "{yaml}");
    let bad = serde_urlencoded::to_string([("csrf", token.as_str()), ("selector", "region")]).unwrap();
    let (status, _, page) = send(console.clone(), post("/editor/form", &bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("key=value"), "{page}");
    // A stale token is refused, whatever the button.
    let stale = serde_urlencoded::to_string([("csrf", "1.00"), ("yaml", yaml.as_str()), ("action", "apply")])
        .unwrap();
    let (status, _, _) = send(console.clone(), post("/editor", &stale)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A delete wants the name typed.
    let wrong = serde_urlencoded::to_string([("csrf", token.as_str()), ("confirm", "g")]).unwrap();
    let (status, _, page) = send(console.clone(), post("/apps/edge/gw/delete", &wrong)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("type the application") && page.contains("gw"), "{page}");
    // A read-only console has no editor.
    let read_only = router(Arc::new(Fixed(Ok(fleet()))), None);
    let (status, _, _) = send(read_only, Request::get("/new").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
