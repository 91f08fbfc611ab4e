use std::collections::{BTreeMap, HashMap};

use super::*;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Valid selectors and their canonical form.
const VALID: &[(&str, &str)] = &[
    ("", ""),
    (",", ""),
    ("x=a,y=b,z=c", "x=a,y=b,z=c"),
    ("z=c,y=b,x=a", "x=a,y=b,z=c"),
    ("x=a,a=x", "a=x,x=a"),
    ("x!=a,y=b", "x!=a,y=b"),
    ("x==a", "x=a"),
    ("x==b,x=a", "x=a,x=b"),
    (r"x=a||y\=b", r"x=a||y\=b"),
    (r"x=a\=\=b", r"x=a\=\=b"),
    (r"complex=\=value\\\,\\", r"complex=\=value\\\,\\"),
    ("metadata.name=foo", "metadata.name=foo"),
    ("a=b,,c=d", "a=b,c=d"),
    ("x=", "x="),
    ("x!=", "x!="),
    ("=x", "=x"),
    ("=", ""),
    ("!=", ""),
    ("a=b,=", "a=b"),
    ("a b=c d", "a b=c d"),
    ("a!b=c", "a!b=c"),
    (r"a\,b=c", r"a\,b=c"),
    ("x=ünï", "x=ünï"),
    (
        "spec.nodeName!=,metadata.namespace=default",
        "metadata.namespace=default,spec.nodeName!=",
    ),
    (
        "status.phase!=Succeeded,status.phase!=Failed",
        "status.phase!=Failed,status.phase!=Succeeded",
    ),
];

#[test]
fn parse_gives_the_canonical_form_which_round_trips() {
    for (input, canonical) in VALID {
        let selector = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.to_string(), *canonical, "{input:?}");
        assert_eq!(selector.is_empty(), canonical.is_empty(), "{input:?}");
        let again: Selector = canonical.parse().unwrap();
        assert_eq!(again, selector, "{input:?}");
        assert_eq!(again.to_string(), *canonical, "{input:?}");
    }
}

#[test]
fn parse_gives_the_requirements() {
    let selector = Selector::parse(r"metadata.name==a\,b,spec.x!=").unwrap();
    assert_eq!(
        selector.requirements(),
        [
            Requirement {
                field: "metadata.name".into(),
                operator: Operator::Equals,
                value: "a,b".into(),
            },
            Requirement {
                field: "spec.x".into(),
                operator: Operator::NotEquals,
                value: String::new(),
            },
        ]
    );
    assert_eq!(Operator::NotEquals.to_string(), "!=");
}

