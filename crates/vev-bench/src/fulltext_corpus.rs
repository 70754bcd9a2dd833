//! The corpus and the query set of the `fulltext` benchmark.
//!
//! Every document comes from a fixed-seed SplitMix64 generator, so every run and every engine
//! indexes the same text, and nothing is downloaded. Two kinds of document, mixed as a music
//! catalogue would mix them:
//! - names (three in five): one to four words of track and album titles ("Intro", "Love",
//!   "Always", ...) or a standard recorded many times ("Crazy in Love"), now and then an
//!   artist whose name has diacritics ("Beyoncé", "Björk", "Café Tacvba") and a suffix
//!   ("(Live)", "Remix", "Part 2"). Few distinct words, each
//!   very frequent: the short, repetitive documents where BM25's length normalization and
//!   the common terms' long posting lists matter;
//! - descriptions (two in five): 20 to 60 words drawn from a vocabulary of a few thousand
//!   words with Zipf-distributed frequencies (the word of rank `r` has weight `1/r`): a few
//!   very common words ("the", "of"), a long tail of rare ones, as in natural text.
//!
//! The words hold no apostrophes, digits with dots or letters without a canonical
//! decomposition (`ß`, `ø`): the three engines split and fold those differently (Vev keeps
//! `don't` as one term, tantivy's and FTS5's tokenizers split it), and the benchmark wants
//! the same documents to match the same queries in all three.

use crate::fixture::SplitMix64;

/// The corpus seed.
pub const SEED: u64 = 0x5EED_F7F7;

/// Title words, in rough order of frequency (the generator picks them Zipf-like too).
const TITLE_WORDS: [&str; 64] = [
    "Love",
    "Intro",
    "Always",
    "Night",
    "Heart",
    "Crazy",
    "in",
    "the",
    "Dance",
    "Forever",
    "You",
    "Me",
    "Home",
    "Blue",
    "Song",
    "Dream",
    "Fire",
    "Rain",
    "Summer",
    "Girl",
    "Baby",
    "Light",
    "Time",
    "Life",
    "World",
    "Star",
    "Moon",
    "Outro",
    "Interlude",
    "Angel",
    "Sweet",
    "Gold",
    "River",
    "Road",
    "Wild",
    "Young",
    "Lonely",
    "Midnight",
    "Paradise",
    "Stay",
    "Tonight",
    "Again",
    "Alone",
    "Never",
    "Goodbye",
    "Hello",
    "Kiss",
    "Lover",
    "Loving",
    "Lovely",
    "Shadow",
    "Silence",
    "Storm",
    "Sun",
    "Train",
    "Wind",
    "Winter",
    "Yesterday",
    "Zero",
    "Echo",
    "Mirror",
    "Ocean",
    "Velvet",
    "Sky",
];

/// Artists (with diacritics that fold: `é`, `ö`, `ó`, `ñ`, `ü`, `å`, `í`).
const ARTISTS: [&str; 12] = [
    "Beyoncé",
    "Björk",
    "Café Tacvba",
    "Sigur Rós",
    "Mötley Crüe",
    "Señorita",
    "Zoë Keating",
    "Ángel Parra",
    "Déjà Vu",
    "Hüsker Dü",
    "Måneskin",
    "Joaquín Sabina",
];

/// Titles many artists have recorded, used whole (one name in twenty): the phrase queries'
/// targets.
const STANDARDS: [&str; 8] = [
    "Crazy in Love",
    "Love Song",
    "Always on My Mind",
    "Silent Night",
    "Summer of Love",
    "Love Me Tender",
    "Blue Moon",
    "Intro",
];

const SUFFIXES: [&str; 6] = ["(Live)", "Remix", "Part 2", "(Acoustic)", "Reprise", "Edit"];

/// The most frequent words of the descriptions, in rank order; rarer ranks are made up.
const COMMON_WORDS: [&str; 48] = [
    "the", "of", "and", "a", "in", "to", "with", "is", "for", "on", "by", "from", "album", "track",
    "recorded", "live", "song", "band", "first", "single", "released", "studio", "version",
    "guitar", "piano", "vocals", "drums", "love", "night", "tour", "record", "label", "producer",
    "written", "chart", "radio", "original", "early", "later", "sound", "style", "debut",
    "session", "lyrics", "melody", "rhythm", "bass", "remix",
];

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ra", "ven", "tor", "sa", "el", "dun", "bri", "mor", "the", "qui", "zan",
    "pol", "rek", "ti", "nus", "gar", "fel", "wy", "osk", "bel", "tra",
];

/// Words in the description vocabulary.
pub const VOCABULARY_WORDS: usize = 4_000;

/// The generated documents: `texts[i]` is the document with `:doc/id` `i + 1`.
pub struct Corpus {
    pub texts: Vec<String>,
    /// The description vocabulary, most frequent first (the query set picks rare words here).
    pub vocabulary: Vec<String>,
}

