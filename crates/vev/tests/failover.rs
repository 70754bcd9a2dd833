//! Writer failover on PostgreSQL storage, and again with the segments in an S3-compatible
//! object store (a throwaway moto, reached from the test hosts through `failover/relay.rs`;
//! the log, root and lease stay in PostgreSQL), with the writer and the readers as separate
//! processes on hosts of their own (network namespaces joined by veth pairs, `failover/net.rs`;
//! where this machine does not permit `ip netns add`, processes on loopback, and a paused
//! process, SIGSTOP, stands in for a cut network; the test says so on stderr).
//!
//! In a loop (`VEV_FAILOVER_ITERATIONS`, default 50) the writing process commits as fast as
//! it can and is then SIGKILLed or cut off the network (alternately); a new writer on the
//! other writer host waits for the lease (300 ms here) to expire, takes over and goes on.
//! A cut writer is joined again once the new one writes, and must be fenced. Two reader
//! processes follow all along through `db()` (and now and then `sync()`), checking on every
//! database they see that no transaction is partial (each writes `+n`, `-n` and sets
//! `:c/last` to `n`, with `n` growing) and that nothing goes back in time. At the end every
//! acknowledged transaction is in the database exactly once, nothing is there that no
//! writer tried, the log is gapless, and `verify` finds every log row and every segment the
//! root names (in PostgreSQL or as objects) whole. Each writer also checkpoints every 40 ms
//! besides the automatic checkpoints, so kills and cuts land during segment uploads too.
//!
//! `VEV_FAILOVER_LOOPBACK=1` runs the loopback fallback where namespaces would work too.
//!
//! Every child process is killed, the server stopped and the namespaces deleted by guards,
//! also when the test fails.

#[path = "failover/net.rs"]
mod net;
#[path = "failover/relay.rs"]
mod relay;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use vev::{Connection, Db, LockMode, OpenOptions};
use vev_objstore::testing::MotoServer;
use vev_postgres::testing::{self, Network, TempServer};

const LEASE: Duration = Duration::from_millis(300);
const SCHEMA: &str = r#"[{:db/ident :k/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :c/id :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :c/last :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :f/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;

/// Entities of `:f/n` made before the writers start: enough datoms that every checkpoint
/// writes segments (a smaller database's trees fit in the root).
const FILLER: i64 = 3_000;

/// The object store's bucket.
const BUCKET: &str = "vev-failover";

/// The two tests run one after the other: each takes both cores' worth of processes, and
/// their namespaces are named by process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Hosts 0 and 1 write (in turn), 2 and 3 read.
const WRITER_HOSTS: [usize; 2] = [0, 1];
const READER_HOSTS: [usize; 2] = [2, 3];

fn ints(text: &str) -> Vec<i64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Every `:k/n` value (with repeats, if a transaction were applied twice), and `:c/last`.
fn contents(db: &Db) -> (Vec<i64>, Option<i64>) {
    let r = db.q("[:find ?e ?n :where [?e :k/n ?n]]", &[]).unwrap();
    let mut ns: Vec<i64> = ints(&r.to_edn().to_string())
        .chunks(2)
        .map(|p| p[1])
        .collect();
    ns.sort_unstable();
    let last = db
        .q("[:find ?v . :where [?c :c/id \"c\"] [?c :c/last ?v]]", &[])
        .unwrap();
    (ns, ints(&last.to_edn().to_string()).first().copied())
}

/// Why a database is not one a sequence of whole transactions could have made, if it is not.
fn partial(ns: &[i64], last: Option<i64>) -> Option<String> {
    let set: BTreeSet<i64> = ns.iter().copied().collect();
    if set.len() != ns.len() {
        return Some("a transaction applied twice".to_owned());
    }
    if let Some(n) = set.iter().find(|&&n| n > 0 && !set.contains(&-n)) {
        return Some(format!("+{n} without -{n}"));
    }
    if let Some(n) = set.iter().find(|&&n| n < 0 && !set.contains(&-n)) {
        return Some(format!("{n} without +{}", -n));
    }
    let max = set.iter().next_back().copied().filter(|&n| n > 0);
    (max != last).then(|| format!(":c/last is {last:?} but the largest n is {max:?}"))
}

