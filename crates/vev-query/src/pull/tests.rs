//! Pull against the reference `VecSource`.

use vev_core::{Cardinality, ValueType};
use vev_datalog::parse_pull;

use super::*;
use crate::testing::{AttrDef, VecSource};

const ANN: EntityId = 1000;
const BOB: EntityId = 1001;
const CY: EntityId = 1002;
const ADDRESS: EntityId = 1100;
const ORDER: EntityId = 1200;
const PART: EntityId = 1400;
const MANY: EntityId = 1500;
const CHAIN: EntityId = 10_000;

fn attrs() -> Vec<AttrDef<'static>> {
    use Cardinality::{Many, One};
    use ValueType::{Long, Ref, String};
    vec![
        ("person/name", String, One, None, false),
        ("person/aka", String, Many, None, false),
        ("person/email", String, One, None, false),
        ("person/friend", Ref, Many, None, false),
        ("person/follows", Ref, One, None, false),
        ("person/address", Ref, One, None, true),
        ("address/street", String, One, None, false),
        ("order/line", Ref, Many, None, true),
        ("line/qty", Long, One, None, false),
        ("part/sub", Ref, One, None, true),
    ]
}

/// Ann, Bob and Cy are friends; Ann follows Bob, who follows Cy, who follows Ann.
fn db() -> VecSource {
    let s = Value::string;
    let mut facts = vec![
        (ANN, "person/name", s("Ann")),
        (ANN, "person/aka", s("A")),
        (ANN, "person/aka", s("Annie")),
        (ANN, "person/friend", Value::Ref(BOB)),
        (ANN, "person/friend", Value::Ref(CY)),
        (ANN, "person/follows", Value::Ref(BOB)),
        (ANN, "person/address", Value::Ref(ADDRESS)),
        (BOB, "person/name", s("Bob")),
        (BOB, "person/friend", Value::Ref(CY)),
        (BOB, "person/follows", Value::Ref(CY)),
        (CY, "person/name", s("Cy")),
        (CY, "person/follows", Value::Ref(ANN)),
        (ADDRESS, "address/street", s("Main")),
        (ORDER, "order/line", Value::Ref(ORDER + 1)),
        (ORDER, "order/line", Value::Ref(ORDER + 2)),
        (ORDER + 1, "line/qty", Value::Long(1)),
        (ORDER + 2, "line/qty", Value::Long(2)),
        (PART, "part/sub", Value::Ref(PART + 1)),
        (PART + 1, "part/sub", Value::Ref(PART)),
    ];
    for n in 0..1500 {
        facts.push((MANY, "person/aka", s(&format!("v{n:04}"))));
    }
    VecSource::of_facts(&attrs(), &facts)
}

fn run(src: &VecSource, pattern: &str, e: EntityId) -> Result<Edn, PullError> {
    let pattern = parse_pull(pattern).expect("test patterns parse");
    pull(src, &pattern, e)
}

/// Pull `pattern` from `e` and compare with the EDN text `expected`.
#[track_caller]
fn check(pattern: &str, e: EntityId, expected: &str) {
    let expected = vev_edn::parse(expected).expect("expected results parse");
    assert_eq!(run(&db(), pattern, e), Ok(expected), "pattern {pattern}");
}

#[track_caller]
fn check_err(pattern: &str, code: &str, message: &str) {
    let err = run(&db(), pattern, ANN).expect_err(pattern);
    assert_eq!((err.code(), err.to_string().as_str()), (code, message));
}

fn count(result: &Edn, key: &str) -> usize {
    let map = result.as_map().expect("a map");
    map[&Edn::keyword(key)].as_seq().map_or(0, <[Edn]>::len)
}

#[test]
fn card_one_and_many() {
    check(
        "[:person/name :person/aka]",
        ANN,
        r#"{:person/name "Ann" :person/aka ["A" "Annie"]}"#,
    );
    check("[:person/email]", ANN, "nil");
}

#[test]
fn db_id() {
    check(
        "[:db/id :person/name]",
        BOB,
        r#"{:db/id 1001 :person/name "Bob"}"#,
    );
    check("[:db/id]", 123_456, "{:db/id 123456}");
    check("[:db/id]", u64::MAX, "{:db/id 18446744073709551615N}");
}