impl Corpus {
    pub fn id(i: usize) -> u64 {
        i as u64 + 1
    }
}

/// A sampler of ranks `0..n` with weight `1/(r+1)`: a cumulative table and a binary search.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect();
        Zipf { cumulative }
    }

    fn sample(&self, rng: &mut SplitMix64) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1)
    }
}

/// The description vocabulary: the common words, then made-up words of two or three
/// syllables, distinct, `VOCABULARY_WORDS` in all.
fn vocabulary() -> Vec<String> {
    let mut words: Vec<String> = COMMON_WORDS.iter().map(|w| (*w).to_owned()).collect();
    let mut seen: std::collections::HashSet<String> = words.iter().cloned().collect();
    let s = SYLLABLES.len();
    let mut k = 0usize;
    while words.len() < VOCABULARY_WORDS {
        let (a, b, c) = (k % s, (k / s) % s, (k / (s * s)) % (s + 1));
        k += 1;
        let mut w = format!("{}{}", SYLLABLES[a], SYLLABLES[(a + b * 7 + 3) % s]);
        if c > 0 {
            w.push_str(SYLLABLES[c - 1]);
        }
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

fn name(rng: &mut SplitMix64, titles: &Zipf) -> String {
    let mut parts: Vec<&str> = if rng.below(20) == 0 {
        vec![STANDARDS[rng.below(STANDARDS.len() as u64) as usize]]
    } else {
        let words = 1 + rng.below(4) as usize;
        (0..words)
            .map(|_| TITLE_WORDS[titles.sample(rng)])
            .collect()
    };
    if rng.below(6) == 0 {
        parts.push(ARTISTS[rng.below(ARTISTS.len() as u64) as usize]);
    }
    if rng.below(8) == 0 {
        parts.push(SUFFIXES[rng.below(SUFFIXES.len() as u64) as usize]);
    }
    parts.join(" ")
}

fn description(rng: &mut SplitMix64, vocabulary: &[String], words: &Zipf) -> String {
    let len = 20 + rng.below(41) as usize;
    let mut out = String::with_capacity(len * 7);
    for i in 0..len {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&vocabulary[words.sample(rng)]);
    }
    out.push('.');
    out
}

/// `docs` documents from `seed`.
pub fn generate(seed: u64, docs: usize) -> Corpus {
    let vocabulary = vocabulary();
    let words = Zipf::new(vocabulary.len());
    let titles = Zipf::new(TITLE_WORDS.len());
    let mut rng = SplitMix64::new(seed);
    let texts = (0..docs)
        .map(|_| {
            if rng.below(5) < 3 {
                name(&mut rng, &titles)
            } else {
                description(&mut rng, &vocabulary, &words)
            }
        })
        .collect();
    Corpus { texts, vocabulary }
}

/// One thing to look for, as the user writes it (each engine analyzes it itself).
#[derive(Clone, Debug)]
pub enum Atom {
    /// A word.
    Term(String),
    /// Words starting with this.
    Prefix(String),
    /// Words at consecutive positions.
    Phrase(String),
}

/// Atoms a document must all match, and atoms it must match none of.
#[derive(Clone, Debug)]
pub struct Group {
    pub must: Vec<Atom>,
    pub not: Vec<Atom>,
}

/// One query of the set: documents matching any of its groups.
#[derive(Clone, Debug)]
pub struct FtQuerySpec {
    pub name: &'static str,
    pub groups: Vec<Group>,
}

impl FtQuerySpec {
    /// Vev's query text (`docs/fulltext.md`): `a b -c OR "d e" f*`.
    pub fn vev_text(&self) -> String {
        let atom = |a: &Atom| match a {
            Atom::Term(t) => t.clone(),
            Atom::Prefix(p) => format!("{p}*"),
            Atom::Phrase(p) => format!("\"{p}\""),
        };
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|g| {
                let must = g.must.iter().map(atom);
                let not = g.not.iter().map(|a| format!("-{}", atom(a)));
                must.chain(not).collect::<Vec<_>>().join(" ")
            })
            .collect();
        groups.join(" OR ")
    }

    /// FTS5's MATCH text: every atom a quoted string (so FTS5 tokenizes it with the
    /// table's tokenizer), `AND`, `NOT` and `OR` explicit and parenthesized.
    pub fn fts5_text(&self) -> String {
        let atom = |a: &Atom| match a {
            Atom::Term(t) | Atom::Phrase(t) => format!("\"{t}\""),
            Atom::Prefix(p) => format!("\"{p}\"*"),
        };
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|g| {
                let must: Vec<String> = g.must.iter().map(atom).collect();
                let mut text = format!("({})", must.join(" AND "));
                if !g.not.is_empty() {
                    let not: Vec<String> = g.not.iter().map(atom).collect();
                    text = format!("({text} NOT ({}))", not.join(" OR "));
                }
                text
            })
            .collect();
        groups.join(" OR ")
    }
}

