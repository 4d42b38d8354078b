//! Unit tests of `version`.

use super::*;

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

/// (constraint, version, matches?) in the spirit of the examples in the
/// Masterminds semver v3 documentation and test suite.
const TABLE: &[(&str, &str, bool)] = &[
    // Plain versions and `=`.
    ("1.2.3", "1.2.3", true),
    ("1.2.3", "1.2.4", false),
    ("=1.2.3", "1.2.3", true),
    ("= 1.2.3", "1.2.2", false),
    ("v1.2.3", "1.2.3", true),
    ("1.2.3", "1.2.3+build.5", true),
    ("=1.2.3+abc", "1.2.3", true),
    ("01.2.3", "1.2.3", true),
    // `!=`, with and without wildcards.
    ("!=1.2.3", "1.2.3", false),
    ("!=1.2.3", "1.2.4", true),
    ("!=4.1", "4.1.0", false),
    ("!=4.1", "4.1.9", false),
    ("!=4.1", "4.2.0", true),
    ("!=4.1", "5.1.0", true),
    ("!=4.x", "4.9.9", false),
    ("!=4.x", "5.1.0", true),
    ("!= 1.2.x", "1.2.7", false),
    ("!= 1.2.x", "1.3.0", true),
    // `>`.
    (">1.2.3", "1.2.4", true),
    (">1.2.3", "1.2.3", false),
    (">1.2", "1.2.9", false),
    (">1.2", "1.3.0", true),
    ("> 1.2.x", "1.3.0", true),
    ("> 1.2.x", "1.2.9", false),
    (">1", "1.9.0", false),
    (">1", "2.0.0", true),
    (">11", "11.1.0", false),
    (">1.x", "2.0.0", true),
    (">0", "0.9.0", false),
    // `<`.
    ("<1.2.3", "1.2.2", true),
    ("<1.2.3", "1.2.3", false),
    ("<1.2", "1.1.9", true),
    ("<1.2", "1.2.0", false),
    ("< 1.2.x", "1.2.0", false),
    ("< 1.2.x", "1.1.99", true),
    ("<2", "1.99.99", true),
    ("<2", "2.0.0", false),
    // `>=` and `=>`.
    (">=1.2.3", "1.2.3", true),
    (">=1.2.3", "1.2.2", false),
    (">= 1.2.x", "1.2.0", true),
    (">= 1.2.x", "1.1.9", false),
    ("=>1.2", "1.2.0", true),
    (">=1.2", "1.1.0", false),
    (">= 1", "1.0.0", true),
    // `<=` and `=<`.
    ("<=1.2.3", "1.2.3", true),
    ("<=1.2.3", "1.2.4", false),
    ("<= 2.x", "2.9.9", true),
    ("<= 2.x", "3.0.0", false),
    ("=<1.2", "1.2.99", true),
    ("<=1.2", "1.3.0", false),
    ("<=1.2.x", "1.2.5", true),
    ("<=1.2.x", "1.3.0", false),
    ("<=1", "1.5.0", true),
    ("<=1", "0.1.0", true),
    // AND groups, by space or comma.
    (">= 1.2, < 3.0.0", "2.9.9", true),
    (">= 1.2, < 3.0.0", "3.0.0", false),
    (">=1.2 <3", "1.1.0", false),
    (">=1.1 <2 !=1.5.0", "1.5.0", false),
    (">=1.1 <2 !=1.5.0", "1.5.1", true),
    (" >= 1.2 ,<2 ", "1.5.0", true),
    (">=1.2,<2", "2.0.0", false),
    // OR groups.
    ("^1.0 || ~2.3", "1.9.0", true),
    ("^1.0 || ~2.3", "2.3.9", true),
    ("^1.0 || ~2.3", "2.4.0", false),
    (">4 || <2", "3.0.0", false),
    (">4 || <2", "1.0.0", true),
    ("1.2.3||1.2.5", "1.2.5", true),
    ("1.2.3||1.2.5", "1.2.4", false),
    // Hyphen ranges; a partial upper end reads as a wildcard.
    ("1.2 - 1.4.5", "1.2.0", true),
    ("1.2 - 1.4.5", "1.4.5", true),
    ("1.2 - 1.4.5", "1.4.6", false),
    ("1.2 - 1.4.5", "1.1.9", false),
    ("2.3 - 4.5", "4.5.7", true),
    ("2.3 - 4.5", "4.6.0", false),
    ("2.3 - 4.5", "2.2.9", false),
    ("1.2.3 - 2", "2.9.0", true),
    ("1 - 2", "3.0.0", false),
    ("1.0 - 1.2 || 3.x", "3.1.0", true),
    // Wildcards and partial versions alone.
    ("1.2.x", "1.2.0", true),
    ("1.2.x", "1.2.99", true),
    ("1.2.x", "1.3.0", false),
    ("1.2.x", "1.1.9", false),
    ("1.*", "1.99.0", true),
    ("1.*", "2.0.0", false),
    ("1.X", "1.3.0", true),
    ("v1.x", "1.4.0", true),
    ("*", "0.0.1", true),
    ("x", "3.4.5", true),
    ("1.2", "1.2.9", true),
    ("1", "1.9.9", true),
    ("1", "2.0.0", false),
    ("=1.2", "1.3.0", false),
    ("1.x.3", "1.7.0", true),
    // Tilde.
    ("~1.2.3", "1.2.3", true),
    ("~1.2.3", "1.2.9", true),
    ("~1.2.3", "1.3.0", false),
    ("~1.2.3", "1.2.2", false),
    ("~1", "1.9.9", true),
    ("~1", "2.0.0", false),
    ("~2.3", "2.3.5", true),
    ("~2.3", "2.4.0", false),
    ("~1.x", "1.7.0", true),
    ("~1.x", "2.0.0", false),
    ("~>1.2", "1.2.8", true),
    ("~>1.2", "1.3.0", false),
    ("~0.2.3", "0.2.5", true),
    ("~0.2.3", "0.3.5", false),
    ("~*", "9.9.9", true),
    ("~0.0.0", "5.0.0", true),
    // Caret.
    ("^1.2.3", "1.2.3", true),
    ("^1.2.3", "1.9.9", true),
    ("^1.2.3", "2.0.0", false),
    ("^1.2.3", "1.2.2", false),
    ("^1.2", "1.9.0", true),
    ("^1.2", "1.1.9", false),
    ("^0.2.3", "0.2.9", true),
    ("^0.2.3", "0.3.0", false),
    ("^0.2", "0.2.0", true),
    ("^0.2", "0.3.0", false),
    ("^0.0.3", "0.0.3", true),
    ("^0.0.3", "0.0.4", false),
    ("^0.0", "0.0.9", true),
    ("^0.0", "0.1.0", false),
    ("^0", "0.9.9", true),
    ("^0", "1.0.0", false),
    ("^1.x", "1.0.0", true),
    ("^1.x", "1.99.0", true),
    ("^1.x", "2.0.0", false),
    ("^1.x", "0.9.0", false),
    ("^*", "4.0.0", true),
    ("^ 1.2.3", "1.5.0", true),
    // Prereleases: excluded unless the alternative names one.
    (">=1.2.3", "1.3.0-beta.1", false),
    ("^1.2.3", "1.2.4-rc.1", false),
    ("*", "1.0.0-alpha", false),
    ("1.2.3", "1.2.3-beta", false),
    (">=1.2.3-0", "1.2.3-alpha", true),
    (">=1.2.3-0", "1.3.0-beta", true),
    (">=1.2.3-beta.2 <2", "1.5.0-rc.1", true),
    (">= 1.0.0-0, < 2.0.0", "2.0.0-rc.1", true),
    (">=1.2.3-beta.2", "1.2.3-beta.1", false),
    (">=1.2.3-beta.2", "1.2.3-beta.10", true),
    (">=1.2.3-beta.2 || <1", "0.5.0-alpha", false),
    ("<1 || >=1.2.3-beta.2", "1.4.0-alpha", true),
    ("~1.2.3-beta.2", "1.2.3-beta.4", true),
    ("^1.2.3-alpha", "1.2.3-beta", true),
    ("^1.2.3-alpha", "2.0.0-alpha", false),
    ("1.2.3-beta", "1.2.3-beta", true),
    ("1.2.3-beta", "1.2.3-beta+exp.sha", true),
    (">=1.2.3-BETA", "1.2.3-alpha", true),
    (">1.0.0-alpha", "1.0.0", true),
    (">1.0.0-alpha", "1.0.0-alpha.1", true),
    ("1.x-0", "1.3.0-rc.1", true),
];

