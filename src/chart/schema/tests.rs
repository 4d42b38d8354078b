//! Unit tests of `schema`.

use super::*;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

const CHART_YAML: &[u8] = b"apiVersion: v2\nname: demo\nversion: 1.4.0\n";
const SCHEMA: &str = r#"{
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "required": ["port"],
        "properties": { "port": { "type": "integer", "maximum": 65535 } }
    }"#;

fn tgz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, path, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts-fixtures/strict-schema")
}

fn strict() -> Chart {
    Chart::from_dir(&fixture()).unwrap()
}

fn violations(chart: &Chart, values: Value) -> Vec<Violation> {
    chart.validate(&values).unwrap_err().0
}

fn rules_at(chart: &Chart, values: Value) -> Vec<(String, String)> {
    violations(chart, values).into_iter().map(|v| (v.path, v.rule)).collect()
}

fn pair(path: &str, rule: &str) -> (String, String) {
    (path.to_string(), rule.to_string())
}

#[test]
fn a_packaged_chart_is_read() {
    let archive = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.yaml", b"port: 8080\nimage:\n  tag: \"1.0\"\n"),
        ("demo/values.schema.json", SCHEMA.as_bytes()),
        ("demo/templates/deployment.yaml", b"kind: Deployment\n"),
        ("demo/charts/sub/values.yaml", b"port: not-this-one\n"),
    ]);
    let chart = Chart::from_tgz(&archive).unwrap();
    assert_eq!(chart.name, "demo");
    assert_eq!(chart.version, "1.4.0");
    assert_eq!(chart.values, json!({ "port": 8080, "image": { "tag": "1.0" } }));
    assert_eq!(chart.schema.as_ref().unwrap()["required"], json!(["port"]));
    assert_eq!(chart.validate(&json!({ "port": 443 })), Ok(()));
    assert_eq!(rules_at(&chart, json!({ "port": 70000 })), vec![pair("/port", "maximum")]);
}

#[test]
fn a_chart_without_values_or_schema_accepts_anything() {
    let chart = Chart::from_tgz(&tgz(&[("demo/Chart.yaml", CHART_YAML)])).unwrap();
    assert_eq!(chart.values, json!({}));
    assert_eq!(chart.schema, None);
    assert_eq!(chart.validate(&json!({ "anything": [1, { "at": "all" }] })), Ok(()));
    assert_eq!(chart.validate(&Value::Null), Ok(()));
}

#[test]
fn empty_values_and_schema_files_count_as_absent() {
    let archive = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.yaml", b"# nothing to set\n"),
        ("demo/values.schema.json", b"\n"),
    ]);
    let chart = Chart::from_tgz(&archive).unwrap();
    assert_eq!(chart.values, json!({}));
    assert_eq!(chart.schema, None);
}

#[test]
fn the_fixture_directory_is_read() {
    let chart = strict();
    assert_eq!(chart.name, "strict-schema");
    assert_eq!(chart.version, "2.0.0");
    assert_eq!(chart.values, json!({ "replicas": 1, "message": "hello", "mode": "edge" }));
    assert!(chart.schema.is_some());
}

#[test]
fn valid_values_pass_the_strict_schema() {
    let chart = strict();
    assert_eq!(chart.validate(&json!({})), Ok(()));
    assert_eq!(chart.validate(&Value::Null), Ok(()));
    let all = json!({ "replicas": 5, "message": "hi", "mode": "cloud", "nodeSelector": { "pool": "a" } });
    assert_eq!(chart.validate(&all), Ok(()));
}

#[test]
fn a_value_outside_the_enum_fails() {
    let found = violations(&strict(), json!({ "mode": "orbit" }));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].path, "/mode");
    assert_eq!(found[0].rule, "enum");
    assert!(found[0].message.contains("orbit"), "{}", found[0].message);
}

