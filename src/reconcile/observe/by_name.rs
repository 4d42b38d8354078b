//! A cached object in an index's set, known by its namespace and name:
//! an event replaces the version the set holds, whatever it was.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{CachedPool, CachedRelease};

/// What an indexed object is known by.
pub(super) trait Named {
    fn id(&self) -> (&str, &str);
}

impl Named for CachedRelease {
    fn id(&self) -> (&str, &str) {
        let meta = &self.metadata;
        (meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
    }
}

impl Named for CachedPool {
    fn id(&self) -> (&str, &str) {
        (self.pool.namespace.as_deref().unwrap_or_default(), self.pool.name.as_str())
    }
}

/// An object in a set, by its namespace and name.
#[derive(Debug)]
pub(super) struct ByName<K>(pub Arc<K>);

impl<K> Clone for ByName<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K: Named> PartialEq for ByName<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

impl<K: Named> Eq for ByName<K> {}

impl<K: Named> Hash for ByName<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id().hash(state);
    }
}