#[test]
fn masterminds_table() {
    assert!(TABLE.len() >= 80);
    let mut failures = Vec::new();
    for (constraint, version, expected) in TABLE {
        let parsed = Constraint::parse(constraint)
            .unwrap_or_else(|e| panic!("constraint {constraint:?} should parse: {e}"));
        if parsed.matches(&v(version)) != *expected {
            failures.push(format!("{constraint:?} vs {version}: expected {expected}"));
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
fn from_str_and_display_round_trip() {
    let c: Constraint = ">=1.2 <2 || ^3".parse().unwrap();
    assert_eq!(c.to_string(), ">=1.2 <2 || ^3");
    assert!(c.matches(&v("3.4.0")));
}

#[test]
fn invalid_constraints_name_the_offending_part() {
    let cases: &[(&str, &str)] = &[
        ("||", "\"||\""),
        ("^1 ||", "\"||\""),
        (">=", "\">=\""),
        ("1.2.3.4", "\"1.2.3.4\""),
        ("abc", "\"abc\""),
        (">>1", "\">>\""),
        ("=!1", "\"=!\""),
        ("1.2 -", "\"1.2\""),
        ("- 1.2", "\"-\""),
        (">=1.2 - 2", "\">=1.2\""),
        (",1.2", "\",\""),
        ("1.2,", "\",\""),
        ("1.2,,1.3", "\",\""),
        ("1.2.3-01", "\"1.2.3-01\""),
        ("1.a", "\"1.a\""),
        (">=1.2 <2.x.y", "\"2.x.y\""),
        ("1.2.3+", "\"1.2.3+\""),
        ("99999999999999999999999", "\"99999999999999999999999\""),
    ];
    for (constraint, part) in cases {
        let err = Constraint::parse(constraint).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, VersionError::InvalidConstraint { .. }), "{constraint:?}: {message}");
        assert!(message.contains(&format!(": {part} ")), "{constraint:?} should name {part}: {message}");
    }
    assert_eq!(Constraint::parse(" "), Err(VersionError::EmptyConstraint));
}

#[test]
fn lenient_version_parsing_follows_new_version() {
    assert_eq!(parse_version("1.2"), Some(v("1.2.0")));
    assert_eq!(parse_version("1"), Some(v("1.0.0")));
    assert_eq!(parse_version("v1.2.3"), Some(v("1.2.3")));
    assert_eq!(parse_version("1.2.3-beta.1+b.7"), Some(v("1.2.3-beta.1+b.7")));
    assert_eq!(parse_version("v2-rc.1"), Some(v("2.0.0-rc.1")));
    assert_eq!(parse_version("01.2.3"), Some(v("1.2.3")));
    for bad in [
        "", "v", "x", "1.x", "1.2.3.4", "1.2.3-", "1.2.3+", "1.2.3-01", "V1.2.3", " 1.2.3", "1..2",
    ] {
        assert_eq!(parse_version(bad), None, "{bad:?}");
    }
}

#[test]
fn exact_versions_are_told_from_ranges() {
    for exact in ["1.2.3", "v1.2.3", "1.2.3-rc.1", "1.2.3+build.7"] {
        assert!(is_exact(exact), "{exact}");
    }
    for range in [
        "",
        "*",
        "1.2",
        "1",
        "^1.2.3",
        "=1.2.3",
        "1.2.x",
        ">=1.2.3",
        "1.2.3 || 1.2.4",
        "01.2.3",
    ] {
        assert!(!is_exact(range), "{range}");
    }
}

#[test]
fn exact_string_wins_over_semver() {
    assert_eq!(resolve("1.0", ["1.0", "1.0.0"]), Ok("1.0"));
    assert_eq!(resolve("1.0.0", ["1.0", "1.0.0"]), Ok("1.0.0"));
    // Equal precedence, so the semver match alone would take the first.
    assert_eq!(resolve("1.0.0+b", ["1.0.0+a", "1.0.0+b"]), Ok("1.0.0+b"));
    // Not written in the index, so `1.0` is the range 1.0.x.
    assert_eq!(resolve("1.0", ["1.0.0", "1.0.1", "1.1.0"]), Ok("1.0.1"));
}

#[test]
fn latest_stable_skips_prereleases() {
    let index = ["1.0.0", "2.0.0-rc.1", "1.5.0", "1.4.9"];
    assert_eq!(resolve("", index), Ok("1.5.0"));
    assert_eq!(resolve("*", index), Ok("1.5.0"));
    assert_eq!(resolve(">=1", index), Ok("1.5.0"));
}

#[test]
fn a_prerelease_is_chosen_when_the_constraint_names_one() {
    let index = ["1.0.0", "2.0.0-rc.1", "2.0.0-beta.3", "1.5.0"];
    assert_eq!(resolve(">=2.0.0-0", index), Ok("2.0.0-rc.1"));
    assert_eq!(resolve("^2.0.0-beta.1", index), Ok("2.0.0-rc.1"));
    assert_eq!(resolve(">=1.0.0-0", index), Ok("2.0.0-rc.1"));
    assert_eq!(resolve("2.0.0-beta.3", index), Ok("2.0.0-beta.3"));
}

#[test]
fn unparseable_index_entries_are_skipped() {
    let index = ["latest", "1.2", "01.4.0", "v1.3.0", "1.1.0", "1.2.3.4"];
    assert_eq!(resolve("", index), Ok("v1.3.0"));
    assert_eq!(resolve(">=1.2", index), Ok("v1.3.0"));
    assert_eq!(resolve("<1.3", index), Ok("1.1.0"));
    // Skipped for ranges, but still found when asked for by name.
    assert_eq!(resolve("1.2", index), Ok("1.2"));
    assert_eq!(resolve("latest", index), Ok("latest"));
}

#[test]
fn equal_precedence_takes_the_first_in_the_index() {
    assert_eq!(resolve("*", ["1.0.0+b", "1.0.0+a", "0.9.0"]), Ok("1.0.0+b"));
    assert_eq!(resolve("^1", ["v1.0.0", "1.0.0"]), Ok("v1.0.0"));
}

#[test]
fn no_match_lists_what_is_available() {
    let err = resolve("^2.0", ["1.0.0", "1.1.0", "nope"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no version of the chart matches \"^2.0\": available are 1.1.0, 1.0.0 — widen the range or \
             publish a matching version"
    );
}

#[test]
fn a_long_list_of_available_versions_is_capped() {
    let index: Vec<String> = (0..25).map(|i| format!("1.{i}.0")).collect();
    let err = resolve("^2", index.iter().map(String::as_str)).unwrap_err();
    let VersionError::NoMatch { available, .. } = &err else {
        panic!("{err}");
    };
    assert!(available.starts_with("1.24.0, 1.23.0, "), "{available}");
    assert!(available.ends_with("1.15.0 and 15 more"), "{available}");
}

#[test]
fn other_failures_say_what_to_do() {
    assert_eq!(resolve("", []), Err(VersionError::NoVersions));
    assert!(matches!(
        resolve("", ["1.0.0-rc.1"]),
        Err(VersionError::NoStableVersion { available }) if available == "1.0.0-rc.1"
    ));
    assert!(matches!(
        resolve("^1", ["latest", "stable"]),
        Err(VersionError::NoValidVersions { listed }) if listed == "latest, stable"
    ));
    assert!(matches!(resolve(">>1", ["1.0.0"]), Err(VersionError::InvalidConstraint { .. })));
    assert!(resolve("", ["1.0.0-rc.1"]).unwrap_err().to_string().contains(">=1.0.0-0"));
}