#[test]
fn missing_entity_is_nil() {
    check("[:person/name :person/_friend]", 999, "nil");
    check("[]", ANN, "nil");
    check("[*]", 999, "{:db/id 999}");
}

#[test]
fn wildcard() {
    let ann = r#"{:db/id 1000 :person/name "Ann" :person/aka ["A" "Annie"]
        :person/friend [{:db/id 1001} {:db/id 1002}] :person/follows {:db/id 1001}
        :person/address {:db/id 1100 :address/street "Main"}}"#;
    check("[*]", ANN, ann);
    check("[* :person/name]", ANN, ann);
}

#[test]
fn wildcard_yields_to_explicit_specs() {
    check(
        "[* [:person/aka :as :alias] {:person/friend [:person/name]} [:db/id :as :id]]",
        ANN,
        r#"{:id 1000 :alias ["A" "Annie"] :person/name "Ann" :person/follows {:db/id 1001}
            :person/friend [{:person/name "Bob"} {:person/name "Cy"}]
            :person/address {:db/id 1100 :address/street "Main"}}"#,
    );
}

#[test]
fn limit() {
    let src = db();
    let aka = |pattern: &str| count(&run(&src, pattern, MANY).expect("pulls"), "person/aka");
    assert_eq!(aka("[:person/aka]"), PULL_LIMIT_DEFAULT);
    assert_eq!(aka("[*]"), PULL_LIMIT_DEFAULT);
    assert_eq!(aka("[[:person/aka :limit 1200]]"), 1200);
    assert_eq!(aka("[(limit :person/aka nil)]"), 1500);
    check(
        "[[:person/aka :limit 2]]",
        MANY,
        r#"{:person/aka ["v0000" "v0001"]}"#,
    );
    check("[[:person/aka :limit 0]]", MANY, "nil");
    check(
        "[[:person/_friend :limit 1]]",
        CY,
        "{:person/_friend [{:db/id 1000}]}",
    );
    check(
        "[{(limit :person/friend 1) [:person/name]}]",
        ANN,
        r#"{:person/friend [{:person/name "Bob"}]}"#,
    );
}

#[test]
fn as_key() {
    check(
        r#"[[:person/name :as "Name"] [:person/aka :as :alias]]"#,
        ANN,
        r#"{"Name" "Ann" :alias ["A" "Annie"]}"#,
    );
}

#[test]
fn default() {
    check(
        r#"[:person/name [:person/email :default "none"]]"#,
        BOB,
        r#"{:person/name "Bob" :person/email "none"}"#,
    );
    check(
        r#"[(default :person/email "none")]"#,
        999,
        r#"{:person/email "none"}"#,
    );
    check(
        "[[:person/email :as :mail :default false]]",
        ANN,
        "{:mail false}",
    );
    check(
        "[[:person/_friend :default :nobody]]",
        ANN,
        "{:person/_friend :nobody}",
    );
    check(
        "[[:person/name :default :unused]]",
        ANN,
        r#"{:person/name "Ann"}"#,
    );
}

#[test]
fn nested_map() {
    check(
        "[{:person/follows [:person/name]}]",
        ANN,
        r#"{:person/follows {:person/name "Bob"}}"#,
    );
    check(
        "[:person/name {:person/friend [:person/name {:person/friend [:db/id]}]}]",
        ANN,
        r#"{:person/name "Ann" :person/friend [{:person/name "Bob" :person/friend [{:db/id 1002}]}
                                             {:person/name "Cy"}]}"#,
    );
    // Nested pulls that find nothing are dropped, and so is an attribute left empty.
    check(
        "[:person/name {:person/friend [:person/email]}]",
        ANN,
        r#"{:person/name "Ann"}"#,
    );
    // Seen entities are tracked per path: Bob appears fully under both attributes.
    check(
        "[{:person/friend [:person/name] :person/follows [:person/name]}]",
        ANN,
        r#"{:person/friend [{:person/name "Bob"} {:person/name "Cy"}]
            :person/follows {:person/name "Bob"}}"#,
    );
}

#[test]
fn reverse() {
    check(
        "[:person/_friend]",
        CY,
        "{:person/_friend [{:db/id 1000} {:db/id 1001}]}",
    );
    check(
        "[{:person/_friend [:person/name]}]",
        CY,
        r#"{:person/_friend [{:person/name "Ann"} {:person/name "Bob"}]}"#,
    );
    check(
        "[:person/_follows]",
        ANN,
        "{:person/_follows [{:db/id 1002}]}",
    );
}

