//! What stock pgbench 15 prints, parsed: the summary of a run and the `done in` line of an
//! init.

use crate::error::BenchError;

/// The summary of one `pgbench -T` run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// `tps = … (without initial connection time)`.
    pub tps: f64,
    /// `latency average = … ms`.
    pub latency_ms: f64,
    /// `number of transactions actually processed: …`.
    pub processed: u64,
    /// `number of failed transactions: … (…%)`.
    pub failed: u64,
    /// `number of transactions retried: … (…%)`; pgbench prints it only when
    /// `--max-tries` is above 1, so `None` means no retry was possible.
    pub retried: Option<u64>,
}

/// The value after `prefix` on the first line that starts with it, trimmed.
fn field<'a>(output: &'a str, prefix: &str) -> Option<&'a str> {
    output
        .lines()
        .find_map(|line| line.trim().strip_prefix(prefix))
        .map(str::trim)
}

/// The first whitespace-separated word of `field(prefix)`, parsed.
fn number<T: std::str::FromStr>(output: &str, prefix: &'static str) -> Result<T, BenchError> {
    field(output, prefix)
        .and_then(|v| v.split_whitespace().next())
        .and_then(|word| word.parse().ok())
        .ok_or(BenchError::PgbenchOutput { line: prefix })
}

/// Parse the summary pgbench prints on stdout at the end of a run.
pub fn parse_run(stdout: &str) -> Result<RunSummary, BenchError> {
    let tps_line = stdout
        .lines()
        .find(|l| l.starts_with("tps = ") && l.contains("without initial connection time"))
        .ok_or(BenchError::PgbenchOutput {
            line: "tps = … (without initial connection time)",
        })?;
    let retried = match field(stdout, "number of transactions retried:") {
        Some(_) => Some(number(stdout, "number of transactions retried:")?),
        None => None,
    };
    Ok(RunSummary {
        tps: number(tps_line, "tps = ")?,
        latency_ms: number(stdout, "latency average = ")?,
        processed: number(stdout, "number of transactions actually processed:")?,
        failed: number(stdout, "number of failed transactions:")?,
        retried,
    })
}

/// The step times of an init: the parenthesis of pgbench's last `done in … s (…)` line,
/// e.g. `drop tables 0.00 s, create tables 0.02 s, client-side generate 0.13 s, primary keys
/// 0.05 s`; `None` when the line is missing.
pub fn init_steps(stderr: &str) -> Option<String> {
    let line = stderr.lines().rev().find(|l| l.starts_with("done in "))?;
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    (open < close).then(|| line[open + 1..close].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELECT_ONLY: &str = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: select only>
scaling factor: 1
query mode: prepared
number of clients: 1
number of threads: 1
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 85276
number of failed transactions: 0 (0.000%)
latency average = 0.023 ms
initial connection time = 4.884 ms
tps = 42739.999008 (without initial connection time)
";

    const TPCB: &str = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: prepared
number of clients: 4
number of threads: 2
maximum number of tries: 10
duration: 2 s
number of transactions actually processed: 2767
number of failed transactions: 3 (0.108%)
number of transactions retried: 17 (0.614%)
total number of retries: 21
latency average = 2.878 ms
initial connection time = 17.808 ms
tps = 1389.869075 (without initial connection time)
";

    #[test]
    fn select_only_summary_has_no_retry_line() {
        let s = parse_run(SELECT_ONLY).unwrap();
        assert_eq!(
            s,
            RunSummary {
                tps: 42739.999008,
                latency_ms: 0.023,
                processed: 85276,
                failed: 0,
                retried: None,
            }
        );
    }

    #[test]
    fn tpcb_summary_counts_failed_and_retried_transactions() {
        let s = parse_run(TPCB).unwrap();
        assert_eq!(s.tps, 1389.869075);
        assert_eq!(s.latency_ms, 2.878);
        assert_eq!(s.processed, 2767);
        assert_eq!(s.failed, 3);
        assert_eq!(s.retried, Some(17));
    }

    #[test]
    fn a_summary_without_tps_is_an_error_naming_the_line() {
        let cut = SELECT_ONLY.replace("tps = ", "");
        let err = parse_run(&cut).unwrap_err();
        assert!(matches!(err, BenchError::PgbenchOutput { line } if line.starts_with("tps")));
        let cut = SELECT_ONLY.replace("latency average = 0.023", "latency average = x");
        let err = parse_run(&cut).unwrap_err();
        assert!(matches!(err, BenchError::PgbenchOutput { line } if line == "latency average = "));
    }

    #[test]
    fn init_steps_are_the_last_done_line_parenthesis() {
        let stderr = "creating tables...\n100000 of 100000 tuples (100%) done (elapsed 0.03 s, remaining 0.00 s)\ndone in 0.20 s (drop tables 0.00 s, create tables 0.02 s, client-side generate 0.13 s, primary keys 0.05 s).\n";
        assert_eq!(
            init_steps(stderr).as_deref(),
            Some("drop tables 0.00 s, create tables 0.02 s, client-side generate 0.13 s, primary keys 0.05 s")
        );
        assert_eq!(init_steps("creating tables...\n"), None);
    }
}
