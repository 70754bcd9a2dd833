//! Why a benchmark run failed.

use std::path::PathBuf;
use std::process::ExitStatus;

#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum BenchError {
    #[error("vev failed: {0}")]
    Vev(#[from] vev::Error),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{command}` in {dir} exited with {status}")]
    Command {
        command: &'static str,
        dir: PathBuf,
        status: ExitStatus,
    },
    #[error("the DataScript runner printed invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("/proc/self/status has no numeric field {name}")]
    StatusField { name: &'static str },
    #[error("the DataScript runner's output has no numeric field {field:?}")]
    MissingField { field: &'static str },
}

impl BenchError {
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> BenchError {
        let path = path.into();
        move |source| BenchError::Io {
            action,
            path,
            source,
        }
    }
}
