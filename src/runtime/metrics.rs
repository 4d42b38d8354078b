//! The Prometheus metrics the controller exports: ours
//! (`nodepool_fanout_*`), Flux's per-object series (`gotk_*`), the
//! leadership as controller-runtime reports it, and the process's own.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success`, or the error's category (`ApiError`, `ApplyFailed`, …).
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiErrorLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `apply`, `delete`, …
    pub verb: String,
    /// `plural.group` (`pods` for the core group), with `/subresource`.
    pub resource: String,
    /// The HTTP status code, or `transport` when no answer came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiRequestLabels {
    /// As for [`ApiErrorLabels`].
    pub verb: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppLabels {
    pub namespace: String,
    pub application: String,
}

/// Flux's labels for one object, as its controllers record
/// `gotk_reconcile_duration_seconds`.
/// One application's metric check, and what its answers came to.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabels {
    pub namespace: String,
    pub application: String,
    pub check: String,
    /// `within`, `out_of_bounds` or `unanswered`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// The labels of Flux's `gotk_resource_info`, as Flux's kube-state-metrics
/// configuration names them, so Flux's dashboards list applications
/// beside Kustomizations and HelmReleases.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceInfoLabels {
    pub customresource_group: String,
    pub customresource_kind: String,
    pub customresource_version: String,
    pub exported_namespace: String,
    pub name: String,
    /// The Ready condition's status: `True`, `False` or `Unknown`.
    pub ready: String,
    /// `true` or `false`.
    pub suspended: String,
}

/// What became of one notification (see [`crate::runtime::notify::Outcome`]).
/// What woke a reconcile (see [`crate::runtime::woken`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WakeLabels {
    /// The kind of a watched object (`HelmRelease`, `Node`, ...), or a
    /// timer: `resync`, `timer`, `chart wait`, `retry`, `uninstall wait`;
    /// or `start`.
    pub cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotificationLabels {
    /// `delivered`, `duplicate`, `refused`, `failed` or `dropped`.
    pub result: String,
    /// The event's severity as Flux names it: `error` (a Warning Event) or
    /// `info`. A full queue drops `info` first.
    pub severity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLabels {
    pub name: String,
}

/// The standard process metrics (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, …), read at each scrape by the
/// metrics-process crate, as client_golang's process collector reads them
/// for Flux's controllers.
#[derive(Debug, Default)]
struct ProcessCollector;

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let now = metrics_process::collector::collect();
        if let Some(seconds) = now.cpu_seconds_total {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges = [
            ("process_open_fds", "Number of open file descriptors.", now.open_fds),
            ("process_max_fds", "Maximum number of open file descriptors.", now.max_fds),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes.", now.virtual_memory_bytes),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                now.resident_memory_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                now.start_time_seconds,
            ),
            ("process_threads", "Number of OS threads in the process.", now.threads),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value as f64);
                let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        Ok(())
    }
}

/// An application's pools by what they are, for its gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCounts {
    pub selected: i64,
    pub ready: i64,
    pub offline: i64,
}

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_duration: Histogram,
    pub pools: Family<AppLabels, Gauge>,
    pub ready_pools: Family<AppLabels, Gauge>,
    pub offline_pools: Family<AppLabels, Gauge>,
    pub api_errors: Family<ApiErrorLabels, Counter>,
    pub api_requests: Family<ApiRequestLabels, Counter>,
    /// Flux's per-object reconcile duration.
    pub object_duration: Family<ObjectLabels, Histogram>,
    /// Flux's resource info, one series per application at value 1.
    pub resource_info: Family<ResourceInfoLabels, Gauge>,
    /// 1 while this instance leads (or runs without leader election), as
    /// controller-runtime reports it for Flux's controllers.
    pub leader: Family<LeaderLabels, Gauge>,
    /// Events sent to notification-controller (`--events-addr`), by result.
    pub notifications: Family<NotificationLabels, Counter>,
    /// Reconciles by what woke them, a reconcile counted once per cause.
    pub wakes: Family<WakeLabels, Counter>,
    /// Reconciles that ended without planning (see `reconcile::Ended::AtRest`).
    pub at_rest: Counter,
    /// Answers to the metric checks of `rollout.analysis`.
    pub answers: Family<AnswerLabels, Counter>,
    /// What the watch caches hold, read at each scrape.
    cached: cached::CachedObjects,
    /// The series of `answers` each application has, to forget with it.
    answer_series: std::sync::Mutex<std::collections::HashMap<(String, String), Vec<AnswerLabels>>>,
}

