//! Static bearer tokens from `--token-auth-file`, as upstream's `tokenfile` authenticator.
//!
//! The file is CSV (Go's `encoding/csv` dialect: `"`-quoted fields, `""` for a quote inside
//! one, quoted fields may span lines, empty lines skipped, no comments, no space trimming).
//! Each record is `token,user,uid[,"group1,group2,..."]`: at least three columns; the fourth,
//! when present, is split on commas into groups (so it is quoted when it holds several); further
//! columns are ignored. A record with an empty token is skipped with a warning; when a token
//! appears twice the later record wins, with a warning.
//!
//! Tokens are kept as SHA-256 digests, so a lookup compares digests and never the secret
//! itself.

use std::collections::HashMap;
use std::path::Path;

use aws_lc_rs::digest;

use crate::UserInfo;

/// What is wrong with a token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("failed to read token file '{path}': {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid CSV (the message is Go's `csv.ParseError`'s).
    #[error("token file '{path}': {}parse error on line {line}, column {column}: {reason}", record_prefix(*.record_line, *.line))]
    Csv {
        /// The file.
        path: String,
        /// The line the record starts on.
        record_line: usize,
        /// The line of the error.
        line: usize,
        /// The 1-based byte column of the error.
        column: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A record has fewer than three columns.
    #[error(
        "token file '{path}' must have at least 3 columns (token, user name, user uid), found {found} (record on line {line})"
    )]
    TooFewColumns {
        /// The file.
        path: String,
        /// The line the record starts on.
        line: usize,
        /// How many columns it has.
        found: usize,
    },
}

fn record_prefix(record_line: usize, line: usize) -> String {
    if record_line == line {
        String::new()
    } else {
        format!("record on line {record_line}; ")
    }
}