/// The children's main: a writer or a reader, by `VEV_FAILOVER_ROLE`.
#[test]
fn failover_child() {
    let Ok(role) = std::env::var("VEV_FAILOVER_ROLE") else {
        return;
    };
    let url = std::env::var("VEV_FAILOVER_URL").unwrap();
    match role.as_str() {
        "writer" => writer_main(&url),
        _ => reader_main(&url),
    }
}

fn say(line: &str) {
    println!("child: {line}");
    std::io::stdout().flush().unwrap();
}

/// Take the lease (waiting), then commit `+n`, `-n`, `:c/last n` transactions with `n`
/// from `VEV_FAILOVER_FIRST` up, saying `try n` before and `ok n` after each; stop when
/// fenced, or when stdin closes.
fn writer_main(url: &str) {
    let first: i64 = std::env::var("VEV_FAILOVER_FIRST")
        .unwrap()
        .parse()
        .unwrap();
    let opts = OpenOptions {
        lease: LEASE,
        lock: LockMode::Wait(Duration::from_secs(60)),
        checkpoint_datoms: 300,
        ..OpenOptions::default()
    };
    let conn = Connection::open_with(url, &opts).unwrap();
    say(&format!("ready {}", conn.db().basis_t()));
    // Checkpoints (segments written, a new root) every 40 ms besides the automatic ones, so
    // that kills and cuts land in the middle of them too. A failed one (fenced, cut off)
    // changes nothing; the process ends with the writer.
    let checkpointer = conn.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(40));
        let _ = checkpointer.checkpoint();
    });
    // Stdin closing (the test is done with this writer) ends it.
    let (stop_send, stop) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let _ = stop_send.send(());
    });
    for n in first.. {
        if stop.try_recv().is_ok() {
            return;
        }
        say(&format!("try {n}"));
        let tx = format!("[{{:k/n {n}}} {{:k/n {}}} {{:c/id \"c\" :c/last {n}}}]", -n);
        match conn.transact_edn(&tx) {
            Ok(_) => say(&format!("ok {n}")),
            Err(e) if e.code() == "storage/fenced" => {
                say(&format!("fenced {n}"));
                return;
            }
            Err(e) => {
                say(&format!("err {n} {}", e.code()));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// Follow until stdin closes, checking every database seen; say `done T CHECKS` (or
/// `violation ...`).
fn reader_main(url: &str) {
    let opts = OpenOptions {
        follow_interval: Some(Duration::from_millis(200)),
        ..OpenOptions::read_only()
    };
    let conn = Connection::open_with(url, &opts).unwrap();
    let (stop_send, stop) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let _ = stop_send.send(());
    });
    say("ready");
    let (mut seen_t, mut seen_last, mut seen_ns) = (0u64, None, BTreeSet::new());
    let mut checks = 0u64;
    for round in 0u64.. {
        let done = stop.try_recv().is_ok();
        // Now and then (and at the end) `sync`; otherwise what the follower brought.
        let db = if done || round % 50 == 0 {
            match conn.sync() {
                Ok(db) => db,
                Err(e) => {
                    say(&format!("violation sync failed: {e}"));
                    return;
                }
            }
        } else {
            conn.db()
        };
        if db.basis_t() != seen_t || done {
            let (ns, last) = contents(&db);
            let problem = partial(&ns, last)
                .or_else(|| (db.basis_t() < seen_t).then(|| "t went back".to_owned()))
                .or_else(|| (last < seen_last).then(|| ":c/last went back".to_owned()))
                .or_else(|| {
                    let set: BTreeSet<i64> = ns.iter().copied().collect();
                    let lost = seen_ns.difference(&set).next().copied();
                    seen_ns = set;
                    lost.map(|n| format!("{n} disappeared"))
                });
            if let Some(p) = problem {
                say(&format!("violation at t={}: {p}", db.basis_t()));
                return;
            }
            (seen_t, seen_last) = (db.basis_t(), last);
            checks += 1;
        }
        if done {
            say(&format!("done {seen_t} {checks}"));
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A child process: its lines go to one channel, tagged with `id`.
struct Proc {
    child: Child,
    id: usize,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
    }

    /// Close its stdin: a writer stops, a reader checks once more and says `done`.
    fn finish(&mut self) {
        drop(self.child.stdin.take());
    }
}

/// The object store the segments go to, and its relay to the test hosts.
struct Objects {
    relay: Option<relay::Relay>,
    moto: MotoServer,
}

struct World {
    /// Dropped first: the relay listens on the hosts' links.
    objects: Option<Objects>,
    hosts: Option<net::Hosts>,
    pg: TempServer,
    db: String,
    /// Where the children's lines go.
    send: Sender<(usize, String)>,
    next_id: usize,
}

impl World {
    /// The database's URL from this process (loopback).
    fn local_url(&self) -> String {
        self.url_at("127.0.0.1")
    }

    /// The database's URL as host `h` reaches the servers.
    fn url(&self, h: usize) -> String {
        let addr = self
            .hosts
            .as_ref()
            .map_or("127.0.0.1".to_owned(), |n| n.server_address(h));
        self.url_at(&addr)
    }

    /// The database's URL with the servers at `addr`.
    fn url_at(&self, addr: &str) -> String {
        let log = format!("postgres://vev@{addr}:{}/{}", self.pg.port, self.db);
        match &self.objects {
            None => log,
            Some(o) => format!(
                "s3://{BUCKET}/failover?endpoint=http://{addr}:{}&allow_http=true&log={log}",
                o.moto.port
            ),
        }
    }

    fn spawn(&mut self, h: usize, role: &str, first: i64) -> Proc {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match &self.hosts {
            Some(n) => n.command(h, &exe),
            None => Command::new(&exe),
        };
        let mut child = cmd
            .args([
                "--exact",
                "failover_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("VEV_FAILOVER_ROLE", role)
            .env("VEV_FAILOVER_URL", self.url(h))
            .env("VEV_FAILOVER_FIRST", first.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let id = self.next_id;
        self.next_id += 1;
        let out = BufReader::new(child.stdout.take().unwrap());
        let send = self.send.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                // libtest's own text may begin the line the child's first answer ends.
                if let Some(at) = line.find("child: ") {
                    if send.send((id, line[at + 7..].to_owned())).is_err() {
                        return;
                    }
                }
            }
        });
        Proc { child, id }
    }
}

/// What the writers said, gathered from the lines.
#[derive(Default)]
struct Ledger {
    tried: BTreeSet<i64>,
    acked: BTreeSet<i64>,
    fenced: usize,
    /// Which process (id) said `ready`, and readers' final words.
    ready: BTreeSet<usize>,
    done: BTreeMap<usize, String>,
}

impl Ledger {
    fn take(&mut self, id: usize, line: &str) {
        let mut words = line.split_whitespace();
        let word = words.next().unwrap_or("");
        let n: Option<i64> = words.next().and_then(|w| w.parse().ok());
        match (word, n) {
            ("try", Some(n)) => {
                self.tried.insert(n);
            }
            ("ok", Some(n)) => {
                assert!(self.acked.insert(n), "{n} acknowledged twice");
            }
            ("fenced", _) => self.fenced += 1,
            ("ready", _) => {
                self.ready.insert(id);
            }
            ("done", _) => {
                self.done.insert(id, line.to_owned());
            }
            ("violation", _) => panic!("reader {id}: {line}"),
            _ => {}
        }
    }

    /// Take lines until `until` holds (or panic after `limit`).
    fn pump(
        &mut self,
        lines: &Receiver<(usize, String)>,
        limit: Duration,
        until: impl Fn(&Ledger) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        while !until(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok((id, line)) => self.take(id, &line),
                Err(_) if Instant::now() >= deadline => panic!("no progress within {limit:?}"),
                Err(_) => {}
            }
        }
    }

    /// Take what has arrived, for `d`.
    fn drain(&mut self, lines: &Receiver<(usize, String)>, d: Duration) {
        let deadline = Instant::now() + d;
        while let Ok((id, line)) =
            lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.take(id, &line);
        }
    }
}

#[test]
fn writer_failover_with_readers_on_other_hosts() {
    failover(false);
}

#[test]
fn writer_failover_with_segments_in_an_object_store() {
    failover(true);
}

fn failover(objects: bool) {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !testing::available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "PostgreSQL 15 is not installed"
        );
        eprintln!("skipped the failover test: PostgreSQL 15 is not installed");
        return;
    }
    let iterations: usize = std::env::var("VEV_FAILOVER_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    // `VEV_FAILOVER_LOOPBACK=1` runs the fallback where namespaces would work too.
    let hosts = match std::env::var_os("VEV_FAILOVER_LOOPBACK").map_or_else(
        || net::Hosts::new(4),
        |_| Err("VEV_FAILOVER_LOOPBACK is set".to_owned()),
    ) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!(
                "network namespaces are not permitted here ({e}): the failover test runs its \
                 processes on loopback, and pauses the writer (SIGSTOP) instead of cutting \
                 its network"
            );
            None
        }
    };
    let network = hosts.as_ref().map_or(Network::default(), |h| Network {
        listen: (0..4).map(|i| h.server_address(i)).collect(),
        clients: (0..4).map(|i| format!("{}/32", h.address(i))).collect(),
    });
    let pg = TempServer::start_with(&network).expect("a throwaway postgresql");
    let db = pg
        .create_db("failover")
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let objects = if objects {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let Some(moto) = vev_objstore::testing::for_test("the object-store failover test", dir)
        else {
            return;
        };
        moto.create_bucket(BUCKET).unwrap();
        let relay = hosts.as_ref().map(|h| {
            let listen: Vec<String> = (0..4).map(|i| h.server_address(i)).collect();
            relay::Relay::start(&listen, SocketAddr::from(([127, 0, 0, 1], moto.port))).unwrap()
        });
        Some(Objects { relay, moto })
    } else {
        None
    };
    let (send, lines) = std::sync::mpsc::channel();
    let mut world = World {
        objects,
        hosts,
        pg,
        db,
        send,
        next_id: 0,
    };
    let setup = Connection::open(world.local_url()).unwrap();
    setup.transact_edn(SCHEMA).unwrap();
    let filler: Vec<String> = (0..FILLER).map(|n| format!("{{:f/n {n}}}")).collect();
    setup
        .transact_edn(&format!("[{}]", filler.join(" ")))
        .unwrap();
    drop(setup);
    run(&mut world, &lines, iterations);
}

