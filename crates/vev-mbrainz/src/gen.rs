//! The generator: artists, abstract releases, releases, media and tracks in the shape of the
//! MusicBrainz 1968-1973 subset, as transactions for `Connection::bulk_load`.
//!
//! Everything is drawn from one SplitMix64 sequence with a fixed seed, in a fixed order, so a
//! scale always yields the same transactions (and the same datoms, entity ids included).
//!
//! The shape:
//! - **Artists** come first, in transactions of 1,000. Releases per artist follow a Pareto law
//!   (tail index 1.25, at most 250): most artists have one or two, a few have hundreds. The
//!   named artists of the queries (the Beatles and their circle, Diana Ross and Motown, Bill
//!   Withers, Janis Joplin) have fixed counts at every scale: John Lennon 21 releases.
//! - **Scenes**: artists are grouped into scenes (the named ones into theirs; the others in
//!   runs of a Pareto-distributed size, most alone, some up to 60). A track is credited to
//!   one or two more artists of its artist's scene with the scene's collaboration rate
//!   (12%, 20-35% in the named scenes). Each named scene is also linked to a few generated
//!   scenes (the first ones of 30 artists or more), which 8% of its co-credits go to. So the
//!   collaboration graph has real fan-out inside a scene, and the named artists' connected
//!   parts have a size that the scale, not chance, decides.
//! - **Releases** are grouped into abstract releases (an album and its reissues in other
//!   countries and formats: 1 to 5 releases), which share their name and their track list
//!   (names, durations, artists); each release has its own media and track entities, as in
//!   MusicBrainz, so track names repeat across releases. Years 1968-1973.
//! - **Track names**: 15% are "standards" (a pool of 20,000 titles drawn by a Zipf law of
//!   exponent 0.7, so that the same title is recorded by many artists; the most recorded is
//!   about 0.24% of all tracks), about 3% of first and last tracks are "Intro"/"Outro" and
//!   their bracketed forms, the rest are made of 1 to 4 words (mostly 2 or 3) drawn by a Zipf
//!   law of exponent 0.6 over a word list (with a few accented words); 0.2% start with
//!   "Always".

use std::sync::Arc;

use vev::{EntityRef, Keyword, TempId, TxMap, TxOp, TxValue, Value};

use crate::names::{capitalize, BOOKENDS, FIRST, GROUP_WORDS, LAST, LINKS, TITLE_WORDS};
use crate::rng::{Rng, Zipf};
use crate::schema::{COUNTRIES, FORMATS, PACKAGINGS, RELEASE_TYPES};

/// How much data to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// About 100,000 datoms: for tests.
    Tiny,
    /// About 1M datoms.
    Small,
    /// About 10M datoms, the order of the real subset.
    Medium,
    /// About 50M datoms.
    Large,
}

impl Scale {
    /// The scale named `tiny`, `small`, `medium` or `large`.
    pub fn parse(name: &str) -> Option<Scale> {
        match name {
            "tiny" => Some(Scale::Tiny),
            "small" => Some(Scale::Small),
            "medium" => Some(Scale::Medium),
            "large" => Some(Scale::Large),
            _ => None,
        }
    }

    /// The scale's name, as `parse` reads it.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny",
            Scale::Small => "small",
            Scale::Medium => "medium",
            Scale::Large => "large",
        }
    }

    /// Releases to generate (about 61 datoms each, with their share of artists).
    pub fn releases(self) -> usize {
        match self {
            Scale::Tiny => 1_650,
            Scale::Small => 16_500,
            Scale::Medium => 165_000,
            Scale::Large => 825_000,
        }
    }
}

/// The fixed seed of every data set.
pub const SEED: u64 = 0x6d62_7261_696e_7a31; // "mbrainz1"

