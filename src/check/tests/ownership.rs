//! Who drives and holds what: two releases on one Helm release or one
//! object, and our field manager on a release we do not own.
use super::*;

#[test]
fn two_releases_driving_one_helm_release_or_holding_one_object_are_caught() {
    let mut checker = Checker::new();
    let mut a = release("gw", "a", 10, 1, "r1", "h1", true);
    a["status"]["inventory"] =
        json!({ "entries": [{ "id": "_nginx_networking.k8s.io_IngressClass", "v": "v1" }] });
    assert!(seen(&mut checker, 0, Kind::HelmRelease, a).is_empty());
    let mut b = release("gw", "b", 11, 1, "r1", "h1", true);
    b["status"]["inventory"] =
        json!({ "entries": [{ "id": "_nginx_networking.k8s.io_IngressClass", "v": "v1" }] });
    let found = seen(&mut checker, 1, Kind::HelmRelease, b);
    assert_eq!(of(&found, Invariant::Isolation), 1, "{found:?}");
    assert!(found[0].message.contains("_nginx_networking.k8s.io_IngressClass"), "{}", found[0].message);
    // The same Helm release name, one cluster.
    let mut c = release("gw", "c", 12, 1, "r1", "h1", true);
    c["spec"] = json!({ "releaseName": "gw-a", "targetNamespace": "a" });
    let found = seen(&mut checker, 2, Kind::HelmRelease, c.clone());
    assert_eq!(of(&found, Invariant::Isolation), 1, "{found:?}");
    assert!(found[0].message.contains("both drive the Helm release edge/gw-a"), "{}", found[0].message);
    // Suspended (inert), it drives nothing; in a site cluster, it is another Helm release.
    c["spec"]["suspend"] = json!(true);
    assert_eq!(of(&seen(&mut checker, 3, Kind::HelmRelease, c.clone()), Invariant::Isolation), 0);
    c["spec"]["suspend"] = json!(false);
    c["spec"]["kubeConfig"] = json!({ "secretRef": { "name": "site-1-kubeconfig" } });
    assert_eq!(of(&seen(&mut checker, 4, Kind::HelmRelease, c), Invariant::Isolation), 0);
}

#[test]
fn our_field_manager_on_a_release_we_do_not_own_is_caught() {
    let mut checker = Checker::new();
    let mut foreign = release("gw", "a", 10, 1, "r1", "h1", true);
    foreign["metadata"]["ownerReferences"] = json!([]);
    foreign["metadata"]["managedFields"] = json!([{ "manager": "kubectl", "operation": "Apply" }]);
    assert!(seen(&mut checker, 0, Kind::HelmRelease, foreign.clone()).is_empty());
    foreign["metadata"]["managedFields"] =
        json!([{ "manager": "kubectl" }, { "manager": "nodepool-fanout-inert" }]);
    let found = seen(&mut checker, 1, Kind::HelmRelease, foreign.clone());
    assert_eq!(of(&found, Invariant::Ownership), 1, "{found:?}");
    assert!(found[0].message.contains("nodepool-fanout-inert"), "{}", found[0].message);
    // Reported once, however many records show it again.
    assert!(seen(&mut checker, 1, Kind::HelmRelease, foreign.clone()).is_empty());
    // Orphaned by its application (deletionPolicy: Orphan): ours before, said so.
    foreign["metadata"]["annotations"]["apps.fanout.dev/orphaned-from"] = json!("edge/gw");
    assert_eq!(of(&seen(&mut checker, 2, Kind::HelmRelease, foreign), Invariant::Ownership), 0);
    let summary = checker.summary().to_string();
    assert!(summary.contains("ownership") && summary.contains("4 records read"), "{summary}");
    assert_eq!(checker.summary().violations.get(&Invariant::Ownership), Some(&1));
}

/// A release is ours only when the application its label names owns it,
/// by a uid that application had (E10: any application's ownership used
/// to count).
#[test]
fn a_release_owned_by_another_application_or_a_uid_it_never_had_is_caught() {
    let mut checker = Checker::new();
    let mut gw = application("gw", 1, json!({}), "r1", "Complete", 1);
    gw["metadata"]["uid"] = json!("u");
    assert!(seen(&mut checker, 0, Kind::Application, gw.clone()).is_empty());
    assert!(seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 2, 1, "r1", "h1", true)).is_empty());

    let mut stolen = release("gw", "b", 3, 1, "r1", "h1", true);
    stolen["metadata"]["ownerReferences"][0]["uid"] = json!("someone-else");
    let found = seen(&mut checker, 2, Kind::HelmRelease, stolen);
    assert_eq!(of(&found, Invariant::Ownership), 1, "{found:?}");
    assert!(found[0].message.contains("uid someone-else, which it never had"), "{}", found[0].message);

    let mut relabelled = release("gw", "c", 4, 1, "r1", "h1", true);
    relabelled["metadata"]["labels"]["apps.fanout.dev/application"] = json!("other");
    let found = seen(&mut checker, 3, Kind::HelmRelease, relabelled);
    assert_eq!(of(&found, Invariant::Ownership), 1, "{found:?}");
    assert!(found[0].message.contains("its label names other"), "{}", found[0].message);

    // Deleted and made again: the first one's releases stay its own while
    // the garbage collector takes them.
    gw["metadata"]["uid"] = json!("u2");
    assert!(seen(&mut checker, 4, Kind::Application, gw).is_empty());
    assert!(seen(&mut checker, 5, Kind::HelmRelease, release("gw", "a", 6, 1, "r1", "h1", true)).is_empty());
}
