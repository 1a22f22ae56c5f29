//! Helpers shared by the SQL backends: keys, subtree ranges, timestamps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The row key of a path: `a/b/c` for `/memories/a/b/c`, `""` for the root.
pub(crate) fn key(components: &[String]) -> String {
    components.join("/")
}

/// Bounds selecting everything strictly below `p` in byte order:
/// `path >= "p/"` and `path < "p0"` (`'0'` is the byte after `'/'`).
pub(crate) fn below(p: &str) -> (String, String) {
    (format!("{p}/"), format!("{p}0"))
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A stored millisecond timestamp as a time.
pub(crate) fn to_time(ms: i64) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(Duration::from_millis(u64::try_from(ms).ok()?))
}