const ARTISTS_PER_TX: usize = 1_000;
/// A release transaction is closed once it holds this many datoms, about.
const TX_DATOMS: usize = 5_000;
/// Titles recorded by many artists, and the Zipf exponent of their popularity: the most
/// recorded one is about 1.6% of the standards drawn (0.24% of all tracks), as a much
/// covered song is in a real catalogue.
const STANDARDS: usize = 20_000;
const STANDARD_ZIPF: f64 = 0.7;
/// The Zipf exponent of title words: the commonest word ("love") is about 4.6% of them.
const WORD_ZIPF: f64 = 0.6;

/// A named artist of the queries: name, group or not, female or not, country, releases.
struct Named {
    name: &'static str,
    group: bool,
    female: bool,
    country: &'static str,
    releases: usize,
}

const fn person(name: &'static str, female: bool, country: &'static str, releases: usize) -> Named {
    Named {
        name,
        group: false,
        female,
        country,
        releases,
    }
}

const fn group(name: &'static str, country: &'static str, releases: usize) -> Named {
    Named {
        name,
        group: true,
        female: false,
        country,
        releases,
    }
}

/// The named scenes: collaboration rate, how many generated scenes they are linked to (their
/// session musicians and guests), and members.
const NAMED_SCENES: &[(f64, usize, &[Named])] = &[
    (
        0.35,
        3,
        &[
            group("The Beatles", "United Kingdom", 30),
            person("John Lennon", false, "United Kingdom", 21),
            person("Paul McCartney", false, "United Kingdom", 18),
            person("George Harrison", false, "United Kingdom", 12),
            person("Ringo Starr", false, "United Kingdom", 9),
            person("Yoko Ono", true, "Japan", 6),
            group("Plastic Ono Band", "United Kingdom", 4),
            person("Billy Preston", false, "United States", 5),
            person("Eric Clapton", false, "United Kingdom", 8),
            person("Ravi Shankar", false, "India", 4),
            person("Harry Nilsson", false, "United States", 5),
            group("Badfinger", "United Kingdom", 4),
            person("Klaus Voormann", false, "Germany", 2),
        ],
    ),
    (
        0.30,
        2,
        &[
            person("Diana Ross", true, "United States", 25),
            group("The Supremes", "United States", 20),
            person("Marvin Gaye", false, "United States", 15),
            person("Stevie Wonder", false, "United States", 14),
            person("Smokey Robinson", false, "United States", 10),
            group("The Temptations", "United States", 12),
            person("Tammi Terrell", true, "United States", 4),
            person("Gladys Knight", true, "United States", 8),
            group("The Jackson 5", "United States", 8),
        ],
    ),
    (
        0.20,
        1,
        &[
            person("Bill Withers", false, "United States", 8),
            person("Booker T. Jones", false, "United States", 5),
            person("Grover Washington Jr.", false, "United States", 4),
        ],
    ),
    (
        0.30,
        1,
        &[
            person("Janis Joplin", true, "United States", 6),
            group("Big Brother and the Holding Company", "United States", 4),
        ],
    ),
];

/// The collaboration rate of a generated scene of more than one artist.
const SCENE_COLLAB: f64 = 0.12;
/// The share of a named scene's co-credits that go to a member of one of its linked scenes.
const LINK_RATE: f64 = 0.08;
/// Linked scenes are the first generated scenes of at least this many artists.
const LINKED_SCENE_MIN: usize = 30;

struct Artist {
    gid: [u8; 16],
    name: String,
    sort_name: String,
    /// Index into `ARTIST_TYPES`.
    kind: usize,
    /// Index into `GENDERS`, for people.
    gender: Option<usize>,
    country: Option<usize>,
    start: [Option<i64>; 3],
    end: [Option<i64>; 3],
    releases: usize,
    scene: usize,
}

struct Scene {
    members: Vec<usize>,
    collab: f64,
    /// Generated scenes whose members this scene's artists also credit (named scenes only).
    links: Vec<usize>,
}

/// What the generator wrote, counted as it went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Artist entities.
    pub artists: usize,
    /// Abstract release entities (an album and its reissues share one).
    pub abstract_releases: usize,
    /// Release entities.
    pub releases: usize,
    /// Medium entities (components of releases).
    pub media: usize,
    /// Track entities (components of media).
    pub tracks: usize,
}

