//! `spec.rollout.analysis` read into checks: durations parsed, queries
//! parsed as PromQL, and each webhook gate as a check that passes on a
//! 2xx answer and never fails.

use std::time::Duration;

use super::render::parse_query;
use super::{Check, Webhook, DEFAULT_GATE_INTERVAL, DEFAULT_INTERVAL};
use crate::api::{MetricCheck, OnEmpty, WebhookGate};
use crate::reconcile::release::build::FieldError;
use crate::reconcile::rollout::settings::parse_duration;

/// The webhook gate `webhooks[i]`, read as a check that passes on a 2xx
/// answer and never fails.
pub(super) fn read_gate(i: usize, gate: &WebhookGate) -> Result<Check, FieldError> {
    let interval = match &gate.interval {
        None => DEFAULT_GATE_INTERVAL,
        Some(text) => {
            parse_duration(text)
                .filter(|d| *d >= Duration::from_secs(1))
                .ok_or_else(|| FieldError {
                    field: format!("rollout.analysis.webhooks[{i}].interval"),
                    message: format!("{text:?} is not a duration of at least a second, such as 10s"),
                })?
        }
    };
    Ok(Check {
        name: gate.name.clone(),
        query: String::new(),
        min: None,
        max: None,
        interval,
        failure_limit: u32::MAX,
        pass_on_empty: false,
        webhook: Some(Webhook {
            url: gate.url.clone(),
            cert_secret: gate.cert_secret_ref.as_ref().map(|s| s.name.clone()),
        }),
        by: None,
    })
}

/// The checks of the list `list` of `spec.rollout.analysis`, read.
pub(super) fn read_checks(list: &str, checks: &[MetricCheck]) -> Result<Vec<Check>, FieldError> {
    checks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let field = |name: &str| format!("rollout.analysis.{list}[{i}].{name}");
            let interval = match &c.interval {
                None => DEFAULT_INTERVAL,
                Some(text) => {
                    parse_duration(text).filter(|d| *d >= Duration::from_secs(1)).ok_or_else(|| {
                        FieldError {
                            field: field("interval"),
                            message: format!("{text:?} is not a duration of at least a second, such as 30s"),
                        }
                    })?
                }
            };
            parse_query(&c.query).map_err(|message| FieldError {
                field: field("query"),
                message: format!("check {}: {message}", c.name),
            })?;
            if c.by.is_some() && !c.query.contains("{{pools}}") {
                return Err(FieldError {
                    field: field("query"),
                    message: format!(
                        "check {}: with by, the query is asked once for many pools and must name them with \
                         {{{{pools}}}}, e.g. site=~\"{{{{pools}}}}\"",
                        c.name
                    ),
                });
            }
            Ok(Check {
                name: c.name.clone(),
                query: c.query.clone(),
                min: c.min,
                max: c.max,
                interval,
                failure_limit: c.failure_limit.unwrap_or(0),
                pass_on_empty: c.on_empty.unwrap_or_default() == OnEmpty::Pass,
                webhook: None,
                by: c.by.clone(),
            })
        })
        .collect()
}
