//! Unit tests of `source`.

use super::download::Verifier;
use super::*;
use serde_json::json;
use sha2::{Digest, Sha256, Sha384, Sha512};

#[test]
fn index_versions_by_chart() {
    let index = b"apiVersion: v1\nentries:\n  ingress-gateway:\n  - version: 1.1.0\n    urls: [a]\n  - version: 1.0.0\n  edgex-lite:\n  - version: 0.3.0\ngenerated: now\n";
    let v = parse_index(index, "flux-system/fixtures").unwrap();
    assert_eq!(v["ingress-gateway"], vec!["1.1.0", "1.0.0"]);
    assert_eq!(v["edgex-lite"], vec!["0.3.0"]);
}

/// An index as a public Helm repository serves it: every field Helm
/// writes, for `charts` charts of `versions` versions each.
fn public_index(charts: usize, versions: usize) -> String {
    let mut text = String::from("apiVersion: v1\nentries:\n");
    for c in 0..charts {
        text.push_str(&format!("  chart-{c}:\n"));
        for v in 0..versions {
            text.push_str(&format!(
                "  - apiVersion: v2\n    appVersion: {v}.0.0\n    created: \"2026-01-01T00:00:00Z\"\n    \
                 description: A chart of the fleet, version {v}\n    \
                 digest: 6f0c5a7c3b5e1f4f2d0d9c8b7a6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e\n    \
                 home: https://example.com/chart-{c}\n    keywords: [edge, gateway, fleet]\n    \
                 maintainers:\n    - email: team@example.com\n      name: team\n    name: chart-{c}\n    \
                 sources: [https://example.com/src/chart-{c}]\n    type: application\n    \
                 urls: [https://example.com/charts/chart-{c}-{v}.0.0.tgz]\n    version: {v}.0.0\n"
            ));
        }
    }
    text.push_str("generated: \"2026-01-01T00:00:00Z\"\n");
    text
}

#[test]
fn an_index_of_ten_thousand_entries_is_read() {
    let text = public_index(100, 100);
    assert!(text.len() < MAX_INDEX_BYTES as usize);
    let v = parse_index(text.as_bytes(), "flux-system/public").unwrap();
    assert_eq!(v.values().map(Vec::len).sum::<usize>(), 10_000);
    assert_eq!(v["chart-7"][42], "42.0.0");
}

#[test]
fn a_broken_index_names_the_repository() {
    let e = parse_index(b"entries: [: :", "flux-system/fixtures").unwrap_err();
    assert!(e.to_string().contains("flux-system/fixtures"), "{e}");
}

#[test]
fn artifacts_need_url_and_digest() {
    let ready = json!({ "metadata": { "name": "r", "namespace": "n" },
            "status": { "artifact": { "url": "http://x/index.yaml", "digest": "sha256:00" } } });
    assert_eq!(artifact_of(&ready, "HelmRepository").unwrap().url, "http://x/index.yaml");
    let pending = json!({ "metadata": { "name": "r", "namespace": "n" },
            "status": { "conditions": [{ "type": "Ready", "status": "False", "message": "fetch failed: 404" }] } });
    let e = artifact_of(&pending, "HelmRepository").unwrap_err();
    assert!(e.to_string().contains("fetch failed: 404"), "{e}");
    assert_eq!(e.reason(), "SourceNotReady");
    assert!(!e.needs_user());
}

#[test]
fn an_artifact_of_an_older_generation_is_not_used() {
    let chart = |generation: i64, observed: Option<i64>| {
        json!({ "metadata": { "name": "c", "namespace": "n", "generation": generation },
                "status": { "observedGeneration": observed,
                    "artifact": { "url": "http://x/c-1.0.0.tgz", "digest": "sha256:00" } } })
    };
    assert!(artifact_of(&chart(2, Some(2)), "HelmChart").is_ok());
    for stale in [chart(3, Some(2)), chart(1, None)] {
        let e = artifact_of(&stale, "HelmChart").unwrap_err();
        assert_eq!(e.reason(), "SourceNotReady", "{e}");
        assert!(e.to_string().contains("has not yet reconciled generation"), "{e}");
        assert!(!e.needs_user());
    }
}

#[test]
fn a_stalled_chart_needs_the_user() {
    let stalled = json!({ "metadata": { "name": "c", "namespace": "flux-system", "generation": 1 },
            "status": { "observedGeneration": 1, "conditions": [
                { "type": "Stalled", "status": "True", "message": "no values file found at path 'x.yaml'" },
                { "type": "Ready", "status": "False", "message": "no values file found at path 'x.yaml'" } ] } });
    let e = artifact_of(&stalled, "HelmChart").unwrap_err();
    assert!(e.needs_user(), "{e}");
    assert_eq!(e.reason(), "SourceFailed");
    assert!(e.to_string().starts_with("HelmChart flux-system/c failed"), "{e}");
    assert!(e.to_string().contains("'x.yaml'"), "{e}");
}