/// The keywords of the attributes and enums the generator writes, made once.
struct Kw {
    artist_gid: Keyword,
    country_name: Keyword,
}

fn kw(name: &str) -> Keyword {
    Keyword::new(name)
}

fn string(s: &str) -> TxValue {
    TxValue::Value(Value::string(s))
}

fn long(n: i64) -> TxValue {
    TxValue::Value(Value::Long(n))
}

fn ident(name: &str) -> TxValue {
    TxValue::Entity(EntityRef::Ident(kw(name)))
}

fn tempid(name: String) -> EntityRef {
    EntityRef::TempId(TempId::Str(Arc::from(name)))
}

/// The transactions of a data set: the schema and enums are not among them (`schema::SCHEMA`
/// and `schema::enums_tx()` come first); then the artists, then their releases.
pub struct Generator {
    rng: Rng,
    artists: Vec<Artist>,
    scenes: Vec<Scene>,
    standards: Vec<String>,
    standard_zipf: Zipf,
    word_zipf: Zipf,
    country_zipf: Zipf,
    kw: Kw,
    /// The next artist to write (first as an entity, then its releases).
    next_artist: usize,
    artists_written: bool,
    tempids: usize,
    counts: Counts,
}

impl Generator {
    /// The generator of `scale`'s data set (it plans the artists now: a fraction of a second
    /// even at the large scale).
    pub fn new(scale: Scale) -> Generator {
        let mut rng = Rng::new(SEED);
        let word_zipf = Zipf::new(TITLE_WORDS.len(), WORD_ZIPF);
        let country_zipf = Zipf::new(COUNTRIES.len(), 1.2);
        let (artists, scenes) = plan_artists(&mut rng, scale.releases(), &country_zipf);
        let mut g = Generator {
            rng,
            artists,
            scenes,
            standards: Vec::new(),
            standard_zipf: Zipf::new(STANDARDS, STANDARD_ZIPF),
            word_zipf,
            country_zipf,
            kw: Kw {
                artist_gid: kw("artist/gid"),
                country_name: kw("country/name"),
            },
            next_artist: 0,
            artists_written: false,
            tempids: 0,
            counts: Counts::default(),
        };
        g.standards = (0..STANDARDS).map(|_| g.title()).collect();
        g
    }

    /// What has been generated so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// How many artists the data set has.
    pub fn artist_count(&self) -> usize {
        self.artists.len()
    }

    fn country(&self, i: usize) -> TxValue {
        TxValue::Entity(EntityRef::LookupRef(
            self.kw.country_name.clone(),
            Box::new(string(COUNTRIES[i])),
        ))
    }

    fn artist_ref(&self, i: usize) -> TxValue {
        TxValue::Entity(EntityRef::LookupRef(
            self.kw.artist_gid.clone(),
            Box::new(TxValue::Value(Value::Uuid(self.artists[i].gid))),
        ))
    }

    fn artists_tx(&mut self) -> Vec<TxOp> {
        let end = (self.next_artist + ARTISTS_PER_TX).min(self.artists.len());
        let mut ops = Vec::with_capacity(end - self.next_artist);
        for a in &self.artists[self.next_artist..end] {
            let mut m = TxMap::new(None)
                .with("artist/gid", Value::Uuid(a.gid))
                .with("artist/name", string(&a.name))
                .with("artist/sortName", string(&a.sort_name))
                .with("artist/type", ident(crate::schema::ARTIST_TYPES[a.kind]));
            if let Some(g) = a.gender {
                m = m.with("artist/gender", ident(crate::schema::GENDERS[g]));
            }
            if let Some(c) = a.country {
                m = m.with("artist/country", self.country(c));
            }
            let date = [
                ("artist/startYear", a.start[0]),
                ("artist/startMonth", a.start[1]),
                ("artist/startDay", a.start[2]),
                ("artist/endYear", a.end[0]),
                ("artist/endMonth", a.end[1]),
                ("artist/endDay", a.end[2]),
            ];
            for (attr, v) in date {
                if let Some(v) = v {
                    m = m.with(attr, long(v));
                }
            }
            ops.push(TxOp::Map(m));
        }
        self.counts.artists = end;
        self.next_artist = end;
        if end == self.artists.len() {
            self.artists_written = true;
            self.next_artist = 0;
        }
        ops
    }

