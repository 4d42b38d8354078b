//! Why a reconcile ran: the watch events that woke its application since
//! its last reconcile began (their kind, how many, the last object), or,
//! when none did, the timer its last reconcile set (the resync, a soak's
//! end, a retry). Each reconcile logs it at debug level and counts it by
//! cause (`nodepool_fanout_reconcile_wakes_total`), so that a reconcile
//! nobody expected names what woke it.

use std::collections::BTreeMap;
use std::fmt;

/// One watch event that woke an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The kind of the object, e.g. `HelmRelease`, `Node`.
    pub kind: &'static str,
    /// The object, `namespace/name` or `name`.
    pub object: String,
}

impl Cause {
    pub fn new(kind: &'static str, namespace: Option<&str>, name: &str) -> Self {
        let object = match namespace {
            Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
            _ => name.to_string(),
        };
        Self { kind, object }
    }
}

/// The timer a reconcile set for the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// `--resync`: nothing sooner was due.
    Resync,
    /// The plan's clock: a soak's end, a deadline, a window opening, a
    /// metric check's next answer.
    Plan,
    /// Waiting for source-controller's chart.
    ChartWait,
    /// The last reconcile failed: its backoff.
    Retry,
    /// A deleted application's releases still uninstalling.
    Uninstall,
    /// The releases the last reconcile created, not in the cache yet (see
    /// [`crate::reconcile::Ended::CreatesUnseen`]).
    CreatesUnseen,
    /// Moved here from another shard: waiting for the release watch to
    /// list its releases again, whole (see
    /// [`crate::reconcile::Ended::ReleasesCutDown`]).
    Relist,
}

impl Timer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resync => "resync",
            Self::Plan => "timer",
            Self::ChartWait => "chart wait",
            Self::Retry => "retry",
            Self::Uninstall => "uninstall wait",
            Self::CreatesUnseen => "creates unseen",
            Self::Relist => "relist",
        }
    }
}

/// What woke an application since its last reconcile began: bounded, as
/// a count per kind and the last object of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Woken {
    by_kind: BTreeMap<&'static str, (u32, String)>,
    /// The timer the last reconcile set.
    timer: Option<Timer>,
}

impl Woken {
    pub fn event(&mut self, cause: Cause) {
        let entry = self.by_kind.entry(cause.kind).or_default();
        entry.0 = entry.0.saturating_add(1);
        entry.1 = cause.object;
    }

    pub fn timer(&mut self, timer: Timer) {
        self.timer = Some(timer);
    }

    /// The causes as the metric counts them, one per kind: the kinds of
    /// the events, or the timer when no event woke it, or `start` for an
    /// application's first reconcile of this process.
    pub fn causes(&self) -> Vec<&'static str> {
        if !self.by_kind.is_empty() {
            return self.by_kind.keys().copied().collect();
        }
        vec![self.timer.map_or("start", Timer::as_str)]
    }

    /// What woke the reconcile that begins now; the next counts afresh.
    pub fn taken(&mut self) -> Self {
        std::mem::take(self)
    }
}

impl fmt::Display for Woken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.by_kind.is_empty() {
            return f.write_str(self.timer.map_or("its first reconcile here", Timer::as_str));
        }
        let mut first = true;
        for (kind, (count, last)) in &self.by_kind {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            match count {
                1 => write!(f, "{kind} {last}")?,
                n => write!(f, "{n} {kind} events (the last {last})")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_their_kinds_and_last_objects_and_a_timer_only_when_no_event_woke_it() {
        let mut woken = Woken::default();
        assert_eq!(woken.causes(), vec!["start"]);
        assert_eq!(woken.to_string(), "its first reconcile here");
        woken.timer(Timer::Resync);
        assert_eq!(woken.taken().causes(), vec!["resync"]);
        assert_eq!(woken.causes(), vec!["start"], "a timer wakes once");

        woken.timer(Timer::Plan);
        for name in ["a", "b", "c"] {
            woken.event(Cause::new("HelmRelease", Some("edge"), name));
        }
        woken.event(Cause::new("Node", None, "n1"));
        let taken = woken.taken();
        assert_eq!(taken.causes(), vec!["HelmRelease", "Node"]);
        assert_eq!(taken.to_string(), "3 HelmRelease events (the last edge/c), Node n1");
        assert_eq!(woken, Woken::default(), "counted again from none");
    }
}
