//! Reaching the server: the database URL (credentials from it or the environment, never in a
//! message), one client that reconnects on its next use after the server went away, and the
//! mapping of the client's failures to storage errors.

use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};
use vev_core::StorageError;

/// How long a connection attempt waits for the server unless the URL says
/// (`connect_timeout=`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `location` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A parsed database URL: the client's configuration and the schema holding Vev's tables.
#[derive(Clone)]
pub struct Target {
    pub(crate) config: Config,
    /// The schema of Vev's tables (`?schema=NAME`, default `vev`); an SQL identifier of
    /// lower-case letters, digits and `_`, so it is spliced into statements as is.
    pub(crate) schema: String,
    /// The URL without its password, for messages.
    pub(crate) location: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.location)
    }
}

impl Target {
    /// Parse `url`. A `schema=` query parameter is Vev's own; the others go to the client
    /// (`connect_timeout`, `sslmode`, ...). A user or password missing from the URL comes
    /// from `PGUSER` / `PGPASSWORD`.
    pub fn parse(url: &str) -> Result<Target, StorageError> {
        let invalid = |reason: String| {
            StorageError::io_kind(
                "parse the database url",
                std::io::ErrorKind::InvalidInput,
                reason,
            )
        };
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut schema = "vev".to_owned();
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", name)) => schema = name.to_owned(),
                _ => rest.push(pair),
            }
        }
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(invalid(format!(
                "schema {schema:?} is not a lower-case SQL identifier (letters, digits, _)"
            )));
        }
        let client_url = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        // The client's own message may quote the URL: say only that it does not parse.
        let mut config = Config::from_str(&client_url)
            .map_err(|e| invalid(format!("not a postgres url ({e})")))?;
        if config.get_user().is_none() {
            match std::env::var("PGUSER") {
                Ok(user) => {
                    config.user(&user);
                }
                Err(_) => {
                    return Err(invalid(
                        "the url names no user and PGUSER is not set".to_owned(),
                    ))
                }
            }
        }
        if config.get_password().is_none() {
            if let Ok(password) = std::env::var("PGPASSWORD") {
                config.password(password);
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("vev");
        let location = location_of(&config, &schema);
        Ok(Target {
            config,
            schema,
            location,
        })
    }

    /// The URL without credentials.
    pub fn location(&self) -> &str {
        &self.location
    }
}

/// `postgres://user@host:port/dbname` (and `?schema=` when not the default), no password.
fn location_of(config: &Config, schema: &str) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut s = format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or(""),
        config.get_dbname().or(config.get_user()).unwrap_or("")
    );
    if schema != "vev" {
        s.push_str("?schema=");
        s.push_str(schema);
    }
    s
}

/// A failure of the client as a storage error: a server that cannot be reached or went
/// away is `storage/unavailable`; missing tables `storage/not-vev`; refused credentials or
/// privileges `storage/io` of kind `PermissionDenied`; the rest `storage/io`.
pub(crate) fn pg_error(location: &str, op: &str, e: &postgres::Error) -> StorageError {
    let io = |kind: std::io::ErrorKind, message: String| StorageError::Io {
        op: op.to_owned(),
        kind,
        sqlite_code: None,
        message: format!("{location}: {message}"),
    };
    let Some(db) = e.as_db_error() else {
        return StorageError::Unavailable {
            location: location.to_owned(),
            op: op.to_owned(),
            message: e.to_string(),
        };
    };
    let code = db.code();
    let message = format!("{} ({})", db.message(), code.code());
    if *code == SqlState::UNDEFINED_TABLE || *code == SqlState::INVALID_SCHEMA_NAME {
        return StorageError::NotVev {
            path: location.to_owned(),
            reason: message,
        };
    }
    use std::io::ErrorKind as K;
    let kind = if [
        SqlState::INVALID_PASSWORD,
        SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        SqlState::INSUFFICIENT_PRIVILEGE,
    ]
    .contains(code)
    {
        K::PermissionDenied
    } else if *code == SqlState::INVALID_CATALOG_NAME {
        K::NotFound
    } else if *code == SqlState::DISK_FULL {
        K::StorageFull
    } else if [
        SqlState::ADMIN_SHUTDOWN,
        SqlState::CRASH_SHUTDOWN,
        SqlState::CANNOT_CONNECT_NOW,
        SqlState::TOO_MANY_CONNECTIONS,
        SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
    ]
    .contains(code)
    {
        return StorageError::Unavailable {
            location: location.to_owned(),
            op: op.to_owned(),
            message,
        };
    } else {
        K::Other
    };
    io(kind, message)
}

