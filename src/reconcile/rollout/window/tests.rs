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

/// The message of a schedule refused, which must name what is wrong.
fn refused(schedule: &str) -> String {
    let e = Window::new(schedule, "1h", None).expect_err(schedule);
    assert_eq!(e.field, "schedule", "{schedule}: {e}");
    e.message
}

#[test]
fn a_schedule_that_never_fires_is_refused() {
    for never in ["0 0 30 2 *", "0 0 31 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 2 */7"] {
        assert!(refused(never).contains("never"), "{never}: {}", refused(never));
    }
    // Rare is not never: the 29th of February, the 31st of the months
    // that have one, and a day of the month or a weekday.
    for rare in ["0 0 29 2 *", "0 0 31 * *", "0 0 30 2 1"] {
        assert!(Window::new(rare, "1h", None).is_ok(), "{rare}");
    }
}

#[test]
fn six_and_seven_fields_are_refused_with_the_count() {
    assert!(refused("0 0 22 * * *").contains("6 fields"), "{}", refused("0 0 22 * * *"));
    assert!(refused("0 0 22 * * * 2027").contains("7 fields"));
    assert!(refused("0 22 * *").contains("4 fields"));
}

#[test]
fn what_vixie_cron_does_not_read_is_refused_with_the_field_named() {
    for (schedule, field) in [
        ("0 22 L * *", "day of month"),
        ("0 22 15W * *", "day of month"),
        ("0 22 ? * 1", "day of month"),
        ("0 22 * * 5L", "day of week"),
        ("0 22 * * 5#3", "day of week"),
        ("0 22 * * +1", "day of week"),
        ("0 22 * * ?", "day of week"),
        ("0 H * * *", "hour"),
        ("5/15 * * * *", "minute"),
        ("0 24 * * *", "hour"),
        ("60 1 * * *", "minute"),
        ("0 1 0 * *", "day of month"),
        ("0 1 * 13 *", "month"),
        ("0 1 * * 8", "day of week"),
        ("0 1 * FOO *", "month"),
    ] {
        let message = refused(schedule);
        assert!(message.contains(field), "{schedule}: {message}");
    }
    // A time zone goes in `timeZone`, not in the schedule (as Kubernetes
    // CronJobs refuse it too).
    assert!(refused("CRON_TZ=Europe/Berlin 0 22 * * *").contains("timeZone"));
    assert!(refused("TZ=UTC 0 22 * * *").contains("timeZone"));
    assert!(refused("@reboot").contains("@reboot"));
}

#[test]
fn a_step_in_the_day_of_month_restricts_the_weekdays_as_in_vixie_cron() {
    // Vixie cron ORs day of month and day of week only when neither field
    // starts with `*`: `*/2` with `1-5` is the odd days that are weekdays.
    // November 2026 starts on a Sunday: the 2nd is a Monday (even), the
    // 3rd a Tuesday (odd), the 7th a Saturday (odd).
    let w = window("0 2 */2 * 1-5", "1h", None);
    assert_eq!(gate([&w], at("2026-11-03T02:30:00Z")), Gate::Open, "odd and a weekday");
    assert_eq!(
        gate([&w], at("2026-11-02T02:30:00Z")),
        Gate::Closed {
            opens: Some(at("2026-11-03T02:00:00Z"))
        },
        "a Monday, but even"
    );
    assert_eq!(
        gate([&w], at("2026-11-07T02:30:00Z")),
        Gate::Closed {
            opens: Some(at("2026-11-09T02:00:00Z"))
        },
        "odd, but a Saturday; the 9th is the next odd weekday"
    );
    // A step in the weekday likewise restricts the days of the month.
    let w = window("0 2 1-7 * */6", "1h", None);
    assert!(
        matches!(gate([&w], at("2026-11-02T02:30:00Z")), Gate::Closed { .. }),
        "the 2nd is a Monday"
    );
    assert_eq!(gate([&w], at("2026-11-07T02:30:00Z")), Gate::Open, "a Saturday in the first week");
}

