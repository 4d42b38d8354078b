//! The text LZ4 is primed with: what a HelmRelease this controller writes
//! holds whatever its pool (our labels and annotations, Flux's spec, the
//! placement patches of each kind of pool), so that a packed release
//! keeps little beyond its pool's name, its values and its hashes.
//! Packed alone, the placement patches of one release must each be spelt
//! out once; primed, each is a reference into this text. What the cache
//! keeps of a release of `make bench-rollout-scale`, 2,010 bytes of text,
//! packs to 900 bytes alone and to 343 primed (the test below).
//!
//! Made once per process from the release builder itself, so that it
//! follows what releases hold; it never leaves the process (the packed
//! bytes are read back only here, with the same text).

use serde_json::{json, Value};

use crate::api::{naming, NodePoolApplicationSpec, PoolKind};
use crate::pools::{kind, Pool};
use crate::reconcile::drift;
use crate::reconcile::release::build::{self, AppInfo};
use crate::values::template::Renderer;

/// Fields the API server or Flux add to a release we write, and Flux's
/// own wording, which live releases hold beside what we wrote.
const ADDED_BY_OTHERS: &str = concat!(
    r#""reconcileStrategy":"ChartVersion","version":"*","finalizers":["finalizers.fluxcd.io"],"#,
    r#""Helm install succeeded for release ","Helm upgrade succeeded for release "," with chart ""#,
);

/// The priming text: a release built for a pool of each kind that has
/// placement patches, as drift reads it ([`drift::compared_part`]), then
/// what others add. Empty if the sample cannot be built, which only
/// packs less tightly.
pub(super) fn text() -> Vec<u8> {
    let mut text = String::new();
    for kind in [
        PoolKind::KubeEdge,
        PoolKind::SuperEdge,
        PoolKind::NodeLabel,
        PoolKind::OpenYurt,
    ] {
        if let Some(sample) = sample(kind) {
            text.push_str(&drift::compared_part(&sample).to_string());
        }
    }
    text.push_str(ADDED_BY_OTHERS);
    text.into_bytes()
}

/// The node label a sample `NodeLabel` application's pools are the values of.
const SAMPLE_NODE_LABEL: &str = "topology.kubernetes.io/zone";

/// A release of an application with no values for a pool with an empty
/// name, of `kind` (a node label's pools by [`SAMPLE_NODE_LABEL`]).
fn sample(kind: PoolKind) -> Option<Value> {
    let pools = match kind {
        PoolKind::NodeLabel => json!({ "kind": "NodeLabel", "nodeLabel": SAMPLE_NODE_LABEL }),
        other => json!({ "kind": other }),
    };
    let spec: NodePoolApplicationSpec = serde_json::from_value(json!({
        "pools": pools,
        "chart": { "spec": { "chart": "", "version": "",
            "sourceRef": { "kind": "HelmRepository", "name": "", "namespace": "flux-system" } } },
        "interval": "10m",
    }))
    .ok()?;
    let marks = match kind::objects(kind) {
        Some(objects) => objects.membership(),
        None => crate::pools::nodes::Membership::Label(SAMPLE_NODE_LABEL.into()),
    };
    let pool = Pool {
        marks,
        ..Pool::named("")
    };
    let app = AppInfo {
        name: "",
        namespace: "",
        uid: Some(""),
        spec: &spec,
        chart_ref: None,
        chart: None,
        shard: Some(""),
        requests: &[],
    };
    let built = build::release(&app, &pool, &Renderer::new(), None).ok()?;
    let mut object = built.object;
    object["metadata"]["labels"][naming::LABEL_SHARD] = json!("");
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::packed::PackedJson;

    #[test]
    fn it_holds_a_release_of_each_kind_of_pool_with_placement() {
        let text = String::from_utf8(text()).expect("JSON text");
        for needle in [
            "apps.openyurt.io/nodepool",
            "apps.kubeedge.io/belonging-to",
            SAMPLE_NODE_LABEL,
            naming::LABEL_MANAGED_BY,
            naming::ANNOTATION_SPEC_HASH,
            "pool-placement",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
    }

    /// A release as `make bench-rollout-scale` writes it, packed as the
    /// cache keeps it: 2,010 bytes of text, 900 packed alone, 343 primed
    /// when this test was written.
    #[test]
    fn a_release_packs_to_less_than_half_of_what_it_takes_unprimed() {
        let spec: NodePoolApplicationSpec = serde_json::from_value(json!({
            "pools": { "selector": { "matchLabels": { "region": "east" } } },
            "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } },
            "interval": "10m",
            "values": { "controller": { "config": { "log-level": "debug" },
                "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" } } },
        }))
        .expect("a spec");
        let app = AppInfo {
            name: "fleet",
            namespace: "rollout-scale-84b98",
            uid: Some("5e0c32fe-b731-4876-b9a3-9d9680926df5"),
            spec: &spec,
            chart_ref: None,
            chart: None,
            shard: None,
            requests: &[],
        };
        let pool = Pool::named("rollout-scale-84b98-p17");
        let built = build::release(&app, &pool, &Renderer::new(), None).expect("a release");
        let text = drift::compared_part(&built.object).to_string();
        let alone = lz4_flex::compress_prepend_size(text.as_bytes()).len();
        let packed = PackedJson::new(&text);
        assert_eq!(packed.text(), text, "read back whole");
        assert!(packed.packed_len() * 2 < alone, "{} primed, {alone} alone", packed.packed_len());
    }
}
