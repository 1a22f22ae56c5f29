//! The actor a call is recorded under in a store's history: the MCP
//! client's name and its session, `{client}@{session}`, the MCP
//! counterpart of the API's `tool_use` id. Both come from the client, so
//! they are cleaned and bounded before they reach a log or a message.

/// At most this many characters of each part.
const MAX: usize = 64;

/// Keeps ASCII letters, digits and `-_.:/ `, replaces anything else with
/// `_`, and cuts at 64 characters: a client's name can never inject a
/// line break, a terminal escape or a megabyte into the history.
pub(crate) fn clean(text: &str) -> String {
    text.chars()
        .take(MAX)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.:/ ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `{client}@{session}` (`mcp-client` when the client gave no name; no
/// `@…` on a transport without sessions).
pub(crate) fn label(client: Option<&str>, session: Option<&str>) -> String {
    let client = match client.map(clean) {
        Some(name) if !name.trim().is_empty() => name,
        _ => "mcp-client".to_owned(),
    };
    match session.map(clean) {
        Some(session) if !session.is_empty() => format!("{client}@{session}"),
        _ => client,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_cleaned_and_bounded() {
        assert_eq!(
            label(Some("claude-code"), Some("abc-1")),
            "claude-code@abc-1"
        );
        assert_eq!(label(Some("evil\n\u{1b}[2J"), None), "evil___2J");
        assert_eq!(label(None, Some("s")), "mcp-client@s");
        assert_eq!(label(Some(""), None), "mcp-client");
        assert_eq!(clean(&"x".repeat(10_000)).len(), 64);
    }
}
