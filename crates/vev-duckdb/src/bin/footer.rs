//! `vev-duckdb-footer LIB OUT [PLATFORM]`: copy the shared library `LIB` to `OUT` with DuckDB's
//! extension metadata footer appended (see `vev_duckdb::footer`). `scripts/duckdb-extension.sh`
//! runs it on the release build.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (lib, out, platform) = match args.as_slice() {
        [lib, out] => (lib, out, vev_duckdb::footer::PLATFORM_LINUX_AMD64),
        [lib, out, platform] => (lib, out, platform.as_str()),
        _ => {
            eprintln!("usage: vev-duckdb-footer LIB OUT [PLATFORM]");
            return ExitCode::from(2);
        }
    };
    match run(lib, out, platform) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("vev-duckdb-footer: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(lib: &str, out: &str, platform: &str) -> Result<(), String> {
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let footer = vev_duckdb::footer::footer(&version, vev_duckdb::footer::C_API_VERSION, platform)
        .map_err(|e| e.to_string())?;
    let mut bytes = std::fs::read(lib).map_err(|e| format!("cannot read {lib}: {e}"))?;
    bytes.extend_from_slice(&footer);
    // Written beside the target, then renamed: a DuckDB loading OUT never sees half a file.
    let tmp = format!("{out}.tmp");
    std::fs::write(&tmp, &bytes).map_err(|e| format!("cannot write {tmp}: {e}"))?;
    std::fs::rename(&tmp, out).map_err(|e| format!("cannot rename {tmp} to {out}: {e}"))
}
