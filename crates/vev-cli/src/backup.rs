//! `vev backup SRC DEST`: a consistent copy of a live database (`Connection::backup`, SQLite's
//! online backup), with a progress bar on a terminal. It opens SRC read-only, so it runs
//! while another process is the writer.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use vev::Edn;

use crate::commands::{kw, open_read};
use crate::error::CliResult;

pub fn backup(src: &Path, dest: &Path) -> CliResult<()> {
    let conn = open_read(src)?;
    // Into a directory: under the source's file name, as `cp` does.
    let dest = match src.file_name() {
        Some(name) if dest.is_dir() => dest.join(name),
        _ => dest.to_path_buf(),
    };
    // Drawn on stderr, and only when it is a terminal.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("backup {bar:40} {pos}/{len} pages ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let done = conn.backup(&dest, &mut |p| {
        bar.set_length(p.pages_total);
        bar.set_position(p.pages_done);
    });
    bar.finish_and_clear();
    let done = done?;
    let report = BTreeMap::from([
        (kw("backup"), Edn::String(dest.display().to_string())),
        (kw("basis-t"), Edn::Integer(done.basis_t as i64)),
        (kw("bytes"), Edn::Integer(done.bytes as i64)),
    ]);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", Edn::Map(report))?;
    Ok(out.flush()?)
}
