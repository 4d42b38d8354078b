//! The header format itself, without a cluster: every file of the corpus
//! parses, and a header that cannot be understood is an error, never a skip.
use super::corpus::parse_case;
use super::*;

fn vars() -> Vars {
    Vars {
        namespace: "ns".into(),
        prefix: "pre".into(),
        pool_a: "pre-a".into(),
        pool_b: "pre-b".into(),
    }
}

const APP: &str = "apiVersion: apps.fanout.dev/v1alpha1\nkind: NodePoolApplication\n\
                   metadata: { name: \"${APP}\", namespace: \"${NAMESPACE}\" }\n\
                   spec: { values: \"${GENERATED}\" }\n";

#[test]
fn every_corpus_file_parses() {
    let mut failures = Vec::new();
    let cases = load_corpus(&vars(), &mut failures);
    assert!(failures.is_empty(), "{failures:#?}");
    assert!((40..=60).contains(&cases.len()), "{} cases", cases.len());
    assert!(cases.iter().any(|c| c.expect == Expect::Admission));
    assert!(cases.iter().any(|c| !c.healthy.is_empty()));
}

#[test]
fn a_full_header_is_read_and_substituted() {
    let text = format!(
        "# A description line: with a colon.\n# expect: condition\n# reason: A | B\n\
         # pool: ${{POOL_B}}\n# message: one\n# message: two\n# healthy: ${{POOL_A}}\n\
         # no-release: ${{POOL_B}}\n# release-field: /spec/x = {{\"a\": 1}}\n# order: last\n\
         # generate: deep-values 3\n{APP}"
    );
    let case = parse_case("07-something.yaml", &text, &vars()).unwrap();
    assert_eq!(case.app, "case-07");
    assert_eq!((case.expect, case.reason.as_deref()), (Expect::Condition, Some("A | B")));
    assert_eq!(case.pool.as_deref(), Some("pre-b"));
    assert_eq!(case.messages, ["one", "two"]);
    assert_eq!((case.healthy, case.no_release), (vec!["pre-a".into()], vec!["pre-b".into()]));
    assert_eq!(case.release_fields, [("/spec/x".to_string(), json!({ "a": 1 }))]);
    assert!(case.last);
    let body: Value = serde_json::from_str(&case.body).unwrap();
    assert_eq!(body["metadata"], json!({ "name": "case-07", "namespace": "ns" }));
    assert_eq!(body["spec"]["values"], json!({ "level": { "level": { "level": "bottom" } } }));
}

#[test]
fn huge_values_have_the_size_asked_for() {
    let text = format!("# expect: admission\n# message: m\n# generate: huge-values 64KiB\n{APP}");
    let case = parse_case("01-huge.yaml", &text, &vars()).unwrap();
    assert!((64 * 1024..66 * 1024).contains(&case.body.len()), "{}", case.body.len());
}

#[test]
fn headers_that_cannot_be_understood_are_errors() {
    let plain = APP.replace("\"${GENERATED}\"", "{}");
    for (header, why) in [
        ("# message: m\n", "no `# expect:`"),
        ("# expect: admission\n", "no `# message:`"),
        ("# expect: sometimes\n# message: m\n", "is not admission or condition"),
        ("# expect: admission\n# mesage: m\n", "unknown header key \"mesage\""),
        ("# expect: condition\n# message: m\n", "needs a `# reason:`"),
        ("# expect: admission\n# message: m\n# pool: p\n", "are for expect: condition"),
        ("# expect: admission\n# message: ${POOL_C}\n", "unknown placeholder"),
        ("# expect: admission\n# message: m\n# generate: wide-values 3\n", "is not `huge-values"),
        ("# expect: admission\n# message: m\n# order: first\n", "is not `last`"),
    ] {
        let err = parse_case("01-x.yaml", &format!("{header}{plain}"), &vars()).unwrap_err();
        assert!(err.contains(why), "{header:?}: {err}");
    }
    let ok = "# expect: admission\n# message: m\n";
    let err = parse_case("1-x.yaml", &format!("{ok}{plain}"), &vars()).unwrap_err();
    assert!(err.contains("NN-short-description"), "{err}");
    let err = parse_case("01-x.yaml", &format!("{ok}{APP}"), &vars()).unwrap_err();
    assert!(err.contains("without a `# generate:`"), "{err}");
    let err = parse_case("01-x.yaml", &format!("{ok}{plain}---\n{plain}"), &vars()).unwrap_err();
    assert!(err.contains("2 NodePoolApplications"), "{err}");
}
