//! Reading a Helm chart's metadata, default values and values schema, and
//! checking the values a release would get against that schema the way Helm
//! does at install time, so a bad override is reported before Flux is asked
//! to install it.
//!
//! Only the parent chart's schema is checked: Helm also validates each
//! subchart's values against the subchart's own schema, which needs the
//! subcharts' values scoped and coalesced the way Helm's dependency handling
//! does, and is out of reach of this module.

use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use serde_json::{Map, Value};

use crate::values::values_from::UnseenValues;

/// Packaged charts are a few hundred KiB at most; anything unpacking to more
/// is refused before it is read, so a crafted archive cannot exhaust memory.
const MAX_UNPACKED_BYTES: u64 = 20 * 1024 * 1024;
const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("cannot read the chart at {path}: {source}; check the path and its permissions")]
    Read { path: String, source: io::Error },
    #[error(
        "the chart archive is not a readable gzipped tar file ({source}); package the chart with \
         `helm package` or point at the unpacked chart directory"
    )]
    Archive { source: io::Error },
    #[error(
        "the chart archive unpacks to more than {limit_mib} MiB, which is refused as a possible \
         decompression bomb; keep large files out of the chart (list them in .helmignore)"
    )]
    ArchiveTooLarge { limit_mib: u64 },
    #[error(
        "{file} in the chart archive is {size} bytes, over the {limit_mib} MiB limit for one file, and is \
         refused as a possible decompression bomb; keep large files out of the chart (list them in .helmignore)"
    )]
    FileTooLarge { file: String, size: u64, limit_mib: u64 },
    #[error(
        "no Chart.yaml at the root of {location}; point at a chart directory or at a .tgz made by \
         `helm package`"
    )]
    MissingChartYaml { location: String },
    #[error(
        "Chart.yaml is at the top of the archive instead of inside the chart's directory; package the \
         chart with `helm package`, which puts everything under one directory named after the chart"
    )]
    ChartYamlAtArchiveRoot,
    #[error("{file} in the chart archive {why}, which Helm refuses; package the chart with `helm package`")]
    IllegalPath { file: String, why: &'static str },
    #[error("{file} in the chart is not UTF-8 text; save it as UTF-8")]
    NotUtf8 { file: String },
    #[error("{file} in the chart is not valid YAML: {source}; fix the file")]
    Yaml {
        file: String,
        source: Box<serde_saphyr::Error>,
    },
    #[error("{file} in the chart is not valid JSON: {source}; fix the file")]
    Json { file: String, source: serde_json::Error },
    #[error("Chart.yaml must be a map of fields like `name: mychart`, not {found}; fix the file")]
    ChartYamlNotAMap { found: &'static str },
    #[error("Chart.yaml has no `{field}`; add it (Helm requires both name and version)")]
    MissingField { field: &'static str },
    #[error("Chart.yaml `{field}` must be a string, not {found}; quote it, e.g. {field}: \"1.0.0\"")]
    FieldNotString {
        field: &'static str,
        found: &'static str,
    },
    #[error("values.yaml must be a map of values at its top level, not {found}; fix the file")]
    ValuesNotAMap { found: &'static str },
    #[error(
        "values.schema.json is not a usable JSON Schema: {message}; fix the schema (references to \
         other files or URLs are not fetched, so inline them under $defs)"
    )]
    Schema { message: String },
}

/// A chart's identity, default values and values schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub name: String,
    pub version: String,
    /// values.yaml, `{}` if the chart has none.
    pub values: Value,
    /// values.schema.json, if the chart has one.
    pub schema: Option<Value>,
    /// The schema compiled, once per chart: every pool's values are checked
    /// against it, and compiling a large schema costs far more than one
    /// check. It goes with `schema`: a Chart made from another with a new
    /// schema takes `CompiledSchema::default()`.
    pub compiled: CompiledSchema,
}

/// A chart's values schema as a validator, compiled at most once.
#[derive(Debug, Clone, Default)]
pub struct CompiledSchema(std::sync::Arc<std::sync::OnceLock<Result<jsonschema::Validator, String>>>);

/// The compiled form follows from the schema: two charts are equal
/// whether or not either has compiled it yet.
impl PartialEq for CompiledSchema {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl CompiledSchema {
    fn get(&self, schema: &Value) -> Result<&jsonschema::Validator, &String> {
        self.0.get_or_init(|| compile(schema)).as_ref()
    }
}

/// Every way the values break the chart's schema, one line each when shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolations(pub Vec<Violation>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// A JSON pointer into the values, e.g. `/mode`, or `(root)`.
    pub path: String,
    /// The schema keyword that failed, e.g. `enum`, `minimum`, `required`.
    pub rule: String,
    pub message: String,
}

impl fmt::Display for SchemaViolations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, violation) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{violation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SchemaViolations {}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.path, self.message, self.rule)
    }
}

/// The three files of a chart this module reads, as raw bytes.
#[derive(Default)]
struct ChartFiles {
    chart_yaml: Option<Vec<u8>>,
    values_yaml: Option<Vec<u8>>,
    schema_json: Option<Vec<u8>>,
}

