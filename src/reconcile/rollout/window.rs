//! Maintenance windows: when an update may reach a pool. A window opens at
//! each time its cron schedule names, in its time zone, and stays open for
//! its duration. Several may apply to one pool (the application's windows
//! that select it, and the pool's own annotation): it is open while any is.
//! A pool no window applies to is always open.
//!
//! Schedules are read as Vixie cron reads them (see [`cron`]) and
//! evaluated by croner; time zones come from the IANA database through
//! jiff. Across
//! a daylight-saving change a window opens as cron would start a job: a
//! start time the clock skips opens at the first minute after the gap, and
//! a start time the clock repeats opens once, at its first occurrence. The
//! duration is elapsed time: a 4h window across a change lasts 4 hours.

mod cron;

use std::time::Duration;

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

/// One window, read and checked.
#[derive(Debug, Clone)]
pub struct Window {
    schedule: Cron,
    duration: SignedDuration,
    zone: TimeZone,
}

// Two windows are the same when they read the same: what they were read
// from (croner's Cron has no equality of its own).
impl PartialEq for Window {
    fn eq(&self, other: &Self) -> bool {
        self.schedule.pattern.to_string() == other.schedule.pattern.to_string()
            && self.duration == other.duration
            && self.zone.iana_name() == other.zone.iana_name()
    }
}

impl Eq for Window {}

/// Why a window cannot be read: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct WindowError {
    pub field: &'static str,
    pub message: String,
}

/// A window as a pool's annotation gives it (JSON, the fields of a
/// window of the spec but its pool selector).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Declared {
    schedule: String,
    duration: String,
    #[serde(default)]
    time_zone: Option<String>,
}

impl Window {
    /// A window from its schedule, duration and time zone (UTC when `None`).
    pub fn new(schedule: &str, duration: &str, time_zone: Option<&str>) -> Result<Self, WindowError> {
        let cron = cron::parse(schedule).map_err(|message| WindowError {
            field: "schedule",
            message,
        })?;
        let duration = super::parse_duration(duration)
            .filter(|d| *d >= Duration::from_secs(60))
            .and_then(|d| SignedDuration::try_from(d).ok())
            .ok_or_else(|| WindowError {
                field: "duration",
                message: format!("{duration:?} is not a duration of a minute or more, such as 4h or 90m"),
            })?;
        let zone = match time_zone {
            None => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|e| WindowError {
                field: "timeZone",
                message: format!(
                    "{name:?} is not a time zone of the IANA database such as Europe/Berlin: {e}"
                ),
            })?,
        };
        Ok(Self {
            schedule: cron,
            duration,
            zone,
        })
    }

    /// A window as a pool's annotation declares it, e.g.
    /// `{"schedule": "0 2 * * *", "duration": "3h", "timeZone": "America/Chicago"}`.
    pub fn from_annotation(text: &str) -> Result<Self, WindowError> {
        let declared: Declared = serde_json::from_str(text).map_err(|e| WindowError {
            field: "annotation",
            message: format!(
                "not a window such as {{\"schedule\": \"0 2 * * *\", \"duration\": \"3h\", \
                 \"timeZone\": \"America/Chicago\"}}: {e}"
            ),
        })?;
        Self::new(&declared.schedule, &declared.duration, declared.time_zone.as_deref())
    }

    /// The window open at `now`, as (opened, closes), if one is.
    fn open_at(&self, now: Timestamp) -> Option<(Timestamp, Timestamp)> {
        let zoned = now.to_zoned(self.zone.clone());
        let opened = self.schedule.find_previous_occurrence(&zoned, true).ok()?.timestamp();
        let closes = opened.checked_add(self.duration).ok()?;
        (now < closes).then_some((opened, closes))
    }

    /// When the window next opens after `now`.
    fn next_opening(&self, now: Timestamp) -> Option<Timestamp> {
        let zoned = now.to_zoned(self.zone.clone());
        Some(self.schedule.find_next_occurrence(&zoned, false).ok()?.timestamp())
    }
}

/// A window of the application, with the pools it applies to.
#[derive(Debug, Clone)]
pub struct AppWindow<'a> {
    pub window: Window,
    /// Every selected pool when `None`.
    pub pools: Option<&'a crate::api::PoolSelection>,
    /// `newPools: Wait`.
    pub holds_installs: bool,
}

/// The application's windows, read; the first that cannot be read is an
/// error naming its field.
pub fn of_spec(
    windows: &[crate::api::MaintenanceWindow],
) -> Result<Vec<AppWindow<'_>>, crate::reconcile::release::FieldError> {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let window = Window::new(&w.schedule, &w.duration, w.time_zone.as_deref()).map_err(|e| {
                crate::reconcile::release::FieldError {
                    field: format!("rollout.windows[{i}].{}", e.field),
                    message: e.message,
                }
            })?;
            Ok(AppWindow {
                window,
                pools: w.pools.as_ref(),
                holds_installs: w.new_pools == Some(crate::api::NewPools::Wait),
            })
        })
        .collect()
}

/// Whether updates may reach a pool now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No window applies, or one is open.
    Open,
    /// Every window that applies is closed; `opens` is the earliest next
    /// opening (none when no schedule ever matches again).
    Closed { opens: Option<Timestamp> },
}

/// The gate of a pool that `windows` apply to, at `now`.
pub fn gate<'a>(windows: impl IntoIterator<Item = &'a Window>, now: Timestamp) -> Gate {
    let mut opens: Option<Timestamp> = None;
    let mut any = false;
    for window in windows {
        any = true;
        if window.open_at(now).is_some() {
            return Gate::Open;
        }
        if let Some(next) = window.next_opening(now) {
            opens = Some(opens.map_or(next, |o| o.min(next)));
        }
    }
    match any {
        false => Gate::Open,
        true => Gate::Closed { opens },
    }
}

#[cfg(test)]
mod tests;
