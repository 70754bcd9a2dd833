//! `Store::verify`: every log row and segment checked (checksums, decoding, order), and the
//! indexes of the latest database against their segments. With segments in an object
//! store, every object a row names is fetched and its checksum checked.

use vev_core::StorageError;
use vev_db::Db;

use crate::session::pg_error;
use crate::{decode_log_row, unseal, Store};

/// Totals that `verify` checked (the fields of `vev-sqlite`'s report of the same name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    pub log_rows: u64,
    pub log_datoms: u64,
    pub segments: u64,
    /// Of `segments`, those no root names any more, kept for the grace period.
    pub garbage_segments: u64,
    pub index_datoms: u64,
    /// Full-text segments stored (their parts' checksums checked).
    pub fulltext_segments: u64,
    /// Of those, the ones a compaction replaced, kept for the grace period.
    pub fulltext_garbage_segments: u64,
    /// Documents of the full-text index, checked against the database's values.
    pub fulltext_documents: u64,
}

impl Store {
    /// Check every log row and segment, and that the log reaches `db` (the latest database).
    pub fn verify(&self, db: &Db) -> Result<VerifyReport, StorageError> {
        let s = &self.schema;
        let location = self.location();
        let err = |e: postgres::Error| pg_error(location, "verify", &e);
        let mut report = self.conn.with("verify", |c| {
            let mut report = VerifyReport {
                log_rows: 0,
                log_datoms: 0,
                segments: 0,
                garbage_segments: 0,
                index_datoms: 0,
                fulltext_segments: 0,
                fulltext_garbage_segments: 0,
                fulltext_documents: 0,
            };
            let rows = c
                .query(&format!("SELECT t, record FROM {s}.log ORDER BY t"), &[])
                .map_err(err)?;
            for (expect, row) in (1u64..).zip(rows) {
                let t: i64 = row.get(0);
                let rec = decode_log_row(t, row.get(1))?;
                if t as u64 != expect {
                    return Err(StorageError::corruption(
                        format!("log row t={t}"),
                        format!("expected t={expect}: the log has a gap"),
                    ));
                }
                report.log_rows += 1;
                report.log_datoms += rec.datoms.len() as u64;
            }
            for row in c
                .query(
                    &format!("SELECT id, payload FROM {s}.segment ORDER BY id"),
                    &[],
                )
                .map_err(err)?
            {
                let id: i64 = row.get(0);
                let what = || format!("segment {id}");
                let payload = unseal(&what, row.get(1))?;
                if let Some(objects) = &self.objects {
                    crate::objects::fetch(objects.as_ref(), &what, payload)?;
                }
                report.segments += 1;
            }
            let mut last = None;
            for row in c
                .query(
                    &format!("SELECT id, part, payload FROM {s}.ft_segment ORDER BY id, part"),
                    &[],
                )
                .map_err(err)?
            {
                let (id, part): (i64, i32) = (row.get(0), row.get(1));
                let payload = unseal(
                    &|| format!("full-text segment {id} part {part}"),
                    row.get(2),
                )?;
                if let Some(objects) = &self.objects {
                    let what = || format!("full-text segment {id}");
                    crate::objects::fetch(objects.as_ref(), &what, payload)?;
                }
                if last != Some(id) {
                    report.fulltext_segments += 1;
                    last = Some(id);
                }
            }
            report.fulltext_garbage_segments = c
                .query_one(&format!("SELECT count(*) FROM {s}.ft_garbage"), &[])
                .map_err(err)?
                .get::<_, i64>(0) as u64;
            Ok(report)
        })?;
        report.garbage_segments = self.garbage_segments()?;
        if report.log_rows < db.basis_t() {
            return Err(StorageError::corruption(
                "log",
                format!(
                    "it ends at t={} but the database is at t={}",
                    report.log_rows,
                    db.basis_t()
                ),
            ));
        }
        report.index_datoms = db.verify_segments()? as u64;
        report.fulltext_documents = db.verify_fulltext()?.documents;
        Ok(report)
    }
}
