//! The mbrainz schema (`../shared/reference/mbrainz.md`): the sample's attributes with their
//! types, uniqueness, indexing, full text and components, and the enum entities.

/// The schema transaction: every attribute of the sample.
pub const SCHEMA: &str = r#"[
 {:db/ident :country/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/unique :db.unique/value :db/doc "The name of the country"}

 {:db/ident :artist/gid :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity :db/index true :db/doc "The globally unique MusicBrainz ID for an artist"}
 {:db/ident :artist/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/fulltext true :db/index true :db/doc "The artist's name"}
 {:db/ident :artist/sortName :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/index true :db/doc "The artist's name for use in alphabetical sorting, e.g. Beatles, The"}
 {:db/ident :artist/type :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
  :db/doc "Enum, one of :artist.type/person, :artist.type/group, :artist.type/other"}
 {:db/ident :artist/gender :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
  :db/doc "Enum, one of :artist.gender/male, :artist.gender/female, :artist.gender/other"}
 {:db/ident :artist/country :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
  :db/doc "The artist's country of origin"}
 {:db/ident :artist/startYear :db/valueType :db.type/long :db/cardinality :db.cardinality/one
  :db/index true :db/doc "The year the artist started actively recording"}
 {:db/ident :artist/startMonth :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :artist/startDay :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :artist/endYear :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :artist/endMonth :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :artist/endDay :db/valueType :db.type/long :db/cardinality :db.cardinality/one}

 {:db/ident :abstractRelease/gid :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity :db/index true}
 {:db/ident :abstractRelease/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/index true}
 {:db/ident :abstractRelease/type :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
  :db/doc "Enum: :release.type/album, /single, /ep, /audiobook or /other"}
 {:db/ident :abstractRelease/artists :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}
 {:db/ident :abstractRelease/artistCredit :db/valueType :db.type/string
  :db/cardinality :db.cardinality/one :db/fulltext true}

 {:db/ident :release/gid :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity :db/index true}
 {:db/ident :release/country :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}
 {:db/ident :release/barcode :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :release/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/fulltext true :db/index true}
 {:db/ident :release/media :db/valueType :db.type/ref :db/cardinality :db.cardinality/many
  :db/isComponent true}
 {:db/ident :release/packaging :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}
 {:db/ident :release/year :db/valueType :db.type/long :db/cardinality :db.cardinality/one
  :db/index true}
 {:db/ident :release/month :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :release/day :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :release/artistCredit :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/fulltext true}
 {:db/ident :release/artists :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}
 {:db/ident :release/abstractRelease :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}
 {:db/ident :release/status :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/index true}

 {:db/ident :medium/tracks :db/valueType :db.type/ref :db/cardinality :db.cardinality/many
  :db/isComponent true}
 {:db/ident :medium/format :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}
 {:db/ident :medium/position :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :medium/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/fulltext true}
 {:db/ident :medium/trackCount :db/valueType :db.type/long :db/cardinality :db.cardinality/one}

 {:db/ident :track/artists :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}
 {:db/ident :track/position :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :track/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/fulltext true :db/index true}
 {:db/ident :track/duration :db/valueType :db.type/long :db/cardinality :db.cardinality/one
  :db/index true :db/doc "The track's length in milliseconds"}
]"#;

/// `:artist/type`'s values (the enum entities, by the attribute that refers to them).
pub const ARTIST_TYPES: &[&str] = &[
    "artist.type/person",
    "artist.type/group",
    "artist.type/other",
];
/// `:artist/gender`'s values.
pub const GENDERS: &[&str] = &[
    "artist.gender/male",
    "artist.gender/female",
    "artist.gender/other",
];
/// `:abstractRelease/type`'s values.
pub const RELEASE_TYPES: &[&str] = &[
    "release.type/album",
    "release.type/single",
    "release.type/ep",
    "release.type/audiobook",
    "release.type/other",
];
/// `:release/packaging`'s values.
pub const PACKAGINGS: &[&str] = &[
    "release.packaging/jewelCase",
    "release.packaging/digipak",
    "release.packaging/cardboardPaperSleeve",
    "release.packaging/gatefold",
    "release.packaging/none",
    "release.packaging/other",
];
/// `:medium/format`'s values.
pub const FORMATS: &[&str] = &[
    "medium.format/vinyl12",
    "medium.format/vinyl7",
    "medium.format/vinyl10",
    "medium.format/cassette",
    "medium.format/cartridge8Track",
    "medium.format/reelToReel",
    "medium.format/cd",
];

/// The countries artists and releases come from (the first few most often).
pub const COUNTRIES: &[&str] = &[
    "United States",
    "United Kingdom",
    "Germany",
    "France",
    "Japan",
    "Canada",
    "Netherlands",
    "Italy",
    "Sweden",
    "Australia",
    "Spain",
    "Brazil",
    "Jamaica",
    "Ireland",
    "Belgium",
    "Denmark",
    "Norway",
    "Finland",
    "Mexico",
    "Argentina",
    "New Zealand",
    "South Africa",
    "Switzerland",
    "Austria",
    "Portugal",
    "Greece",
    "Poland",
    "Czechoslovakia",
    "Hungary",
    "Yugoslavia",
    "Soviet Union",
    "India",
    "Turkey",
    "Israel",
    "Nigeria",
    "Ghana",
    "Senegal",
    "Cuba",
    "Chile",
    "Colombia",
    "Venezuela",
    "Peru",
    "Philippines",
    "Indonesia",
    "Korea",
    "Taiwan",
    "Hong Kong",
    "Iceland",
    "Luxembourg",
    "Romania",
];

/// The transaction that creates the enum entities and the countries.
pub fn enums_tx() -> String {
    let mut tx = String::from("[");
    for ident in ARTIST_TYPES
        .iter()
        .chain(GENDERS)
        .chain(RELEASE_TYPES)
        .chain(PACKAGINGS)
        .chain(FORMATS)
    {
        tx.push_str(&format!("{{:db/ident :{ident}}}\n"));
    }
    for name in COUNTRIES {
        tx.push_str(&format!("{{:country/name \"{name}\"}}\n"));
    }
    tx.push(']');
    tx
}