fn run(world: &mut World, lines: &Receiver<(usize, String)>, iterations: usize) {
    let started = Instant::now();
    let mut ledger = Ledger::default();
    let mut readers: Vec<Proc> = READER_HOSTS
        .iter()
        .map(|&h| world.spawn(h, "reader", 0))
        .collect();
    let reader_ids: Vec<usize> = readers.iter().map(|p| p.id).collect();
    ledger.pump(lines, Duration::from_secs(60), |l| {
        reader_ids.iter().all(|id| l.ready.contains(id))
    });
    let mut writer = world.spawn(WRITER_HOSTS[0], "writer", 1);
    let mut cut: Vec<Proc> = Vec::new();
    let (mut kills, mut cuts) = (0, 0);
    for it in 0..iterations {
        let id = writer.id;
        ledger.pump(lines, Duration::from_secs(60), |l| l.ready.contains(&id));
        // Let it commit a while.
        let before = ledger.acked.len();
        ledger.pump(lines, Duration::from_secs(60), |l| {
            l.acked.len() >= before + 8
        });
        let host = WRITER_HOSTS[it % 2];
        let next_host = WRITER_HOSTS[(it + 1) % 2];
        let partition = it % 2 == 1;
        if partition {
            match &world.hosts {
                Some(h) => h.link(host, false),
                None => writer.signal("-STOP"),
            }
            cuts += 1;
        } else {
            writer.signal("-KILL");
            kills += 1;
        }
        let first = (it as i64 + 2) * 1_000_000;
        let old = std::mem::replace(&mut writer, world.spawn(next_host, "writer", first));
        let id = writer.id;
        ledger.pump(lines, Duration::from_secs(60), |l| l.ready.contains(&id));
        if partition {
            // The new writer holds the lease: the old one comes back and must be fenced.
            match &world.hosts {
                Some(h) => h.link(host, true),
                None => old.signal("-CONT"),
            }
            cut.push(old);
        }
        // Cut writers get a while to meet the fence, then go.
        if cut.len() > 2 {
            cut.remove(0);
        }
    }
    let id = writer.id;
    ledger.pump(lines, Duration::from_secs(60), |l| l.ready.contains(&id));
    writer.finish();
    let _ = writer.child.wait();
    ledger.drain(lines, Duration::from_millis(300));
    drop(cut);
    drop(writer);
    for r in &mut readers {
        r.finish();
    }
    ledger.pump(lines, Duration::from_secs(60), |l| {
        reader_ids.iter().all(|id| l.done.contains_key(id))
    });
    let report = check_final(world, &ledger);
    eprintln!(
        "failover ({}): {iterations} iterations ({kills} SIGKILLs, {cuts} {}) in {:?}; {} \
         transactions acknowledged, {} tried; {} writers met the fence; readers: {:?}; \
         {} segments named, {} kept as garbage",
        if world.objects.is_some() {
            "segments in an object store"
        } else {
            "postgresql"
        },
        if world.hosts.is_some() {
            "network cuts"
        } else {
            "pauses"
        },
        started.elapsed(),
        ledger.acked.len(),
        ledger.tried.len(),
        ledger.fenced,
        ledger.done.values().collect::<Vec<_>>(),
        report.segments,
        report.garbage_segments
    );
}

