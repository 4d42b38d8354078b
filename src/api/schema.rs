//! Schema pieces the derived OpenAPI schema cannot express alone:
//! patterns, CEL rules, free-form values and list-maps.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{json_schema, Schema, SchemaGenerator};

pub(super) const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";
pub(super) const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// CEL rules rather than bare patterns, so that a refusal says what is
/// wanted instead of quoting a regular expression. `[.]` stands for a dot:
/// no escaping through Rust, CEL and RE2.
pub(super) const DNS1123_SUBDOMAIN_RULE: &str =
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
/// A label key, as Kubernetes validates it (`IsQualifiedName`): an optional
/// DNS-1123 subdomain prefix of at most 253 characters and `/`, then a name
/// of at most 63.
pub(super) const LABEL_KEY_RULE: &str =
    "self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?\
     [A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && !self.matches('^[^/]{254,}/')";

/// A maintenance window's schedule as Vixie cron writes it: five fields
/// (letters only in the month and the weekday, for their names) or a
/// macro. What the fields hold is checked when the window is read, which
/// names the field; this refuses what is plainly another dialect
/// (seconds, years, Quartz's `?`, a `CRON_TZ=` prefix) at admission.
/// `[[:space:]]` for whitespace: no escaping through Rust, CEL and RE2.
pub(super) const SCHEDULE_RULE: &str = "self.matches('^[[:space:]]*(\
     @(yearly|annually|monthly|weekly|daily|midnight|hourly)|\
     [0-9*,/-]+([[:space:]]+[0-9*,/-]+){2}([[:space:]]+[0-9A-Za-z*,/-]+){2}\
     )[[:space:]]*$')";
/// A schedule that never fires, where its text alone tells: only the 30th
/// or 31st of February, or only the 31st of months of 30 days or fewer,
/// with a weekday that starts with `*` (so both days must match).
pub(super) const SCHEDULE_FIRES_RULE: &str =
    "!self.matches('^[[:space:]]*[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+\
     (30|31|30-31)(,(30|31|30-31))*[[:space:]]+(2|(?i:feb))(,(2|(?i:feb)))*\
     [[:space:]]+[*][^[:space:]]*[[:space:]]*$') && \
     !self.matches('^[[:space:]]*[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+\
     31(,31)*[[:space:]]+(2|4|6|9|11|(?i:feb|apr|jun|sep|nov))(,(2|4|6|9|11|(?i:feb|apr|jun|sep|nov)))*\
     [[:space:]]+[*][^[:space:]]*[[:space:]]*$')";

pub(super) fn duration_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": DURATION_PATTERN })
}

/// An integer or a percentage string, as Kubernetes' own `maxUnavailable`.
pub(super) fn int_or_percent_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true, "nullable": true })
}

pub(super) fn optional_duration_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "nullable": true, "pattern": DURATION_PATTERN })
}

// Helm values are free-form; the apiserver must keep every field the user wrote.
pub(super) fn opaque_object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true })
}

pub(super) fn pool_names_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 1000,
        "items": { "type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN }
    })
}

pub(super) fn values_paths_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 32,
        "items": { "type": "string", "maxLength": 253, "pattern": r"^[^.]+(\.[^.]+){0,15}$" }
    })
}

// A list-map lets server-side apply merge conditions by type, as for core types.
pub(super) fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<Condition>(generator, "type")
}

pub(super) fn list_map<T: schemars::JsonSchema>(generator: &mut SchemaGenerator, key: &str) -> Schema {
    let item = generator.subschema_for::<T>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key]
    })
}
