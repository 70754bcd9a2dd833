//! The S3 client: `object_store`'s, driven by a runtime of the store's own.
//!
//! `object_store` is async and the storage seam is synchronous. Each call spawns its future
//! on a one-worker tokio runtime that this store owns and waits for the answer on a plain
//! channel, so it works from any thread: a plain one, or a worker of another tokio runtime
//! (`vev serve`), where `Runtime::block_on` would panic. The runtime is shut down in the
//! background on drop, which is allowed inside an async context too.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, PutPayload, RetryConfig};
use vev_core::StorageError;
use vev_postgres::SegmentObjects;

use crate::Target;

/// Uploads and deletes run this many requests at once.
const CONCURRENCY: usize = 8;

/// A bucket and prefix of an S3-compatible store.
pub struct S3Objects {
    store: Arc<dyn ObjectStore>,
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    prefix: String,
    location: String,
    bucket: String,
}

impl std::fmt::Debug for S3Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.location)
    }
}

impl Drop for S3Objects {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl S3Objects {
    /// A client for `target`'s bucket: configuration from the environment, then the URL's.
    /// Requests are retried (3 times, with backoff from 100 ms, 15 s in all) before a
    /// failure is reported.
    pub fn new(target: &Target) -> Result<S3Objects, StorageError> {
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&target.bucket)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: 3,
                retry_timeout: Duration::from_secs(15),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(60)),
            );
        if let Some(endpoint) = &target.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = &target.region {
            builder = builder.with_region(region);
        }
        if let Some(allow) = target.allow_http {
            builder = builder.with_allow_http(allow);
        }
        let location = target.objects_location();
        let store = builder.build().map_err(|e| StorageError::Io {
            op: "object store configuration".to_owned(),
            kind: std::io::ErrorKind::InvalidInput,
            sqlite_code: None,
            message: format!("{location}: {}", redact(&e.to_string())),
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("vev-objstore")
            .enable_all()
            .build()
            .map_err(|e| StorageError::io_kind("object store runtime", e.kind(), e.to_string()))?;
        Ok(S3Objects {
            store: Arc::new(store),
            runtime: Some(runtime),
            prefix: target.prefix.clone(),
            location,
            bucket: target.bucket.clone(),
        })
    }

    fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{key}", self.prefix))
        }
    }

    /// A listed path's key relative to the prefix.
    fn relative(&self, path: String) -> String {
        let strip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        path[strip.min(path.len())..].to_owned()
    }

    /// Run `f` on the store's runtime and wait for it.
    fn run<T: Send + 'static>(
        &self,
        op: &str,
        f: impl Future<Output = Result<T, object_store::Error>> + Send + 'static,
    ) -> Result<T, StorageError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let Some(rt) = &self.runtime else {
            unreachable!("the runtime lives until drop");
        };
        rt.spawn(async move {
            let _ = tx.send(f.await);
        });
        match rx.recv() {
            Ok(out) => out.map_err(|e| self.error(op, &e)),
            Err(_) => Err(StorageError::Unavailable {
                location: self.location.clone(),
                op: op.to_owned(),
                message: "the object store's runtime stopped".to_owned(),
            }),
        }
    }

    /// Up to `n` keys under the prefix (relative to it), in no particular order.
    pub fn keys(&self, n: usize) -> Result<Vec<String>, StorageError> {
        let prefix = (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()));
        self.list_under(prefix, n)
    }

    /// Up to `n` keys of the objects under `dir` (all of them: `None`), relative to the
    /// prefix.
    fn list_under(&self, dir: Option<Path>, n: usize) -> Result<Vec<String>, StorageError> {
        let store = self.store.clone();
        let keys = self.run("list", async move {
            store
                .list(dir.as_ref())
                .take(n)
                .map_ok(|m| m.location.to_string())
                .try_collect::<Vec<_>>()
                .await
        })?;
        Ok(keys.into_iter().map(|k| self.relative(k)).collect())
    }

    /// A failure as a storage error: no answer (refused, timed out, a server error after
    /// the retries) is `storage/unavailable`; refused credentials (401, 403) `storage/io`
    /// of kind `PermissionDenied`; a missing bucket of kind `NotFound`; other refusals of
    /// kind `Other`.
    fn error(&self, op: &str, e: &object_store::Error) -> StorageError {
        use object_store::Error as E;
        use std::io::ErrorKind as K;
        let text = redact(&chain(e));
        let io = |kind: K, message: String| StorageError::Io {
            op: op.to_owned(),
            kind,
            sqlite_code: None,
            message: format!("{}: {message}", self.location),
        };
        if text.contains("NoSuchBucket") {
            return io(
                K::NotFound,
                format!("bucket {} does not exist", self.bucket),
            );
        }
        match (e, http_status(&text)) {
            (E::PermissionDenied { .. } | E::Unauthenticated { .. }, _) | (_, Some(401 | 403)) => {
                io(K::PermissionDenied, text)
            }
            (E::NotFound { .. }, _) | (_, Some(404)) => io(K::NotFound, text),
            // Refused, timed out, reset, or a server error after the retries.
            (E::Generic { .. }, None) | (_, Some(500..)) => StorageError::Unavailable {
                location: self.location.clone(),
                op: op.to_owned(),
                message: text,
            },
            _ => io(K::Other, text),
        }
    }
}