fn term(t: &str) -> Atom {
    Atom::Term(t.to_owned())
}

fn all(must: Vec<Atom>) -> Group {
    Group { must, not: vec![] }
}

fn spec(name: &'static str, groups: Vec<Group>) -> FtQuerySpec {
    FtQuerySpec { name, groups }
}

/// The fixed query set: common and rare single terms, folded diacritics, conjunctions, phrases,
/// prefixes, disjunctions and exclusions. The rare terms are the vocabulary's words of rank
/// 1,500 and 3,900 (about one description in 60 and one in 230 holds each).
pub fn query_set(corpus: &Corpus) -> Vec<FtQuerySpec> {
    let rare = |rank: usize| corpus.vocabulary[rank.min(corpus.vocabulary.len() - 1)].clone();
    let (rare1, rare2) = (rare(1_500), rare(3_900));
    vec![
        spec("term common: love", vec![all(vec![term("love")])]),
        spec("term common: the", vec![all(vec![term("the")])]),
        spec("term: intro", vec![all(vec![term("intro")])]),
        spec("term: always", vec![all(vec![term("always")])]),
        spec("term folded: Beyoncé", vec![all(vec![term("Beyoncé")])]),
        spec("term folded: bjork", vec![all(vec![term("bjork")])]),
        spec("term folded: cafe", vec![all(vec![term("cafe")])]),
        spec("term rare: rank 1500", vec![all(vec![term(&rare1)])]),
        spec("term rare: rank 3900", vec![all(vec![term(&rare2)])]),
        spec(
            "and: love night",
            vec![all(vec![term("love"), term("night")])],
        ),
        spec(
            "and common+rare",
            vec![all(vec![term("the"), term(&rare1)])],
        ),
        spec(
            "and: crazy in love",
            vec![all(vec![term("crazy"), term("in"), term("love")])],
        ),
        spec(
            "phrase: \"crazy in love\"",
            vec![all(vec![Atom::Phrase("crazy in love".into())])],
        ),
        spec(
            "phrase: \"of the\"",
            vec![all(vec![Atom::Phrase("of the".into())])],
        ),
        spec("prefix: lov*", vec![all(vec![Atom::Prefix("lov".into())])]),
        spec("prefix: mi*", vec![all(vec![Atom::Prefix("mi".into())])]),
        spec(
            "or: intro OR outro",
            vec![all(vec![term("intro")]), all(vec![term("outro")])],
        ),
        spec(
            "or: björk OR beyonce",
            vec![all(vec![term("björk")]), all(vec![term("beyonce")])],
        ),
        spec(
            "not: love -crazy",
            vec![Group {
                must: vec![term("love")],
                not: vec![term("crazy")],
            }],
        ),
        spec(
            "not: always -live -remix",
            vec![Group {
                must: vec![term("always")],
                not: vec![term("live"), term("remix")],
            }],
        ),
        spec(
            "mixed: \"love song\" OR night -the",
            vec![
                all(vec![Atom::Phrase("love song".into())]),
                Group {
                    must: vec![term("night")],
                    not: vec![term("the")],
                },
            ],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_deterministic_with_both_kinds() {
        let a = generate(SEED, 2_000);
        let b = generate(SEED, 2_000);
        assert_eq!(a.texts, b.texts);
        assert_eq!(a.vocabulary.len(), VOCABULARY_WORDS);
        let long = a
            .texts
            .iter()
            .filter(|t| t.split(' ').count() >= 20)
            .count();
        assert!((600..1_000).contains(&long), "{long} descriptions of 2,000");
        assert!(a.texts.iter().any(|t| t.contains("Beyoncé")));
        let distinct: std::collections::HashSet<&String> = a.vocabulary.iter().collect();
        assert_eq!(distinct.len(), VOCABULARY_WORDS);
    }

    #[test]
    fn zipf_favours_low_ranks() {
        let z = Zipf::new(1_000);
        let mut rng = SplitMix64::new(1);
        let mut counts = [0usize; 1_000];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        // Weight 1/r: rank 0 about twice rank 1 and about ten times rank 9.
        let ratio = counts[0] as f64 / counts[9] as f64;
        assert!((7.0..13.0).contains(&ratio), "rank 0 / rank 9 = {ratio}");
        assert!(counts[0] > counts[1] && counts[1] > counts[50]);
    }

    #[test]
    fn query_texts_per_engine() {
        let q = spec(
            "x",
            vec![
                Group {
                    must: vec![term("love"), Atom::Prefix("cr".into())],
                    not: vec![term("live")],
                },
                all(vec![Atom::Phrase("in the".into())]),
            ],
        );
        assert_eq!(q.vev_text(), "love cr* -live OR \"in the\"");
        assert_eq!(
            q.fts5_text(),
            "((\"love\" AND \"cr\"*) NOT (\"live\")) OR (\"in the\")"
        );
    }
}
