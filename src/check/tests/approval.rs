//! Steps that need approval: a wave updated without it, an approval
//! read late, a gated step whose pools are gone.
use super::*;

/// An application whose second step, `rest` (pool b), needs approval;
/// pool c is of no step, the last wave.
fn gated(rv: u64, approval: Option<&str>) -> Value {
    let steps = json!({ "strategy": "Progressive", "steps": [
        { "name": "canary", "pools": { "names": ["a"] } },
        { "name": "rest", "pools": { "names": ["b"] }, "requireApproval": true }
    ] });
    let mut app = application("gw", rv, steps, "r2", "Progressing", 3);
    if let Some(approval) = approval {
        app["metadata"]["annotations"] = json!({ "apps.fanout.dev/approve": approval });
    }
    app
}

/// `release`, written by the rollout numbered `rollout` in the history.
fn by_rollout(mut release: Value, rollout: u64) -> Value {
    release["metadata"]["annotations"]["apps.fanout.dev/rollout"] = json!(rollout.to_string());
    release
}

#[test]
fn a_wave_updated_without_its_approval_or_with_another_revisions_is_caught() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, gated(10, None));
    for (i, pool) in ["a", "b", "c"].iter().enumerate() {
        seen(
            &mut checker,
            0,
            Kind::HelmRelease,
            release("gw", pool, 11 + i as u64, 1, "r1", "h1", true),
        );
    }
    // The canary needs no approval.
    let canary = by_rollout(release("gw", "a", 20, 2, "r2", "h2", true), 2);
    let found = seen(&mut checker, 1, Kind::HelmRelease, canary);
    assert_eq!(of(&found, Invariant::Approvals), 0, "{found:?}");
    // rest goes with an approval of the revision before: it lets nothing go.
    seen(&mut checker, 2, Kind::Application, gated(21, Some("r1@1/rest")));
    let rest = by_rollout(release("gw", "b", 22, 2, "r2", "h2", false), 2);
    let found = seen(&mut checker, 3, Kind::HelmRelease, rest);
    assert!(found.is_empty(), "judged once a later version of the application is seen: {found:?}");
    let found = seen(&mut checker, 4, Kind::Application, gated(23, Some("r1@1/rest")));
    assert_eq!(of(&found, Invariant::Approvals), 1, "{found:?}");
    let message = &found[0].message;
    assert!(message.contains("gw-b (pool b)") && message.contains("r2@2/rest"), "{message}");
    // Approved, the last wave goes.
    seen(&mut checker, 5, Kind::Application, gated(30, Some("r2@2/rest")));
    let last = by_rollout(release("gw", "c", 31, 2, "r2", "h2", false), 2);
    let found = seen(&mut checker, 6, Kind::HelmRelease, last);
    assert_eq!(of(&found, Invariant::Approvals), 0, "{found:?}");
    seen(&mut checker, 7, Kind::Application, gated(32, Some("r2@2/rest")));
    assert_eq!(checker.summary().violations.get(&Invariant::Approvals), Some(&1));
}

/// Fourth review, E9: the checker took a named step's position, which
/// the controller refuses, and any approval of the revision, which a
/// change undone and redone must not reuse.
#[test]
fn an_earlier_rollouts_approval_or_a_named_steps_position_approves_nothing() {
    for (approval, rollout) in [("r2@2/rest", 4), ("r2@4/2", 4), ("r2/rest", 4)] {
        let mut checker = Checker::new();
        seen(&mut checker, 0, Kind::Application, gated(10, Some(approval)));
        seen(&mut checker, 0, Kind::HelmRelease, release("gw", "b", 11, 1, "r1", "h1", true));
        let rest = by_rollout(release("gw", "b", 22, 2, "r2", "h2", false), rollout);
        seen(&mut checker, 1, Kind::HelmRelease, rest);
        let found = seen(&mut checker, 2, Kind::Application, gated(23, Some(approval)));
        assert_eq!(of(&found, Invariant::Approvals), 1, "{approval} let rollout {rollout} go: {found:?}");
    }
    // Unnamed steps go by position.
    let steps = json!({ "strategy": "Progressive", "steps": [
        { "pools": { "names": ["a"] } },
        { "pools": { "names": ["b"] }, "requireApproval": true }
    ] });
    let mut app = application("gw", 10, steps, "r2", "Progressing", 3);
    app["metadata"]["annotations"] = json!({ "apps.fanout.dev/approve": "r2@4/2" });
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app.clone());
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "b", 11, 1, "r1", "h1", true));
    let rest = by_rollout(release("gw", "b", 22, 2, "r2", "h2", false), 4);
    seen(&mut checker, 1, Kind::HelmRelease, rest);
    app["metadata"]["resourceVersion"] = json!("23");
    let found = seen(&mut checker, 2, Kind::Application, app);
    assert_eq!(of(&found, Invariant::Approvals), 0, "{found:?}");
}

