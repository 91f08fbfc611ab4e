use std::collections::{BTreeMap, HashMap};

use super::*;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Valid selectors and their canonical form (sorted by key, values sorted, spaces dropped).
const VALID: &[(&str, &str)] = &[
    ("", ""),
    ("x=a,y=b,z=c", "x=a,y=b,z=c"),
    ("z=c,y=b,x=a", "x=a,y=b,z=c"),
    ("x!=a,y=b", "x!=a,y=b"),
    ("x==a", "x==a"),
    ("x=", "x="),
    ("x= ", "x="),
    ("x=,z= ", "x=,z="),
    ("x= ,z= ", "x=,z="),
    ("x!=", "x!="),
    ("!x", "!x"),
    ("!x,y=z", "!x,y=z"),
    ("x>1", "x>1"),
    ("x>1,z<5", "x>1,z<5"),
    ("b>1,a=x,b<5", "a=x,b>1,b<5"),
    ("\rx", "x"),
    ("a ", "a"),
    (
        "this-is-a-dns.domain.com/key-with-dash",
        "this-is-a-dns.domain.com/key-with-dash",
    ),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
    ),
    ("foo  in\t (abc)", "foo in (abc)"),
    ("x notin\n (abc)", "x notin (abc)"),
    ("x  notin\t\t\t(abc,def)", "x notin (abc,def)"),
    ("x in(def,abc)", "x in (abc,def)"),
    ("x in (b,a,b)", "x in (a,b)"),
    ("x in (abc,)", "x in (,abc)"),
    ("x in (,abc)", "x in (,abc)"),
    ("x in ()", "x in ()"),
    ("x notin ( )", "x notin ()"),
    ("x notin (, )", "x notin ()"),
    (
        "x notin (abc,,def),bar,z in (),w",
        "bar,w,x notin (,abc,def),z in ()",
    ),
    ("x,y in (a)", "x,y in (a)"),
    ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
    ("in=notin,notin", "in=notin,notin"),
    ("in in (in)", "in in (in)"),
    ("x=a,x!=b", "x=a,x!=b"),
    (
        "example.com/app in (web),tier",
        "example.com/app in (web),tier",
    ),
    (" app = web , !canary ", "app=web,!canary"),
];

#[test]
fn parse_gives_the_canonical_form() {
    for (input, canonical) in VALID {
        let selector = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.to_string(), *canonical, "{input:?}");
        assert_eq!(selector.is_empty(), canonical.is_empty(), "{input:?}");
    }
}

#[test]
fn canonical_form_round_trips() {
    for (input, canonical) in VALID {
        let selector = Selector::parse(input).unwrap();
        let again: Selector = canonical.parse().unwrap();
        assert_eq!(again, selector, "{input:?}");
        assert_eq!(again.to_string(), *canonical, "{input:?}");
    }
    let built = Selector::from_requirements([
        Requirement::new("z", Operator::NotIn, ["", "b", "a"]).unwrap(),
        Requirement::new("a", Operator::LessThan, ["10"]).unwrap(),
        Requirement::new("m", Operator::DoesNotExist, Vec::<String>::new()).unwrap(),
        Requirement::new("b", Operator::Equals, [""]).unwrap(),
    ]);
    assert_eq!(built.to_string(), "a<10,b=,!m,z notin (,a,b)");
    assert_eq!(Selector::parse(&built.to_string()).unwrap(), built);
}

