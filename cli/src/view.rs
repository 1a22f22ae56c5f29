//! `view PATH [--range START:END]`: what the model would see.

use serde_json::json;

use crate::output::{Failure, Outcome, err, out};

pub fn view(tool: &crate::Tool, path: &str, range: Option<[i64; 2]>) -> Outcome {
    let mut input = json!({"command": "view", "path": path});
    if let Some(r) = range {
        input["view_range"] = json!(r);
    }
    let result = tool.dispatch(&input);
    let text = result.text().unwrap_or("(an image)");
    if result.is_error {
        err(text);
        return Err(Failure::Reported);
    }
    out(text)
}
