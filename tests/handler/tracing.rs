//! The `tracing` feature: one `memory_command` span per command, with the
//! command, path, outcome and duration, and never file content.
#![cfg(feature = "tracing")]

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use claude_memory::{InMemoryStore, MemoryTool};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span's name and its fields, as `name=value` strings.
type SpanRecord = (String, Vec<String>);

/// Every span opened while it is the subscriber.
#[derive(Default, Clone)]
struct Capture(Arc<Mutex<Vec<SpanRecord>>>);

struct Fields<'a>(&'a mut Vec<String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        let mut spans = self.0.lock().expect("lock");
        spans.push((span.metadata().name().to_owned(), fields));
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.0.lock().expect("lock");
        if let Some((_, fields)) = usize::try_from(span.into_u64() - 1)
            .ok()
            .and_then(|i| spans.get_mut(i))
        {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn one_span_per_command_with_outcome_and_no_content() {
    let capture = Capture::default();
    let tool = MemoryTool::new(InMemoryStore::new());
    tracing::subscriber::with_default(capture.clone(), || {
        tool.dispatch(&json!({"command": "create", "path": "/memories/s.md",
                              "file_text": "SECRET-CONTENT"}));
        tool.dispatch(&json!({"command": "view", "path": "/memories/s.md"}));
        tool.dispatch(&json!({"command": "rename", "old_path": "/memories/s.md",
                              "new_path": "/memories/t.md"}));
        tool.dispatch(&json!({"command": "delete", "path": "/memories/missing.md"}));
    });
    let spans = capture.0.lock().expect("lock").clone();
    assert_eq!(spans.len(), 4, "{spans:?}");
    for (name, _) in &spans {
        assert_eq!(name, "memory_command");
    }
    let field = |i: usize, key: &str| -> Option<String> {
        spans[i]
            .1
            .iter()
            .find_map(|f| f.strip_prefix(&format!("{key}=")).map(str::to_owned))
    };
    assert_eq!(field(0, "command").as_deref(), Some("\"create\""));
    assert_eq!(field(0, "path").as_deref(), Some("\"/memories/s.md\""));
    assert_eq!(field(0, "is_error").as_deref(), Some("false"));
    assert!(field(0, "duration_us").is_some());
    assert_eq!(field(2, "new_path").as_deref(), Some("\"/memories/t.md\""));
    assert_eq!(field(3, "is_error").as_deref(), Some("true"));
    let all = format!("{spans:?}");
    assert!(!all.contains("SECRET-CONTENT"), "{all}");
}
