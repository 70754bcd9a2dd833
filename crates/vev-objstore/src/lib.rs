//! Vev's index and full-text segments in an S3-compatible object store (`object_store`'s
//! S3 client), with the log, the root, the full-text manifest and the writer lease in
//! PostgreSQL (`vev-postgres`): the PostgreSQL store with its segment payloads moved out of
//! its tables (`vev_postgres::SegmentObjects`, whose module doc gives the layout and the
//! order of writes).
//!
//! A database is named by one URL:
//!
//! ```text
//! s3://BUCKET[/PREFIX]?[endpoint=URL&][region=REGION&][allow_http=true&]log=POSTGRES_URL
//! ```
//!
//! `log=` comes last and takes the rest of the URL, so the PostgreSQL URL keeps its own
//! `?schema=...&...`. `endpoint`, `region` and `allow_http` override the environment's
//! `AWS_ENDPOINT`, `AWS_REGION` (or `AWS_DEFAULT_REGION`) and `AWS_ALLOW_HTTP`.
//! Credentials come only from the environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, or the provider chain `object_store`
//! follows), never from the URL, and are never in a message.
//!
//! Under the prefix: `vev-database` (a marker naming the prefix a Vev database's),
//! `segments/ID-GENERATION` and `fulltext/ID-GENERATION` (immutable, each written once).
//!
//! Only this crate knows the object store.

use std::sync::Arc;

use vev_core::StorageError;
use vev_postgres::SegmentObjects;

mod s3;
#[cfg(feature = "testing")]
pub mod testing;

pub use s3::S3Objects;

/// The marker object under a database's prefix, and what it starts with.
pub const MARKER: &str = "vev-database";
const MARKER_TEXT: &str = "vev objects 1\n";

/// Whether `location` names a database with its segments in an object store (`s3://`).
pub fn is_objstore_url(location: &str) -> bool {
    location.starts_with("s3://")
}

/// A parsed `s3://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub bucket: String,
    /// The key prefix without slashes at either end; empty for the bucket's root.
    pub prefix: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub allow_http: Option<bool>,
    /// The PostgreSQL URL of the log, root and lease.
    pub log: String,
}

fn invalid(reason: String) -> StorageError {
    StorageError::io_kind(
        "parse the database url",
        std::io::ErrorKind::InvalidInput,
        reason,
    )
}