#[test]
fn every_chart_source_kind_has_its_resource() {
    for (kind, plural) in [
        ("HelmRepository", "helmrepositories"),
        ("GitRepository", "gitrepositories"),
        ("Bucket", "buckets"),
    ] {
        let (named, resource) = chart_source_resource(kind).unwrap();
        assert_eq!((named, resource.kind.as_str()), (kind, kind));
        assert_eq!(resource.plural, plural);
        assert_eq!(resource.api_version, "source.toolkit.fluxcd.io/v1");
    }
    assert!(chart_source_resource("OCIRepository").is_none());
}

#[test]
fn a_helmchart_names_its_source_in_its_own_namespace() {
    let chart = json!({ "metadata": { "name": "c", "namespace": "flux-system" },
            "spec": { "sourceRef": { "kind": "GitRepository", "name": "no-such-git" } } });
    assert_eq!(source_of(&chart), Some(("GitRepository", "flux-system", "no-such-git")));
    assert_eq!(source_of(&json!({ "metadata": { "name": "c" } })), None);
}

#[test]
fn a_missing_source_names_kind_namespace_and_name_and_needs_the_user() {
    let e = SourceError::Missing {
        kind: "GitRepository",
        namespace: "flux-system".into(),
        name: "no-such-git".into(),
    };
    assert_eq!(e.reason(), "SourceNotFound");
    assert!(e.needs_user());
    assert!(e.to_string().starts_with("GitRepository flux-system/no-such-git does not exist"), "{e}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `bytes` match `digest`; `None` for an algorithm that cannot be verified.
fn digest_matches(digest: &str, bytes: &[u8]) -> Option<bool> {
    let mut verifier = Verifier::new(digest)?;
    verifier.update(bytes);
    Some(verifier.matches())
}

#[test]
fn every_algorithm_source_controller_offers_is_verified() {
    let digests = [
        format!("sha256:{}", hex(&Sha256::digest(b"abc"))),
        format!("sha384:{}", hex(&Sha384::digest(b"abc"))),
        format!("sha512:{}", hex(&Sha512::digest(b"abc"))),
        format!("blake3:{}", blake3::hash(b"abc").to_hex()),
    ];
    for digest in &digests {
        assert_eq!(digest_matches(digest, b"abc"), Some(true), "{digest}");
        assert_eq!(digest_matches(digest, b"abd"), Some(false), "{digest}");
        let (algorithm, hex) = digest.split_once(':').unwrap();
        let upper = format!("{algorithm}:{}", hex.to_uppercase());
        assert_eq!(digest_matches(&upper, b"abc"), Some(true), "hex in capitals: {digest}");
    }
    // Published vectors, so the check does not only agree with itself.
    assert_eq!(
        digest_matches("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", b"abc"),
        Some(true)
    );
    assert_eq!(
        digest_matches("blake3:6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85", b"abc"),
        Some(true)
    );
}

#[test]
fn an_unknown_or_malformed_digest_is_refused_not_trusted() {
    // Was: anything but sha256 matched, and was cached under that digest.
    assert_ne!(digest_matches("blake3:whatever", b"abc"), Some(true));
    for digest in [
        "md5:900150983cd24fb0d6963f7d28e17f72",
        "sha1:a9993e36",
        "sha256",
        "",
    ] {
        assert_eq!(digest_matches(digest, b"abc"), None, "{digest:?}");
    }
    let e = SourceError::UnknownDigest {
        url: "http://x/c.tgz".into(),
        digest: "md5:00".into(),
        known: Verifier::KNOWN,
    };
    assert!(e.needs_user());
    assert_eq!(e.reason(), "UnsupportedDigest");
    assert!(e.to_string().contains("--artifact-digest-algo"), "{e}");
}

#[tokio::test]
async fn an_index_that_failed_to_parse_is_not_downloaded_again() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    // A repository whose index is broken, counting its downloads.
    const BROKEN: &str = "entries: [: :";
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let app = axum::Router::new().route(
        "/index.yaml",
        axum::routing::get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { BROKEN }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let sources = Sources::new(kube::Client::try_from(config).unwrap());
    let digest = |body: &str| {
        use sha2::Digest as _;
        let hex: String = sha2::Sha256::digest(body).iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    };
    let artifact = Artifact {
        url: format!("http://{address}/index.yaml"),
        digest: digest(BROKEN),
    };
    for _ in 0..3 {
        let e = sources.index(&artifact, "flux-system/broken").await.unwrap_err();
        assert_eq!(e.reason(), "InvalidIndex", "{e}");
        assert!(e.needs_user(), "a person must fix the repository: {e}");
    }
    assert_eq!(served.load(Ordering::SeqCst), 1, "downloaded once");
}