#[test]
fn reverse_component_is_single() {
    check(
        "[:person/_address]",
        ADDRESS,
        "{:person/_address {:db/id 1000}}",
    );
    check(
        "[{:person/_address [:person/name]}]",
        ADDRESS,
        r#"{:person/_address {:person/name "Ann"}}"#,
    );
    check("[:order/_line]", ORDER + 2, "{:order/_line {:db/id 1200}}");
}

#[test]
fn component_expansion() {
    let lines = "{:order/line [{:db/id 1201 :line/qty 1} {:db/id 1202 :line/qty 2}]}";
    check("[:order/line]", ORDER, lines);
    check("[*]", ORDER, &format!("{{:db/id 1200 {}", &lines[1..]));
    // A sub-pattern overrides the expansion.
    check(
        "[{:order/line [:line/qty]}]",
        ORDER,
        "{:order/line [{:line/qty 1} {:line/qty 2}]}",
    );
    // Expansion stops at an entity it already expanded on the path.
    check(
        "[*]",
        PART,
        "{:db/id 1400 :part/sub {:db/id 1401 :part/sub {:db/id 1400 :part/sub {:db/id 1401}}}}",
    );
}

#[test]
fn recursion_unbounded_with_cycle() {
    // Ann -> Bob -> Cy -> Ann: the second visit of Bob on the path is only its id.
    check(
        "[:person/name {:person/follows ...}]",
        ANN,
        r#"{:person/name "Ann" :person/follows {:person/name "Bob" :person/follows
             {:person/name "Cy" :person/follows {:person/name "Ann" :person/follows
               {:db/id 1001}}}}}"#,
    );
}

#[test]
fn recursion_depth_limit() {
    check(
        "[:person/name {:person/follows 2}]",
        ANN,
        r#"{:person/name "Ann" :person/follows {:person/name "Bob" :person/follows
             {:person/name "Cy"}}}"#,
    );
    check(
        "[:person/name {:person/follows 0}]",
        ANN,
        r#"{:person/name "Ann"}"#,
    );
    // Each map entry has its own budget; an entity seen on the path is its id even where
    // the budget is spent (Cy, at the end).
    check(
        "[:db/id {:person/follows 1 :person/friend 1}]",
        ANN,
        "{:db/id 1000 :person/follows {:db/id 1001 :person/friend [{:db/id 1002}]}
          :person/friend [{:db/id 1001 :person/follows {:db/id 1002}}
                          {:db/id 1002 :person/follows {:db/id 1000
                                                        :person/friend [{:db/id 1002}]}}]}",
    );
}

#[test]
fn recursion_long_chain_is_capped() {
    let n = 100_000;
    let follows = |i: u64| (CHAIN + i, "person/follows", Value::Ref(CHAIN + i + 1));
    let facts: Vec<_> = (0..n).map(follows).collect();
    let src = VecSource::of_facts(&attrs(), &facts);
    let result = run(&src, "[:db/id {:person/follows ...}]", CHAIN).expect("pulls");
    let (id, next) = (Edn::keyword("db/id"), Edn::keyword("person/follows"));
    let mut level = &result;
    let mut depth = 0;
    while let Some(inner) = level.as_map().and_then(|m| m.get(&next)) {
        level = inner;
        depth += 1;
    }
    assert_eq!(depth, PULL_DEPTH_MAX + 1);
    let last = level.as_map().expect("a map");
    assert_eq!(last.get(&id), Some(&id_edn(CHAIN + depth as u64)));
    assert_eq!(last.len(), 1);
    // The capped result prints as EDN that reads back.
    assert_eq!(vev_edn::parse(&result.to_string()), Ok(result));
}