/// One client connection, opened on first use and again after the server dropped it, so
/// that a reader (or a writer) outlives a server restart: the operation that met the
/// failure gets `storage/unavailable`, the next one reconnects.
pub(crate) struct Session {
    target: Target,
    /// Statements run once on every new connection (`SET ...`).
    setup: String,
    client: Mutex<Option<Client>>,
    /// Statements prepared on the current connection (by their SQL), forgotten with it.
    prepared: Mutex<std::collections::HashMap<String, postgres::Statement>>,
}

impl Session {
    pub(crate) fn new(target: Target, setup: String) -> Session {
        Session {
            target,
            setup,
            client: Mutex::new(None),
            prepared: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// `with`, given `sql` prepared on the connection (once per connection: a statement
    /// sent as text is prepared again on every call, a round trip of its own).
    pub(crate) fn with_prepared<T>(
        &self,
        op: &str,
        sql: &str,
        f: impl FnOnce(&mut Client, &postgres::Statement) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let location = &self.target.location;
        self.with(op, |client| {
            let mut prepared = vev_core::sync::lock(&self.prepared);
            let statement = match prepared.get(sql) {
                Some(s) => s.clone(),
                None => {
                    let s = client
                        .prepare(sql)
                        .map_err(|e| pg_error(location, op, &e))?;
                    prepared.insert(sql.to_owned(), s.clone());
                    s
                }
            };
            drop(prepared);
            f(client, &statement)
        })
    }

    /// Run `f` on the connection (connecting first if there is none). A failure that left
    /// the connection closed drops it, so the next call connects again.
    pub(crate) fn with<T>(
        &self,
        op: &str,
        f: impl FnOnce(&mut Client) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let mut guard = self.connected(op)?;
        let Some(client) = guard.as_mut() else {
            unreachable!("connected() leaves a client");
        };
        let out = f(client);
        if client.is_closed() {
            *guard = None;
        }
        out
    }

    fn connected(&self, op: &str) -> Result<MutexGuard<'_, Option<Client>>, StorageError> {
        let mut guard = vev_core::sync::lock(&self.client);
        if guard.as_ref().is_some_and(Client::is_closed) {
            *guard = None;
        }
        if guard.is_none() {
            // Statements prepared on the old connection are gone with it.
            vev_core::sync::lock(&self.prepared).clear();
            let location = &self.target.location;
            let mut client = self
                .target
                .config
                .connect(NoTls)
                .map_err(|e| pg_error(location, op, &e))?;
            if !self.setup.is_empty() {
                client
                    .batch_execute(&self.setup)
                    .map_err(|e| pg_error(location, op, &e))?;
            }
            *guard = Some(client);
        }
        Ok(guard)
    }

    pub(crate) fn location(&self) -> &str {
        &self.target.location
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_their_password_out_of_the_location() {
        let t = Target::parse("postgres://ann:secret@127.0.0.1:5433/app?schema=s1").unwrap();
        assert_eq!(t.location(), "postgres://ann@127.0.0.1:5433/app?schema=s1");
        assert_eq!(t.schema, "s1");
        assert!(!format!("{t:?}").contains("secret"));
        let t = Target::parse("postgresql://ann@db/app?connect_timeout=3").unwrap();
        assert_eq!(t.location(), "postgres://ann@db:5432/app");
        assert_eq!(
            t.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
    }

    #[test]
    fn bad_urls_and_schemas_are_invalid_input() {
        for url in [
            "postgres://ann@h/app?schema=Bad",
            "postgres://ann@h/app?schema=a;drop",
            "postgres://ann@h/app?schema=",
            "postgres://ann:pw@h:notaport/app",
        ] {
            let e = Target::parse(url).unwrap_err();
            assert_eq!(e.code(), "storage/io", "{url}");
            assert!(!e.to_string().contains("pw@"), "{e}");
        }
        assert!(is_postgres_url("postgres://x@h/d"));
        assert!(is_postgres_url("postgresql://x@h/d"));
        assert!(!is_postgres_url("app.vev"));
    }
}
