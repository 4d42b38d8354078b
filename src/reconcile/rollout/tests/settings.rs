//! The rollout's settings as the spec gives them: percentages of the
//! selected pools, refusals that name the field, and durations.
use super::*;

#[test]
fn settings_resolve_percentages_of_the_selected_pools() {
    let spec: Rollout = serde_json::from_value(serde_json::json!({
        "strategy": "Progressive", "maxUnavailable": "25%", "maxFailures": "10%",
        "minReadySeconds": 30, "progressDeadline": "1h30m", "paused": true, "offlinePools": "Include",
        "offlineAfter": "2m"
    }))
    .unwrap();
    let s = Settings::new(Some(&spec), 10).unwrap();
    assert_eq!(
        s,
        Settings {
            progressive: true,
            max_unavailable: 2,
            max_failures: 1,
            min_ready: Duration::from_secs(30),
            progress_deadline: Duration::from_secs(5400),
            paused: true,
            skip_offline: false,
            offline_after: Duration::from_secs(120),
            awaiting_approval: BTreeSet::new(),
            wave_steps: Vec::new(),
            approved_steps: Vec::new(),
            rollout_number: None,
            clock_since: None,
            rollback: false,
            back_to: None,
            cannot_go_back: Vec::new(),
            rolled_back: false,
            halted_before: false,
            halted_because: None,
            completed: false,
            held_renders: 0,
            first_install_alone: false,
            undeployed_leaving: None,
            new_chart_alone: None,
            wave_checks: Default::default(),
            pre_rollout: None,
        }
    );
    // Rounded down, yet at least one pool may update.
    assert_eq!(Settings::new(Some(&spec), 3).unwrap().max_unavailable, 1);
    assert_eq!(Settings::new(Some(&spec), 3).unwrap().max_failures, 0);
    assert_eq!(Settings::new(None, 3).unwrap(), Settings::default());
    let spec: Rollout = serde_json::from_value(serde_json::json!({ "maxUnavailable": "3" })).unwrap();
    assert_eq!(Settings::new(Some(&spec), 10).unwrap().max_unavailable, 3, "a count in quotes is a count");
}

#[test]
fn bad_settings_name_the_field() {
    for (spec, field) in [
        (serde_json::json!({ "maxUnavailable": "lots" }), "rollout.maxUnavailable"),
        (serde_json::json!({ "maxFailures": -1 }), "rollout.maxFailures"),
        (serde_json::json!({ "progressDeadline": "soon" }), "rollout.progressDeadline"),
        (serde_json::json!({ "offlineAfter": "a while" }), "rollout.offlineAfter"),
        (serde_json::json!({ "minReadySeconds": -5 }), "rollout.minReadySeconds"),
    ] {
        let spec: Rollout = serde_json::from_value(spec).unwrap();
        assert_eq!(Settings::new(Some(&spec), 4).unwrap_err().field, field);
    }
}

#[test]
fn durations_read_as_flux_writes_them() {
    assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
    assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("later"), None);
}
