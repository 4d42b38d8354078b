//! The soak's shards (`SHARDS=2`): the controller instances, one a shard,
//! each serving its applications by `sharding.fluxcd.io/key`, and an
//! application's move from one to the other.
use super::*;

/// The shards of `SHARDS=2`, by index: the instance serving applications
/// with no `sharding.fluxcd.io/key`, and the one serving `one`.
pub const SHARD_NAMES: [&str; 2] = ["main", "one"];

impl World {
    /// Starts the instance serving `shard`. Each incarnation logs to a
    /// file of its own (`target/e2e-logs/<namespace>-<shard>-<n>.log`), so
    /// a finding can be read in the log of the process that made it.
    pub fn start_controller(&mut self, shard: usize) {
        let selector = match (self.controllers.len(), shard) {
            (1, _) => None,
            (_, 0) => Some(format!("!{}", naming::LABEL_SHARD)),
            (_, s) => Some(format!("{}={}", naming::LABEL_SHARD, SHARD_NAMES[s])),
        };
        let flags: Vec<&str> = match &selector {
            Some(selector) => vec!["--watch-label-selector", selector],
            None => Vec::new(),
        };
        let name = format!("{}-{}", SHARD_NAMES[shard], self.started[shard]);
        self.started[shard] += 1;
        let started = RunningController::start_env(&self.env.namespace, &flags, &[("POD_NAME", &name)]);
        self.controllers[shard] = Some(started);
    }

    /// Whether the soak runs shards (`SHARDS=2`).
    pub fn sharded(&self) -> bool {
        self.controllers.len() > 1
    }
}

/// Puts the application in `shard` (see [`SHARD_NAMES`]): the
/// `sharding.fluxcd.io/key` label, or none for the main shard.
pub(super) fn set_shard(manifest: &mut Value, shard: usize) {
    match shard {
        0 => {
            if let Some(labels) = manifest["metadata"]["labels"].as_object_mut() {
                labels.remove(naming::LABEL_SHARD);
            }
        }
        s => manifest["metadata"]["labels"][naming::LABEL_SHARD] = json!(SHARD_NAMES[s]),
    }
}