    fn next_tempid(&mut self) -> EntityRef {
        self.tempids += 1;
        tempid(format!("ar{}", self.tempids))
    }

    /// A title: 1 to 4 words (1: 4%, 2: 40%, 3: 36%, 4: 20%), sometimes joined by a link
    /// ("Love in the Rain").
    fn title(&mut self) -> String {
        let words = match self.rng.below(100) {
            0..=3 => 1,
            4..=43 => 2,
            44..=79 => 3,
            _ => 4,
        };
        let mut parts: Vec<String> = Vec::with_capacity(words + 1);
        if self.rng.chance(0.002) {
            parts.push("Always".to_string());
        }
        for i in 0..words {
            if i > 0 && self.rng.chance(0.2) {
                parts.push((*self.rng.pick(LINKS)).to_string());
            }
            parts.push(capitalize(TITLE_WORDS[self.word_zipf.draw(&mut self.rng)]));
        }
        parts.join(" ")
    }

    fn track_name(&mut self, position: usize, count: usize) -> String {
        let bookend = (position == 0 || position + 1 == count) && count > 3;
        if bookend && self.rng.chance(0.03) {
            let first = usize::from(position != 0);
            return BOOKENDS[2 * self.rng.below(2) + first].to_string();
        }
        if self.rng.chance(0.15) {
            return self.standards[self.standard_zipf.draw(&mut self.rng)].clone();
        }
        self.title()
    }

    /// The artists a track of `artist` is credited to: the artist, and with the scene's rate
    /// one or two more.
    fn track_artists(&mut self, artist: usize) -> Vec<usize> {
        let mut artists = vec![artist];
        let scene = &self.scenes[self.artists[artist].scene];
        if scene.members.len() < 2 || !self.rng.chance(scene.collab) {
            return artists;
        }
        let more = 1 + usize::from(self.rng.chance(0.25));
        for _ in 0..more {
            let scene = &self.scenes[self.artists[artist].scene];
            let from = if !scene.links.is_empty() && self.rng.chance(LINK_RATE) {
                &self.scenes[scene.links[self.rng.below(scene.links.len())]]
            } else {
                scene
            };
            let other = from.members[self.rng.below(from.members.len())];
            if !artists.contains(&other) {
                artists.push(other);
            }
        }
        artists
    }

    fn credit(&self, artists: &[usize]) -> String {
        let names: Vec<&str> = artists
            .iter()
            .map(|&a| self.artists[a].name.as_str())
            .collect();
        names.join(" & ")
    }

    /// One abstract release of `artist` and its `n` releases.
    fn abstract_release(&mut self, artist: usize, n: usize, ops: &mut Vec<TxOp>) -> usize {
        let r = &mut self.rng;
        let kind = match r.below(100) {
            0..=59 => 0,  // album
            60..=89 => 1, // single
            90..=97 => 2, // ep
            98 => 3,      // audiobook
            _ => 4,       // other
        };
        let tracks = match kind {
            0 => r.between(8, 14) as usize,
            1 => 2,
            2 => 4,
            _ => r.between(3, 20) as usize,
        };
        let name = self.title();
        let mut list = Vec::with_capacity(tracks);
        for p in 0..tracks {
            let tname = self.track_name(p, tracks);
            let duration = (!self.rng.chance(0.05))
                .then(|| self.rng.between(90_000, 300_000) + self.rng.between(0, 180_000));
            let artists = self.track_artists(artist);
            list.push((tname, duration, artists));
        }
        let mut credited = vec![artist];
        if self.rng.chance(0.05) {
            let more = self.track_artists(artist);
            credited.extend(more.into_iter().skip(1));
        }
        let credit = self.credit(&credited);
        let id = self.next_tempid();
        let gid = self.rng.uuid();
        let mut m = TxMap::new(Some(id.clone()))
            .with("abstractRelease/gid", Value::Uuid(gid))
            .with("abstractRelease/name", string(&name))
            .with("abstractRelease/type", ident(RELEASE_TYPES[kind]))
            .with(
                "abstractRelease/artists",
                TxValue::Many(credited.iter().map(|&a| self.artist_ref(a)).collect()),
            )
            .with("abstractRelease/artistCredit", string(&credit));
        let mut datoms = 4 + credited.len();
        m.attrs.shrink_to_fit();
        ops.push(TxOp::Map(m));
        self.counts.abstract_releases += 1;

        let first_year = self.rng.between(1968, 1973);
        for i in 0..n {
            let year = if i == 0 {
                first_year
            } else {
                self.rng.between(first_year, 1973)
            };
            datoms += self.release(
                artist, &credited, &credit, &name, year, kind, &list, &id, ops,
            );
        }
        datoms
    }

