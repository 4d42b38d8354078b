//! The rules that stop a plan, or one pool, before anything is written:
//! an invalid selector, a Helm release another HelmRelease drives, a
//! selection that lost every pool, two pools whose release names collide.

use crate::api::conditions;
use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

use super::*;

/// Selects the pools, and checks every override's selector up front: one
/// that cannot be evaluated would make every pool's values uncertain.
pub(super) fn check_selectors<'a>(
    input: &PlanInput<'a>,
    app: &AppInfo,
) -> Result<pools::Selected<'a>, (String, String)> {
    let invalid = |field: String, e: pools::SelectorError| {
        (conditions::reason::INVALID_SELECTOR.to_string(), format!("{field}: {e}"))
    };
    let selected = pools::select(&app.spec.pools.selection(), input.pools.iter().copied())
        .map_err(|e| invalid("pools".into(), e))?;
    for (i, o) in app.spec.overrides.iter().enumerate() {
        if let Some(selector) = &o.pools.selector {
            pools::Selector::new(selector).map_err(|e| invalid(format!("overrides[{i}].pools"), e))?;
        }
    }
    let steps = app.spec.rollout.as_ref().map(|r| r.steps.as_slice()).unwrap_or_default();
    for (i, step) in steps.iter().enumerate() {
        if let Some(selector) = &step.pools.selector {
            pools::Selector::new(selector).map_err(|e| invalid(format!("rollout.steps[{i}].pools"), e))?;
        }
    }
    let windows = app.spec.rollout.as_ref().map(|r| r.windows.as_slice()).unwrap_or_default();
    for (i, window) in windows.iter().enumerate() {
        if let Some(selector) = window.pools.as_ref().and_then(|p| p.selector.as_ref()) {
            pools::Selector::new(selector).map_err(|e| invalid(format!("rollout.windows[{i}].pools"), e))?;
        }
    }
    Ok(selected)
}

pub(super) fn blocked(input: &PlanInput, reason: String, message: String) -> Plan {
    let mut plan = Plan {
        blocked: Some(message.clone()),
        ..Plan::new(Vec::new())
    };
    plan.report = roll_up(input, &plan, &Owned::default(), Some((reason, message)), None, input.nodes);
    plan
}

/// A release that would drive a Helm release another HelmRelease already
/// drives is refused, unless this application's own release of that pool
/// drove it first (the older of the two keeps it; names break a tie). The
/// refused pool's existing release, if any, is made inert (see
/// `Plan::inert`) and not deleted: deleting an active one would uninstall
/// the Helm release both drive. A site cluster is known by every name its
/// profile gives it (`Pool::cluster_ids`) as well as by its kubeconfig
/// Secret: another application's profile of the same cluster, in any
/// namespace, leads to the same Helm release.
pub(super) fn helm_release_taken(
    input: &PlanInput,
    owned: &Owned,
    pool: &Pool,
    built: &Built,
) -> Option<Outcome> {
    let key = built.made.helm_release.as_ref()?;
    let first = |created: &Option<String>, name: &str| {
        (created.clone().unwrap_or_else(|| "~".into()), name.to_string())
    };
    let by = std::iter::once(input.others.driving(key))
        .chain(
            pool.cluster_ids
                .iter()
                .filter_map(|id| naming::same_helm_release_on(key, id))
                .map(|same| input.others.driving(&same)),
        )
        .flatten()
        .min_by_key(|by| first(&by.created, &by.name))?;
    let ours = owned.get(built.name.as_str()).filter(|o| o.helm_release.as_ref() == Some(key));
    if ours.is_some_and(|o| first(&o.created, &o.name) < first(&by.created, &by.name)) {
        return None;
    }
    Some(Outcome::HelmReleaseTaken {
        helm_release: naming::describe_helm_release(key),
        by,
    })
}

pub(super) fn helm_release_taken_message(outcome: &Outcome) -> String {
    let Outcome::HelmReleaseTaken { helm_release, by } = outcome else {
        return String::new();
    };
    let owner = match &by.application {
        Some(app) => format!(" of NodePoolApplication {app}"),
        None => String::new(),
    };
    let name = match &by.namespace {
        Some(namespace) => format!("{namespace}/{}", by.name),
        None => by.name.clone(),
    };
    format!(
        "releaseName: Helm release {helm_release} is already driven by HelmRelease {name}{owner}; two \
         HelmReleases would overwrite each other's installs: give each application's releases \
         their own names (include {{{{app.name}}}} in releaseName) or storageNamespace",
    )
}

/// A selection that matches no pool while releases exist is far likelier a
/// typo (a misspelt label, a renamed key) than a wish to uninstall every
/// site: nothing is pruned, the existing releases are reported as they
/// are, and the application is Stalled until a person acts. Deleting the
/// application is how every release is removed.
pub(super) fn nothing_selected(input: &PlanInput, app: &AppInfo) -> Plan {
    let owned: Owned = input.owned.iter().map(|o| (o.name.as_str(), &**o)).collect();
    let mut plan = Plan {
        unchanged: input.owned.iter().map(|o| o.name.clone()).collect(),
        pools: input
            .owned
            .iter()
            .map(|o| PoolOutcome {
                pool: o.pool.clone().unwrap_or_default(),
                release: o.name.clone(),
                outcome: Outcome::Unchanged,
            })
            .collect(),
        ..Plan::new(Vec::new())
    };
    plan.pools.sort_by(|a, b| a.pool.cmp(&b.pool));
    let message = format!(
        "spec.pools ({}) matches no {}, yet this application has {} HelmRelease(s); nothing is \
         pruned: fix spec.pools, or delete the application to remove every release",
        describe_selection(&app.spec.pools.selection()),
        app.spec.pools.kind.pool_noun(),
        input.owned.len()
    );
    plan.blocked = Some(message.clone());
    plan.report = roll_up(
        input,
        &plan,
        &owned,
        Some((conditions::reason::NO_POOLS_SELECTED.to_string(), message)),
        None,
        input.nodes,
    );
    plan
}