#[test]
fn the_examples_users_copy_read_as_their_documentation_says() {
    // Kubernetes' CronJob documentation: both days restricted, either
    // matches: every Friday and every 13th. 2026-11-13 is a Friday; the
    // 20th a Friday; 2027-01-13 a Wednesday.
    let w = window("0 0 13 * 5", "1h", None);
    assert_eq!(gate([&w], at("2026-11-20T00:30:00Z")), Gate::Open, "a Friday");
    assert_eq!(gate([&w], at("2027-01-13T00:30:00Z")), Gate::Open, "a 13th");
    assert!(matches!(gate([&w], at("2026-11-19T00:30:00Z")), Gate::Closed { .. }));
    // Its macros, @midnight among them, and names in any case.
    let wednesday_noon = at("2026-11-25T12:00:00Z");
    for (macro_, opened) in [
        ("@yearly", "2026-01-01T00:00:00Z"),
        ("@annually", "2026-01-01T00:00:00Z"),
        ("@monthly", "2026-11-01T00:00:00Z"),
        ("@weekly", "2026-11-22T00:00:00Z"),
        ("@daily", "2026-11-25T00:00:00Z"),
        ("@midnight", "2026-11-25T00:00:00Z"),
        ("@hourly", "2026-11-25T12:00:00Z"),
    ] {
        let w = window(macro_, "1m", None);
        assert_eq!(w.open_at(at(opened)).map(|(o, _)| o), Some(at(opened)), "{macro_}");
        assert!(w.open_at(wednesday_noon).is_some() == (macro_ == "@hourly"), "{macro_}");
    }
    let w = window("0 22 * jan-dec Mon-Fri", "1h", None);
    assert_eq!(gate([&w], at("2026-11-25T22:30:00Z")), Gate::Open);
    // Argo CD's sync windows: `0 22 * * *` for 1h, `30 10 * * *` for 30m,
    // `10 1 * * *` for 1h.
    for (schedule, duration, inside, outside) in [
        ("0 22 * * *", "1h", "2026-11-25T22:59:00Z", "2026-11-25T23:00:00Z"),
        ("30 10 * * *", "30m", "2026-11-25T10:45:00Z", "2026-11-25T11:00:00Z"),
        ("10 1 * * *", "1h", "2026-11-25T01:10:00Z", "2026-11-25T01:09:00Z"),
    ] {
        let w = window(schedule, duration, None);
        assert_eq!(gate([&w], at(inside)), Gate::Open, "{schedule} at {inside}");
        assert!(matches!(gate([&w], at(outside)), Gate::Closed { .. }), "{schedule} at {outside}");
    }
    // Sunday is 0 or 7, as in Vixie cron; 2026-11-22 is a Sunday.
    let w = window("0 3 * * 7", "1h", None);
    assert_eq!(gate([&w], at("2026-11-22T03:30:00Z")), Gate::Open);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, failure_persistence: None, ..Default::default() })]

    /// Refused as never firing exactly when croner, set as Vixie cron
    /// reads the days, finds no time from now to its last year.
    #[test]
    fn a_schedule_is_refused_as_never_firing_exactly_when_no_time_matches(
        days in proptest::sample::subsequence(vec![1, 28, 29, 30, 31], 1..=3),
        months in proptest::sample::subsequence(vec![1, 2, 4, 6, 9, 11], 1..=3),
        weekday in proptest::sample::select(vec!["*", "*/7", "1-5", "0"]),
    ) {
        let list = |values: Vec<i32>| values.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        let schedule = format!("0 0 {} {} {weekday}", list(days), list(months));
        let cron = croner::parser::CronParser::builder()
            .dom_and_dow(weekday.starts_with('*'))
            .build()
            .parse(&schedule)
            .unwrap();
        let from = at("2026-01-01T00:00:00Z").to_zoned(TimeZone::UTC);
        let fires = cron.find_next_occurrence(&from, false).is_ok();
        match Window::new(&schedule, "1h", None) {
            Ok(_) => proptest::prop_assert!(fires, "{schedule} accepted, but never fires"),
            Err(e) => proptest::prop_assert!(!fires && e.message.contains("never"), "{schedule}: {e}"),
        }
    }
}

