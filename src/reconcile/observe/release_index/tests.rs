//! Unit and property tests of the release index: kept by its writer, it
//! answers as an index made at once from the cache does.

use proptest::prelude::*;
use serde_json::json;

use super::*;

/// A release of the application `owner` (none: of nobody) in `edge`,
/// driving the Helm release `edge/<drives>`.
fn release(name: &str, owner: Option<&str>, drives: &str) -> CachedRelease {
    let owners = owner.map(|uid| {
        json!([{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                 "name": format!("app-{uid}"), "uid": uid, "controller": true }])
    });
    let object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": name, "namespace": "edge", "ownerReferences": owners,
                      "labels": { "apps.fanout.dev/pool": name } },
        "spec": { "releaseName": drives, "interval": "10m" }
    });
    CachedRelease::from_object(serde_json::from_value(object).unwrap())
}

fn key(name: &str) -> HelmReleaseKey {
    ("edge".into(), name.into())
}

fn names(releases: Vec<Arc<CachedRelease>>) -> Vec<String> {
    let mut names: Vec<String> =
        releases.iter().map(|r| r.metadata.name.clone().unwrap_or_default()).collect();
    names.sort();
    names
}

fn apply(writer: &mut ReleaseWriter, release: CachedRelease) {
    writer.apply_watcher_event(&watcher::Event::Apply(release));
}

fn listed() -> ReleaseWriter {
    let mut writer = ReleaseWriter::default();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    writer
}

/// A cache with `r1` and `r2` of `u1`, driving `a` and `b`, and its index.
fn two_of_u1() -> (ReleaseWriter, Arc<ReleaseIndex>) {
    let mut writer = listed();
    apply(&mut writer, release("r1", Some("u1"), "a"));
    apply(&mut writer, release("r2", Some("u1"), "b"));
    let index = writer.index();
    (writer, index)
}

#[test]
fn a_release_changed_is_found_where_it_is_now_and_nowhere_else() {
    let (mut writer, index) = two_of_u1();
    assert_eq!(names(index.owned_by("u1")), ["r1", "r2"]);
    assert_eq!(names(index.driving(&key("a"))), ["r1"]);
    // Another owner, another Helm release.
    apply(&mut writer, release("r1", Some("u2"), "c"));
    assert_eq!(names(index.owned_by("u1")), ["r2"]);
    assert_eq!(names(index.owned_by("u2")), ["r1"]);
    assert!(index.driving(&key("a")).is_empty());
    assert_eq!(names(index.driving(&key("c"))), ["r1"]);
    // Of nobody: in no application's releases, still a driver.
    apply(&mut writer, release("r1", None, "c"));
    assert!(index.owned_by("u2").is_empty());
    assert_eq!(names(index.driving(&key("c"))), ["r1"]);
    writer.apply_watcher_event(&watcher::Event::Delete(release("r1", None, "c")));
    assert!(index.driving(&key("c")).is_empty());
    // The version the index returns is the one the cache holds.
    let held = index.owned_by("u1").pop().unwrap();
    let cached = writer.store().get(&ObjectRef::new("r2").within("edge")).unwrap();
    assert!(Arc::ptr_eq(&held, &cached));
}

#[test]
fn two_releases_driving_one_helm_release_are_both_found() {
    let mut writer = listed();
    apply(&mut writer, release("r1", Some("u1"), "a"));
    apply(&mut writer, release("r2", Some("u2"), "a"));
    assert_eq!(names(writer.index().driving(&key("a"))), ["r1", "r2"]);
}

/// Two HelmReleases of two namespaces with one `storageNamespace` and
/// release name drive one Helm release: each is found driving it, and a
/// change of the other namespace's counts where the Helm release is
/// stored (fourth review, item 10).
#[test]
fn a_release_of_another_namespace_storing_here_drives_the_same_helm_release() {
    let mut writer = listed();
    apply(&mut writer, release("r1", Some("u1"), "a"));
    let index = writer.index();
    let stored_here = |version: u64| index.version("edge") != version;
    let before = index.version("edge");
    let mut elsewhere = release("r9", Some("u9"), "a");
    elsewhere.metadata.namespace = Some("shop".into());
    elsewhere.drives = Some(key("a"));
    apply(&mut writer, elsewhere);
    assert_eq!(names(index.driving(&key("a"))), ["r1", "r9"]);
    let first = index.first_driving(&key("a"), |r| r.metadata.namespace.as_deref() == Some("shop"));
    assert_eq!(first.and_then(|r| r.metadata.name.clone()), Some("r9".into()));
    assert!(stored_here(before), "the version of where it is stored changed");
}

#[test]
fn a_relist_leaves_only_what_it_listed() {
    let (mut writer, index) = two_of_u1();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitApply(release("r2", Some("u1"), "b")));
    // Until the list ends, the cache and the index hold what they held.
    assert_eq!(names(index.owned_by("u1")), ["r1", "r2"]);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    assert_eq!(names(index.owned_by("u1")), ["r2"]);
    assert!(index.driving(&key("a")).is_empty());
}

