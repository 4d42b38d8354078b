//! The events waiting to be sent, in order, bounded. One sender works
//! through them, and under an event server that never answers each takes
//! about 27 s (5 s per attempt, four attempts, 7 s of waits between): the
//! queue fills with whatever a busy fleet reports, mostly Info. When it is
//! full an Info gives way, the oldest first, so that a Warning (a halted
//! rollout, a failed pool) is never lost while an Info waits.

use std::collections::VecDeque;

use super::FluxEvent;

/// Events waiting, oldest first.
#[derive(Debug)]
pub(super) struct Queue {
    events: VecDeque<FluxEvent>,
    capacity: usize,
}

impl Queue {
    /// An empty queue that holds at most `capacity` events (at least one).
    pub(super) fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            events: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Queues `event`. When the queue is full, one event gives way and is
    /// returned: the oldest Info queued; else, with only Warnings queued,
    /// `event` itself if it is an Info, or the oldest Warning, since the
    /// newest says best how the fleet stands now.
    pub(super) fn push(&mut self, event: FluxEvent) -> Option<FluxEvent> {
        if self.events.len() < self.capacity {
            self.events.push_back(event);
            return None;
        }
        let gives_way = match self.events.iter().position(|e| !e.is_warning()) {
            Some(oldest_info) => self.events.remove(oldest_info),
            None if !event.is_warning() => return Some(event),
            None => self.events.pop_front(),
        };
        self.events.push_back(event);
        gives_way
    }

    /// The oldest event, taken off the queue.
    pub(super) fn pop(&mut self) -> Option<FluxEvent> {
        self.events.pop_front()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::fleet::Transition;
    use k8s_openapi::api::core::v1::ObjectReference;
    use proptest::prelude::*;

    /// An event whose message is `n`, a Warning or an Info.
    fn event(n: usize, warning: bool) -> FluxEvent {
        let happened = Transition {
            warning,
            reason: if warning {
                "RolloutHalted"
            } else {
                "RolloutProgressed"
            }
            .into(),
            action: "Rollout",
            message: n.to_string(),
            release: None,
            pool: None,
        };
        FluxEvent::of(
            &ObjectReference::default(),
            &happened,
            None,
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            None,
        )
    }

    fn drain(queue: &mut Queue) -> Vec<(String, bool)> {
        std::iter::from_fn(|| queue.pop())
            .map(|e| (e.message.clone(), e.is_warning()))
            .collect()
    }

    #[test]
    fn a_full_queue_drops_the_oldest_info_for_a_warning() {
        let mut queue = Queue::with_capacity(3);
        for (n, warning) in [(0, false), (1, true), (2, false)] {
            assert!(queue.push(event(n, warning)).is_none());
        }
        let dropped = queue.push(event(3, true)).expect("full");
        assert_eq!((dropped.message.as_str(), dropped.is_warning()), ("0", false));
        let dropped = queue.push(event(4, false)).expect("full");
        assert_eq!((dropped.message.as_str(), dropped.is_warning()), ("2", false), "the oldest Info left");
        let order = [("1", true), ("3", true), ("4", false)].map(|(m, w)| (m.to_string(), w));
        assert_eq!(drain(&mut queue), order, "the rest keep their order");
    }

    #[test]
    fn with_only_warnings_queued_an_info_is_dropped_and_a_warning_replaces_the_oldest() {
        let mut queue = Queue::with_capacity(2);
        queue.push(event(0, true));
        queue.push(event(1, true));
        let dropped = queue.push(event(2, false)).expect("full");
        assert_eq!((dropped.message.as_str(), dropped.is_warning()), ("2", false));
        let dropped = queue.push(event(3, true)).expect("full");
        assert_eq!((dropped.message.as_str(), dropped.is_warning()), ("0", true));
        assert_eq!(drain(&mut queue), [("1".to_string(), true), ("3".to_string(), true)]);
    }

    proptest! {
        /// Whatever comes in: the queue never passes its capacity, keeps
        /// its order, and drops a Warning only when it holds no Info.
        #[test]
        fn no_warning_is_dropped_while_an_info_is_queued(
            capacity in 1..8usize,
            warnings in prop::collection::vec(any::<bool>(), 1..40),
        ) {
            let mut queue = Queue::with_capacity(capacity);
            let mut dropped = Vec::new();
            for (n, warning) in warnings.iter().copied().enumerate() {
                let infos_queued = queue.events.iter().any(|e| !e.is_warning());
                if let Some(gone) = queue.push(event(n, warning)) {
                    prop_assert!(!gone.is_warning() || !infos_queued, "a Warning dropped beside an Info");
                    prop_assert!(!gone.is_warning() || warning, "a Warning dropped for an Info");
                    dropped.push(gone.message.parse::<usize>().unwrap());
                }
                prop_assert!(queue.len() <= capacity);
            }
            let left: Vec<usize> = drain(&mut queue).iter().map(|(m, _)| m.parse().unwrap()).collect();
            prop_assert!(left.windows(2).all(|w| w[0] < w[1]), "in order: {:?}", left);
            prop_assert_eq!(left.len() + dropped.len(), warnings.len());
            let warnings_in = warnings.iter().filter(|w| **w).count();
            let warnings_left = left.iter().filter(|n| warnings[**n]).count();
            prop_assert_eq!(warnings_left, warnings_in.min(capacity), "every Warning that fits stays");
        }
    }
}