    /// One release of an abstract release; its datoms.
    #[allow(clippy::too_many_arguments)]
    fn release(
        &mut self,
        artist: usize,
        credited: &[usize],
        credit: &str,
        name: &str,
        year: i64,
        kind: usize,
        list: &[(String, Option<i64>, Vec<usize>)],
        abstract_id: &EntityRef,
        ops: &mut Vec<TxOp>,
    ) -> usize {
        let country = match self.artists[artist].country {
            Some(c) if self.rng.chance(0.7) => c,
            _ => self.country_zipf.draw(&mut self.rng),
        };
        let mut m = TxMap::new(None)
            .with("release/gid", Value::Uuid(self.rng.uuid()))
            .with("release/name", string(name))
            .with("release/country", self.country(country))
            .with("release/year", long(year))
            .with("release/artistCredit", string(credit))
            .with(
                "release/artists",
                TxValue::Many(credited.iter().map(|&a| self.artist_ref(a)).collect()),
            )
            .with(
                "release/abstractRelease",
                TxValue::Entity(abstract_id.clone()),
            );
        let mut datoms = 6 + credited.len();
        let status = match self.rng.below(100) {
            0..=89 => "Official",
            90..=96 => "Promotion",
            _ => "Bootleg",
        };
        m = m.with("release/status", string(status));
        datoms += 1;
        if self.rng.chance(0.5) {
            let barcode = format!(
                "{:06}{:06}",
                self.rng.below(1_000_000),
                self.rng.below(1_000_000)
            );
            m = m.with("release/barcode", string(&barcode));
            datoms += 1;
        }
        if self.rng.chance(0.8) {
            let packaging = PACKAGINGS[self.rng.below(PACKAGINGS.len())];
            m = m.with("release/packaging", ident(packaging));
            datoms += 1;
        }
        if self.rng.chance(0.8) {
            m = m.with("release/month", long(self.rng.between(1, 12)));
            datoms += 1;
            if self.rng.chance(0.75) {
                m = m.with("release/day", long(self.rng.between(1, 28)));
                datoms += 1;
            }
        }
        // Media: one, or the track list split over two (a double album) or three.
        let media = if list.len() >= 10 && self.rng.chance(0.2) {
            2 + usize::from(self.rng.chance(0.2))
        } else {
            1
        };
        let format = match (kind, self.rng.below(10)) {
            (1, 0..=7) => FORMATS[1], // a single on 7"
            (_, 0..=5) => FORMATS[0],
            (_, 6..=7) => FORMATS[3],
            (_, 8) => FORMATS[4],
            _ => *self.rng.pick(FORMATS),
        };
        let per = list.len().div_ceil(media);
        let mut media_maps = Vec::with_capacity(media);
        for (mi, chunk) in list.chunks(per).enumerate() {
            let mut medium = TxMap::new(None)
                .with("medium/format", ident(format))
                .with("medium/position", long(mi as i64 + 1))
                .with("medium/trackCount", long(chunk.len() as i64));
            datoms += 4;
            if self.rng.chance(0.1) {
                let mname = self.title();
                medium = medium.with("medium/name", string(&mname));
                datoms += 1;
            }
            let mut tracks = Vec::with_capacity(chunk.len());
            for (ti, (tname, duration, artists)) in chunk.iter().enumerate() {
                let mut t = TxMap::new(None)
                    .with("track/name", string(tname))
                    .with("track/position", long(ti as i64 + 1))
                    .with(
                        "track/artists",
                        TxValue::Many(artists.iter().map(|&a| self.artist_ref(a)).collect()),
                    );
                datoms += 3 + artists.len();
                if let Some(d) = duration {
                    t = t.with("track/duration", long(*d));
                    datoms += 1;
                }
                tracks.push(TxValue::Map(t));
            }
            self.counts.tracks += tracks.len();
            medium = medium.with("medium/tracks", TxValue::Many(tracks));
            media_maps.push(TxValue::Map(medium));
        }
        self.counts.media += media_maps.len();
        m = m.with("release/media", TxValue::Many(media_maps));
        ops.push(TxOp::Map(m));
        self.counts.releases += 1;
        datoms
    }