#[test]
fn parse_gives_the_requirements() {
    let selector = Selector::parse("x notin (abc,,def),bar,z in (),!w").unwrap();
    let parsed: Vec<(&str, Operator, Vec<&str>)> = selector
        .requirements()
        .iter()
        .map(|r| {
            (
                r.key(),
                r.operator(),
                r.values().iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        parsed,
        [
            ("bar", Operator::Exists, vec![]),
            ("w", Operator::DoesNotExist, vec![]),
            ("x", Operator::NotIn, vec!["", "abc", "def"]),
            ("z", Operator::In, vec![""]),
        ]
    );
    let ops: Vec<Operator> = Selector::parse("a=1,b==1,c!=1,d>1,e<1")
        .unwrap()
        .requirements()
        .iter()
        .map(Requirement::operator)
        .collect();
    assert_eq!(
        ops,
        [
            Operator::Equals,
            Operator::DoubleEquals,
            Operator::NotEquals,
            Operator::GreaterThan,
            Operator::LessThan,
        ]
    );
    assert_eq!(Operator::GreaterThan.to_string(), "gt");
    assert_eq!(Operator::DoesNotExist.as_str(), "!");
}

/// Invalid selectors and (a part of) upstream's message for them.
const INVALID: &[(&str, &str)] = &[
    ("x==a==b", "found '==', expected: ',' or 'end of string'"),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("x=a b", "found 'b', expected: ',' or 'end of string'"),
    (
        "a in (xyz)b notin ()",
        "found 'b', expected: ',' or 'end of string'",
    ),
    ("x,,y", "found ',', expected: identifier after ','"),
    ("a in (xyz),", "found '', expected: identifier after ','"),
    (
        ",x,y",
        "found ',', expected: !, identifier, or 'end of string'",
    ),
    (
        "(",
        "found '(', expected: !, identifier, or 'end of string'",
    ),
    (
        "!",
        "unable to parse requirement: found '', expected: identifier",
    ),
    (
        "!!x",
        "unable to parse requirement: found '!', expected: identifier",
    ),
    (
        "x nott in (y)",
        "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt",
    ),
    (
        "a (",
        "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
    ),
    (
        "x in a",
        "unable to parse requirement: found 'a' expected: '('",
    ),
    (
        "a notin(",
        "unable to parse requirement: found '', expected: ',', ')' or identifier",
    ),
    (
        "a in (xyz abc)",
        "unable to parse requirement: found 'abc', expected: ',' or ')'",
    ),
    (
        "x in (a",
        "unable to parse requirement: found '', expected: ',' or ')'",
    ),
    (
        "x in (a,",
        "unable to parse requirement: found '', expected: ',', or identifier",
    ),
    (
        "x=(a)",
        "unable to parse requirement: found '(', expected: identifier",
    ),
    (
        "x<a",
        "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer",
    ),
    (
        "x>1.5",
        "values[0]: Invalid value: \"1.5\": for 'Gt', 'Lt' operators, the value must be an integer",
    ),
    (
        "x>-1",
        "unable to parse requirement: values[0][x]: Invalid value: \"-1\": a valid label must be",
    ),
    (
        "x=a||y=b",
        "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": a valid label must be",
    ),
    ("x=a/b", "values[0][x]: Invalid value: \"a/b\""),
    (
        "x in (ok,-bad)",
        "values[0][x]: Invalid value: \"-bad\": a valid label must be",
    ),
    (
        "k@y=v",
        "unable to parse requirement: key: Invalid value: \"k@y\": name part must consist",
    ),
    ("x~=y", "key: Invalid value: \"x~\": name part must consist"),
    (
        "a/b/c",
        "key: Invalid value: \"a/b/c\": a qualified name must consist",
    ),
    (
        "/a",
        "key: Invalid value: \"/a\": prefix part must be non-empty",
    ),
    ("x\0=a", "key: Invalid value: \"x\\x00\""),
];

#[test]
fn invalid_selectors_are_rejected_with_upstream_messages() {
    for (input, message) in INVALID {
        match Selector::parse(input) {
            Ok(selector) => panic!("{input:?} parsed as {selector}"),
            Err(e) => {
                assert!(matches!(e, Error::Parse(_)), "{input:?}: {e:?}");
                assert!(
                    e.to_string().contains(message),
                    "{input:?}: {e} does not contain {message}"
                );
            }
        }
    }
    let long_value = format!("x={}", "a".repeat(64));
    assert!(
        Selector::parse(&long_value)
            .unwrap_err()
            .to_string()
            .contains("must be no more than 63 characters")
    );
}

/// Selector, map, whether it matches.
type MatchCase = (&'static str, &'static [(&'static str, &'static str)], bool);

const MATCHES: &[MatchCase] = &[
    ("", &[("x", "y")], true),
    ("", &[], true),
    ("x=y", &[("x", "y")], true),
    ("x==y", &[("x", "y")], true),
    ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
    ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
    ("notin=in", &[("notin", "in")], true),
    ("x", &[("x", "z")], true),
    ("!x", &[("y", "z")], true),
    ("x>1", &[("x", "2")], true),
    ("x<1", &[("x", "0")], true),
    ("x=z", &[], false),
    ("x=y", &[("x", "z")], false),
    ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
    ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
    ("x", &[("y", "z")], false),
    ("!x", &[("x", "z")], false),
    ("x>1", &[("x", "0")], false),
    ("x<1", &[("x", "2")], false),
    // `!=` and `notin` match an absent label; `=`, `in` do not.
    ("x!=y", &[], true),
    ("x notin (a,b)", &[], true),
    ("x notin (a,b)", &[("x", "a")], false),
    ("x notin (a,b)", &[("x", "c")], true),
    ("x in (a,b)", &[], false),
    ("x in (a,b)", &[("x", "b")], true),
    ("x in (a,b)", &[("x", "c")], false),
    // The empty value.
    ("x in ()", &[("x", "")], true),
    ("x in ()", &[("x", "a")], false),
    ("x in ()", &[], false),
    ("x=", &[("x", "")], true),
    ("x=", &[], false),
    ("x!=", &[], true),
    ("x!=", &[("x", "")], false),
    ("x", &[("x", "")], true),
    // Gt and Lt compare integers, and need an integer label.
    ("x>1", &[], false),
    ("x>1", &[("x", "abc")], false),
    ("x>1", &[("x", "1")], false),
    ("x>10", &[("x", "9")], false),
    ("x>9", &[("x", "10")], true),
    ("x<1", &[("x", "-5")], true),
    ("x<5", &[("x", "+4")], true),
    ("x>1", &[("x", "99999999999999999999")], false),
    ("x>1", &[("x", " 2")], false),
    // Several requirements are ANDed.
    ("foo=bar,baz=blah", &[("foo", "bar"), ("baz", "blah")], true),
    (
        "foo=bar,foobar=bar,baz=blah",
        &[("foo", "bar"), ("baz", "blah")],
        false,
    ),
    (
        "app in (web,api),!canary,tier",
        &[("app", "api"), ("tier", "fe")],
        true,
    ),
    (
        "app in (web,api),!canary,tier",
        &[("app", "api"), ("tier", "fe"), ("canary", "")],
        false,
    ),
];

#[test]
fn matching_follows_upstream() {
    for (input, labels, expected) in MATCHES {
        let selector = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        let labels = set(labels);
        assert_eq!(
            selector.matches(&labels),
            *expected,
            "{input:?} on {labels:?}"
        );
        let hashed: HashMap<String, String> = labels.clone().into_iter().collect();
        assert_eq!(
            selector.matches(&hashed),
            *expected,
            "{input:?} on {labels:?}"
        );
    }
}

#[test]
fn requirement_new_checks_like_upstream() {
    type Case = (
        &'static str,
        Operator,
        &'static [&'static str],
        Option<&'static str>,
    );
    let long_key = "a".repeat(254);
    let long_value = "a".repeat(254);
    let cases: &[Case] = &[
        (
            "x1",
            Operator::In,
            &[],
            Some(
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
        ),
        (
            "x2",
            Operator::NotIn,
            &[],
            Some(
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
        ),
        ("x3", Operator::In, &["foo"], None),
        ("x4", Operator::NotIn, &["foo"], None),
        (
            "x5",
            Operator::Equals,
            &["foo", "bar"],
            Some(
                "values: Invalid value: [\"foo\",\"bar\"]: exact-match compatibility requires one single value",
            ),
        ),
        (
            "x5",
            Operator::NotEquals,
            &[],
            Some("values: Invalid value: []: exact-match compatibility requires one single value"),
        ),
        ("x6", Operator::Exists, &[], None),
        ("x7", Operator::DoesNotExist, &[], None),
        (
            "x8",
            Operator::Exists,
            &["foo"],
            Some(
                "values: Invalid value: [\"foo\"]: values set must be empty for exists and does not exist",
            ),
        ),
        ("x11", Operator::GreaterThan, &["1"], None),
        ("x12", Operator::LessThan, &["6"], None),
        (
            "x13",
            Operator::GreaterThan,
            &[],
            Some(
                "values: Invalid value: []: for 'Gt', 'Lt' operators, exactly one value is required",
            ),
        ),
        (
            "x14",
            Operator::GreaterThan,
            &["bar"],
            Some(
                "values[0]: Invalid value: \"bar\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
        ),
        (
            "x15",
            Operator::LessThan,
            &["bar"],
            Some(
                "values[0]: Invalid value: \"bar\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
        ),
        (
            "x17",
            Operator::Equals,
            &["a b"],
            Some("values[0][x17]: Invalid value: \"a b\": a valid label must be"),
        ),
        (
            "bad key",
            Operator::GreaterThan,
            &["z"],
            Some("[key: Invalid value: \"bad key\": name part must consist"),
        ),
    ];
    for (key, operator, values, expected) in cases {
        let result = Requirement::new(*key, *operator, values.iter().copied());
        match (result, expected) {
            (Ok(r), None) => {
                assert_eq!(r.key(), *key);
                assert_eq!(r.operator(), *operator);
                assert_eq!(r.values(), *values);
            }
            (Err(e), Some(message)) => {
                assert!(matches!(e, Error::InvalidRequirement(_)), "{e:?}");
                assert!(e.to_string().starts_with(message), "{key}: {e}");
            }
            (result, _) => panic!("{key} {operator}: {result:?}"),
        }
    }
    let e = Requirement::new(long_key.as_str(), Operator::Exists, Vec::<String>::new())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("key: Invalid value:"), "{e}");
    assert!(
        e.contains("name part must be no more than 63 characters"),
        "{e}"
    );
    let e = Requirement::new("x16", Operator::Equals, [long_value.as_str()])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("values[0][x16]: Invalid value:")
            && e.ends_with("must be no more than 63 characters"),
        "{e}"
    );
    let Err(Error::InvalidRequirement(list)) =
        Requirement::new("bad key", Operator::GreaterThan, ["z"])
    else {
        panic!("bad key accepted");
    };
    let fields: Vec<&str> = list.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["key", "values[0]"]);
}

#[test]
fn requires_exact_match_finds_pinned_values() {
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("x=a", "x", Some("a")),
        ("x==a", "x", Some("a")),
        ("x in (a)", "x", Some("a")),
        ("x=", "x", Some("")),
        ("x in (a,b)", "x", None),
        ("x!=a", "x", None),
        ("x notin (a)", "x", None),
        ("x", "x", None),
        ("x=a", "y", None),
        ("", "x", None),
        ("y=b,x=a", "x", Some("a")),
        // Only the first requirement on the key counts, as upstream.
        ("x,x=a", "x", None),
    ];
    for (input, key, expected) in cases {
        let selector = Selector::parse(input).unwrap();
        assert_eq!(
            selector.requires_exact_match(key),
            *expected,
            "{input:?} {key}"
        );
    }
}

#[test]
fn everything_nothing_and_sets() {
    let labels = set(&[("a", "b")]);
    assert!(Selector::everything().matches(&labels));
    assert!(Selector::everything().is_empty());
    assert_eq!(Selector::everything(), Selector::parse("").unwrap());
    assert!(!Selector::nothing().matches(&labels));
    assert!(!Selector::nothing().matches(&BTreeMap::new()));
    assert!(!Selector::nothing().is_empty());
    assert!(Selector::nothing().is_nothing());
    assert_eq!(Selector::nothing().to_string(), "");
    let still_nothing = Selector::nothing().with_requirements([Requirement::new(
        "a",
        Operator::Exists,
        Vec::<String>::new(),
    )
    .unwrap()]);
    assert!(still_nothing.is_nothing());

    let from_set = Selector::from_set(&set(&[("b", "2"), ("a", "1"), ("c", "")])).unwrap();
    assert_eq!(from_set.to_string(), "a=1,b=2,c=");
    assert!(from_set.matches(&set(&[("a", "1"), ("b", "2"), ("c", ""), ("d", "x")])));
    assert!(!from_set.matches(&set(&[("a", "1"), ("b", "2")])));
    assert!(Selector::from_set(&BTreeMap::new()).unwrap().is_empty());
    assert!(
        Selector::from_set(&set(&[("a", "not valid")]))
            .unwrap_err()
            .to_string()
            .starts_with("values[0][a]: Invalid value: \"not valid\"")
    );

    let added = Selector::parse("c=3,a=1")
        .unwrap()
        .with_requirements([Requirement::new("b", Operator::In, ["2"]).unwrap()]);
    assert_eq!(added.to_string(), "a=1,b in (2),c=3");
}

#[test]
fn label_selectors_convert_like_upstream() {
    type Case = (&'static str, Result<&'static str, &'static str>);
    let cases: &[Case] = &[
        ("{}", Ok("")),
        (
            r#"{"matchLabels":{"tier":"fe","app":"web"}}"#,
            Ok("app=web,tier=fe"),
        ),
        (
            r#"{"matchLabels":{"app":"web"},"matchExpressions":[{"key":"env","operator":"In","values":["prod","dev"]}]}"#,
            Ok("app=web,env in (dev,prod)"),
        ),
        (
            r#"{"matchExpressions":[{"key":"a","operator":"DoesNotExist"},{"key":"b","operator":"Exists"},{"key":"c","operator":"NotIn","values":["x"]}]}"#,
            Ok("!a,b,c notin (x)"),
        ),
        (
            r#"{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}"#,
            Err(
                "values: Invalid value: [\"x\"]: values set must be empty for exists and does not exist",
            ),
        ),
        (
            r#"{"matchExpressions":[{"key":"a","operator":"In","values":[]}]}"#,
            Err(
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
        ),
        (
            r#"{"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}"#,
            Err("\"Gt\" is not a valid label selector operator"),
        ),
        (
            r#"{"matchExpressions":[{"key":"a","operator":"in","values":["1"]}]}"#,
            Err("\"in\" is not a valid label selector operator"),
        ),
        (
            r#"{"matchLabels":{"a":"b c"}}"#,
            Err("values[0][a]: Invalid value: \"b c\": a valid label must be"),
        ),
        (
            r#"{"matchLabels":{"a b":"c"}}"#,
            Err("key: Invalid value: \"a b\": name part must consist"),
        ),
    ];
    for (json, expected) in cases {
        let selector: LabelSelector = serde_json::from_str(json).unwrap();
        match (Selector::try_from(&selector), expected) {
            (Ok(s), Ok(text)) => assert_eq!(s.to_string(), *text, "{json}"),
            (Err(e), Err(message)) => {
                assert!(e.to_string().starts_with(message), "{json}: {e}");
            }
            (result, _) => panic!("{json}: {result:?}"),
        }
    }
    let selector: LabelSelector = serde_json::from_str(cases[2].0).unwrap();
    assert_eq!(
        serde_json::to_string(&selector).unwrap(),
        r#"{"matchLabels":{"app":"web"},"matchExpressions":[{"key":"env","operator":"In","values":["prod","dev"]}]}"#
    );
    assert_eq!(
        serde_json::to_string(&LabelSelector::default()).unwrap(),
        "{}"
    );

    let absent = label_selector_as_selector(None).unwrap();
    assert!(absent.is_nothing());
    assert!(!absent.matches(&BTreeMap::new()));
    let empty = label_selector_as_selector(Some(&LabelSelector::default())).unwrap();
    assert!(empty.is_empty());
    assert!(empty.matches(&set(&[("any", "thing")])));
}