/// A watch event of a small world of names, owners and Helm releases,
/// where every change of owner and of Helm release happens.
#[derive(Debug, Clone)]
enum Step {
    Apply { name: u8, owner: Option<u8>, drives: u8 },
    Delete { name: u8 },
    Relist { keep: Vec<bool> },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..6u8, proptest::option::of(0..3u8), 0..4u8)
            .prop_map(|(name, owner, drives)| Step::Apply { name, owner, drives }),
        2 => (0..6u8).prop_map(|name| Step::Delete { name }),
        1 => proptest::collection::vec(any::<bool>(), 6).prop_map(|keep| Step::Relist { keep }),
    ]
}

fn nth(name: u8, owner: Option<u8>, drives: u8) -> CachedRelease {
    let owner = owner.map(|o| format!("u{o}"));
    release(&format!("r{name}"), owner.as_deref(), &format!("h{drives}"))
}

proptest! {
    #[test]
    fn the_kept_index_answers_as_one_made_from_the_cache(steps in proptest::collection::vec(step(), 1..40)) {
        let mut writer = listed();
        for step in steps {
            match step {
                Step::Apply { name, owner, drives } => {
                    writer.apply_watcher_event(&watcher::Event::Apply(nth(name, owner, drives)));
                }
                Step::Delete { name } => {
                    writer.apply_watcher_event(&watcher::Event::Delete(nth(name, None, 0)));
                }
                Step::Relist { keep } => {
                    let kept: Vec<CachedRelease> = (writer.store().state().iter())
                        .filter(|r| {
                            let name = r.metadata.name.as_deref().unwrap_or_default();
                            let n: usize = name[1..].parse().unwrap();
                            keep[n]
                        })
                        .map(|r| r.as_ref().clone())
                        .collect();
                    writer.apply_watcher_event(&watcher::Event::Init);
                    for release in kept {
                        writer.apply_watcher_event(&watcher::Event::InitApply(release));
                    }
                    writer.apply_watcher_event(&watcher::Event::InitDone);
                }
            }
            let made = ReleaseIndex::of(writer.store().state());
            let kept = writer.index();
            for owner in 0..3 {
                let uid = format!("u{owner}");
                prop_assert_eq!(names(kept.owned_by(&uid)), names(made.owned_by(&uid)));
            }
            for drives in 0..4 {
                let key = key(&format!("h{drives}"));
                prop_assert_eq!(names(kept.driving(&key)), names(made.driving(&key)));
            }
        }
    }
}

/// What another application reads of a namespace's releases changes its
/// version: a release that comes, goes, or drives another Helm release;
/// a new status does not, nor does another namespace, and a list made
/// again never gives back a version read before it.
#[test]
fn the_version_of_a_namespace_follows_what_others_read_of_it() {
    let (mut writer, index) = two_of_u1();
    let mut seen = vec![index.version("edge")];
    let mut changed = |writer: &mut ReleaseWriter, what: &str, event: watcher::Event<CachedRelease>| {
        writer.apply_watcher_event(&event);
        let now = index.version("edge");
        assert!(!seen.contains(&now), "{what}: the version did not change");
        seen.push(now);
    };
    changed(&mut writer, "a release came", watcher::Event::Apply(release("r3", None, "c")));
    changed(&mut writer, "it drives another", watcher::Event::Apply(release("r3", None, "d")));
    changed(&mut writer, "it is owned", watcher::Event::Apply(release("r3", Some("u2"), "d")));
    changed(&mut writer, "it went", watcher::Event::Delete(release("r3", Some("u2"), "d")));
    let mut ready = release("r1", Some("u1"), "a");
    ready.print = 7;
    let (before, anywhere) = (index.version("edge"), index.version_anywhere());
    writer.apply_watcher_event(&watcher::Event::Apply(ready));
    assert_eq!(index.version("edge"), before, "a new status of the same release");
    assert_eq!(index.version_anywhere(), anywhere, "a new status, anywhere");
    let mut elsewhere = release("r4", None, "e");
    elsewhere.metadata.namespace = Some("core".into());
    elsewhere.drives = Some(("core".into(), "e".into()));
    writer.apply_watcher_event(&watcher::Event::Apply(elsewhere));
    assert_eq!(index.version("edge"), before, "a release of another namespace, stored there");
    assert_ne!(index.version_anywhere(), anywhere, "a release of another namespace, anywhere");
    // Listed again, with the releases as they were: counts start afresh.
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitApply(release("r1", Some("u1"), "a")));
    writer.apply_watcher_event(&watcher::Event::InitApply(release("r2", Some("u1"), "b")));
    changed(&mut writer, "listed again", watcher::Event::InitDone);
}
