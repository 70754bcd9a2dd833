//! `vev demo mbrainz`: the MusicBrainz-shaped data set of `vev-mbrainz`, loaded through
//! `bulk_load` with a progress bar, then a few of the workload's queries with their timings.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use vev::{Connection, Edn};
use vev_mbrainz::{NamedQuery, Scale};

use crate::demo::{as_is, count, fresh_file, ms, show};
use crate::error::CliResult;

/// Datoms per release, about (with the release's share of artists), for the bar's length.
const DATOMS_PER_RELEASE: u64 = 61;

pub fn run(dir: Option<PathBuf>, scale: Scale) -> CliResult<()> {
    let path = fresh_file(dir, "mbrainz")?;
    let conn = Connection::open(&path)?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "created {} (scale {}: about {} releases)",
        path.display(),
        scale.name(),
        scale.releases()
    )?;
    let bar = ProgressBar::new(scale.releases() as u64 * DATOMS_PER_RELEASE);
    bar.set_style(
        ProgressStyle::with_template(
            "loading {bar:40} {human_pos}/~{human_len} datoms ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let loaded = vev_mbrainz::load(&conn, scale, &mut |p| bar.set_position(p.datoms))?;
    bar.finish_and_clear();
    let c = loaded.counts;
    writeln!(
        out,
        "loaded {} artists, {} abstract releases, {} releases, {} media, {} tracks: {} in {} in {:.2?}",
        c.artists,
        c.abstract_releases,
        c.releases,
        c.media,
        c.tracks,
        count(loaded.progress.datoms as usize, "datom", "datoms"),
        count(loaded.progress.txs as usize, "transaction", "transactions"),
        loaded.progress.elapsed,
    )?;
    writeln!(out)?;
    let db = conn.db();
    let rules = vev::edn::parse(vev_mbrainz::RULES)?;
    for q in vev_mbrainz::NINE
        .iter()
        .filter(|q| ["q1", "q5", "q6"].contains(&q.name))
    {
        let mut args = Vec::new();
        if q.rules {
            args.push(rules.clone());
        }
        if let Some(input) = q.input {
            args.push(vev::edn::parse(input)?);
        }
        let title = format!(
            "{} ({}, input {})",
            q.name,
            first_line(q),
            q.input.unwrap_or("none")
        );
        show(&mut out, &title, &db, body(q), &args, &as_is)?;
    }
    feed_query_8(&db, &rules, &mut out)?;
    writeln!(
        out,
        "try (from the repository's root): vev query {} @queries/mbrainz/q1.edn '\"John Lennon\"'",
        path.display()
    )?;
    writeln!(
        out,
        "     vev query {} @queries/mbrainz/q7.edn @queries/mbrainz/rules.edn '[\"George Harrison\"]'",
        path.display()
    )?;
    Ok(())
}

/// Query 8 on its own result: Diana Ross's collaborators, then theirs.
fn feed_query_8(db: &vev::Db, rules: &Edn, out: &mut dyn Write) -> CliResult<()> {
    let q8 = &vev_mbrainz::NINE[7];
    let started = Instant::now();
    let first = db.q(
        q8.text,
        &[rules.clone(), vev::edn::parse(r#"[["Diana Ross"]]"#)?],
    )?;
    let second = db.q(q8.text, &[rules.clone(), vev_mbrainz::relation_of(&first)])?;
    writeln!(
        out,
        "q8 (collaborators of Diana Ross's {}, through the query's own result): {} ({})",
        count(first.len(), "collaborator", "collaborators"),
        count(second.len(), "row", "rows"),
        ms(started.elapsed())
    )?;
    writeln!(out)?;
    Ok(())
}

/// The description on a query file's first line, without its `;;`.
fn first_line(q: &NamedQuery) -> &str {
    q.text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix(";; "))
        .and_then(|l| l.split_once(": ").map(|(_, d)| d.trim_end_matches('.')))
        .unwrap_or(q.name)
}

/// The query without its comment lines.
fn body(q: &NamedQuery) -> &str {
    let mut rest = q.text;
    while rest.starts_with(";;") {
        rest = rest.split_once('\n').map_or("", |(_, r)| r);
    }
    rest
}
