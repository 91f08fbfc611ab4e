//! Go's `%q` formatting of strings (`strconv.Quote`), which upstream's messages use and
//! clients and tests match on: `configmaps "a\u0092b" not found`, never Rust's `"a\u{92}b"`.

use std::fmt::Write;

/// A string as Go's `%q` writes it: double-quoted, with Go's escapes.
pub fn quote(s: &str) -> String {
    Quoted(s).to_string()
}

/// Writes a string as Go's `%q` does, without allocating (for `format!` arguments).
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_char('"')?;
        write_escaped(f, self.0)?;
        f.write_char('"')
    }
}

/// Writes the concatenation of its parts as Go's `%q` writes a string, without allocating.
#[derive(Debug, Clone, Copy)]
pub struct QuotedJoin<'a>(pub &'a [&'a str]);

impl std::fmt::Display for QuotedJoin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_char('"')?;
        for part in self.0 {
            write_escaped(f, part)?;
        }
        f.write_char('"')
    }
}

/// A list of strings as Go's `%q` writes a slice: `["a" "b"]`.
pub fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{}", Quoted(item.as_ref()));
    }
    out.push(']');
    out
}

/// Whether Go's `strconv.IsPrint` holds for `c`, as far as messages need it: letters, marks,
/// numbers, punctuation, symbols and the ASCII space are printable; controls, format
/// characters, separators other than the space, surrogates, private use and noncharacters
/// are not.
fn is_print(c: char) -> bool {
    let u = c as u32;
    if c.is_control() {
        return false;
    }
    !matches!(u,
        // Separators other than U+0020 (Zs, Zl, Zp).
        0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000
        // Format characters (Cf) that occur in practice.
        | 0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F
        // Private use and noncharacters.
        | 0xE000..=0xF8FF | 0xF0000..=0x10FFFF | 0xFDD0..=0xFDEF
    ) && (u & 0xFFFE) != 0xFFFE
}

fn write_escaped(out: &mut impl Write, s: &str) -> std::fmt::Result {
    if s.chars().all(|c| c != '"' && c != '\\' && is_print(c)) {
        return out.write_str(s);
    }
    for c in s.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\u{7}' => out.write_str("\\a")?,
            '\u{8}' => out.write_str("\\b")?,
            '\u{c}' => out.write_str("\\f")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            '\u{b}' => out.write_str("\\v")?,
            c if is_print(c) => out.write_char(c)?,
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32)?,
            c if (c as u32) < 0x10000 => write!(out, "\\u{:04x}", c as u32)?,
            c => write!(out, "\\U{:08x}", c as u32)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_go() {
        for (given, go) in [
            ("bob", r#""bob""#),
            ("a\"b\\c\n", r#""a\"b\\c\n""#),
            ("\u{1}\u{7f}", r#""\x01\x7f""#),
            ("a\u{92}b", r#""a\u0092b""#),
            ("\u{200b}\u{feff}\u{a0}", r#""\u200b\ufeff\u00a0""#),
            ("\u{10ffff}", r#""\U0010ffff""#),
            ("é😀 ", "\"é😀 \""),
            ("", r#""""#),
        ] {
            assert_eq!(quote(given), go, "{given:?}");
        }
        assert_eq!(quote_list(&["a", "b"]), r#"["a" "b"]"#);
        assert_eq!(QuotedJoin(&["a", "/", "b\n"]).to_string(), r#""a/b\n""#);
        assert_eq!(quote_list::<&str>(&[]), "[]");
        assert_eq!(quote_list(&[""]), r#"[""]"#);
    }
}
