//! The workload's queries, as the files under `queries/mbrainz/` hold them, with the inputs
//! the reference runs them with.

/// The rule set (`queries/mbrainz/rules.edn`), the `%` input of the queries that call rules.
pub const RULES: &str = include_str!("../../../queries/mbrainz/rules.edn");

/// A query of the workload.
#[derive(Clone, Copy, Debug)]
pub struct NamedQuery {
    /// `q1` ... `q9`, `collab-net-10`, `artist`, `track-count`, `name-length`.
    pub name: &'static str,
    /// Its file under `queries/mbrainz/` (`q1.edn`).
    pub file: &'static str,
    /// The query's text (the file's contents).
    pub text: &'static str,
    /// Whether its second input is the rule set (`:in $ % ...`).
    pub rules: bool,
    /// The input after `$` (and `%`), as EDN text; `None` for queries without one.
    pub input: Option<&'static str>,
    /// Query 8: run a second time on the first run's result (as `[[?aname]]` rows).
    pub feeds_itself: bool,
}

macro_rules! query {
    ($name:literal, $rules:expr, $input:expr) => {
        query!($name, $rules, $input, false)
    };
    ($name:literal, $rules:expr, $input:expr, $feeds:expr) => {
        NamedQuery {
            name: $name,
            file: concat!($name, ".edn"),
            text: include_str!(concat!("../../../queries/mbrainz/", $name, ".edn")),
            rules: $rules,
            input: $input,
            feeds_itself: $feeds,
        }
    };
}

/// The nine queries of the sample, in order.
pub const NINE: [NamedQuery; 9] = [
    query!("q1", false, Some(r#""John Lennon""#)),
    query!("q2", false, Some(r#""John Lennon""#)),
    query!("q3", false, Some(r#""John Lennon""#)),
    query!("q4", true, Some(r#""John Lennon""#)),
    query!("q5", true, Some(r#""always""#)),
    query!(
        "q6",
        true,
        Some(r#"["John Lennon" "Paul McCartney" "George Harrison" "Ringo Starr"]"#)
    ),
    query!("q7", true, Some(r#"["George Harrison"]"#)),
    query!("q8", true, Some(r#"[["Diana Ross"]]"#), true),
    query!("q9", false, Some(r#""Bill Withers""#)),
];

/// The queries beyond the nine: the depth-10 collaboration network, the artist query and the
/// two aggregates of Datomic's documentation.
pub const EXTRA: [NamedQuery; 4] = [
    query!("collab-net-10", true, Some(r#"["George Harrison"]"#)),
    query!("artist", false, Some(r#""Janis Joplin""#)),
    query!("track-count", false, None),
    query!("name-length", false, None),
];

/// Every query: the nine, then the extra ones.
pub fn all() -> impl Iterator<Item = &'static NamedQuery> {
    NINE.iter().chain(EXTRA.iter())
}
