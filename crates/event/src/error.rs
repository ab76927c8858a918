//! Errors of the normalize step.

/// Result of a normalize step.
pub type Result<T, E = NormalizeError> = std::result::Result<T, E>;

/// Why a payload could not be turned into a [`crate::DriftEvent`].
///
/// Every variant becomes a `rejected` line in the replay report with its message as
/// the reason; none is retryable (the same bytes fail the same way).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NormalizeError {
    /// The payload is empty or only white space.
    #[error("empty input: no JSON value found")]
    Empty,
    /// The payload is not valid JSON (truncated, invalid escapes, trailing garbage).
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// serde_json's description of the problem.
        message: String,
    },
    /// Valid JSON that holds no event at all: an empty array, an empty CloudTrail
    /// `Records` list.
    #[error("no events: the input is an empty list (`[]` or an empty `Records` array)")]
    NoEvents,
    /// Valid JSON, but not any supported event format.
    #[error("unrecognized event format: {0}")]
    UnknownFormat(String),
    /// A recognized format with a required field missing or of the wrong type.
    #[error("{format}: field `{field}` {problem}")]
    Field {
        /// The format being read (e.g. "CloudTrail record", "Event Grid event").
        format: &'static str,
        /// The JSON path of the field (e.g. `detail.eventID`).
        field: String,
        /// What is wrong with it, in plain words ("is missing", "is not a string").
        problem: String,
    },
}

impl NormalizeError {
    /// Builds a [`NormalizeError::Json`] from a serde_json error, keeping position.
    pub fn json(err: &serde_json::Error) -> Self {
        if err.is_eof() && err.line() <= 1 && err.column() == 0 {
            return NormalizeError::Empty;
        }
        let message = err.to_string();
        let suffix = format!(" at line {} column {}", err.line(), err.column());
        NormalizeError::Json {
            line: err.line(),
            column: err.column(),
            message: message.strip_suffix(&suffix).unwrap_or(&message).to_owned(),
        }
    }

    /// Builds a [`NormalizeError::Field`] for `format` whose `field` is missing.
    pub fn missing(format: &'static str, field: impl Into<String>) -> Self {
        NormalizeError::Field {
            format,
            field: field.into(),
            problem: "is missing".into(),
        }
    }
}

impl From<serde_json::Error> for NormalizeError {
    fn from(err: serde_json::Error) -> Self {
        NormalizeError::json(&err)
    }
}