/// The application's windows of the tests of `Gates`: every night for
/// every pool; weekend noons for the pools of `names: [north]`.
fn app_windows(north: &crate::api::PoolSelection) -> Vec<AppWindow<'_>> {
    vec![
        AppWindow {
            window: window("0 22 * * *", "2h", None),
            pools: None,
            holds_installs: false,
        },
        AppWindow {
            window: window("0 12 * * 6,0", "1h", Some("Asia/Shanghai")),
            pools: Some(north),
            holds_installs: true,
        },
    ]
}

/// Pools' own windows: two that read, one that does not.
const OWN: [&str; 3] = [
    r#"{"schedule": "0 2 * * *", "duration": "3h", "timeZone": "America/Chicago"}"#,
    r#"{"schedule": "30 9 * * 1-5", "duration": "90m"}"#,
    r#"{"schedule": "0 0 30 2 *", "duration": "1h"}"#,
];

#[test]
fn a_plans_windows_are_read_once_each_whatever_the_pools() {
    let north = crate::api::PoolSelection {
        names: vec!["north".into()],
        ..Default::default()
    };
    let windows = app_windows(&north);
    // Ten thousand pools, a tenth with an annotation of three texts.
    let annotations = (0..10_000).filter(|i| i % 10 == 0).map(|i| OWN[i % 3]);
    let gates = Gates::new(&windows, annotations, at("2026-11-25T12:30:00Z"));
    assert_eq!(gates.read(), 2 + 3, "the application's two and three texts");
}

/// What a pool's windows say, read for it alone: the reference `Gates`
/// must agree with.
fn closed_alone(
    windows: &[AppWindow],
    applies: &dyn Fn(usize) -> bool,
    own: Option<&str>,
    now: Timestamp,
) -> Option<super::super::Closed> {
    let own = match own.map(Window::from_annotation) {
        Some(Err(e)) => {
            return Some(super::super::Closed {
                opens: None,
                holds_installs: false,
                unreadable: Some(e.to_string()),
            })
        }
        Some(Ok(w)) => Some(w),
        None => None,
    };
    let applying: Vec<&AppWindow> =
        windows.iter().enumerate().filter(|(i, _)| applies(*i)).map(|(_, w)| w).collect();
    match gate(applying.iter().map(|w| &w.window).chain(own.as_ref()), now) {
        Gate::Open => None,
        Gate::Closed { opens } => Some(super::super::Closed {
            opens,
            holds_installs: applying.iter().any(|w| w.holds_installs),
            unreadable: None,
        }),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, failure_persistence: None, ..Default::default() })]

    #[test]
    fn reading_windows_once_answers_as_reading_them_for_each_pool(
        seconds in 0i64..(2 * 366 * 86_400),
        in_north in proptest::bool::ANY,
        own in proptest::option::of(0usize..OWN.len()),
        read_before in proptest::bool::ANY,
    ) {
        let north = crate::api::PoolSelection { names: vec!["north".into()], ..Default::default() };
        let windows = app_windows(&north);
        let now = Timestamp::from_second(at("2026-01-01T00:00:00Z").as_second() + seconds).unwrap();
        let own = own.map(|i| OWN[i]);
        let mut pool = Pool::named(if in_north { "north" } else { "south" });
        if let Some(text) = own {
            pool.annotations.insert(ANNOTATION_MAINTENANCE_WINDOW.to_string(), text.to_string());
        }
        // The pool's text read with the others, or not among them.
        let annotations: &[&str] = if read_before { &OWN } else { &[] };
        let gates = Gates::new(&windows, annotations.iter().copied(), now);
        let alone = closed_alone(&windows, &|i| i == 0 || in_north, own, now);
        proptest::prop_assert_eq!(gates.closed(&pool), alone);
    }
}
