//! `vev serve`: a PostgreSQL wire-protocol server in front of a Vev database.
//!
//! SQL over datoms: a table is an attribute namespace and a row an entity
//! (`catalog`); each SQL statement is translated to a Datalog query or transaction data
//! (`sql`) and run by the same engine as Datalog, in a session that gives PostgreSQL's
//! transactions (`session`, with row locks from `locks`). The protocol is pgwire's
//! (`server`). `docs/sql.md` is the user's reference.

pub mod cancel;
pub mod catalog;
pub mod error;
pub mod jdbcmeta;
pub mod locks;
pub mod numeric;
pub mod pgcatalog;
pub mod server;
pub mod session;
pub mod sql;
pub mod sqlfns;
pub mod types;

use std::net::SocketAddr;
use std::sync::Arc;

pub use error::SqlError;

/// The PostgreSQL version the server reports (`server_version`): clients choose their
/// SQL by it, and Vev answers what PostgreSQL 15 clients send.
pub const SERVER_VERSION: &str = "15.18";

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on (`127.0.0.1:5432` by default).
    pub listen: SocketAddr,
    /// Clients must give this password (SCRAM-SHA-256, libpq's default method); `None`
    /// trusts every client (fit for loopback only).
    pub password: Option<String>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 5432)),
            password: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("serve/listen: cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("serve/runtime: cannot start the server's threads: {0}")]
    Runtime(std::io::Error),
}

impl ServeError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            ServeError::Listen { .. } => "serve/listen",
            ServeError::Runtime(_) => "serve/runtime",
        }
    }
}

/// A running server: it stops when dropped (or at `shutdown`).
pub struct Server {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Server {
    /// Listen on `opts.listen` and serve `conn` on background threads.
    pub fn start(conn: vev::Connection, opts: &ServeOptions) -> Result<Server, ServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("vev-serve")
            .build()
            .map_err(ServeError::Runtime)?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(opts.listen))
            .map_err(|source| ServeError::Listen {
                addr: opts.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Listen {
            addr: opts.listen,
            source,
        })?;
        let shared = Arc::new(session::Shared::new(conn));
        let factory = Arc::new(server::Factory(Arc::new(server::Handlers::new(
            shared,
            opts.password.as_deref(),
        ))));
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stop_rx => break,
                    accepted = listener.accept() => {
                        let Ok((socket, _)) = accepted else { continue };
                        let _ = socket.set_nodelay(true);
                        let factory = factory.clone();
                        tokio::spawn(async move {
                            let _ = pgwire::tokio::process_socket(socket, None, factory).await;
                        });
                    }
                }
            }
            let _ = done_tx.send(());
        });
        Ok(Server {
            addr,
            runtime: Some(runtime),
            stop: Some(stop_tx),
            done: Some(done_rx),
        })
    }

    /// The address the server listens on (with the port chosen when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve until the process is stopped.
    pub fn wait(mut self) {
        if let (Some(rt), Some(done)) = (&self.runtime, self.done.take()) {
            let _ = rt.block_on(done);
        }
    }

    /// Serve until the process receives SIGTERM or SIGINT (PostgreSQL's "smart" and "fast"
    /// shutdown signals), then stop accepting and close every connection; the signal's name.
    /// The other signals keep their default actions. Without a way to listen for signals
    /// (no Unix), serves until stopped.
    pub fn wait_for_signal(mut self) -> Option<&'static str> {
        let (rt, done) = (self.runtime.as_ref()?, self.done.take()?);
        let signal = rt.block_on(async {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut term), Ok(mut int)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                ) else {
                    let _ = done.await;
                    return None;
                };
                tokio::select! {
                    _ = term.recv() => Some("SIGTERM"),
                    _ = int.recv() => Some("SIGINT"),
                    _ = done => None,
                }
            }
            #[cfg(not(unix))]
            {
                let _ = done.await;
                None
            }
        });
        self.stop_now();
        signal
    }

    /// Stop accepting and close every connection.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}
