//! `vev copy SRC DEST`: a database moved to another store with its whole history
//! (`Connection::copy_to`): a file into PostgreSQL, PostgreSQL into a file, file to file.
//! SRC is opened read-only, so another process may go on writing to it; DEST must be empty
//! (or not exist). A progress bar on a terminal; a summary line at the end.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use vev::{CopyOptions, CopyStage, Edn, LockMode, OpenOptions};

use crate::commands::{kw, open_read};
use crate::error::CliResult;

pub fn copy(src: &Path, dest: &Path, verify: bool, lock: LockMode) -> CliResult<()> {
    let conn = open_read(src)?;
    // Drawn on stderr, and only when it is a terminal.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("copy {msg:12} {bar:40} {pos}/{len} transactions ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let opts = CopyOptions {
        open: OpenOptions {
            lock,
            ..OpenOptions::default()
        },
        verify,
        ..CopyOptions::default()
    };
    let done = conn.copy_to(dest, &opts, &mut |p| {
        bar.set_length(p.records_total);
        bar.set_position(p.records);
        bar.set_message(match p.stage {
            CopyStage::Reading => "reading",
            CopyStage::Writing => "writing",
            CopyStage::Checkpointing => "checkpoint",
            CopyStage::Verifying => "verifying",
        });
    });
    bar.finish_and_clear();
    let done = done?;
    let report = BTreeMap::from([
        (kw("copy"), Edn::String(done.dest.clone())),
        (kw("basis-t"), Edn::Integer(done.basis_t as i64)),
        (kw("records"), Edn::Integer(done.records as i64)),
        (kw("datoms"), Edn::Integer(done.datoms as i64)),
        (kw("bytes"), Edn::Integer(done.bytes as i64)),
        (
            kw("verified-datoms"),
            Edn::Integer(done.verified_datoms as i64),
        ),
        // Milliseconds kept: three decimals.
        (
            kw("seconds"),
            Edn::Float((done.elapsed.as_secs_f64() * 1000.0).round() / 1000.0),
        ),
    ]);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", Edn::Map(report))?;
    Ok(out.flush()?)
}
