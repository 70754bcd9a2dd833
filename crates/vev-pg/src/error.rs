//! Errors as PostgreSQL reports them: a SQLSTATE code clients and drivers branch on, and a
//! message that names the offending value.

use pgwire::error::{ErrorInfo, PgWireError};

use crate::types::SqlType;

/// A SQL statement's failure, sent to the client as an ErrorResponse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (SQLSTATE {code})")]
pub struct SqlError {
    /// The SQLSTATE, e.g. `23505`.
    pub code: &'static str,
    pub message: String,
    /// `ERROR`, or `FATAL` for errors that end the session.
    pub severity: &'static str,
}

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> SqlError {
        SqlError {
            code,
            message: message.into(),
            severity: "ERROR",
        }
    }

    /// `0A000`: valid SQL this server does not support (yet); the message says what.
    pub fn unsupported(what: impl std::fmt::Display) -> SqlError {
        SqlError::new("0A000", format!("{what} is not supported by Vev"))
    }

    pub fn syntax(message: impl Into<String>) -> SqlError {
        SqlError::new("42601", message)
    }

    pub fn invalid_text(t: SqlType, text: &str) -> SqlError {
        SqlError::new(
            "22P02",
            format!("invalid input syntax for type {}: \"{text}\"", t.display()),
        )
    }

    pub fn too_long(t: SqlType) -> SqlError {
        SqlError::new("22001", format!("value too long for type {}", t.display()))
    }

    pub fn undefined_table(name: &str) -> SqlError {
        SqlError::new("42P01", format!("relation \"{name}\" does not exist"))
    }

    pub fn undefined_column(name: &str) -> SqlError {
        SqlError::new("42703", format!("column \"{name}\" does not exist"))
    }

    pub fn duplicate_table(name: &str) -> SqlError {
        SqlError::new("42P07", format!("relation \"{name}\" already exists"))
    }

    pub fn unique_violation(message: impl Into<String>) -> SqlError {
        SqlError::new("23505", message)
    }

    pub fn not_null(table: &str, column: &str) -> SqlError {
        SqlError::new(
            "23502",
            format!("null value in column \"{column}\" of relation \"{table}\" violates not-null constraint"),
        )
    }

    pub fn datatype_mismatch(message: impl Into<String>) -> SqlError {
        SqlError::new("42804", message)
    }

    pub fn in_failed_transaction() -> SqlError {
        SqlError::new(
            "25P02",
            "current transaction is aborted, commands ignored until end of transaction block",
        )
    }

    pub fn deadlock(message: impl Into<String>) -> SqlError {
        SqlError::new("40P01", message)
    }

    pub fn serialization(message: impl Into<String>) -> SqlError {
        SqlError::new("40001", message)
    }

    pub fn canceled(message: impl Into<String>) -> SqlError {
        SqlError::new("57014", message)
    }

    /// A failure inside Vev (storage, an engine error the translation should have
    /// prevented): `XX000`, with Vev's own error code in the message.
    pub fn internal(e: impl std::fmt::Display) -> SqlError {
        SqlError::new("XX000", e.to_string())
    }

    /// Vev's error, mapped to the SQLSTATE a PostgreSQL client expects where one fits.
    pub fn from_vev(e: &vev::Error) -> SqlError {
        let text = e.to_string();
        if let Some(coded) = crate::sqlfns::coded_message(&text) {
            return coded;
        }
        let code = match e.code() {
            "tx/unique-conflict" | "tx/conflicting-upserts" | "schema/existing-values-conflict" => {
                "23505"
            }
            c if c.starts_with("storage/") => "58030",
            c if c.starts_with("query/timeout") => "57014",
            "query/canceled" => return crate::cancel::Canceler::error(),
            _ => "XX000",
        };
        SqlError::new(code, text)
    }
}

impl From<SqlError> for ErrorInfo {
    fn from(e: SqlError) -> ErrorInfo {
        ErrorInfo::new(e.severity.to_owned(), e.code.to_owned(), e.message)
    }
}

impl From<SqlError> for PgWireError {
    fn from(e: SqlError) -> PgWireError {
        PgWireError::UserError(Box::new(e.into()))
    }
}
