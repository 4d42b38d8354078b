//! What cached releases share of their metadata.

use super::*;

#[test]
fn the_releases_of_one_application_hold_one_copy_of_its_owner_reference() {
    let read = |name: &str, uid: &str| -> CachedRelease {
        serde_json::from_value(serde_json::to_value(release(name, "edge", Some(uid))).unwrap()).unwrap()
    };
    let (hz, sh, other) = (read("gw-hz", "u1"), read("gw-sh", "u1"), read("gw-bj", "u2"));
    let owner = |r: &CachedRelease| r.metadata.owner_references.as_ref().map(|o| o.as_slice().as_ptr());
    assert_eq!(owner(&hz), owner(&sh), "one copy for both releases of u1");
    assert_ne!(owner(&hz), owner(&other), "another application's is its own");
    assert_eq!(application_owner(&other).map(|o| o.uid.as_str()), Some("u2"));
    // Held while a release holds it: the last one read again finds the
    // same copy until it goes.
    drop(hz);
    assert_eq!(owner(&sh), owner(&read("gw-sh", "u1")));
}