/// Why a prune of `leaving` releases is held, if it is: more than half
/// of the application's releases, two at least, and more than its
/// [`naming::ANNOTATION_ALLOW_PRUNE`] allows. An empty selection is held
/// whatever is allowed (see [`nothing_selected`]); this one catches the
/// selection that still matches something: a label misspelt in a
/// selector, a list of names cut short.
pub(super) fn prune_held(input: &PlanInput, leaving: usize) -> Option<(String, String)> {
    let releases = input.owned.len();
    let allowed = (input.app.metadata.annotations.as_ref())
        .and_then(|a| a.get(naming::ANNOTATION_ALLOW_PRUNE))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if leaving < 2 || leaving * 2 <= releases || leaving <= allowed {
        return None;
    }
    let name = input.app.metadata.name.as_deref().unwrap_or_default();
    let message = format!(
        "{leaving} of this application's {releases} HelmRelease(s) are no longer selected; none is \
         pruned, since more than half would go at once. If that is meant, say so: kubectl annotate \
         nodepoolapplication {name} {}={leaving}; otherwise fix spec.pools",
        naming::ANNOTATION_ALLOW_PRUNE
    );
    Some((conditions::reason::PRUNE_HELD.to_string(), message))
}

/// `names [a, b], selector {"matchLabels":{"region":"east"}}`, as the user wrote it.
pub(super) fn describe_selection(selection: &crate::api::PoolSelection) -> String {
    let mut parts = Vec::new();
    if !selection.names.is_empty() {
        parts.push(format!("names [{}]", selection.names.join(", ")));
    }
    if let Some(selector) = &selection.selector {
        let text = serde_json::to_string(selector).unwrap_or_else(|e| format!("<unprintable: {e}>"));
        parts.push(format!("selector {text}"));
    }
    parts.join(", ")
}

/// Two pools installing the same Helm release (one name, stored in one
/// namespace of one cluster) would overwrite each other.
pub(super) fn fail_duplicate_release_names(built: &mut [(usize, &Pool, Result<Built, FieldError>)]) {
    // Borrowed while looking: at ten thousand pools, copies of every name
    // were a tenth of a resync.
    // Hashed, not ordered: which pools share a name is all that is read.
    // The first pool of a name is kept apart, so that the many names with
    // one pool allocate nothing.
    type Name<'a> = (&'a str, Option<&'a HelmReleaseKey>);
    let mut by_name: foldhash::HashMap<Name, (usize, Vec<usize>)> =
        foldhash::HashMap::with_capacity_and_hasher(built.len(), Default::default());
    for (at, (_, _, result)) in built.iter().enumerate() {
        if let Ok(release) = result {
            let key = (release.made.release_name.as_str(), release.made.helm_release.as_ref());
            match by_name.entry(key) {
                Entry::Vacant(first) => {
                    first.insert((at, Vec::new()));
                }
                Entry::Occupied(mut taken) => taken.get_mut().1.push(at),
            }
        }
    }
    let duplicates: Vec<(String, Vec<usize>)> = by_name
        .into_iter()
        .filter(|(_, (_, more))| !more.is_empty())
        .map(|((release_name, _), (first, more))| {
            (release_name.to_string(), std::iter::once(first).chain(more).collect())
        })
        .collect();
    for (release_name, at) in duplicates {
        let pools: Vec<&str> = at.iter().map(|i| built[*i].1.name.as_str()).collect();
        let message = format!(
            "renders to {release_name:?} for pools {}; include {{{{pool.name}}}} so each pool's release is unique",
            pools.join(", ")
        );
        for i in at {
            built[i].2 = Err(FieldError {
                field: "releaseName".into(),
                message: message.clone(),
            });
        }
    }
}

/// Two sites of the application that are one cluster (two profiles of it
/// in its namespace, two managers' for example) installing the same Helm
/// release there would overwrite each other, through two kubeconfig
/// Secrets that [`fail_duplicate_release_names`] takes for two clusters.
pub(super) fn fail_one_cluster_twice(built: &mut [(usize, &Pool, Result<Built, FieldError>)]) {
    // Sites only, and few share a name: the map holds one entry a name.
    let mut by_cluster: BTreeMap<HelmReleaseKey, Vec<usize>> = BTreeMap::new();
    for (at, (_, pool, result)) in built.iter().enumerate() {
        let Some(key) = result.as_ref().ok().and_then(|b| b.made.helm_release.as_ref()) else {
            continue;
        };
        for id in &pool.cluster_ids {
            if let Some(same) = naming::same_helm_release_on(key, id) {
                by_cluster.entry(same).or_default().push(at);
            }
        }
    }
    for (key, at) in by_cluster.into_iter().filter(|(_, at)| at.len() > 1) {
        let (cluster, _) = key.0.rsplit_once(':').unwrap_or_default();
        let pools: Vec<&str> = at.iter().map(|i| built[*i].1.name.as_str()).collect();
        let message = format!(
            "renders to {:?} for sites {}, which are one cluster ({cluster}): both would install one \
             Helm release there; select one profile of each cluster, or include {{{{pool.name}}}} in \
             releaseName",
            key.1,
            pools.join(", ")
        );
        for i in at {
            if built[i].2.is_ok() {
                built[i].2 = Err(FieldError {
                    field: "releaseName".into(),
                    message: message.clone(),
                });
            }
        }
    }
}
