//! The committed CRD must be what the Rust types generate, or the cluster
//! would validate against a schema the controller does not speak; and the
//! committed API reference too, or it would document another schema.

use clap::Parser;
use nodepool_fanout::cli::{execute, Cli};

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

#[test]
fn committed_api_reference_matches_the_rust_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference/api.md");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = nodepool_fanout::api::reference::api_reference();
    assert!(
        committed == generated,
        "docs/reference/api.md is out of date; regenerate it with `make api-reference` \
         (`cargo run -- crd --reference > docs/reference/api.md`)"
    );
}

/// `crd --reference` prints the reference, and `crd` alone the CRD.
#[tokio::test]
async fn the_crd_command_prints_the_reference_on_request() {
    for (args, expected) in [
        (
            &["nodepool-fanout", "crd", "--reference"][..],
            nodepool_fanout::api::reference::api_reference(),
        ),
        (
            &["nodepool-fanout", "crd"][..],
            nodepool_fanout::api::crds_yaml().expect("the CRD serializes"),
        ),
    ] {
        let cli = Cli::try_parse_from(args).expect("the command parses");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert!(execute(cli, &mut out, &mut err).await.expect("the command runs"), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out), expected, "{args:?}");
    }
}
