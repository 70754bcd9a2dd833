//! Times `(reach ?a ?b)` over the demo's friend graph from one person, with the rule written
//! right-linear and left-linear and called with either argument bound (issue 24).
//!
//! `cargo run --release -p vev-cli --example time_reach -- DB [EMAIL] [RUNS]`: DB is a file
//! `vev demo DIR --people N` made (opened read only), EMAIL the person (default
//! `p999999@example.com`), RUNS the runs per query (default 5); prints the count each query
//! finds and its best and median time.

use std::time::{Duration, Instant};

use vev::edn::Edn;
use vev::{Connection, OpenOptions};

const RIGHT: &str = r#"[[(reach ?a ?b) [?a :person/friend ?b]]
                        [(reach ?a ?b) [?a :person/friend ?x] (reach ?x ?b)]]"#;
const LEFT: &str = r#"[[(reach ?a ?b) [?a :person/friend ?b]]
                       [(reach ?a ?b) (reach ?a ?x) [?x :person/friend ?b]]]"#;
const FROM: &str = r#"[:find (count ?b) . :in $ % ?email
                       :where [?a :person/email ?email] (reach ?a ?b)]"#;
const TO: &str = r#"[:find (count ?a) . :in $ % ?email
                     :where [?b :person/email ?email] (reach ?a ?b)]"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: time_reach DB [EMAIL] [RUNS]")?;
    let email = args
        .next()
        .unwrap_or_else(|| "p999999@example.com".to_owned());
    let runs: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )?;
    let db = conn.db();
    for (rules_name, rules) in [("right-linear", RIGHT), ("left-linear", LEFT)] {
        for (dir, query) in [("?a bound", FROM), ("?b bound", TO)] {
            let inputs = [vev::edn::parse(rules)?, Edn::String(email.clone())];
            let mut times: Vec<Duration> = Vec::with_capacity(runs);
            let mut found = String::new();
            for _ in 0..runs.max(1) {
                let started = Instant::now();
                let result = db.q(query, &inputs)?;
                times.push(started.elapsed());
                found = result.to_edn().to_string();
            }
            times.sort();
            println!(
                "{rules_name:13} {dir}: {found:>7} found, best {:.1} ms, median {:.1} ms ({} runs)",
                times[0].as_secs_f64() * 1e3,
                times[times.len() / 2].as_secs_f64() * 1e3,
                times.len()
            );
        }
    }
    Ok(())
}