/// The name under which leadership is reported: the Lease's.
pub const LEADER_NAME: &str = "nodepool-fanout";

impl Default for Metrics {
    fn default() -> Self {
        let mut root = Registry::default();
        // Flux's shape beside ours: the names Flux's dashboards and alerts
        // query, with NodePoolApplication as the kind.
        let object_duration = Family::<ObjectLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        root.register(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a reconciliation of one object",
            object_duration.clone(),
        );
        let resource_info = Family::<ResourceInfoLabels, Gauge>::default();
        root.register(
            "gotk_resource_info",
            "The current state of a NodePoolApplication, as Flux reports its own objects",
            resource_info.clone(),
        );
        let leader = Family::<LeaderLabels, Gauge>::default();
        root.register(
            "leader_election_master_status",
            "Whether this instance leads (1) or stands by (0)",
            leader.clone(),
        );
        root.register_collector(Box::new(ProcessCollector));
        let registry = root.sub_registry_with_prefix("nodepool_fanout");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register("reconciles", "Reconciles of NodePoolApplications by result", reconciles.clone());
        let reconcile_duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile of an application took",
            reconcile_duration.clone(),
        );
        let pools = Family::<AppLabels, Gauge>::default();
        registry.register("pools", "Node pools an application selects", pools.clone());
        let ready_pools = Family::<AppLabels, Gauge>::default();
        registry.register("ready_pools", "Node pools whose release is ready", ready_pools.clone());
        let offline_pools = Family::<AppLabels, Gauge>::default();
        registry.register(
            "offline_pools",
            "Node pools with nodes, none of them Ready: sites cut off, told apart from failed releases",
            offline_pools.clone(),
        );
        let api_errors = Family::<ApiErrorLabels, Counter>::default();
        registry.register(
            "api_errors",
            "Kubernetes API requests that failed, by verb, resource and HTTP code",
            api_errors.clone(),
        );
        let api_requests = Family::<ApiRequestLabels, Counter>::default();
        registry.register(
            "api_requests",
            "Kubernetes API requests sent, by verb and resource: what the controller costs the API server",
            api_requests.clone(),
        );
        let wakes = Family::<WakeLabels, Counter>::default();
        registry.register(
            "reconcile_wakes",
            "Reconciles by what woke them: the kind of the watched object whose event did, or the timer the last reconcile set; a reconcile woken by several kinds counts once for each",
            wakes.clone(),
        );
        let at_rest = Counter::default();
        registry.register(
            "reconciles_at_rest",
            "Reconciles that ended without planning: the input was what the last plan, which wrote nothing, was made from",
            at_rest.clone(),
        );
        let notifications = Family::<NotificationLabels, Counter>::default();
        registry.register(
            "notifications",
            "Events sent to Flux's notification-controller, by result and severity",
            notifications.clone(),
        );
        let answers = Family::<AnswerLabels, Counter>::default();
        registry.register(
            "analysis_answers",
            "Answers to the metric checks of rollout.analysis, by application, check and result",
            answers.clone(),
        );
        let cached = cached::CachedObjects::default();
        registry.register_collector(Box::new(cached.clone()));
        Self {
            answers,
            cached,
            answer_series: Default::default(),
            registry: root,
            reconciles,
            reconcile_duration,
            pools,
            ready_pools,
            offline_pools,
            api_errors,
            api_requests,
            object_duration,
            resource_info,
            leader,
            notifications,
            wakes,
            at_rest,
        }
    }
}

impl Metrics {
    /// Reports what `caches` hold from now on (`nodepool_fanout_cached_objects`).
    pub fn watch_caches(&self, caches: crate::reconcile::observe::Caches) {
        self.cached.watch(caches);
    }