#[test]
fn invalid_selectors_are_rejected_with_upstream_messages() {
    let cases: &[(&str, Error, &str)] = &[
        (
            "x=a||y=b",
            Error::UnescapedCharacter('='),
            "invalid field selector: unescaped character in value: '='",
        ),
        ("x==a==b", Error::UnescapedCharacter('='), ""),
        ("a=b=c", Error::UnescapedCharacter('='), ""),
        (
            "x=a,b",
            Error::InvalidSelector {
                selector: "x=a,b".into(),
                term: "b".into(),
            },
            "invalid selector: 'x=a,b'; can't understand 'b'",
        ),
        (
            "x in (a)",
            Error::InvalidSelector {
                selector: "x in (a)".into(),
                term: "x in (a)".into(),
            },
            "invalid selector: 'x in (a)'; can't understand 'x in (a)'",
        ),
        (
            "x in (a,b,c)",
            Error::InvalidSelector {
                selector: "x in (a,b,c)".into(),
                term: "b".into(),
            },
            "",
        ),
        (
            "x",
            Error::InvalidSelector {
                selector: "x".into(),
                term: "x".into(),
            },
            "",
        ),
        (
            "x>1",
            Error::InvalidSelector {
                selector: "x>1".into(),
                term: "x>1".into(),
            },
            "",
        ),
        (
            r"x=a\",
            Error::InvalidEscapeSequence(r"\".into()),
            r"invalid field selector: invalid escape sequence: \",
        ),
        (
            r"x=\a",
            Error::InvalidEscapeSequence(r"\a".into()),
            r"invalid field selector: invalid escape sequence: \a",
        ),
        // The term splits at its first `=`, so an escaped `=` in a field name leaves a `\` at
        // the end of the field and an unescaped `=` in the value.
        (r"a\=b=c", Error::UnescapedCharacter('='), ""),
    ];
    for (input, error, message) in cases {
        let e = Selector::parse(input).unwrap_err();
        assert_eq!(&e, error, "{input:?}");
        if !message.is_empty() {
            assert_eq!(e.to_string(), *message, "{input:?}");
        }
    }
}

/// Selector, map, whether it matches.
type MatchCase = (&'static str, &'static [(&'static str, &'static str)], bool);

const MATCHES: &[MatchCase] = &[
    ("", &[("x", "y")], true),
    ("x=y", &[("x", "y")], true),
    ("x==y", &[("x", "y")], true),
    ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
    ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
    ("notin=in", &[("notin", "in")], true),
    ("x=y", &[("x", "z")], false),
    ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
    ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
    // An absent field reads as "".
    ("x=y", &[], false),
    ("x!=y", &[], true),
    ("x=", &[], true),
    ("x!=", &[], false),
    ("x=", &[("x", "a")], false),
    ("x!=", &[("x", "a")], true),
    // Escaped values match their literal.
    (r"v=a\,b", &[("v", "a,b")], true),
    (r"v=a\,b", &[("v", r"a\,b")], false),
];

#[test]
fn matching_follows_upstream() {
    for (input, fields, expected) in MATCHES {
        let selector = Selector::parse(input).unwrap();
        let fields = set(fields);
        assert_eq!(
            selector.matches(&fields),
            *expected,
            "{input:?} on {fields:?}"
        );
        let hashed: HashMap<String, String> = fields.clone().into_iter().collect();
        assert_eq!(
            selector.matches(&hashed),
            *expected,
            "{input:?} on {fields:?}"
        );
    }
    let fields = set(&[("foo", "bar"), ("baz", "blah"), ("complex", r"=value\,\")]);
    let cases: &[(&str, bool)] = &[
        ("foo=bar", true),
        ("baz=blah", true),
        ("foo=bar,baz=blah", true),
        (r"foo=bar,baz=blah,complex=\=value\\\,\\", true),
        ("foo=blah", false),
        ("baz=bar", false),
        ("foo=bar,foobar=bar,baz=blah", false),
    ];
    for (input, expected) in cases {
        assert_eq!(
            Selector::parse(input).unwrap().matches(&fields),
            *expected,
            "{input:?}"
        );
    }
}

#[test]
fn values_escape_and_unescape() {
    let escapes: &[(&str, &str)] = &[
        ("", ""),
        ("a", "a"),
        ("=", r"\="),
        (",", r"\,"),
        (r"\", r"\\"),
        (r"\=\,\", r"\\\=\\\,\\"),
        ("a=b,c", r"a\=b\,c"),
    ];
    for (literal, escaped) in escapes {
        assert_eq!(escape_value(literal), *escaped, "{literal:?}");
        assert_eq!(unescape_value(escaped).unwrap(), *literal, "{escaped:?}");
    }
    let bad: &[(&str, Error)] = &[
        (r"\", Error::InvalidEscapeSequence(r"\".into())),
        (r"\\\", Error::InvalidEscapeSequence(r"\".into())),
        (r"\a", Error::InvalidEscapeSequence(r"\a".into())),
        (r"\\\a", Error::InvalidEscapeSequence(r"\a".into())),
        (r"x\ ", Error::InvalidEscapeSequence(r"\ ".into())),
        ("=", Error::UnescapedCharacter('=')),
        (",", Error::UnescapedCharacter(',')),
        (r"\==", Error::UnescapedCharacter('=')),
        (r"a\,,", Error::UnescapedCharacter(',')),
    ];
    for (escaped, error) in bad {
        assert_eq!(&unescape_value(escaped).unwrap_err(), error, "{escaped:?}");
    }
}

#[test]
fn requires_exact_match_finds_pinned_values() {
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("metadata.name=x", "metadata.name", Some("x")),
        ("metadata.name==x", "metadata.name", Some("x")),
        ("metadata.name=", "metadata.name", Some("")),
        ("metadata.name!=x", "metadata.name", None),
        ("metadata.name=x", "metadata.namespace", None),
        ("", "metadata.name", None),
        (
            "metadata.namespace=ns,metadata.name=x",
            "metadata.name",
            Some("x"),
        ),
        (
            "metadata.name!=y,metadata.name=x",
            "metadata.name",
            Some("x"),
        ),
        (r"metadata.name=a\,b", "metadata.name", Some("a,b")),
    ];
    for (input, field, expected) in cases {
        let selector = Selector::parse(input).unwrap();
        assert_eq!(selector.requires_exact_match(field), *expected, "{input:?}");
    }
    let nested = Selector::and([
        Selector::one_term_not_equal("test", "foo"),
        Selector::and([Selector::one_term_equal("test", "bar")]),
    ]);
    assert_eq!(nested.requires_exact_match("test"), Some("bar"));
    assert_eq!(nested.to_string(), "test!=foo,test=bar");
}

#[test]
fn transform_renames_drops_and_rejects_fields() {
    type Transform = fn(&str, &str) -> Result<(String, String), String>;
    fn same(f: &str, v: &str) -> Result<(String, String), String> {
        Ok((f.to_owned(), v.to_owned()))
    }
    let cases: &[(&str, Transform, Result<&str, &str>)] = &[
        ("", same, Ok("")),
        ("a=b,c=d", same, Ok("a=b,c=d")),
        (
            "a=b,c=d",
            |f, v| {
                if f == "a" {
                    Ok(("e".into(), "f".into()))
                } else {
                    same(f, v)
                }
            },
            // The order is kept, as upstream keeps it.
            Ok("e=f,c=d"),
        ),
        ("a=b", |_, _| Ok((String::new(), String::new())), Ok("")),
        (
            "a=b,c=d,e=f",
            |f, v| {
                if f == "c" {
                    Ok((String::new(), String::new()))
                } else {
                    same(f, v)
                }
            },
            Ok("a=b,e=f"),
        ),
        (
            "metadata.name=x,spec.bogus!=y",
            |f, v| match f {
                "metadata.name" | "metadata.namespace" => same(f, v),
                _ => Err(format!("field label not supported: {f}")),
            },
            Err("field label not supported: spec.bogus"),
        ),
        (
            "name=x,namespace=y",
            |f, v| Ok((format!("metadata.{f}"), v.to_owned())),
            Ok("metadata.name=x,metadata.namespace=y"),
        ),
    ];
    for (input, transform, expected) in cases {
        let selector = Selector::parse(input).unwrap();
        let result = selector.transform(transform).map(|s| s.to_string());
        assert_eq!(
            result.as_deref(),
            expected.map_err(str::to_owned).as_deref(),
            "{input:?}"
        );
    }
    let renamed = Selector::parse("a=b,c=d")
        .unwrap()
        .transform(|_, _| Ok::<_, String>((String::new(), String::new())))
        .unwrap();
    assert!(renamed.is_empty());
    assert!(renamed.matches(&set(&[])));
}

#[test]
fn parse_and_transform_reports_both_kinds_of_error() {
    #[derive(Debug, PartialEq)]
    enum ApiError {
        Selector(String),
        Unsupported(String),
    }
    impl From<Error> for ApiError {
        fn from(e: Error) -> Self {
            ApiError::Selector(e.to_string())
        }
    }
    let check = |f: &str, v: &str| match f {
        "metadata.name" => Ok((f.to_owned(), v.to_owned())),
        _ => Err(ApiError::Unsupported(format!(
            "field label not supported: {f}"
        ))),
    };
    assert_eq!(
        Selector::parse_and_transform("metadata.name=x", check)
            .unwrap()
            .to_string(),
        "metadata.name=x"
    );
    assert_eq!(
        Selector::parse_and_transform("spec.x=y", check).unwrap_err(),
        ApiError::Unsupported("field label not supported: spec.x".into())
    );
    assert_eq!(
        Selector::parse_and_transform("metadata.name", check).unwrap_err(),
        ApiError::Selector(
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'".into()
        )
    );
}

#[test]
fn constructors() {
    assert!(Selector::everything().is_empty());
    assert_eq!(Selector::everything(), Selector::parse("").unwrap());
    assert!(Selector::everything().matches(&set(&[("a", "b")])));
    assert_eq!(Selector::one_term_equal("a", "b=c").to_string(), r"a=b\=c");
    assert_eq!(Selector::one_term_not_equal("a", "").to_string(), "a!=");
    let from_set = Selector::from_set(&set(&[("b", "2"), ("a", "1")]));
    assert_eq!(from_set.to_string(), "a=1,b=2");
    assert!(from_set.matches(&set(&[("a", "1"), ("b", "2"), ("c", "3")])));
    assert!(!from_set.matches(&set(&[("a", "1")])));
    assert_eq!(Selector::parse(&from_set.to_string()).unwrap(), from_set);
}