fn check_final(world: &World, ledger: &Ledger) -> vev::VerifyReport {
    let reader = Connection::open_with(
        world.local_url(),
        &OpenOptions {
            follow_interval: None,
            ..OpenOptions::read_only()
        },
    )
    .unwrap();
    let db = reader.sync().unwrap();
    let (ns, last) = contents(&db);
    assert_eq!(partial(&ns, last), None);
    let present: BTreeSet<i64> = ns.iter().copied().filter(|&n| n > 0).collect();
    let lost: Vec<_> = ledger.acked.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    let invented: Vec<_> = present.difference(&ledger.tried).collect();
    assert!(invented.is_empty(), "present but never tried: {invented:?}");
    let log = db.tx_range(Some(1), None).unwrap();
    let ts: Vec<u64> = log.iter().map(|e| e.t).collect();
    assert_eq!(ts, (1..=db.basis_t()).collect::<Vec<_>>(), "a gapless log");
    let report = reader.verify().unwrap().unwrap();
    assert!(report.segments > 0, "no checkpoint was written: {report:?}");
    if let Some(relay) = world.objects.as_ref().and_then(|o| o.relay.as_ref()) {
        assert!(relay.connections() > 0, "no host reached the object store");
    }
    for (id, done) in &ledger.done {
        let t: u64 = done.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(t, db.basis_t(), "reader {id} ended at t={t} after sync");
    }
    report
}
