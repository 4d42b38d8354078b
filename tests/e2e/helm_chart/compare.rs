//! A render against a kustomize build: the objects by kind, namespace
//! and name, then field by field (the Deployment's pod and containers,
//! the NetworkPolicy's peers), each difference saying where and what.
use super::*;

/// An object's identity: kind, namespace (empty when cluster-scoped), name.
type Key = (String, String, String);

fn key(object: &Value) -> Key {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

fn show(key: &Key) -> String {
    match key.1.as_str() {
        "" => format!("{} {}", key.0, key.2),
        namespace => format!("{} {namespace}/{}", key.0, key.2),
    }
}

fn by_key(objects: &[Value]) -> BTreeMap<Key, Value> {
    let mut map = BTreeMap::new();
    for object in objects {
        let previous = map.insert(key(object), object.clone());
        assert!(previous.is_none(), "{} twice", show(&key(object)));
    }
    map
}

fn keys_of(value: &Value) -> BTreeSet<String> {
    value.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// The differences found between `deploy/` (or `crds/`) and the chart,
/// each saying where and what.
pub(super) struct Differences {
    /// What the chart is compared with.
    reference: &'static str,
    found: Vec<String>,
}

impl Differences {
    pub(super) fn against(reference: &'static str) -> Self {
        Differences {
            reference,
            found: Vec::new(),
        }
    }

    /// Reports the innermost fields that differ, so that a difference deep
    /// in a CRD's schema names its path rather than the whole schema.
    pub(super) fn equal(&mut self, what: &str, deploy: &Value, chart: &Value) {
        match (deploy, chart) {
            (Value::Object(d), Value::Object(c)) => {
                let names: BTreeSet<&String> = d.keys().chain(c.keys()).collect();
                for name in names {
                    let null = Value::Null;
                    let (dv, cv) = (d.get(name).unwrap_or(&null), c.get(name).unwrap_or(&null));
                    self.equal(&format!("{what}.{name}"), dv, cv);
                }
            }
            (Value::Array(d), Value::Array(c)) if d.len() == c.len() => {
                for (i, (dv, cv)) in d.iter().zip(c).enumerate() {
                    self.equal(&format!("{what}[{i}]"), dv, cv);
                }
            }
            // A number is a number: kustomize writes 86400.0 as 86400.
            (Value::Number(d), Value::Number(c)) if d.as_f64() == c.as_f64() => {}
            _ if deploy != chart => {
                let reference = self.reference;
                self.found.push(format!("{what}: {reference} has {deploy}, the chart {chart}"))
            }
            _ => {}
        }
    }

    fn require(&mut self, what: &str, holds: bool, detail: String) {
        if !holds {
            self.found.push(format!("{what}: {detail}"));
        }
    }

    /// Compares every field of two maps, but those in `skip` (compared by
    /// the caller); fields in `chart_only` may be in the chart alone.
    fn fields(&mut self, what: &str, deploy: &Value, chart: &Value, skip: &[&str], chart_only: &[&str]) {
        let names: BTreeSet<String> = keys_of(deploy).union(&keys_of(chart)).cloned().collect();
        for name in names {
            if skip.contains(&name.as_str()) {
                continue;
            }
            let (d, c) = (deploy.get(&name), chart.get(&name));
            if d.is_none() && chart_only.contains(&name.as_str()) {
                continue;
            }
            self.equal(&format!("{what}.{name}"), d.unwrap_or(&Value::Null), c.unwrap_or(&Value::Null));
        }
    }

    /// Every label and annotation `deploy/` sets, the chart sets alike (it
    /// adds Helm's own).
    fn metadata(&mut self, what: &str, deploy: &Value, chart: &Value) {
        for field in ["labels", "annotations"] {
            self.require(
                &format!("{what}.{field}"),
                is_subset(&deploy[field], &chart[field]),
                format!("{} has {}, the chart {}", self.reference, deploy[field], chart[field]),
            );
        }
    }

    pub(super) fn assert_none(self, context: &str) {
        assert!(
            self.found.is_empty(),
            "{context}: {} difference(s):\n  - {}",
            self.found.len(),
            self.found.join("\n  - ")
        );
    }
}

fn compare_deployment(diffs: &mut Differences, what: &str, deploy: &Value, chart: &Value) {
    let (ds, cs) = (&deploy["spec"], &chart["spec"]);
    diffs.fields(&format!("{what}.spec"), ds, cs, &["selector", "template"], &[]);
    diffs.require(
        &format!("{what}.spec.selector"),
        is_subset(pod_selector(deploy), pod_selector(chart)),
        format!("deploy/ selects {}, the chart {}", ds["selector"], cs["selector"]),
    );
    let (dt, ct) = (&ds["template"], &cs["template"]);
    diffs.require(
        &format!("{what}: the chart's selector"),
        is_subset(pod_selector(chart), &ct["metadata"]["labels"]),
        format!("{} does not select its pods {}", cs["selector"], ct["metadata"]["labels"]),
    );
    diffs.metadata(&format!("{what}.spec.template.metadata"), &dt["metadata"], &ct["metadata"]);
    diffs.fields(&format!("{what}.spec.template"), dt, ct, &["metadata", "spec"], &[]);
    // The pod: the chart may add scheduling of its own (by default, away
    // from edge nodes); everything else is deploy/'s.
    let (dp, cp) = (&dt["spec"], &ct["spec"]);
    let pod = format!("{what} pod");
    diffs.fields(&pod, dp, cp, &["containers"], &["affinity"]);
    let containers = |pod: &Value| -> BTreeMap<String, Value> {
        pod["containers"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| (c["name"].as_str().unwrap_or("").to_string(), c.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (dcs, ccs) = (containers(dp), containers(cp));
    diffs.equal(
        &format!("{pod}: containers"),
        &json!(dcs.keys().collect::<Vec<_>>()),
        &json!(ccs.keys().collect::<Vec<_>>()),
    );
    for (name, dc) in &dcs {
        let Some(cc) = ccs.get(name) else { continue };
        let container = format!("{pod}: container {name}");
        diffs.fields(&container, dc, cc, &["image"], &["imagePullPolicy"]);
        let repository = |c: &Value| {
            let image = c["image"].as_str().unwrap_or_default().to_string();
            let tagless = image.rsplit_once(':').map(|(r, _)| r.to_string()).unwrap_or(image);
            json!(tagless)
        };
        diffs.equal(&format!("{container}: image repository"), &repository(dc), &repository(cc));
    }
}

/// The NetworkPolicy: the same policy, its peers the chart's own pods (the
/// chart's selector, which also names the release) in the same namespace;
/// one that guards the Deployment's own pods guards the chart's.
fn compare_network_policy(
    diffs: &mut Differences,
    what: &str,
    (deploy, deploy_deployment): (&Value, &Value),
    (chart, chart_deployment): (&Value, &Value),
) {
    let (ds, cs) = (&deploy["spec"], &chart["spec"]);
    if ds["podSelector"]["matchLabels"] == *pod_selector(deploy_deployment) {
        diffs.fields(&format!("{what}.spec"), ds, cs, &["ingress", "podSelector"], &[]);
        diffs.require(
            &format!("{what}.spec.podSelector"),
            cs["podSelector"]["matchLabels"] == *pod_selector(chart_deployment),
            format!("the chart's {} is not its Deployment's pods", cs["podSelector"]),
        );
    } else {
        diffs.fields(&format!("{what}.spec"), ds, cs, &["ingress"], &[]);
    }
    let rules = |spec: &Value| spec["ingress"].as_array().cloned().unwrap_or_default();
    let (dr, cr) = (rules(ds), rules(cs));
    diffs.equal(&format!("{what}: ingress rules"), &json!(dr.len()), &json!(cr.len()));
    for (i, (d, c)) in dr.iter().zip(&cr).enumerate() {
        let rule = format!("{what}.spec.ingress[{i}]");
        diffs.fields(&rule, d, c, &["from"], &[]);
        let peers = |rule: &Value| rule["from"].as_array().cloned().unwrap_or_default();
        let (dp, cp) = (peers(d), peers(c));
        diffs.equal(&format!("{rule}: peers"), &json!(dp.len()), &json!(cp.len()));
        for (j, (dpeer, cpeer)) in dp.iter().zip(&cp).enumerate() {
            let peer = format!("{rule}.from[{j}]");
            diffs.fields(&peer, dpeer, cpeer, &["podSelector"], &[]);
            diffs.require(
                &format!("{peer}.podSelector"),
                dpeer["podSelector"]["matchLabels"] == *pod_selector(deploy_deployment),
                format!("deploy/'s peer {} is not its Deployment's pods", dpeer["podSelector"]),
            );
            diffs.require(
                &format!("{peer}.podSelector"),
                cpeer["podSelector"]["matchLabels"] == *pod_selector(chart_deployment),
                format!("the chart's peer {} is not its Deployment's pods", cpeer["podSelector"]),
            );
        }
    }
}

/// What differs between what `deploy` (a kustomize build) and `chart` (a
/// render) hold.
pub(super) fn differences(deploy: &[Value], chart: &[Value], reference: &'static str) -> Differences {
    let (deploy_map, chart_map) = (by_key(deploy), by_key(chart));

    // The same objects, by kind, namespace and name; the namespace is made
    // by Helm (--create-namespace) or the HelmRelease.
    let wanted: BTreeSet<&Key> = deploy_map.keys().filter(|k| k.0 != "Namespace").collect();
    let rendered: BTreeSet<&Key> = chart_map.keys().collect();
    let mut diffs = Differences::against(reference);
    for k in wanted.difference(&rendered) {
        diffs.found.push(format!("{reference} has {}, the chart does not", show(k)));
    }
    for k in rendered.difference(&wanted) {
        diffs.found.push(format!("the chart has {}, {reference} does not", show(k)));
    }

    let deploy_deployment = one(deploy, "Deployment");
    let chart_deployment = one(chart, "Deployment");
    for (k, d) in &deploy_map {
        let Some(c) = chart_map.get(k) else { continue };
        let what = show(k);
        diffs.metadata(&format!("{what} metadata"), &d["metadata"], &c["metadata"]);
        match k.0.as_str() {
            "Namespace" => {}
            "Deployment" => compare_deployment(&mut diffs, &what, d, c),
            "PodDisruptionBudget" => {
                diffs.fields(&format!("{what}.spec"), &d["spec"], &c["spec"], &["selector"], &[]);
                diffs.require(
                    &format!("{what}.spec.selector"),
                    c["spec"]["selector"]["matchLabels"] == *pod_selector(chart_deployment),
                    format!("{} is not the Deployment's pods", c["spec"]["selector"]),
                );
            }
            "NetworkPolicy" => {
                compare_network_policy(&mut diffs, &what, (d, deploy_deployment), (c, chart_deployment))
            }
            "Service" => {
                diffs.fields(&format!("{what}.spec"), &d["spec"], &c["spec"], &["selector"], &[]);
                diffs.require(
                    &format!("{what}.spec.selector"),
                    c["spec"]["selector"] == *pod_selector(chart_deployment),
                    format!("{} is not the Deployment's pods", c["spec"]["selector"]),
                );
            }
            // The CRD whole; RBAC rules, aggregation, role references and
            // subjects; and whatever kind deploy/ may gain.
            _ => diffs.fields(&what, d, c, &["metadata"], &[]),
        }
    }
    diffs
}