    /// The releases of the next artists, until the transaction is big enough.
    fn releases_tx(&mut self) -> Vec<TxOp> {
        let mut ops = Vec::new();
        let mut datoms = 0;
        while self.next_artist < self.artists.len() && datoms < TX_DATOMS {
            let a = self.next_artist;
            self.next_artist += 1;
            let mut left = self.artists[a].releases;
            while left > 0 {
                // An album and its reissues: mostly one release, some up to five.
                let n = if self.rng.chance(0.3) {
                    1 + self.rng.pareto(1.5, 4)
                } else {
                    1
                }
                .min(left);
                left -= n;
                datoms += self.abstract_release(a, n, &mut ops);
            }
        }
        ops
    }
}

impl Iterator for Generator {
    type Item = Vec<TxOp>;

    fn next(&mut self) -> Option<Vec<TxOp>> {
        if !self.artists_written {
            return Some(self.artists_tx());
        }
        if self.next_artist >= self.artists.len() {
            return None;
        }
        Some(self.releases_tx())
    }
}

/// The artists (named ones first) and their scenes, with releases summing to about `target`.
fn plan_artists(rng: &mut Rng, target: usize, countries: &Zipf) -> (Vec<Artist>, Vec<Scene>) {
    let mut artists = Vec::new();
    let mut scenes = Vec::new();
    let named: std::collections::HashSet<&str> = NAMED_SCENES
        .iter()
        .flat_map(|(_, _, members)| members.iter().map(|m| m.name))
        .collect();
    let mut total = 0;
    for (collab, _, members) in NAMED_SCENES {
        let scene = scenes.len();
        let mut ids = Vec::new();
        for m in *members {
            let country = COUNTRIES.iter().position(|c| *c == m.country);
            let mut a = new_artist(rng, m.name.to_string(), m.group, country);
            a.gender = (!m.group).then_some(usize::from(m.female));
            a.releases = m.releases;
            a.scene = scene;
            total += a.releases;
            ids.push(artists.len());
            artists.push(a);
        }
        scenes.push(Scene {
            members: ids,
            collab: *collab,
            links: Vec::new(),
        });
    }
    // The others: scenes of Pareto-distributed sizes, filled until the releases reach the
    // target.
    while total < target {
        let size = rng.pareto(1.6, 60);
        let scene = scenes.len();
        let mut ids = Vec::with_capacity(size);
        for _ in 0..size {
            let group = rng.chance(0.3);
            let name = loop {
                let name = if group {
                    group_name(rng)
                } else {
                    format!("{} {}", rng.pick(FIRST), rng.pick(LAST))
                };
                if !named.contains(name.as_str()) {
                    break name;
                }
            };
            let country = rng.chance(0.9).then(|| countries.draw(rng));
            let mut a = new_artist(rng, name, group, country);
            if !group {
                a.kind = if rng.chance(0.03) { 2 } else { 0 };
                a.gender = match rng.below(100) {
                    0..=69 => Some(0),
                    70..=96 => Some(1),
                    _ => Some(2),
                };
            }
            a.releases = rng
                .pareto(1.25, 250)
                .min(target.saturating_sub(total).max(1));
            a.scene = scene;
            total += a.releases;
            ids.push(artists.len());
            artists.push(a);
        }
        let collab = if ids.len() > 1 { SCENE_COLLAB } else { 0.0 };
        scenes.push(Scene {
            members: ids,
            collab,
            links: Vec::new(),
        });
    }
    link_named_scenes(&mut scenes);
    (artists, scenes)
}

