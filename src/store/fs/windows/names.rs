//! Names a Windows filesystem cannot store, or stores as something else.
//!
//! A memory path may hold any name SPEC §2 accepts, but Win32 refuses some
//! of them (`<`, `>`, `:`, `"`, `|`, `?`, `*`), strips others (a trailing
//! dot or space: `a.` and `a` would be one file), and maps others to devices
//! (`CON`, `NUL`, `COM1`, … with any extension, in any case). The store
//! reaches files by verbatim (`\\?\`) paths, which would let NTFS keep some
//! of these names, but no other Windows program could then open them, so the
//! Windows store refuses them all with a reason instead of an I/O error.
//! Compiled on every platform so its tests run everywhere.

/// Why Windows cannot store `name` (one path component), or `None`.
pub(crate) fn unsupported(name: &str) -> Option<&'static str> {
    if name
        .chars()
        .any(|c| matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*'))
    {
        return Some("Windows does not allow the characters < > : \" | ? * in a name");
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Some("Windows does not allow a name that ends with a dot or a space");
    }
    // `CON`, `con.txt`, `Con .md`: the part before the first dot, less
    // trailing spaces, names a device whatever follows.
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    if is_device(stem) {
        return Some(
            "CON, PRN, AUX, NUL, COM0-9 and LPT0-9 are device names on Windows, with any extension",
        );
    }
    None
}

fn is_device(stem: &str) -> bool {
    let upper = stem.to_ascii_uppercase();
    if matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) {
        return true;
    }
    let Some(rest) = upper
        .strip_prefix("COM")
        .or_else(|| upper.strip_prefix("LPT"))
    else {
        return false;
    };
    // `COM1`…`COM9`, `COM0`, and the superscript digits Windows also maps.
    let mut chars = rest.chars();
    matches!(
        (chars.next(), chars.next()),
        (Some('0'..='9' | '¹' | '²' | '³'), None)
    )
}

#[cfg(test)]
mod tests {
    use super::unsupported;

    #[test]
    fn refused_names() {
        for name in [
            "CON",
            "con",
            "Con.md",
            "nul.txt",
            "NUL .md",
            "aux",
            "prn.tar.gz",
            "COM1",
            "com9.md",
            "LPT1",
            "lpt3.txt",
            "COM¹",
            "conin$",
            "a.",
            "a ",
            "notes.md.",
            "a:b",
            "a*b",
            "a?",
            "a<b",
            "a>b",
            "a|b",
            "a\"b",
        ] {
            assert!(unsupported(name).is_some(), "{name} should be refused");
        }
    }

    #[test]
    fn accepted_names() {
        for name in [
            "a.md",
            "console",
            "CON_notes",
            "nul-ish.md",
            "COM10",
            "LPT",
            "com",
            "conx.txt",
            ".hidden",
            "a b",
            "100%.md",
            "café.md",
            "a..b",
            ".a",
        ] {
            assert_eq!(unsupported(name), None, "{name} should be accepted");
        }
    }
}