#[test]
fn bounds_and_types_fail_with_their_keyword() {
    let chart = strict();
    assert_eq!(rules_at(&chart, json!({ "replicas": 0 })), vec![pair("/replicas", "minimum")]);
    assert_eq!(rules_at(&chart, json!({ "replicas": 6 })), vec![pair("/replicas", "maximum")]);
    assert_eq!(rules_at(&chart, json!({ "replicas": "2" })), vec![pair("/replicas", "type")]);
    assert_eq!(rules_at(&chart, json!({ "message": "" })), vec![pair("/message", "minLength")]);
    assert_eq!(
        rules_at(&chart, json!({ "nodeSelector": { "pool": 1 } })),
        vec![pair("/nodeSelector/pool", "type")]
    );
}

#[test]
fn unknown_keys_fail_additional_properties() {
    assert_eq!(rules_at(&strict(), json!({ "extra": 1 })), vec![pair("(root)", "additionalProperties")]);
}

#[test]
fn a_null_removes_the_default_and_fails_required() {
    let found = violations(&strict(), json!({ "message": null }));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].path.as_str(), found[0].rule.as_str()), ("(root)", "required"));
    assert!(found[0].message.contains("message"), "{}", found[0].message);
}

#[test]
fn nested_nulls_are_removed_too() {
    let schema = json!({
        "type": "object",
        "properties": { "image": { "type": "object", "required": ["tag"] } }
    });
    let chart = Chart {
        compiled: Default::default(),
        name: "demo".to_string(),
        version: "1.0.0".to_string(),
        values: json!({ "image": { "repository": "r", "tag": "1" } }),
        schema: Some(schema),
    };
    assert_eq!(rules_at(&chart, json!({ "image": { "tag": null } })), vec![pair("/image", "required")]);
    assert_eq!(chart.validate(&json!({ "image": { "repository": null } })), Ok(()));
}

#[test]
fn every_violation_is_reported_one_per_line() {
    let err = strict()
        .validate(&json!({ "mode": "orbit", "replicas": 0, "extra": true }))
        .unwrap_err();
    assert_eq!(err.0.len(), 3, "{err}");
    let text = err.to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().any(|l| l.starts_with("/mode: ") && l.ends_with(" (enum)")), "{text}");
}

#[test]
fn user_values_that_are_not_a_map_are_reported() {
    let found = violations(&strict(), json!(["a"]));
    assert_eq!((found[0].path.as_str(), found[0].rule.as_str()), ("(root)", "type"));
}

#[test]
fn a_hand_built_chart_with_a_broken_schema_reports_it() {
    let chart = Chart {
        schema: Some(json!({ "type": 12 })),
        // Compiled afresh: strict()'s compiled schema is of its own.
        compiled: Default::default(),
        ..strict()
    };
    assert_eq!(rules_at(&chart, json!({})), vec![pair("(root)", "$schema")]);
}

#[test]
fn the_draft_is_taken_from_the_schema() {
    // Draft 4 spells an exclusive bound as a boolean beside `maximum`;
    // read as 2020-12 the boolean would be rejected when compiling.
    let schema = r#"{
            "$schema": "http://json-schema.org/draft-04/schema#",
            "properties": { "n": { "maximum": 3, "exclusiveMaximum": true } }
        }"#;
    let archive = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.schema.json", schema.as_bytes()),
    ]);
    let chart = Chart::from_tgz(&archive).unwrap();
    assert_eq!(chart.validate(&json!({ "n": 2 })), Ok(()));
    assert_eq!(rules_at(&chart, json!({ "n": 3 })), vec![pair("/n", "exclusiveMaximum")]);

    let undeclared = schema.replace(r#""$schema": "http://json-schema.org/draft-04/schema#","#, "");
    let archive = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.schema.json", undeclared.as_bytes()),
    ]);
    assert!(matches!(Chart::from_tgz(&archive), Err(ChartError::Schema { .. })));
}

#[test]
fn a_schema_that_does_not_compile_is_refused() {
    for schema in [
        r#"{ "type": 12 }"#,
        r#"{ "$ref": "https://example.com/values.json" }"#,
    ] {
        let archive = tgz(&[
            ("demo/Chart.yaml", CHART_YAML),
            ("demo/values.schema.json", schema.as_bytes()),
        ]);
        let err = Chart::from_tgz(&archive).unwrap_err();
        assert!(matches!(err, ChartError::Schema { .. }), "{schema}: {err}");
        assert!(err.to_string().contains("values.schema.json"), "{err}");
    }
}

