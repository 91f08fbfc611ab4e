//! Go's `%q` formatting, which upstream's RBAC messages use and clients match on.

use std::fmt::Write;

/// A string as Go's `%q` writes it: double-quoted, with Go escapes.
pub(crate) fn quote(s: &str) -> String {
    Quoted(&[s]).to_string()
}

/// Writes the concatenation of its parts as Go's `%q` writes a string, without allocating.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quoted<'a>(pub(crate) &'a [&'a str]);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_char('"')?;
        for part in self.0 {
            write_escaped(f, part)?;
        }
        f.write_char('"')
    }
}

fn write_escaped(out: &mut impl Write, s: &str) -> std::fmt::Result {
    if !s.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
        return out.write_str(s);
    }
    for c in s.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            '\u{7}' => out.write_str("\\a")?,
            '\u{8}' => out.write_str("\\b")?,
            '\u{c}' => out.write_str("\\f")?,
            '\u{b}' => out.write_str("\\v")?,
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(out, "\\x{:02x}", c as u32)?,
            c if c.is_control() => write!(out, "\\u{:04x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

/// A string slice as Go's `%q` writes it: `["a" "b"]`.
pub(crate) fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_go() {
        assert_eq!(quote("bob"), "\"bob\"");
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("\u{1}"), "\"\\x01\"");
        assert_eq!(quote("é"), "\"é\"");
        assert_eq!(quote_list(&["a", "b"]), "[\"a\" \"b\"]");
        assert_eq!(quote_list::<&str>(&[]), "[]");
        assert_eq!(quote_list(&[""]), "[\"\"]");
    }
}