/// The users of a token file, by token.
#[derive(Clone, Default)]
pub struct TokenFile {
    users: HashMap<[u8; 32], UserInfo>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("tokens", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl TokenFile {
    /// Reads and parses the token file at `path`.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let name = path.display().to_string();
        let content = std::fs::read(path).map_err(|source| TokenFileError::Read {
            path: name.clone(),
            source,
        })?;
        Self::parse(&name, &content)
    }

    /// Parses token-file `content`; `path` names the file in errors and warnings.
    pub fn parse(path: &str, content: &[u8]) -> Result<Self, TokenFileError> {
        let mut file = TokenFile::default();
        let mut record_number = 0;
        for record in parse_csv(path, content)? {
            let fields = record.fields;
            if fields.len() < 3 {
                return Err(TokenFileError::TooFewColumns {
                    path: path.to_owned(),
                    line: record.line,
                    found: fields.len(),
                });
            }
            record_number += 1;
            if fields[0].is_empty() {
                file.warnings.push(format!(
                    "empty token has been found in token file '{path}', record number '{record_number}'"
                ));
                continue;
            }
            let groups = fields
                .get(3)
                .map(|g| g.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            let mut user = UserInfo::authenticated(fields[1].clone(), groups);
            user.uid = fields[2].clone();
            if file.users.insert(digest_of(&fields[0]), user).is_some() {
                file.warnings.push(format!(
                    "duplicate token has been found in token file '{path}', record number '{record_number}'"
                ));
            }
        }
        Ok(file)
    }

    /// The user `token` belongs to, or `None` when the file does not hold it (the request is
    /// then not authenticated by this method).
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.users.get(&digest_of(token)).cloned()
    }

    /// How many tokens the file holds.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file holds no token.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Warnings to log: records with an empty token, duplicate tokens (upstream's words).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

fn digest_of(token: &str) -> [u8; 32] {
    let digest = digest::digest(&digest::SHA256, token.as_bytes());
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

struct Record {
    /// The line the record starts on (1-based).
    line: usize,
    fields: Vec<String>,
}

/// Splits `content` into records as Go's `encoding/csv` reader does with `FieldsPerRecord = -1`
/// and no `LazyQuotes`.
fn parse_csv(path: &str, content: &[u8]) -> Result<Vec<Record>, TokenFileError> {
    let text = String::from_utf8_lossy(content);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let error = |record_line, line, column, reason| TokenFileError::Csv {
        path: path.to_owned(),
        record_line,
        line,
        column,
        reason,
    };
    let mut records = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let start = index + 1;
        let mut line = strip_newline(lines[index]);
        index += 1;
        if line.is_empty() {
            continue;
        }
        let mut fields = Vec::new();
        let mut line_no = start;
        let mut column = 0;
        loop {
            if !line.starts_with('"') {
                // An unquoted field runs to the next comma or the end of the line.
                let (field, rest) = match line.find(',') {
                    Some(i) => (&line[..i], Some(&line[i + 1..])),
                    None => (line, None),
                };
                if let Some(j) = field.find('"') {
                    return Err(error(
                        start,
                        line_no,
                        column + j + 1,
                        "bare \" in non-quoted-field",
                    ));
                }
                fields.push(field.to_owned());
                match rest {
                    Some(rest) => {
                        column += field.len() + 1;
                        line = rest;
                        continue;
                    }
                    None => break,
                }
            }
            // A quoted field: up to a quote followed by a comma or the end of the record.
            let mut field = String::new();
            line = &line[1..];
            column += 1;
            let more_fields = loop {
                if let Some(i) = line.find('"') {
                    field.push_str(&line[..i]);
                    let after = &line[i + 1..];
                    column += i + 1;
                    if let Some(rest) = after.strip_prefix('"') {
                        field.push('"');
                        line = rest;
                        column += 1;
                    } else if let Some(rest) = after.strip_prefix(',') {
                        fields.push(std::mem::take(&mut field));
                        line = rest;
                        column += 1;
                        break true;
                    } else if after.is_empty() {
                        fields.push(std::mem::take(&mut field));
                        break false;
                    } else {
                        return Err(error(
                            start,
                            line_no,
                            column + 1,
                            "extraneous or missing \" in quoted-field",
                        ));
                    }
                } else if index < lines.len() {
                    // The field goes on on the next line.
                    field.push_str(line);
                    field.push('\n');
                    line = strip_newline(lines[index]);
                    index += 1;
                    line_no += 1;
                    column = 0;
                } else {
                    return Err(error(
                        start,
                        line_no,
                        column + line.len() + 1,
                        "extraneous or missing \" in quoted-field",
                    ));
                }
            };
            if !more_fields {
                break;
            }
        }
        records.push(Record {
            line: start,
            fields,
        });
    }
    Ok(records)
}

fn strip_newline(line: &str) -> &str {
    line.strip_suffix('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .unwrap_or(line)
}

/// The fuzz entry point of [`TokenFile::parse`]: the input as a token file. Of a file that
/// parses, the first field of each line is tried as a token; one it recognizes is an
/// authenticated user (its name may be empty, as upstream allows).
///
/// # Panics
///
/// When parsing or authenticating panics, or a recognized token's user is not authenticated.
pub fn exercise(data: &[u8]) {
    let Ok(file) = TokenFile::parse("fuzzed.csv", data) else {
        return;
    };
    let text = String::from_utf8_lossy(data);
    for token in text.lines().filter_map(|line| line.split(',').next()) {
        if let Some(user) = file.authenticate(token) {
            assert!(
                user.groups.iter().any(|g| g == crate::SYSTEM_AUTHENTICATED),
                "{token:?} is {user:?}"
            );
        }
    }
    file.authenticate("");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(content: &str) -> Result<TokenFile, TokenFileError> {
        TokenFile::parse("tokens.csv", content.as_bytes())
    }

    #[test]
    fn records_name_users_uids_and_groups() {
        let file = parse(
            "t1,alice,uid-1\n\
             \n\
             t2,bob,uid-2,\"dev,ops\"\r\n\
             t3,carol,uid-3,admins,ignored,columns\n\
             \"t,4\",\"dan \"\"the man\"\"\",uid-4,\"multi\nline\"",
        )
        .unwrap();
        assert_eq!(file.len(), 4);
        let alice = file.authenticate("t1").unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(alice.uid, "uid-1");
        assert_eq!(alice.groups, ["system:authenticated"]);
        let bob = file.authenticate("t2").unwrap();
        assert_eq!(bob.groups, ["dev", "ops", "system:authenticated"]);
        let carol = file.authenticate("t3").unwrap();
        assert_eq!(carol.groups, ["admins", "system:authenticated"]);
        let dan = file.authenticate("t,4").unwrap();
        assert_eq!(dan.username, "dan \"the man\"");
        assert_eq!(dan.groups, ["multi\nline", "system:authenticated"]);
        assert!(file.authenticate("t").is_none());
        assert!(file.authenticate("").is_none());
        assert!(file.warnings().is_empty());
    }

    #[test]
    fn empty_and_duplicate_tokens_are_warned_about() {
        let file = parse(",nobody,0\nt,first,1\nt,second,2\n").unwrap();
        assert_eq!(file.len(), 1);
        assert_eq!(file.authenticate("t").unwrap().username, "second");
        assert_eq!(
            file.warnings(),
            [
                "empty token has been found in token file 'tokens.csv', record number '1'",
                "duplicate token has been found in token file 'tokens.csv', record number '3'",
            ]
        );
    }

    #[test]
    fn an_empty_group_column_is_one_empty_group_as_upstream() {
        let file = parse("t,alice,1,\n").unwrap();
        assert_eq!(
            file.authenticate("t").unwrap().groups,
            ["", "system:authenticated"]
        );
    }

    #[test]
    fn bad_records_are_refused_naming_the_line() {
        let err = parse("t1,alice,1\nt2,bob\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 2 (record on line 2)"
        );
        let err = parse("t1,alice,1\n   \n").unwrap_err();
        assert!(matches!(
            err,
            TokenFileError::TooFewColumns {
                line: 2,
                found: 1,
                ..
            }
        ));
        let err = parse("t1,al\"ice,1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file 'tokens.csv': parse error on line 1, column 6: bare \" in non-quoted-field"
        );
        let err = parse("t1,\"alice\"x,1\n").unwrap_err();
        assert!(
            err.to_string().ends_with(
                "parse error on line 1, column 11: extraneous or missing \" in quoted-field"
            ),
            "{err}"
        );
        let err = parse("t1,alice,1\nt2,\"bob\nstill open\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("record on line 2; parse error on line 3"),
            "{err}"
        );
    }

    #[test]
    fn files_are_read_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "secret,admin,admin,system:masters\n").unwrap();
        let file = TokenFile::load(&path).unwrap();
        assert!(
            file.authenticate("secret")
                .unwrap()
                .in_group("system:masters")
        );
        let err = TokenFile::load(&dir.path().join("missing.csv")).unwrap_err();
        assert!(matches!(err, TokenFileError::Read { .. }));
    }
}
