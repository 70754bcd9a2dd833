//! Readers following the writer: PostgreSQL `LISTEN/NOTIFY`, with polling as the fallback
//! (protocol: `docs/design/follow.md`).
//!
//! - The writer sends `NOTIFY` on the database's channel (`channel`) inside the PostgreSQL
//!   transaction of every log write and of every checkpoint's root, so a notification is
//!   delivered exactly when (and only if) what it announces has committed. For a plain group
//!   commit it is part of the one fenced statement (`pg_notify` in the same `WITH`), so it
//!   costs no round trip.
//! - A read-only store's follower (`Follower`, thread `vev-follow`) holds a connection of its
//!   own that `LISTEN`s on the channel. On a notification (all pending ones drained into one
//!   wake) it calls the caller's `check`, which reads the data version and catches up. It
//!   also checks every `interval` without a notification: a notification can be missed only
//!   while the listen connection is down, and a connection cut without a reset (a network
//!   partition) may look alive.
//! - When the listen connection fails (the server restarted, `pg_terminate_backend`, a
//!   network cut) the follower polls every `interval` and reconnects with exponential
//!   backoff (100 ms doubling to at most `interval`, and at most 5 s); once `LISTEN` is back
//!   it checks at once, since notifications sent meanwhile are gone. A check that finds a
//!   change no notification announced means the listen connection may be dead without
//!   knowing it: it is dropped and made again.
//!
//! So a reader's lag behind an acknowledged commit is, while listening, the notification's
//! delivery plus one catch-up read; otherwise at most `interval` plus that read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use crate::session::Target;

/// The application name of listen connections (`pg_stat_activity.application_name`).
pub const LISTEN_APPLICATION: &str = "vev follow";
/// The first reconnection delay of a listen connection (doubling from there).
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// The longest reconnection delay.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long the follower blocks at a time before it looks at its stop flag.
const SLICE: Duration = Duration::from_millis(100);

/// The notification channel of the database in `schema`: `vev:` and the schema, cut to
/// PostgreSQL's 63 bytes (two schemas sharing a 59-byte prefix only wake each other's
/// readers for nothing; a wake is a check, never data).
pub(crate) fn channel(schema: &str) -> String {
    let mut c = format!("vev:{schema}");
    c.truncate(63);
    c
}

/// What a follower's `check` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// The database had not changed.
    Same,
    /// It had, and the reader caught up (or tried to).
    Changed,
    /// The reader is gone: stop following.
    Stop,
}

/// A running follower thread; dropping it stops the thread (within `SLICE`), without
/// waiting for it.
pub struct Follower {
    stop: Arc<AtomicBool>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Start a follower for the database at `target`: `check` runs on every notification and
/// at least every `interval`.
pub(crate) fn start(
    target: &Target,
    interval: Duration,
    check: Box<dyn FnMut() -> Checked + Send>,
) -> Result<Follower, std::io::Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut config = target.config.clone();
    config.application_name(LISTEN_APPLICATION);
    let mut follow = Follow {
        config,
        listen_sql: format!("LISTEN \"{}\"", channel(&target.schema)),
        interval: interval.max(Duration::from_millis(1)),
        stop: stop.clone(),
        check,
        listen: None,
        backoff: BACKOFF_FIRST,
        connect_at: Instant::now(),
    };
    std::thread::Builder::new()
        .name("vev-follow".to_owned())
        .spawn(move || follow.run())?;
    Ok(Follower { stop })
}

struct Follow {
    config: postgres::Config,
    listen_sql: String,
    interval: Duration,
    stop: Arc<AtomicBool>,
    check: Box<dyn FnMut() -> Checked + Send>,
    /// The listen connection, while it is up.
    listen: Option<Client>,
    /// The next reconnection delay.
    backoff: Duration,
    /// When to try to connect again.
    connect_at: Instant,
}

/// What one wait for notifications ended with.
enum Woken {
    Notified,
    Quiet,
    Lost,
}

impl Follow {
    fn run(&mut self) {
        let mut checked_at = Instant::now();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let mut due = false;
            let mut reconnected = false;
            if self.listen.is_none() && Instant::now() >= self.connect_at {
                // Back after a gap: what was committed meanwhile sent no notification here.
                reconnected = self.connect();
                due = reconnected;
            }
            let notified = match self.wait() {
                Woken::Notified => true,
                Woken::Quiet => false,
                Woken::Lost => {
                    self.lost();
                    due = true;
                    false
                }
            };
            due |= checked_at.elapsed() >= self.interval;
            if !(notified || due) {
                continue;
            }
            checked_at = Instant::now();
            match (self.check)() {
                Checked::Stop => return,
                // A change nobody announced: the listen connection may be dead unawares.
                Checked::Changed if !notified && !reconnected && self.listen.is_some() => {
                    self.lost();
                }
                Checked::Changed | Checked::Same => {}
            }
        }
    }

    /// Connect and `LISTEN`; whether that worked.
    fn connect(&mut self) -> bool {
        let listening = self.config.connect(NoTls).and_then(|mut c| {
            c.batch_execute(&self.listen_sql)?;
            Ok(c)
        });
        match listening {
            Ok(c) => {
                self.listen = Some(c);
                self.backoff = BACKOFF_FIRST;
                true
            }
            Err(_) => {
                self.retry_later();
                false
            }
        }
    }

    fn retry_later(&mut self) {
        self.connect_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2)
            .min(self.interval.max(BACKOFF_FIRST))
            .min(BACKOFF_MAX);
    }

    /// The listen connection failed (or may have): drop it and reconnect later.
    fn lost(&mut self) {
        self.listen = None;
        self.retry_later();
    }

    /// Block up to `SLICE` for a notification, draining every pending one.
    fn wait(&mut self) -> Woken {
        let Some(client) = &mut self.listen else {
            std::thread::sleep(SLICE.min(self.interval));
            return Woken::Quiet;
        };
        let woken = {
            let mut notifications = client.notifications();
            let first = notifications.timeout_iter(SLICE.min(self.interval)).next();
            match first {
                Ok(Some(_)) => {
                    // Drain what else has arrived: one catch-up covers them all.
                    let mut more = notifications.iter();
                    while let Ok(Some(_)) = more.next() {}
                    Woken::Notified
                }
                Ok(None) => Woken::Quiet,
                Err(_) => Woken::Lost,
            }
        };
        // A closed connection reads as "no notification": look.
        if client.is_closed() {
            return Woken::Lost;
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::channel;

    #[test]
    fn channels_fit_postgres_identifiers() {
        assert_eq!(channel("vev"), "vev:vev");
        let long = "s".repeat(63);
        assert_eq!(channel(&long).len(), 63);
        assert!(channel(&long).starts_with("vev:sss"));
    }
}
