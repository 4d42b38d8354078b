//! The rules hold for any fleet: random pools (wave, offline, a
//! release missing, behind or current in any Flux state, written
//! and Ready for any time) under random settings.
use super::*;
use proptest::prelude::*;

const STATES: [ReleaseState; 7] = [
    ReleaseState::Ready,
    ReleaseState::Progressing,
    ReleaseState::Waiting,
    ReleaseState::Failed,
    ReleaseState::Stalled,
    ReleaseState::Unknown,
    ReleaseState::Offline,
];

#[derive(Debug, Clone)]
struct Drawn {
    wave: usize,
    offline: bool,
    /// 0 missing, 1 behind, 2 current.
    kind: u8,
    state: usize,
    observed_latest: bool,
    ready_for: i64,
    written_ago: i64,
    /// When it went offline, as seconds before now.
    offline_ago: i64,
    /// Its maintenance windows are closed (and hold installs too).
    closed: bool,
    holds_installs: bool,
}

fn drawn() -> impl Strategy<Value = Drawn> {
    (
        0..3usize,
        prop::bool::weighted(0.2),
        0..3u8,
        0..STATES.len(),
        any::<bool>(),
        0..1200i64,
        0..900i64,
        0..1800i64,
        (prop::bool::weighted(0.2), any::<bool>()),
    )
        .prop_map(
            |(
                wave,
                offline,
                kind,
                state,
                observed_latest,
                ready_for,
                written_ago,
                offline_ago,
                (closed, holds_installs),
            )| Drawn {
                closed,
                holds_installs,
                wave,
                offline,
                kind,
                state,
                observed_latest,
                ready_for,
                written_ago,
                offline_ago,
            },
        )
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        any::<bool>(),
        1..4usize,
        0..3usize,
        prop::sample::select(vec![0u64, 30]),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![0u64, 60, 600]),
        prop::collection::btree_set(0..3usize, 0..3),
    )
        .prop_map(
            |(
                progressive,
                max_unavailable,
                max_failures,
                min_ready,
                paused,
                skip_offline,
                offline_after,
                awaiting_approval,
            )| {
                Settings {
                    progressive,
                    max_unavailable,
                    max_failures,
                    min_ready: Duration::from_secs(min_ready),
                    progress_deadline: Duration::from_secs(600),
                    paused,
                    skip_offline,
                    offline_after: Duration::from_secs(offline_after),
                    awaiting_approval,
                    ..Settings::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn the_rules_hold_for_any_fleet(settings in settings(), fleet in prop::collection::vec(drawn(), 1..12)) {
        let names: Vec<String> = (0..fleet.len()).map(|i| format!("p{i:02}")).collect();
        let statuses: Vec<ReleaseStatus> = fleet
            .iter()
            .map(|d| ReleaseStatus {
                state: STATES[d.state],
                reason: String::new(),
                message: String::new(),
                chart_version: None,
                observed_latest: d.observed_latest,
                ready_since: Some(ts(10_000 - d.ready_for).to_string()),
                ready_recorded: None,
                checks_recorded: None,
                deployed_before: false,
                deployed_version: None,
            })
            .collect();
        let inputs: Vec<PoolInput> = fleet
            .iter()
            .enumerate()
            .map(|(i, d)| PoolInput {
                pool: &names[i],
                wave: d.wave,
                offline: d.offline,
                offline_since: Some(ts(10_000 - d.offline_ago)),
                down_since: Some(ts(10_000 - d.offline_ago)),
                closed: d.closed.then(|| Closed { opens: Some(ts(10_600)), holds_installs: d.holds_installs, unreadable: None }),
                window_closes: None,
                release: match d.kind {
                    0 => Release::Missing,
                    1 => Release::Behind(&statuses[i]),
                    _ => Release::Current { status: &statuses[i], written: Some(ts(10_000 - d.written_ago)), resumed: None },
                },
                stamp: Stamp::Earlier,
                suspended: false,
                refused_before: false,
                last_written: (d.kind != 0).then(|| ts(10_000 - d.written_ago)),
                analysis: None,
            })
            .collect();
        let d = decide(&settings, &inputs, 3, now());
        let state = |i: usize| d.pools[&names[i]].state;
        // Down for less than offlineAfter: not offline yet.
        let flapping = |i: usize| fleet[i].offline && settings.skip_offline
            && fleet[i].offline_ago < settings.offline_after.as_secs() as i64;
        // Offline and skipped; went down after its update and counted failed.
        let offline = |i: usize| fleet[i].offline && settings.skip_offline && !flapping(i);
        let down_after_update = |i: usize| {
            let d = &fleet[i];
            let proven = STATES[d.state] == ReleaseState::Ready && d.observed_latest
                && d.ready_for >= d.offline_ago
                && d.written_ago.min(d.ready_for) - d.offline_ago >= settings.min_ready.as_secs() as i64;
            offline(i) && d.kind == 2 && d.offline_ago <= d.written_ago && !proven
        };
        let skipped = |i: usize| offline(i) && !down_after_update(i);
        // Healthy: Ready, waited on by Flux (its source, not its workload),
        // or not yet judged by Flux (no verdict that it is unavailable).
        let healthy = |i: usize| {
            matches!(STATES[fleet[i].state], ReleaseState::Ready | ReleaseState::Waiting) || !fleet[i].observed_latest
        };
        let halted = d.phase == RolloutPhase::Halted;
        prop_assert_eq!(d.pools.len(), fleet.len());
        prop_assert_eq!(d.total, (0..fleet.len()).filter(|i| !skipped(*i)).count());
        prop_assert_eq!(d.failed.len() >= (0..fleet.len()).filter(|i| down_after_update(*i)).count(), true);
        prop_assert_eq!(halted, settings.progressive && d.failed.len() > settings.max_failures);
        for i in 0..fleet.len() {
            let s = state(i);
            // An offline pool is never written; a current one never written again.
            if skipped(i) { prop_assert_eq!(s, PoolRollout::Offline); }
            // Down after its update: failed for this revision, whatever Flux says.
            if down_after_update(i) { prop_assert_eq!(s, PoolRollout::Failed); }
            // Down briefly: waited for, never written, skipped or failed for being down.
            if flapping(i) {
                prop_assert!(s != PoolRollout::Write && s != PoolRollout::Offline);
                if fleet[i].kind != 2 && !halted && !(settings.paused && fleet[i].kind == 1) {
                    prop_assert_eq!(s, PoolRollout::Waiting);
                }
                if fleet[i].kind == 2 {
                    prop_assert_eq!(d.pools[&names[i]].note.as_ref().map(|n| n.reason == crate::api::conditions::pool_reason::OFFLINE_AFTER_UPDATE), d.pools[&names[i]].note.as_ref().map(|_| false));
                }
            }
            if fleet[i].kind == 2 { prop_assert!(s != PoolRollout::Write); }
            // A wave awaiting approval, and every wave after it, starts
            // no update of a healthy pool.
            let gated = settings.awaiting_approval.iter().any(|g| *g <= fleet[i].wave);
            if settings.progressive && gated && fleet[i].kind == 1 && healthy(i) {
                prop_assert!(s != PoolRollout::Write);
            }
            if s == PoolRollout::AwaitingApproval {
                prop_assert!(settings.progressive && gated);
                prop_assert_eq!(d.phase, RolloutPhase::AwaitingApproval);
            }
            // Outside its windows: no update, and no install if the window says so.
            if fleet[i].closed && (fleet[i].kind == 1 || (fleet[i].kind == 0 && fleet[i].holds_installs)) {
                prop_assert!(s != PoolRollout::Write);
            }
            // A halt writes nothing; a pause writes no update.
            if halted { prop_assert!(s != PoolRollout::Write); }
            if settings.paused && fleet[i].kind == 1 { prop_assert!(s != PoolRollout::Write); }
            // A new pool is installed unless it is offline or the revision is known bad.
            let held_by_window = fleet[i].closed && fleet[i].holds_installs;
            if fleet[i].kind == 0 && !held_by_window && !skipped(i) && !flapping(i) && !halted {
                prop_assert_eq!(s, PoolRollout::Write);
            }
            // All at once: every update goes, unless paused.
            if !settings.progressive && !settings.paused && fleet[i].kind == 1 && !skipped(i) && !flapping(i) && !fleet[i].closed {
                prop_assert_eq!(s, PoolRollout::Write);
            }
            if s == PoolRollout::Failed { prop_assert!(d.failed.contains(&names[i])); }
        }
        if settings.progressive {
            let busy = (0..fleet.len()).filter(|i| matches!(state(*i), PoolRollout::Updating | PoolRollout::Soaking)).count();
            let unhealthy_written = (0..fleet.len()).filter(|i| fleet[*i].kind == 1 && !healthy(*i) && state(*i) == PoolRollout::Write).count();
            let healthy_written: Vec<usize> = (0..fleet.len()).filter(|i| fleet[*i].kind == 1 && healthy(*i) && state(*i) == PoolRollout::Write).collect();
            // Behind and not judged by Flux since its last change: an update
            // under way, which takes a slot and waits for the verdict.
            // Behind, written within its progressDeadline and not judged by
            // Flux since: an update under way, which takes a slot and waits.
            let recent = |i: usize| fleet[i].written_ago < settings.progress_deadline.as_secs() as i64;
            let in_flight = |i: usize| fleet[i].kind == 1 && !fleet[i].observed_latest && recent(i) && state(i) == PoolRollout::Pending;
            for (i, drawn) in fleet.iter().enumerate() {
                if drawn.kind == 1 && !drawn.observed_latest && recent(i) { prop_assert!(state(i) != PoolRollout::Write); }
            }
            if !healthy_written.is_empty() {
                // Healthy pools start only within maxUnavailable, updates under way counted...
                let under_way = (0..fleet.len()).filter(|i| in_flight(*i)).count();
                prop_assert!(busy + unhealthy_written + under_way + healthy_written.len() <= settings.max_unavailable);
                // ...from one wave, the earliest not done, in name order.
                let wave = fleet[healthy_written[0]].wave;
                prop_assert!(healthy_written.iter().all(|i| fleet[*i].wave == wave));
                for i in 0..fleet.len() {
                    let unfinished = matches!(state(i), PoolRollout::Pending | PoolRollout::Updating | PoolRollout::Soaking | PoolRollout::Write | PoolRollout::Waiting);
                    prop_assert!(!(unfinished && fleet[i].wave < wave), "pool {} of an earlier wave is not done", names[i]);
                    let skipped_over = state(i) == PoolRollout::Pending && healthy(i) && !in_flight(i) && fleet[i].wave == wave;
                    prop_assert!(!(skipped_over && names[i] < names[*healthy_written.last().unwrap()]));
                }
            }
        }
        let left = (0..fleet.len()).any(|i| matches!(state(i),
            PoolRollout::Write | PoolRollout::Updating | PoolRollout::Soaking | PoolRollout::Pending | PoolRollout::Paused | PoolRollout::Halted | PoolRollout::Waiting | PoolRollout::AwaitingApproval));
        // An offline pool behind on the revision keeps it from completing:
        // every pool reached done with it reads AwaitingOffline instead.
        let offline_behind = (0..fleet.len()).any(|i| skipped(i) && fleet[i].kind != 2);
        prop_assert_eq!(d.phase == RolloutPhase::Complete, !left && !halted && !offline_behind);
        prop_assert_eq!(d.phase == RolloutPhase::AwaitingOffline, !left && !halted && offline_behind);
        prop_assert_eq!(d.done, (0..fleet.len()).filter(|i| state(*i) == PoolRollout::Done).count());
    }
}
