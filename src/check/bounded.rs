//! Bounded: an application's status stays small whatever the fleet's
//! size (docs/concepts.md, "Status"): at most 40 pools listed, each
//! message cut to 1 KiB, the whole status under 64 KiB, so etcd's object
//! limit is never near. The controller's memory is the soak's to judge:
//! it reads the process's own metrics.

use serde_json::Value;

use super::{text, Invariant, Record, Violation};

/// The bounds docs/concepts.md states.
pub const MAX_STATUS_BYTES: usize = 64 * 1024;
pub const MAX_LISTED_POOLS: usize = 40;
pub const MAX_POOL_MESSAGE_BYTES: usize = 1024;

pub(super) fn check(record: &Record) -> Vec<Violation> {
    let app = &record.object;
    let Some(status) = app.get("status") else {
        return Vec::new();
    };
    let name = format!(
        "NodePoolApplication {}/{}",
        text(app, "/metadata/namespace").unwrap_or_default(),
        text(app, "/metadata/name").unwrap_or_default()
    );
    let violation = |message: String| Violation {
        invariant: Invariant::Bounded,
        message: format!("{name}: {message}"),
        objects: vec![name.clone()],
        story: Vec::new(),
    };
    let mut found = Vec::new();
    let size = serde_json::to_vec(status).map(|b| b.len()).unwrap_or_default();
    if size > MAX_STATUS_BYTES {
        found.push(violation(format!("its status is {size} bytes, over {MAX_STATUS_BYTES}")));
    }
    let pools = status.get("pools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if pools.len() > MAX_LISTED_POOLS {
        found.push(violation(format!("status.pools lists {} pools, over {MAX_LISTED_POOLS}", pools.len())));
    }
    for pool in pools {
        let message = pool.get("message").and_then(Value::as_str).unwrap_or_default();
        if message.len() > MAX_POOL_MESSAGE_BYTES {
            found.push(violation(format!(
                "the message of pool {} in status.pools is {} bytes, over {MAX_POOL_MESSAGE_BYTES}",
                pool["pool"],
                message.len()
            )));
        }
    }
    found
}