#[test]
fn an_approval_its_watch_delivers_after_the_write_it_let_go_is_no_violation() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, gated(10, None));
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "b", 11, 1, "r1", "h1", true));
    seen(
        &mut checker,
        1,
        Kind::HelmRelease,
        by_rollout(release("gw", "b", 25, 2, "r2", "h2", false), 2),
    );
    // The approval was written (rv 24) before the release (rv 25).
    let found = seen(&mut checker, 2, Kind::Application, gated(24, Some("r2@2/rest")));
    assert!(found.is_empty(), "{found:?}");
    let found = seen(&mut checker, 3, Kind::Application, gated(26, Some("r2@2/rest")));
    assert!(found.is_empty(), "{found:?}");
    // Pools not Ready before their write (unavailable already) go at once.
    seen(&mut checker, 4, Kind::HelmRelease, release("gw", "c", 27, 1, "r1", "h1", false));
    let found = seen(&mut checker, 5, Kind::HelmRelease, release("gw", "c", 28, 2, "r3", "h3", false));
    seen(&mut checker, 6, Kind::Application, gated(29, None));
    assert_eq!(of(&found, Invariant::Approvals), 0);
    assert_eq!(checker.summary().violations.get(&Invariant::Approvals), None);
}

#[test]
fn a_gated_step_whose_pools_are_gone_still_holds_the_waves_after_it() {
    // Step rest lists pool b, which has no release (deleted): c, of the
    // last wave, still needs rest's approval.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, gated(10, None));
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "c", 11, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "c", 12, 2, "r2", "h2", true));
    let found = seen(&mut checker, 2, Kind::Application, gated(13, None));
    assert_eq!(of(&found, Invariant::Approvals), 1, "{found:?}");
    assert!(found[0].message.contains("gw-c (pool c)") && found[0].message.contains("step(s) rest"));
}

/// Fourth review, E1: a release not Ready only because Flux waits on its
/// source (`SourceNotReady`), or because this cluster's API server could
/// not give Helm its storage (`StateError`), runs its workload as before:
/// updated without its approval, it is caught; one Flux finds failed is not.
#[test]
fn a_release_flux_only_waits_on_is_no_release_unavailable_already() {
    let not_ready = |reason: &str| {
        let mut r = release("gw", "b", 11, 1, "r1", "h1", false);
        r["status"]["conditions"][0]["reason"] = json!(reason);
        r
    };
    for (reason, caught) in [
        ("SourceNotReady", 1),
        ("ArtifactFailed", 1),
        ("DependencyNotReady", 1),
        ("StateError", 1),
        ("UpgradeFailed", 0),
    ] {
        let mut checker = Checker::new();
        seen(&mut checker, 0, Kind::Application, gated(10, None));
        seen(&mut checker, 0, Kind::HelmRelease, not_ready(reason));
        let rest = by_rollout(release("gw", "b", 22, 2, "r2", "h2", false), 2);
        seen(&mut checker, 1, Kind::HelmRelease, rest);
        let found = seen(&mut checker, 2, Kind::Application, gated(23, None));
        assert_eq!(of(&found, Invariant::Approvals), caught, "{reason}: {found:?}");
    }
}