    pub fn observe_reconcile(&self, result: &str, took: Duration) {
        self.reconciles
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    /// A reconcile began, woken by `causes`.
    pub fn observe_wakes(&self, causes: &[&'static str]) {
        for cause in causes {
            self.wakes
                .get_or_create(&WakeLabels {
                    cause: cause.to_string(),
                })
                .inc();
        }
    }

    pub fn observe_api_error(&self, verb: &str, resource: &str, code: &str) {
        self.api_errors
            .get_or_create(&ApiErrorLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    pub fn observe_api_request(&self, verb: &str, resource: &str) {
        self.api_requests
            .get_or_create(&ApiRequestLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
            })
            .inc();
    }

    pub fn set_pools(&self, namespace: &str, application: &str, counts: PoolCounts) {
        let labels = AppLabels {
            namespace: namespace.to_string(),
            application: application.to_string(),
        };
        self.pools.get_or_create(&labels).set(counts.selected);
        self.ready_pools.get_or_create(&labels).set(counts.ready);
        self.offline_pools.get_or_create(&labels).set(counts.offline);
    }

    /// One reconcile of one application, as Flux records one of its objects.
    pub fn observe_object(&self, namespace: &str, name: &str, took: Duration) {
        self.object_duration
            .get_or_create(&ObjectLabels {
                kind: "NodePoolApplication".to_string(),
                name: name.to_string(),
                namespace: namespace.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// The labels of an application's `gotk_resource_info` series.
    pub fn info_labels(namespace: &str, name: &str, ready: &str, suspended: bool) -> ResourceInfoLabels {
        ResourceInfoLabels {
            customresource_group: "apps.fanout.dev".to_string(),
            customresource_kind: "NodePoolApplication".to_string(),
            customresource_version: "v1alpha1".to_string(),
            exported_namespace: namespace.to_string(),
            name: name.to_string(),
            ready: ready.to_string(),
            suspended: suspended.to_string(),
        }
    }

    /// An application's Ready status and suspension, as
    /// `gotk_resource_info`: the series `info`, in place of `was` (its
    /// series until now, which the caller keeps).
    pub fn set_info(&self, was: Option<&ResourceInfoLabels>, info: &ResourceInfoLabels) {
        if let Some(old) = was.filter(|old| *old != info) {
            self.resource_info.remove(old);
        }
        self.resource_info.get_or_create(info).set(1);
    }

    /// What became of one notification of `severity` (`error` or `info`).
    pub fn observe_notification(&self, result: &str, severity: &str) {
        self.notifications
            .get_or_create(&NotificationLabels {
                result: result.to_string(),
                severity: severity.to_string(),
            })
            .inc();
    }

    /// What the metric checks of `application` answered, each check with
    /// what its answer came to.
    pub fn observe_answers(&self, namespace: &str, application: &str, answers: &[(String, &'static str)]) {
        for (check, result) in answers {
            let labels = AnswerLabels {
                namespace: namespace.to_string(),
                application: application.to_string(),
                check: check.clone(),
                result: result.to_string(),
            };
            self.answers.get_or_create(&labels).inc();
            if let Ok(mut series) = self.answer_series.lock() {
                let of_app =
                    series.entry((labels.namespace.clone(), labels.application.clone())).or_default();
                if !of_app.contains(&labels) {
                    of_app.push(labels);
                }
            }
        }
    }

    /// Whether this instance leads now.
    pub fn set_leader(&self, leading: bool) {
        self.leader
            .get_or_create(&LeaderLabels {
                name: LEADER_NAME.to_string(),
            })
            .set(i64::from(leading));
    }

    /// An application that is gone leaves no series behind; `info` is its
    /// `gotk_resource_info` series, if it has one.
    pub fn forget(&self, namespace: &str, application: &str, info: Option<&ResourceInfoLabels>) {
        let labels = AppLabels {
            namespace: namespace.to_string(),
            application: application.to_string(),
        };
        self.pools.remove(&labels);
        self.ready_pools.remove(&labels);
        self.offline_pools.remove(&labels);
        self.object_duration.remove(&ObjectLabels {
            kind: "NodePoolApplication".to_string(),
            name: application.to_string(),
            namespace: namespace.to_string(),
        });
        if let Some(info) = info {
            self.resource_info.remove(info);
        }
        let series = self
            .answer_series
            .lock()
            .ok()
            .and_then(|mut s| s.remove(&(labels.namespace, labels.application)));
        for labels in series.unwrap_or_default() {
            self.answers.remove(&labels);
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

mod cached;

#[cfg(test)]
mod tests;
