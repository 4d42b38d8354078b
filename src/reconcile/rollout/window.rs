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
//!
//! One plan reads each window once, at its `now` ([`Gates`]): the
//! application's windows and each distinct text of a pool's annotation
//! give one answer for every pool they apply to.

mod cron;

use std::time::Duration;

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use crate::api::naming::ANNOTATION_MAINTENANCE_WINDOW;
use crate::pools::{Labels, Pool};

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

    /// Whether the window is open at `now`, or else when it next opens.
    fn gate(&self, now: Timestamp) -> Gate {
        self.read(now).0
    }

    /// Its gate at `now`, and when it closes if it is open: read once.
    fn read(&self, now: Timestamp) -> (Gate, Option<Timestamp>) {
        match self.open_at(now) {
            Some((_, closes)) => (Gate::Open, Some(closes)),
            None => (
                Gate::Closed {
                    opens: self.next_opening(now),
                },
                None,
            ),
        }
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
) -> Result<Vec<AppWindow<'_>>, crate::reconcile::release::build::FieldError> {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let window = Window::new(&w.schedule, &w.duration, w.time_zone.as_deref()).map_err(|e| {
                crate::reconcile::release::build::FieldError {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No window applies, or one is open.
    Open,
    /// Every window that applies is closed; `opens` is the earliest next
    /// opening (none when no schedule ever matches again).
    Closed { opens: Option<Timestamp> },
}

/// The gate of a pool that `windows` apply to, at `now`.
pub fn gate<'a>(windows: impl IntoIterator<Item = &'a Window>, now: Timestamp) -> Gate {
    either(windows.into_iter().map(|w| w.gate(now)))
}

/// The gate of several windows' gates: open while any is, else opening
/// at the earliest; open when there are none.
fn either(gates: impl IntoIterator<Item = Gate>) -> Gate {
    let mut closed: Option<Option<Timestamp>> = None;
    for gate in gates {
        match gate {
            Gate::Open => return Gate::Open,
            Gate::Closed { opens } => {
                let earliest = match closed.flatten() {
                    Some(before) => Some(opens.map_or(before, |o| o.min(before))),
                    None => opens,
                };
                closed = Some(earliest);
            }
        }
    }
    match closed {
        None => Gate::Open,
        Some(opens) => Gate::Closed { opens },
    }
}

/// Whether a pool of this name and these labels is one a window selects.
type Picks<'a> = Box<dyn Fn(&str, &Labels) -> bool + 'a>;

/// One window of the application: which pools it applies to (every pool
/// when `None`), its gate and, when open, when it closes.
type AppGate<'a> = (&'a AppWindow<'a>, Option<Picks<'a>>, Gate, Option<Timestamp>);

/// The windows of one plan read at its `now`, each once: the
/// application's, and each distinct text of a pool's annotation (pools
/// of one site or one region tend to share theirs), with each window's
/// selector read once too. A pool's gate is then a look-up and a
/// selector match per window of the application, where reading a window
/// is a backward and a forward cron search.
pub struct Gates<'a> {
    now: Timestamp,
    /// Each window of the application, which pools it applies to (every
    /// pool when `None`), its gate and, when open, when it closes.
    app: Vec<AppGate<'a>>,
    own: foldhash::HashMap<&'a str, Result<(Gate, Option<Timestamp>), WindowError>>,
}

impl<'a> Gates<'a> {
    /// `windows`, and the pools' `annotations`, read at `now`. A window
    /// whose selector cannot be read was refused with the others: such a
    /// window applies to every pool.
    pub fn new(
        windows: &'a [AppWindow<'a>],
        annotations: impl IntoIterator<Item = &'a str>,
        now: Timestamp,
    ) -> Self {
        let picks = |selection: &'a crate::api::PoolSelection| -> Picks<'a> {
            match crate::pools::picker(selection) {
                Ok(picks) => Box::new(picks),
                Err(_) => Box::new(|_: &str, _: &Labels| true),
            }
        };
        let app = (windows.iter())
            .map(|w| {
                let (gate, closes) = w.window.read(now);
                (w, w.pools.map(picks), gate, closes)
            })
            .collect();
        let mut own = foldhash::HashMap::default();
        for text in annotations {
            own.entry(text).or_insert_with(|| read(text, now));
        }
        Self { now, app, own }
    }

    /// How many windows were read.
    pub fn read(&self) -> usize {
        self.app.len() + self.own.len()
    }

    /// Whether `pool`'s windows hold it back: the application's that
    /// select it and its annotation's. An annotation text not among those
    /// the gates were made with is read now.
    pub fn closed(&self, pool: &Pool) -> Option<super::Closed> {
        let own = match self.own_window(pool) {
            Some(Err(e)) => {
                return Some(super::Closed {
                    opens: None,
                    holds_installs: false,
                    unreadable: Some(e.to_string()),
                })
            }
            Some(Ok((gate, _))) => Some(gate),
            None => None,
        };
        // `either` reads every gate when it finds them all closed, which
        // is when `holds_installs` counts.
        let mut holds_installs = false;
        let applying = self.applying(pool).map(|(w, _, gate, _)| {
            holds_installs |= w.holds_installs;
            *gate
        });
        match either(applying.chain(own)) {
            Gate::Open => None,
            Gate::Closed { opens } => Some(super::Closed {
                opens,
                holds_installs,
                unreadable: None,
            }),
        }
    }

    /// When the first of `pool`'s open windows closes, if one is open: a
    /// pool the rollout has yet to reach is held from then, and its
    /// status says so, so the plan looks again then (see `rollout::start`).
    pub fn closes(&self, pool: &Pool) -> Option<Timestamp> {
        let own = self.own_window(pool).and_then(|read| read.ok()).and_then(|(_, closes)| closes);
        let applying = self.applying(pool).filter_map(|(_, _, _, closes)| *closes);
        applying.chain(own).min()
    }

    /// The application's windows that apply to `pool`.
    fn applying<'s>(&'s self, pool: &'s Pool) -> impl Iterator<Item = &'s AppGate<'a>> + 's {
        (self.app.iter())
            .filter(|(_, picks, _, _)| picks.as_ref().is_none_or(|picks| picks(&pool.name, &pool.labels)))
    }

    /// `pool`'s own window, read: as the gates read its annotation's text
    /// when they were made, or now for a text not among those.
    fn own_window(&self, pool: &Pool) -> Option<Result<(Gate, Option<Timestamp>), WindowError>> {
        let text = pool.annotations.get(ANNOTATION_MAINTENANCE_WINDOW)?;
        Some(match self.own.get(text.as_str()) {
            Some(read) => read.clone(),
            None => read(text, self.now),
        })
    }
}

/// A pool's own window at `now`, from its annotation's text: its gate,
/// and when it closes if it is open.
fn read(text: &str, now: Timestamp) -> Result<(Gate, Option<Timestamp>), WindowError> {
    Window::from_annotation(text).map(|w| w.read(now))
}

#[cfg(test)]
mod tests;