/// Each named scene's links: the first generated scenes of `LINKED_SCENE_MIN` artists or
/// more, in order, each linked to one named scene (fewer where the scale has too few).
fn link_named_scenes(scenes: &mut [Scene]) {
    let named = NAMED_SCENES.len();
    let large: Vec<usize> = (named..scenes.len())
        .filter(|&s| scenes[s].members.len() >= LINKED_SCENE_MIN)
        .collect();
    let mut large = large.into_iter();
    for (i, (_, links, _)) in NAMED_SCENES.iter().enumerate() {
        scenes[i].links = large.by_ref().take(*links).collect();
    }
}

fn group_name(rng: &mut Rng) -> String {
    let a = rng.pick(GROUP_WORDS);
    let b = rng.pick(GROUP_WORDS);
    if rng.chance(0.5) {
        format!("The {a} {b}")
    } else {
        format!("{a} {b}")
    }
}

fn new_artist(rng: &mut Rng, name: String, group: bool, country: Option<usize>) -> Artist {
    let sort_name = sort_name(&name, group);
    let start_year = rng.between(1920, 1970);
    let start = [
        Some(start_year),
        rng.chance(0.6).then(|| rng.between(1, 12)),
        rng.chance(0.4).then(|| rng.between(1, 28)),
    ];
    let end = if rng.chance(0.15) {
        [
            Some(rng.between(start_year.max(1968), 2010)),
            rng.chance(0.5).then(|| rng.between(1, 12)),
            None,
        ]
    } else {
        [None; 3]
    };
    Artist {
        gid: rng.uuid(),
        name,
        sort_name,
        kind: usize::from(group),
        gender: None,
        country,
        start,
        end,
        releases: 0,
        scene: 0,
    }
}

/// MusicBrainz's sort name: "Lennon, John", "Beatles, The".
fn sort_name(name: &str, group: bool) -> String {
    if group {
        match name.strip_prefix("The ") {
            Some(rest) => format!("{rest}, The"),
            None => name.to_string(),
        }
    } else {
        match name.rsplit_once(' ') {
            Some((first, last)) => format!("{last}, {first}"),
            None => name.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_names() {
        assert_eq!(sort_name("John Lennon", false), "Lennon, John");
        assert_eq!(sort_name("The Beatles", true), "Beatles, The");
        assert_eq!(sort_name("Badfinger", true), "Badfinger");
    }

    #[test]
    fn the_same_scale_gives_the_same_transactions() {
        let a: Vec<Vec<TxOp>> = Generator::new(Scale::Tiny).take(3).collect();
        let b: Vec<Vec<TxOp>> = Generator::new(Scale::Tiny).take(3).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn named_artists_keep_their_release_counts() {
        let mut g = Generator::new(Scale::Tiny);
        let lennon = g
            .artists
            .iter()
            .find(|a| a.name == "John Lennon")
            .map(|a| a.releases);
        assert_eq!(lennon, Some(21));
        let txs = g.by_ref().count();
        let c = g.counts();
        assert!(txs > 2, "{txs}");
        assert!(
            c.releases >= Scale::Tiny.releases(),
            "{} releases",
            c.releases
        );
        assert!(c.tracks > 5 * c.releases, "{c:?}");
    }
}
