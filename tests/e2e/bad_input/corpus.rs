//! Reading the corpus: each file's header and documents, its
//! placeholders substituted and its values generated.
use super::*;

impl Vars {
    fn substitute(&self, text: &str, app: &str) -> Result<String, String> {
        let out = text
            .replace("${NAMESPACE}", &self.namespace)
            .replace("${APP}", app)
            .replace("${PREFIX}", &self.prefix)
            .replace("${POOL_A}", &self.pool_a)
            .replace("${POOL_B}", &self.pool_b)
            .replace("${CHART_VERSION}", CHART_VERSION);
        let leftover = out.replace("${GENERATED}", "");
        match leftover.find("${") {
            Some(at) => {
                let rest: String = leftover[at..].chars().take(30).collect();
                Err(format!("unknown placeholder at {rest:?}"))
            }
            None => Ok(out),
        }
    }
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad-input")
}

/// Reads every case file; a file that cannot be parsed is a failure, not a skip.
pub(super) fn load_corpus(vars: &Vars, failures: &mut Vec<String>) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/bad-input exists")
        .map(|e| e.expect("a readable directory entry").path())
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut numbers = BTreeSet::new();
    for path in files {
        let file = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|text| parse_case(&file, &text, vars));
        match parsed {
            Ok(case) if numbers.insert(case.app.clone()) => cases.push(case),
            Ok(case) => failures.push(format!("{file}: its number is taken by another case ({})", case.app)),
            Err(e) => failures.push(format!("{file}: {e}")),
        }
    }
    cases
}

pub(super) fn parse_case(file: &str, text: &str, vars: &Vars) -> Result<Case, String> {
    let stem = file
        .strip_suffix(".yaml")
        .ok_or("a case file must be named NN-short-description.yaml")?;
    let number = stem.split('-').next().unwrap_or_default();
    if number.len() != 2 || !number.chars().all(|c| c.is_ascii_digit()) || stem.len() < 4 {
        return Err("a case file must be named NN-short-description.yaml".into());
    }
    let app = format!("case-{number}");
    let text = vars.substitute(text, &app)?;

    let mut expect = None;
    let mut case = Case {
        file: file.to_string(),
        app: app.clone(),
        expect: Expect::Admission,
        messages: Vec::new(),
        reason: None,
        pool: None,
        healthy: Vec::new(),
        no_release: Vec::new(),
        release_fields: Vec::new(),
        last: false,
        extra: Vec::new(),
        body: String::new(),
    };
    let mut generate = None;
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let line = line.trim_start_matches('#').trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            continue; // description
        }
        let value = value.trim().to_string();
        if value.is_empty() {
            return Err(format!("header key {key:?} has no value"));
        }
        let once = |slot: &Option<String>| match slot {
            Some(_) => Err(format!("header key {key:?} is given twice")),
            None => Ok(Some(value.clone())),
        };
        match key {
            "expect" => {
                expect = Some(match value.as_str() {
                    "admission" => Expect::Admission,
                    "condition" => Expect::Condition,
                    other => return Err(format!("expect: {other:?} is not admission or condition")),
                })
            }
            "message" => case.messages.push(value),
            "reason" => case.reason = once(&case.reason)?,
            "pool" => case.pool = once(&case.pool)?,
            "healthy" => case.healthy.push(value),
            "no-release" => case.no_release.push(value),
            "release-field" => {
                let (pointer, json) = value
                    .split_once(" = ")
                    .ok_or("release-field must be `<JSON pointer> = <JSON value>`")?;
                let json = serde_json::from_str(json.trim())
                    .map_err(|e| format!("release-field value is not JSON: {e}"))?;
                case.release_fields.push((pointer.trim().to_string(), json));
            }
            "generate" => generate = Some(parse_generate(&value)?),
            "order" if value == "last" => case.last = true,
            "order" => return Err(format!("order: {value:?} is not `last`")),
            other => return Err(format!("unknown header key {other:?}")),
        }
    }
    case.expect = expect.ok_or("the header has no `# expect:` line")?;
    if case.messages.is_empty() {
        return Err("the header has no `# message:` line".into());
    }
    match case.expect {
        Expect::Condition if case.reason.is_none() => {
            return Err("expect: condition needs a `# reason:` line".into())
        }
        Expect::Admission
            if case.reason.is_some()
                || case.pool.is_some()
                || !case.healthy.is_empty()
                || !case.no_release.is_empty()
                || !case.release_fields.is_empty() =>
        {
            return Err("reason, pool, healthy, no-release and release-field are for expect: condition".into())
        }
        _ => {}
    }

    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| format!("the documents are not YAML: {e}"))?;
    let mut apps = Vec::new();
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        if document["kind"] == "NodePoolApplication" {
            apps.push(document);
        } else if document["kind"].is_string() && document["apiVersion"].is_string() {
            case.extra.push(document);
        } else {
            return Err("every document needs apiVersion and kind".into());
        }
    }
    let [app_doc] = apps.as_slice() else {
        return Err(format!("{} NodePoolApplications; a case has exactly one", apps.len()));
    };
    let body = serde_json::to_string(app_doc).map_err(|e| e.to_string())?;
    let placeholder = "\"${GENERATED}\"";
    case.body = match (generate, body.matches(placeholder).count()) {
        (Some(generate), 1) => body.replace(placeholder, &generated(generate)),
        (None, 0) => body,
        (Some(_), n) => return Err(format!("generate needs exactly one \"${{GENERATED}}\", found {n}")),
        (None, _) => return Err("\"${GENERATED}\" without a `# generate:` line".into()),
    };
    Ok(case)
}

fn parse_generate(value: &str) -> Result<Generate, String> {
    let bad = || format!("generate: {value:?} is not `huge-values <size>` or `deep-values <depth>`");
    let (what, amount) = value.split_once(' ').ok_or_else(bad)?;
    let amount = amount.trim();
    match what {
        "huge-values" => {
            let (digits, unit) =
                amount.split_at(amount.find(|c: char| !c.is_ascii_digit()).unwrap_or(amount.len()));
            let n: usize = digits.parse().map_err(|_| bad())?;
            let scale = match unit {
                "MiB" => 1024 * 1024,
                "KiB" => 1024,
                "" | "B" => 1,
                _ => return Err(bad()),
            };
            Ok(Generate::HugeValues(n * scale))
        }
        "deep-values" => Ok(Generate::DeepValues(amount.parse().map_err(|_| bad())?)),
        _ => Err(bad()),
    }
}

/// The generated values, as JSON text.
fn generated(generate: Generate) -> String {
    match generate {
        // Text a compressor cannot shrink, as certificates or encoded blobs
        // in values are: 1 KiB strings of pseudo-random characters.
        Generate::HugeValues(bytes) => {
            let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
            let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
            let entries: Vec<String> = (0..bytes.div_ceil(1024))
                .map(|i| {
                    let text: String = (0..1024 - 16)
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            char::from(alphabet[(state % 64) as usize])
                        })
                        .collect();
                    format!("\"blob-{i:05}\":\"{text}\"")
                })
                .collect();
            format!("{{{}}}", entries.join(","))
        }
        Generate::DeepValues(depth) => {
            format!("{}\"bottom\"{}", "{\"level\":".repeat(depth), "}".repeat(depth))
        }
    }
}
