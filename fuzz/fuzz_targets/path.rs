//! Any string: `MemoryPath::parse` never panics, and what it accepts is
//! always safe to hand to a store.
#![no_main]

use claude_memory::MemoryPath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    let Ok(path) = MemoryPath::parse(raw) else {
        return;
    };
    let normalized = path.normalized();
    assert!(normalized == "/memories" || normalized.starts_with("/memories/"));
    assert!(normalized.len() <= raw.len().max("/memories".len()));
    for c in path.components() {
        assert!(!c.is_empty() && c != "." && c != "..", "{raw:?}");
        assert!(!c.contains(['/', '\\']), "{raw:?}");
        assert!(!c.chars().any(char::is_control), "{raw:?}");
        assert!(!c.starts_with(".claude-memory"), "{raw:?}");
        assert!(c.len() <= 255, "{raw:?}");
    }
    assert_eq!(MemoryPath::parse(&normalized).ok(), Some(path));
});