impl Chart {
    /// A packaged chart (.tgz as helm package writes it: one top-level directory named after the chart).
    pub fn from_tgz(bytes: &[u8]) -> Result<Self, ChartError> {
        // The cap sits under the tar reader, so it also bounds what the tar
        // format itself makes us buffer (long names, extended headers).
        let unpacked = CappedReader {
            inner: flate2::read::GzDecoder::new(bytes),
            left: MAX_UNPACKED_BYTES,
        };
        let mut archive = tar::Archive::new(unpacked);
        let mut files = ChartFiles::default();
        let entries = archive.entries().map_err(archive_error)?;
        for entry in entries {
            let mut entry = entry.map_err(archive_error)?;
            let entry_type = entry.header().entry_type();
            if !(entry_type.is_file() || entry_type == tar::EntryType::Continuous) {
                continue;
            }
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let size = entry.size();
            if size > MAX_FILE_BYTES {
                return Err(ChartError::FileTooLarge {
                    file: name,
                    size,
                    limit_mib: MAX_FILE_BYTES / MIB,
                });
            }
            let inside = path_in_chart(&name)?;
            let slot = match inside.as_str() {
                "Chart.yaml" => &mut files.chart_yaml,
                "values.yaml" => &mut files.values_yaml,
                "values.schema.json" => &mut files.schema_json,
                _ => continue,
            };
            let mut data = Vec::new();
            // `size` is what the header claims; the cap holds whatever it says.
            (&mut entry).take(MAX_FILE_BYTES).read_to_end(&mut data).map_err(archive_error)?;
            // Helm's loader lets a later copy of a file replace an earlier one.
            *slot = Some(data);
        }
        Self::from_files(files, "the chart archive")
    }

    /// An unpacked chart directory (Chart.yaml at its root).
    pub fn from_dir(path: &Path) -> Result<Self, ChartError> {
        let read_optional = |name: &str| -> Result<Option<Vec<u8>>, ChartError> {
            let file = path.join(name);
            match fs::read(&file) {
                Ok(data) => Ok(Some(data)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(ChartError::Read {
                    path: file.display().to_string(),
                    source,
                }),
            }
        };
        let files = ChartFiles {
            chart_yaml: read_optional("Chart.yaml")?,
            values_yaml: read_optional("values.yaml")?,
            schema_json: read_optional("values.schema.json")?,
        };
        Self::from_files(files, &path.display().to_string())
    }

    /// Either, by looking at the path.
    pub fn load(path: &Path) -> Result<Self, ChartError> {
        let read_error = |source| ChartError::Read {
            path: path.display().to_string(),
            source,
        };
        let metadata = fs::metadata(path).map_err(read_error)?;
        if metadata.is_dir() {
            return Self::from_dir(path);
        }
        // Checked before reading, so a huge file is not pulled into memory
        // only to be refused: compression makes a valid archive smaller than
        // what it unpacks to, never larger by more than its headers.
        if metadata.len() > MAX_UNPACKED_BYTES {
            return Err(ChartError::ArchiveTooLarge {
                limit_mib: MAX_UNPACKED_BYTES / MIB,
            });
        }
        let bytes = fs::read(path).map_err(read_error)?;
        Self::from_tgz(&bytes)
    }

    fn from_files(files: ChartFiles, location: &str) -> Result<Self, ChartError> {
        let chart_yaml = files.chart_yaml.ok_or_else(|| ChartError::MissingChartYaml {
            location: location.to_string(),
        })?;
        let metadata = parse_yaml("Chart.yaml", &chart_yaml)?;
        let Value::Object(metadata) = metadata else {
            return Err(ChartError::ChartYamlNotAMap {
                found: kind(&metadata),
            });
        };
        let name = string_field(&metadata, "name")?;
        let version = string_field(&metadata, "version")?;

        let values = match files.values_yaml {
            None => Value::Object(Map::new()),
            Some(data) => match parse_yaml("values.yaml", &data)? {
                // An empty or all-comment values.yaml means no defaults.
                Value::Null => Value::Object(Map::new()),
                values @ Value::Object(_) => values,
                other => return Err(ChartError::ValuesNotAMap { found: kind(&other) }),
            },
        };

        let schema = match files.schema_json {
            // Helm skips validation when the schema file is empty.
            Some(data) if !data.iter().all(u8::is_ascii_whitespace) => {
                let schema: Value = serde_json::from_slice(&data).map_err(|source| ChartError::Json {
                    file: "values.schema.json".to_string(),
                    source,
                })?;
                Some(schema)
            }
            _ => None,
        };
        let compiled = CompiledSchema::default();
        // Compiled now, once, so a broken schema is reported when the chart
        // is read, not as a puzzling failure of some values later.
        if let Some(schema) = &schema {
            compiled.get(schema).map_err(|message| ChartError::Schema {
                message: message.clone(),
            })?;
        }

        Ok(Self {
            name,
            version,
            values,
            schema,
            compiled,
        })
    }

    /// Validates the values a release would get against values.schema.json, as Helm does:
    /// Helm validates the chart's values.yaml COALESCED with the user values (user values win;
    /// a null in the user values removes the key), then drops keys whose value is null.
    pub fn validate(&self, user_values: &Value) -> Result<(), SchemaViolations> {
        self.validate_with(user_values, &UnseenValues::default())
    }

    /// As [`Chart::validate`], when Flux will also merge in values the
    /// controller does not see (`valuesFrom`): only violations that no
    /// unseen value could mend are reported (see [`crate::values::values_from`]).
    pub fn validate_with(&self, user_values: &Value, unseen: &UnseenValues) -> Result<(), SchemaViolations> {
        let Some(schema) = &self.schema else {
            return Ok(());
        };
        // Missing user values are no values, as with a release that sets none.
        let empty = Value::Object(Map::new());
        let user_values = if user_values.is_null() {
            &empty
        } else {
            user_values
        };
        let mut values = crate::values::merge::merge(&self.values, user_values, "values").map_err(|e| {
            SchemaViolations(vec![Violation {
                path: "(root)".to_string(),
                rule: "type".to_string(),
                message: e.to_string(),
            }])
        })?;
        drop_nulls(&mut values);

        // The schema was compiled when the chart was read; this only fails
        // for a Chart built by hand around a broken schema.
        let validator = self.compiled.get(schema).map_err(|message| {
            SchemaViolations(vec![Violation {
                path: "(root)".to_string(),
                rule: "$schema".to_string(),
                message: format!("the chart's values.schema.json is not a usable JSON Schema: {message}"),
            }])
        })?;
        let violations: Vec<Violation> = validator
            .iter_errors(&values)
            .filter(|error| {
                unseen.is_final(error.instance_path().as_str(), error.kind().keyword(), user_values)
            })
            .map(|error| {
                let path = error.instance_path().as_str();
                Violation {
                    path: if path.is_empty() {
                        "(root)".to_string()
                    } else {
                        path.to_string()
                    },
                    rule: error.kind().keyword().to_string(),
                    message: error.to_string(),
                }
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaViolations(violations))
        }
    }
}

/// Draft detected from `$schema` (2020-12 when absent), as Helm's current
/// validator does; no remote references can be fetched (the crate is built
/// without that), so a chart cannot make the controller reach out.
fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}