#[test]
fn bad_files_are_named() {
    let yaml = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.yaml", b"a: [1, 2\n"),
    ]);
    let err = Chart::from_tgz(&yaml).unwrap_err();
    assert!(matches!(&err, ChartError::Yaml { file, .. } if file == "values.yaml"), "{err}");
    assert!(err.to_string().starts_with("values.yaml in the chart is not valid YAML"), "{err}");

    let json = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.schema.json", b"{ nope"),
    ]);
    let err = Chart::from_tgz(&json).unwrap_err();
    assert!(err.to_string().starts_with("values.schema.json in the chart is not valid JSON"), "{err}");

    let chart_yaml = tgz(&[("demo/Chart.yaml", b"name: [unclosed\n")]);
    let err = Chart::from_tgz(&chart_yaml).unwrap_err();
    assert!(matches!(&err, ChartError::Yaml { file, .. } if file == "Chart.yaml"), "{err}");

    let list = tgz(&[
        ("demo/Chart.yaml", CHART_YAML),
        ("demo/values.yaml", b"- a\n- b\n"),
    ]);
    assert!(matches!(Chart::from_tgz(&list), Err(ChartError::ValuesNotAMap { found: "a list" })));
}

#[test]
fn chart_yaml_must_name_and_version_the_chart() {
    let cases: &[(&[u8], &str)] = &[
        (b"apiVersion: v2\nversion: 1.0.0\n", "Chart.yaml has no `name`"),
        (b"apiVersion: v2\nname: demo\n", "Chart.yaml has no `version`"),
        (b"apiVersion: v2\nname: demo\nversion: 1.0\n", "`version` must be a string, not a number"),
        (b"- demo\n", "Chart.yaml must be a map"),
    ];
    for (chart_yaml, expected) in cases {
        let err = Chart::from_tgz(&tgz(&[("demo/Chart.yaml", chart_yaml)])).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn chart_yaml_must_be_inside_the_chart_directory() {
    let missing = tgz(&[
        ("demo/values.yaml", b"a: 1\n"),
        ("demo/sub/Chart.yaml", CHART_YAML),
    ]);
    assert!(matches!(Chart::from_tgz(&missing), Err(ChartError::MissingChartYaml { .. })));
    let at_root = tgz(&[("Chart.yaml", CHART_YAML)]);
    assert!(matches!(Chart::from_tgz(&at_root), Err(ChartError::ChartYamlAtArchiveRoot)));
}

#[test]
fn something_that_is_not_an_archive_is_refused() {
    let err = Chart::from_tgz(b"apiVersion: v2\nname: demo\n").unwrap_err();
    assert!(matches!(err, ChartError::Archive { .. }), "{err}");
}

#[test]
fn an_oversized_file_is_refused() {
    let big = vec![0u8; (MAX_FILE_BYTES + 1) as usize];
    let archive = tgz(&[("demo/Chart.yaml", CHART_YAML), ("demo/files/blob.bin", &big)]);
    // Zeros compress about a thousandfold: this is what a bomb looks like.
    assert!(archive.len() < 64 * 1024, "{}", archive.len());
    let err = Chart::from_tgz(&archive).unwrap_err();
    assert!(
        matches!(&err, ChartError::FileTooLarge { file, .. } if file == "demo/files/blob.bin"),
        "{err}"
    );
    assert!(err.to_string().contains("decompression bomb"), "{err}");
}

#[test]
fn an_archive_unpacking_past_the_total_limit_is_refused() {
    let chunk = vec![0u8; (4 * MIB) as usize];
    let names: Vec<String> = (0..6).map(|i| format!("demo/files/part{i}.bin")).collect();
    let mut files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), chunk.as_slice())).collect();
    // Last, so the limit has to stop the read before Chart.yaml is seen.
    files.push(("demo/Chart.yaml", CHART_YAML));
    let err = Chart::from_tgz(&tgz(&files)).unwrap_err();
    assert!(matches!(err, ChartError::ArchiveTooLarge { limit_mib: 20 }), "{err}");
    assert!(err.to_string().contains("more than 20 MiB"), "{err}");
}