/// The HTTP status a failure's text reports (`object_store` gives some requests' statuses
/// only in their messages: `... status code: 403 Forbidden`).
fn http_status(text: &str) -> Option<u16> {
    ["status code: ", "with status "].iter().find_map(|marker| {
        let at = text.find(marker)? + marker.len();
        text.get(at..at + 3)?.parse().ok()
    })
}

/// An error and its sources, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// A message without the values of the credentials in the environment (a server's
/// answer may echo the access key id).
fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ] {
        if let Ok(value) = std::env::var(var) {
            if value.len() >= 4 {
                out = out.replace(&value, &format!("<{var}>"));
            }
        }
    }
    out
}

impl SegmentObjects for S3Objects {
    fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> Result<(), StorageError> {
        let store = self.store.clone();
        let puts: Vec<(Path, Vec<u8>)> = objects
            .into_iter()
            .map(|(k, b)| (self.path(&k), b))
            .collect();
        self.run("segment upload", async move {
            futures::stream::iter(puts)
                .map(|(path, bytes)| {
                    let store = store.clone();
                    async move { store.put(&path, PutPayload::from(bytes)).await }
                })
                .buffer_unordered(CONCURRENCY)
                .try_collect::<Vec<_>>()
                .await
                .map(drop)
        })
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let store = self.store.clone();
        let path = self.path(key);
        self.run("segment read", async move {
            match store.get(&path).await {
                Ok(r) => r.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn delete_all(&self, keys: Vec<String>) -> Result<(), StorageError> {
        let store = self.store.clone();
        let paths: Vec<Path> = keys.iter().map(|k| self.path(k)).collect();
        self.run("segment delete", async move {
            futures::stream::iter(paths)
                .map(|path| {
                    let store = store.clone();
                    async move {
                        match store.delete(&path).await {
                            Err(object_store::Error::NotFound { .. }) => Ok(()),
                            other => other,
                        }
                    }
                })
                .buffer_unordered(CONCURRENCY)
                .try_collect::<Vec<_>>()
                .await
                .map(drop)
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        // `object_store` lists by whole path segments: `segments/` names the directory.
        let dir = self.path(prefix.trim_end_matches('/'));
        let mut keys = self.list_under(Some(dir), usize::MAX)?;
        keys.retain(|k| k.starts_with(prefix));
        Ok(keys)
    }

    fn location(&self) -> &str {
        &self.location
    }
}

#[cfg(test)]
mod tests {
    use super::http_status;

    #[test]
    fn statuses_are_read_from_messages() {
        assert_eq!(
            http_status("Server returned non-2xx status code: 403 Forbidden: <Error>"),
            Some(403)
        );
        assert_eq!(
            http_status("Client error with status 404 Not Found"),
            Some(404)
        );
        assert_eq!(
            http_status("error sending request: connection refused"),
            None
        );
    }
}
