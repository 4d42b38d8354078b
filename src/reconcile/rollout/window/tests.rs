//! Window arithmetic: across midnight, across daylight-saving changes in
//! both directions, with several windows, and the errors that name a field.

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn window(schedule: &str, duration: &str, zone: Option<&str>) -> Window {
    Window::new(schedule, duration, zone).unwrap()
}

#[test]
fn a_window_is_open_from_its_start_for_its_duration_across_midnight() {
    let night = window("0 22 * * *", "4h", None);
    assert_eq!(
        gate([&night], at("2026-11-25T21:59:59Z")),
        Gate::Closed {
            opens: Some(at("2026-11-25T22:00:00Z"))
        }
    );
    assert_eq!(gate([&night], at("2026-11-25T22:00:00Z")), Gate::Open);
    assert_eq!(
        gate([&night], at("2026-11-26T01:59:59Z")),
        Gate::Open,
        "after midnight, still the night's window"
    );
    assert_eq!(
        gate([&night], at("2026-11-26T02:00:00Z")),
        Gate::Closed {
            opens: Some(at("2026-11-26T22:00:00Z"))
        }
    );
}

#[test]
fn a_window_keeps_its_wall_clock_time_in_its_zone() {
    // 02:00 in Chicago is 08:00 UTC in winter (CST) and 07:00 in summer (CDT).
    let store = window("0 2 * * *", "3h", Some("America/Chicago"));
    assert_eq!(gate([&store], at("2026-01-15T08:30:00Z")), Gate::Open);
    assert_eq!(gate([&store], at("2026-07-15T07:30:00Z")), Gate::Open);
    assert_eq!(
        gate([&store], at("2026-07-15T06:59:00Z")),
        Gate::Closed {
            opens: Some(at("2026-07-15T07:00:00Z"))
        }
    );
}

#[test]
fn a_start_the_clock_skips_opens_right_after_the_gap() {
    // Berlin springs forward on 2026-03-29: 02:00 CET becomes 03:00 CEST,
    // so 02:30 does not exist that night; the window opens at 03:00 CEST
    // (01:00 UTC), and lasts its hour of elapsed time.
    let w = window("30 2 * * *", "1h", Some("Europe/Berlin"));
    assert_eq!(
        gate([&w], at("2026-03-29T00:59:00Z")),
        Gate::Closed {
            opens: Some(at("2026-03-29T01:00:00Z"))
        }
    );
    assert_eq!(gate([&w], at("2026-03-29T01:30:00Z")), Gate::Open);
    assert!(matches!(gate([&w], at("2026-03-29T02:00:00Z")), Gate::Closed { .. }));
    // The night before and after, 02:30 local as usual (01:30 and 00:30 UTC).
    assert_eq!(gate([&w], at("2026-03-28T01:45:00Z")), Gate::Open);
    assert_eq!(gate([&w], at("2026-03-30T00:45:00Z")), Gate::Open);
}

#[test]
fn a_start_the_clock_repeats_opens_once() {
    // Berlin falls back on 2026-10-25: 03:00 CEST becomes 02:00 CET, so
    // 02:30 comes twice (00:30 and 01:30 UTC). The window opens at the
    // first and lasts 30 minutes of elapsed time: closed at 01:30 UTC.
    let w = window("30 2 * * *", "30m", Some("Europe/Berlin"));
    assert_eq!(gate([&w], at("2026-10-25T00:45:00Z")), Gate::Open);
    assert!(
        matches!(gate([&w], at("2026-10-25T01:45:00Z")), Gate::Closed { opens: Some(next) } if next == at("2026-10-26T01:30:00Z")),
        "{:?}",
        gate([&w], at("2026-10-25T01:45:00Z"))
    );
}

#[test]
fn several_windows_open_a_pool_when_any_is_open_and_none_always_does() {
    let night = window("0 22 * * *", "2h", None);
    let noon = window("0 12 * * 6,0", "1h", None);
    // Wednesday 2026-11-25 at 12:30: the weekend noon window is closed.
    assert_eq!(
        gate([&night, &noon], at("2026-11-25T12:30:00Z")),
        Gate::Closed {
            opens: Some(at("2026-11-25T22:00:00Z"))
        }
    );
    // Saturday 2026-11-28 at 12:30: open by the second.
    assert_eq!(gate([&night, &noon], at("2026-11-28T12:30:00Z")), Gate::Open);
    assert_eq!(gate([], at("2026-11-25T12:30:00Z")), Gate::Open, "no window: always open");
}

#[test]
fn bad_windows_name_the_field() {
    let field = |r: Result<Window, WindowError>| r.unwrap_err().field;
    assert_eq!(field(Window::new("every night", "4h", None)), "schedule");
    assert_eq!(field(Window::new("0 22 * * *", "soon", None)), "duration");
    assert_eq!(field(Window::new("0 22 * * *", "30s", None)), "duration", "under a minute");
    assert_eq!(field(Window::new("0 22 * * *", "4h", Some("Mars/Olympus"))), "timeZone");
    assert_eq!(field(Window::from_annotation("tonight")), "annotation");
    assert_eq!(field(Window::from_annotation(r#"{"schedule": "0 2 * * *"}"#)), "annotation");
    let w = Window::from_annotation(
        r#"{"schedule": "0 2 * * *", "duration": "3h", "timeZone": "America/Chicago"}"#,
    )
    .unwrap();
    assert_eq!(w, window("0 2 * * *", "3h", Some("America/Chicago")));
}