#[test]
fn a_header_claiming_a_huge_file_is_refused_before_reading() {
    let mut header = tar::Header::new_gnu();
    header.set_path("demo/values.yaml").unwrap();
    header.set_size(1 << 40);
    header.set_mode(0o644);
    header.set_cksum();
    let mut raw = header.as_bytes().to_vec();
    raw.extend_from_slice(&[0u8; 1024]);
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&raw).unwrap();
    let err = Chart::from_tgz(&gz.finish().unwrap()).unwrap_err();
    assert!(matches!(err, ChartError::FileTooLarge { size, .. } if size == 1 << 40), "{err}");
}

#[test]
fn load_tells_a_directory_from_an_archive() {
    assert_eq!(Chart::load(&fixture()).unwrap(), strict());

    let dir = std::env::temp_dir().join(format!("chart-load-test-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("demo-1.4.0.tgz");
    fs::write(&file, tgz(&[("demo/Chart.yaml", CHART_YAML)])).unwrap();
    let loaded = Chart::load(&file);
    let missing = Chart::load(&dir.join("absent.tgz"));
    fs::remove_dir_all(&dir).unwrap();

    assert_eq!(loaded.unwrap().name, "demo");
    assert!(matches!(missing, Err(ChartError::Read { .. })));
    let err = Chart::from_dir(&fixture().join("templates")).unwrap_err();
    assert!(matches!(err, ChartError::MissingChartYaml { .. }), "{err}");
}

/// As `tgz`, with entry names written byte for byte (the tar crate
/// would normalise `./` and refuse `..`).
fn tgz_raw(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for (path, data) in files {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

#[test]
fn entry_paths_are_cleaned_as_helms_loader_cleans_them() {
    let chart_yaml: &[u8] = b"name: demo\nversion: 1.0.0\n";
    let schema: &[u8] = br#"{ "type": "object", "required": ["port"] }"#;
    for schema_path in [
        "demo/./values.schema.json",
        "demo/templates/../values.schema.json",
        "demo\\values.schema.json",
    ] {
        let archive = tgz_raw(&[("demo/Chart.yaml", chart_yaml), (schema_path, schema)]);
        let chart = Chart::from_tgz(&archive).unwrap_or_else(|e| panic!("{schema_path}: {e}"));
        // Was: the schema was skipped here while Helm used it.
        assert!(chart.schema.is_some(), "{schema_path}: the schema Helm uses was not read");
    }
    // A name that mixes both separators is split where Helm splits it.
    let archive = tgz_raw(&[
        ("demo/Chart.yaml", chart_yaml),
        ("demo/sub\\values.schema.json", schema),
    ]);
    assert!(Chart::from_tgz(&archive).unwrap().schema.is_some());
}

#[test]
fn entry_paths_helm_refuses_are_refused() {
    let chart_yaml: &[u8] = b"name: demo\nversion: 1.0.0\n";
    for (path, why) in [
        ("demo/../../etc/values.yaml", "parent directory"),
        ("demo//etc/values.yaml", "absolute path"),
        ("README.md", "outside the chart's directory"),
        ("demo/..", "parent directory"),
    ] {
        let archive = tgz_raw(&[("demo/Chart.yaml", chart_yaml), (path, b"x: 1\n")]);
        let result = Chart::from_tgz(&archive);
        let e = result.unwrap_err();
        assert!(e.to_string().contains(why), "{path}: {e}");
    }
    let archive = tgz_raw(&[("demo/Chart.yaml", chart_yaml), ("demo\\\\abs.yaml", b"x: 1\n")]);
    let e = Chart::from_tgz(&archive).unwrap_err();
    assert!(e.to_string().contains("absolute path"), "{e}");
}
