//! Any bytes, split into lines, as a session of tool calls on one store:
//! `dispatch` never panics and always answers with text or an image.
#![no_main]

use claude_memory::{InMemoryStore, MemoryTool};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tool = MemoryTool::new(InMemoryStore::new());
    for line in data.split(|&b| b == b'\n').take(64) {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let result = tool.dispatch_json(line);
        assert!(!result.content.is_empty());
    }
});