/// Helm removes keys set to null once values are coalesced; lists are left
/// alone, as there.
fn drop_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        map.values_mut().for_each(drop_nulls);
    }
}

fn parse_yaml(file: &str, data: &[u8]) -> Result<Value, ChartError> {
    let text = std::str::from_utf8(data).map_err(|_| ChartError::NotUtf8 {
        file: file.to_string(),
    })?;
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    super::yaml::from_str(text).map_err(|e| ChartError::Yaml {
        file: file.to_string(),
        source: Box::new(e),
    })
}

fn string_field(metadata: &Map<String, Value>, field: &'static str) -> Result<String, ChartError> {
    match metadata.get(field) {
        None | Some(Value::Null) => Err(ChartError::MissingField { field }),
        Some(Value::String(s)) if s.trim().is_empty() => Err(ChartError::MissingField { field }),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(ChartError::FieldNotString {
            field,
            found: kind(other),
        }),
    }
}

/// Where an archive entry sits inside the chart, read as Helm's loader
/// reads it (`pkg/chart/loader/archive`): the first component, the chart's
/// directory, dropped (split at `\\` if the name has one, else at `/`),
/// then the rest cleaned as Go's `path.Clean` does, so that
/// `demo/./values.schema.json` is the schema Helm will use. Paths Helm
/// refuses are refused.
fn path_in_chart(name: &str) -> Result<String, ChartError> {
    let illegal = |why| ChartError::IllegalPath {
        file: name.to_string(),
        why,
    };
    let delimiter = if name.contains('\\') { '\\' } else { '/' };
    let parts: Vec<&str> = name.split(delimiter).collect();
    if parts.len() == 1 && parts[0] == "Chart.yaml" {
        return Err(ChartError::ChartYamlAtArchiveRoot);
    }
    let inside = parts[1..].join("/");
    if inside.starts_with('/') {
        return Err(illegal("is an absolute path"));
    }
    let cleaned = path_clean::clean(&inside).to_string_lossy().into_owned();
    if cleaned == "." {
        return Err(illegal("lies outside the chart's directory"));
    }
    if cleaned.starts_with("..") {
        return Err(illegal("refers to a parent directory"));
    }
    if parts[0] == "Chart.yaml" {
        return Err(ChartError::ChartYamlAtArchiveRoot);
    }
    Ok(cleaned)
}

fn archive_error(source: io::Error) -> ChartError {
    if source.kind() == io::ErrorKind::FileTooLarge {
        ChartError::ArchiveTooLarge {
            limit_mib: MAX_UNPACKED_BYTES / MIB,
        }
    } else {
        ChartError::Archive { source }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// Fails reads once more than `left` bytes have come through, with an error
/// kind the archive code turns into the size-limit message.
struct CappedReader<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            // One byte more than allowed tells a stream that ends exactly at
            // the limit from one that goes on.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::new(io::ErrorKind::FileTooLarge, "chart archive too large")),
            };
        }
        let max = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