impl Target {
    /// Parse `s3://BUCKET[/PREFIX]?[endpoint=..&region=..&allow_http=..&]log=POSTGRES_URL`.
    pub fn parse(url: &str) -> Result<Target, StorageError> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| invalid("an object-store url starts with s3://".to_owned()))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !bucket_ok {
            return Err(invalid(format!(
                "bucket {bucket:?} is not an s3 bucket name (3 to 63 of a-z 0-9 . -)"
            )));
        }
        let prefix = prefix.trim_matches('/');
        let prefix_ok = prefix.is_empty()
            || prefix
                .split('/')
                .all(|p| !p.is_empty() && p != "." && p != ".." && !p.contains(['\\', '?']));
        if !prefix_ok {
            return Err(invalid(format!("prefix {prefix:?} is not a key prefix")));
        }
        let at = if query.starts_with("log=") {
            Some(0)
        } else {
            query.find("&log=").map(|i| i + 1)
        };
        let Some(at) = at else {
            return Err(invalid(
                "the url names no log: add log=postgres://... as its last parameter".to_owned(),
            ));
        };
        let log = query[at + 4..].to_owned();
        if !vev_postgres::is_postgres_url(&log) {
            return Err(invalid(
                "log= must name a postgres:// url (the log, root and lease)".to_owned(),
            ));
        }
        let mut target = Target {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
            endpoint: None,
            region: None,
            allow_http: None,
            log,
        };
        for pair in query[..at].split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("endpoint", v)) => target.endpoint = Some(v.to_owned()),
                Some(("region", v)) => target.region = Some(v.to_owned()),
                Some(("allow_http", v)) => {
                    target.allow_http = Some(v.parse().map_err(|_| {
                        invalid(format!("allow_http={v:?} is neither true nor false"))
                    })?)
                }
                _ => {
                    let name = pair.split_once('=').map_or(pair, |p| p.0);
                    return Err(invalid(format!(
                        "unknown parameter {name:?} (endpoint, region, allow_http and log; \
                         credentials come from the environment)"
                    )));
                }
            }
        }
        Ok(target)
    }

    /// `s3://bucket/prefix`.
    pub fn objects_location(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// How `open` treats a prefix without a database.
#[derive(Clone, Copy, Debug)]
pub struct OpenMode {
    pub read_only: bool,
    /// Make the prefix a database when it holds no objects (writers only).
    pub create: bool,
}

/// Reach the object store `url` names and check that its prefix holds a Vev database (or,
/// with `mode.create`, make an empty prefix one). Returns the log's PostgreSQL URL and the
/// objects, to open the PostgreSQL store with (`StoreOptions::objects`).
pub fn open(url: &str, mode: OpenMode) -> Result<(String, Arc<dyn SegmentObjects>), StorageError> {
    let target = Target::parse(url)?;
    let objects = S3Objects::new(&target)?;
    check_or_mark(&objects, mode)?;
    Ok((target.log, Arc::new(objects)))
}

/// The bucket must exist; the prefix must hold the marker, or (a writer creating) nothing,
/// in which case the marker is written.
fn check_or_mark(objects: &S3Objects, mode: OpenMode) -> Result<(), StorageError> {
    let listed = objects.keys(2)?;
    let not_vev = |reason: String| StorageError::NotVev {
        path: objects.location().to_owned(),
        reason,
    };
    match objects.get(MARKER)? {
        Some(bytes) if bytes.starts_with(MARKER_TEXT.as_bytes()) => Ok(()),
        Some(_) => Err(not_vev(format!("its object {MARKER} is not a vev marker"))),
        None if !listed.is_empty() => Err(not_vev(format!(
            "it holds objects ({}, ...) but no {MARKER} marker",
            listed[0]
        ))),
        None if mode.read_only || !mode.create => {
            Err(not_vev(format!("it holds no objects (no {MARKER} marker)")))
        }
        None => objects.put_all(vec![(MARKER.to_owned(), MARKER_TEXT.as_bytes().to_vec())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_the_log_last() {
        let t = Target::parse(
            "s3://my-bucket/apps/one/?endpoint=http://127.0.0.1:9000&allow_http=true&\
             log=postgres://vev@127.0.0.1:5433/app?schema=s1&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(t.bucket, "my-bucket");
        assert_eq!(t.prefix, "apps/one");
        assert_eq!(t.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(t.allow_http, Some(true));
        assert_eq!(
            t.log,
            "postgres://vev@127.0.0.1:5433/app?schema=s1&connect_timeout=3"
        );
        assert_eq!(t.objects_location(), "s3://my-bucket/apps/one");
        let t = Target::parse("s3://bkt?log=postgres://u@h/d").unwrap();
        assert_eq!((t.prefix.as_str(), t.region.as_deref()), ("", None));
        assert_eq!(t.objects_location(), "s3://bkt");
    }

    #[test]
    fn bad_urls_are_invalid_input() {
        for url in [
            "s3://Bad_Bucket/p?log=postgres://u@h/d",
            "s3://ok-bucket/a//b?log=postgres://u@h/d",
            "s3://ok-bucket/../b?log=postgres://u@h/d",
            "s3://ok-bucket/p",
            "s3://ok-bucket/p?log=mysql://u@h/d",
            "s3://ok-bucket/p?secret_access_key=x&log=postgres://u@h/d",
            "s3://ok-bucket/p?allow_http=yes&log=postgres://u@h/d",
        ] {
            let e = Target::parse(url).unwrap_err();
            assert_eq!(e.code(), "storage/io", "{url}: {e}");
            assert!(!e.to_string().contains("x&log"), "{e}");
        }
        assert!(is_objstore_url("s3://b/p?log=postgres://u@h/d"));
        assert!(!is_objstore_url("postgres://u@h/d"));
    }
}
