use super::*;
use std::collections::HashSet;

fn assert_valid(name: &str) {
    assert!(name.len() <= MAX_RELEASE_NAME, "{name} is {} long", name.len());
    assert!(is_dns1123_label(name), "{name} is not a DNS-1123 label");
}

#[test]
fn short_names_are_kept_whole() {
    assert_eq!(release_name("gateway", "hangzhou"), "gateway-hangzhou-89ec6e65");
    assert_eq!(release_name("a", "b"), "a-b-59b271ae");
}

#[test]
fn the_scheme_is_stable() {
    // Changing any of these renames every release in every cluster.
    assert_eq!(hex_prefix(&["gateway", "hangzhou"], 8), "89ec6e65");
    assert_eq!(
        label_value(&"p".repeat(70)),
        format!("{}-{}", "p".repeat(54), hex_prefix(&[&"p".repeat(70)], 8))
    );
    assert_eq!(
        release_name("edgex-foundry-per-pool-with-a-long-name", "shanghai-pudong-district-zone-a"),
        "edgex-foundry-per-poo-shanghai-pudong-distri-509292ca"
    );
}

#[test]
fn lookalike_pairs_do_not_collide() {
    let one = release_name("a-b", "c");
    let two = release_name("a", "b-c");
    assert!(one.starts_with("a-b-c-") && two.starts_with("a-b-c-"));
    assert_ne!(one, two);
}

#[test]
fn no_collisions_over_many_pairs() {
    let words = [
        "a", "a-b", "b", "b-c", "c", "edge", "edge-1", "1", "x.y", "x-y", "gw", "gw-edge",
    ];
    let long = "l".repeat(60);
    let mut pairs = HashSet::new();
    for app in words.iter().copied().chain([long.as_str()]) {
        for pool in words.iter().copied().chain([long.as_str()]) {
            for n in 0..8 {
                pairs.insert((app.to_string(), format!("{pool}-{n}")));
                pairs.insert((app.to_string(), pool.to_string()));
            }
        }
    }
    let mut seen = HashSet::new();
    for (app, pool) in &pairs {
        let name = release_name(app, pool);
        assert_valid(&name);
        assert!(seen.insert(name.clone()), "{app} + {pool} collides as {name}");
    }
    assert!(seen.len() > 1000);
}

#[test]
fn long_names_are_cut_to_53() {
    let name = release_name(&"a".repeat(253), &"p".repeat(253));
    assert_eq!(name.len(), 53);
    assert_eq!(
        name,
        format!(
            "{}-{}-{}",
            "a".repeat(21),
            "p".repeat(22),
            hex_prefix(&[&"a".repeat(253), &"p".repeat(253)], 8)
        )
    );
}

#[test]
fn a_short_part_leaves_its_room_to_the_other() {
    let name = release_name("gw", &"p".repeat(100));
    assert_eq!(name, format!("gw-{}-{}", "p".repeat(41), hex_prefix(&["gw", &"p".repeat(100)], 8)));
    let name = release_name(&"a".repeat(100), "hz");
    assert_eq!(name, format!("{}-hz-{}", "a".repeat(41), hex_prefix(&[&"a".repeat(100), "hz"], 8)));
}

#[test]
fn every_length_combination_is_valid() {
    for app_len in [1, 2, 20, 21, 22, 43, 44, 63, 253] {
        for pool_len in [1, 2, 20, 21, 22, 43, 44, 63, 253] {
            let app = "ab-".repeat(app_len).chars().take(app_len).collect::<String>();
            let pool = "p.q".repeat(pool_len).chars().take(pool_len).collect::<String>();
            assert_valid(&release_name(&app, &pool));
        }
    }
}

#[test]
fn cuts_do_not_leave_dashes_or_dots() {
    // The cut at 21 characters falls just after a separator.
    let app = format!("{}-{}", "a".repeat(20), "b".repeat(40));
    let pool = format!("{}.{}", "p".repeat(21), "q".repeat(40));
    let name = release_name(&app, &pool);
    assert_valid(&name);
    assert!(name.starts_with(&format!("{}-{}-", "a".repeat(20), "p".repeat(21))), "{name}");
}

#[test]
fn dots_in_pool_names_become_dashes() {
    let name = release_name("gw", "cn.east.hz");
    assert!(name.starts_with("gw-cn-east-hz-"), "{name}");
    assert_ne!(name, release_name("gw", "cn-east-hz"));
    assert_valid(&name);
}

#[test]
fn label_values_fit_and_stay_unique() {
    assert_eq!(label_value("hangzhou"), "hangzhou");
    assert_eq!(label_value(&"x".repeat(63)), "x".repeat(63));
    let long_a = format!("{}a", "x".repeat(70));
    let long_b = format!("{}b", "x".repeat(70));
    for value in [label_value(&long_a), label_value(&long_b)] {
        assert!(value.len() <= 63 && is_label_value(&value), "{value}");
    }
    assert_ne!(label_value(&long_a), label_value(&long_b));
}

