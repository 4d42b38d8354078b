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