#[test]
fn pull_many_in_order() {
    let pattern = parse_pull("[:person/name]").expect("parses");
    let got = pull_many(&db(), &pattern, &[BOB, 999, ANN]);
    let want = [r#"{:person/name "Bob"}"#, "nil", r#"{:person/name "Ann"}"#];
    let want = want.map(|text| vev_edn::parse(text).expect("parses"));
    assert_eq!(got, Ok(want.to_vec()));
}

#[test]
fn unknown_attribute() {
    let message = "the pull pattern names :person/age, which is not an attribute of this database";
    check_err("[:person/age]", "pull/unknown-attribute", message);
    check_err(
        "[{:person/friend [:person/age]}]",
        "pull/unknown-attribute",
        message,
    );
    check_err(
        "[:db.type/long]",
        "pull/unknown-attribute",
        "the pull pattern names :db.type/long, which is not an attribute of this database",
    );
    check_err(
        "[:person/_nope]",
        "pull/unknown-attribute",
        "the pull pattern names :person/_nope, which is not an attribute of this database",
    );
}

#[test]
fn invalid_reverse_and_not_a_ref() {
    let reverse = "reverse attribute :person/_name needs :person/name to be a ref attribute";
    check_err("[:person/_name]", "pull/invalid-reverse", reverse);
    let id = "reverse attribute :db/_id needs :db/id to be a ref attribute";
    check_err("[:db/_id]", "pull/invalid-reverse", id);
    let map = ":person/name is not a ref attribute, so it cannot have a sub-pattern or recursion";
    check_err("[{:person/name [:db/id]}]", "pull/not-a-ref", map);
    check_err(
        "[{:db/id ...}]",
        "pull/not-a-ref",
        &map.replace("person/name", "db/id"),
    );
}

/// Any pattern over known and unknown attributes, from any entity: a result or one of the
/// documented errors, never a panic.
mod arbitrary {
    use std::sync::OnceLock;

    use proptest::prelude::*;

    use super::*;

    fn attr() -> impl Strategy<Value = PullAttr> {
        const NAMES: [&str; 13] = [
            "db/id",
            "db/_id",
            "person/name",
            "person/aka",
            "person/friend",
            "person/_friend",
            "person/follows",
            "person/_address",
            "order/line",
            "order/_line",
            "part/sub",
            "person/_name",
            "nope/x",
        ];
        let limit = prop::option::of(prop::option::of(0usize..3));
        let default = prop::option::of(Just(Edn::keyword("d")));
        (
            prop::sample::select(&NAMES[..]),
            limit,
            default,
            any::<bool>(),
        )
            .prop_map(|(name, limit, default, renamed)| PullAttr {
                attr: Keyword::new(name),
                as_key: renamed.then(|| Edn::string(name)),
                limit,
                default,
            })
    }

    fn pattern() -> impl Strategy<Value = PullPattern> {
        let leaf = prop_oneof![Just(PullElem::Wildcard), attr().prop_map(PullElem::Attr)];
        let elems = prop::collection::vec(leaf, 0..4);
        let leaf_pattern = elems.prop_map(|elems| PullPattern { elems });
        leaf_pattern.prop_recursive(3, 24, 4, |inner| {
            let sub = prop_oneof![
                inner.clone().prop_map(PullSub::Pattern),
                prop::option::of(0usize..3).prop_map(PullSub::Recurse),
            ];
            let map = prop::collection::vec((attr(), sub), 1..3).prop_map(PullElem::Map);
            let elem = prop_oneof![
                map,
                attr().prop_map(PullElem::Attr),
                Just(PullElem::Wildcard)
            ];
            prop::collection::vec(elem, 0..4).prop_map(|elems| PullPattern { elems })
        })
    }

    fn entity() -> impl Strategy<Value = EntityId> {
        prop_oneof![
            prop::sample::select(vec![ANN, BOB, CY, ADDRESS, ORDER, ORDER + 2, PART, MANY]),
            any::<u64>(),
        ]
    }

    proptest! {
        #[test]
        fn pull_never_panics(pattern in pattern(), es in prop::collection::vec(entity(), 1..4)) {
            static DB: OnceLock<VecSource> = OnceLock::new();
            let src = DB.get_or_init(db);
            match pull_many(src, &pattern, &es) {
                Ok(results) => prop_assert_eq!(results.len(), es.len()),
                Err(err) => prop_assert!(
                    ["pull/unknown-attribute", "pull/invalid-reverse", "pull/not-a-ref"]
                        .contains(&err.code()),
                    "{err}"
                ),
            }
        }
    }
}

#[test]
fn history_view() {
    let src = db().with_history(true);
    let err = run(&src, "[:person/name]", ANN).expect_err("refused");
    assert_eq!(err.code(), "pull/history-view");
}
