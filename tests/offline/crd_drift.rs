//! The committed CRD must be what the Rust types generate, or the cluster
//! would validate against a schema the controller does not speak.

#[test]
fn committed_crd_matches_the_rust_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/apps.fanout.dev_nodepoolapplications.yaml");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = nodepool_fanout::api::crds_yaml().expect("the CRD serializes");
    assert!(
        committed == generated,
        "crds/apps.fanout.dev_nodepoolapplications.yaml is out of date; regenerate it with \
         `cargo run -- crd > crds/apps.fanout.dev_nodepoolapplications.yaml`"
    );
}