#[test]
fn label_values_keep_dots_but_fix_ends() {
    assert_eq!(label_value("cn.east.hz"), "cn.east.hz");
    let cut = label_value(&format!("{}.{}", "a".repeat(53), "b".repeat(20)));
    assert!(cut.starts_with(&format!("{}-", "a".repeat(53))), "{cut}");
    assert!(is_label_value(&cut));
}

#[test]
fn dns_checks() {
    assert!(is_dns1123_subdomain("a.b-c", 253));
    assert!(!is_dns1123_subdomain("a..b", 253));
    assert!(!is_dns1123_subdomain("-a", 253));
    assert!(!is_dns1123_subdomain("A", 253));
    assert!(!is_dns1123_subdomain(&"a".repeat(54), 53));
    assert!(is_dns1123_label("edge-1"));
    assert!(!is_dns1123_label("edge.1"));
    assert!(!is_dns1123_label(""));
}

#[test]
fn the_helm_release_a_helmrelease_drives_is_named_as_flux_names_it() {
    let hr = |spec: serde_json::Value| serde_json::json!({ "metadata": { "name": "web", "namespace": "edge" }, "spec": spec });
    let key = |s: &str, r: &str| Some((s.to_string(), r.to_string()));
    assert_eq!(helm_release_of(&hr(serde_json::json!({}))), key("edge", "web"));
    assert_eq!(
        helm_release_of(&hr(serde_json::json!({ "targetNamespace": "apps" }))),
        key("edge", "apps-web")
    );
    assert_eq!(
        helm_release_of(&hr(
            serde_json::json!({ "releaseName": "gw", "targetNamespace": "apps", "storageNamespace": "store" })
        )),
        key("store", "gw")
    );
    assert_eq!(helm_release_of(&serde_json::json!({ "metadata": { "name": "x" } })), None);
}

#[test]
fn a_site_cluster_is_its_kubeconfig_in_its_namespace_whatever_names_flux_default_key() {
    let hr = |namespace: &str, kube_config: serde_json::Value| {
        serde_json::json!({ "metadata": { "name": "web", "namespace": namespace },
                            "spec": { "storageNamespace": "apps", "kubeConfig": kube_config } })
    };
    let default = helm_release_of(&hr("edge", serde_json::json!({ "secretRef": { "name": "s1" } })));
    assert_eq!(default, Some(("Secret edge/s1:apps".to_string(), "web".to_string())));
    let value = hr("edge", serde_json::json!({ "secretRef": { "name": "s1", "key": "value" } }));
    assert_eq!(helm_release_of(&value), default, "no key is Flux's `value`");
    let yaml = hr("edge", serde_json::json!({ "secretRef": { "name": "s1", "key": "value.yaml" } }));
    assert_ne!(helm_release_of(&yaml), default);
    let elsewhere = hr("other", serde_json::json!({ "secretRef": { "name": "s1" } }));
    assert_ne!(helm_release_of(&elsewhere), default, "another namespace's Secret of that name");
    let identity = hr("edge", serde_json::json!({ "configMapRef": { "name": "s1" } }));
    assert_eq!(helm_release_of(&identity).unwrap().0, "ConfigMap edge/s1:apps");
    // The same Helm release, by another name of its cluster.
    assert_eq!(
        same_helm_release_on(default.as_ref().unwrap(), "cluster c1 of manager ocm"),
        Some(("cluster c1 of manager ocm:apps".to_string(), "web".to_string()))
    );
    assert_eq!(same_helm_release_on(&("apps".into(), "web".into()), "c1"), None, "of this cluster");
    assert_eq!(
        describe_helm_release(default.as_ref().unwrap()),
        "apps/web in the site cluster of Secret edge/s1"
    );
    assert_eq!(describe_helm_release(&("apps".into(), "web".into())), "apps/web");
}

#[test]
fn long_release_names_are_shortened_as_flux_shortens_them() {
    let long = "a".repeat(60);
    let short = shorten_release_name(&long);
    assert_eq!(short.len(), 53);
    assert!(short.starts_with(&format!("{}-", "a".repeat(40))), "{short}");
    // sha256 of 60 'a's, first 12 hex digits, as Go's fmt.Sprintf("%x") writes it.
    let hex: String = Sha256::digest(long.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(&short[41..], &hex[..12]);
    assert_eq!(shorten_release_name("short"), "short");
    assert_eq!(shorten_release_name(&"b".repeat(53)), "b".repeat(53));
}
