//! Source positions and the diagnostics every phase reports.

use std::fmt;

/// A 1-based line and column (columns count code points).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub fn new(line: u32, col: u32) -> Self {
        Pos { line, col }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One coded error: `CODE: message`, optionally at a position in a file.
///
/// The code families follow the reference (`PAR…`, `MOD…`, `LDR…`, `IMP…`, `TC…`, `RT…`) so
/// that tools grepping for them keep working.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostic {
    pub code: String,
    pub message: String,
    pub file: Option<String>,
    pub pos: Option<Pos>,
    /// What to change, when the checker can tell.
    pub suggestion: Option<String>,
}

impl Diagnostic {
    pub fn new(code: &str, message: impl Into<String>, pos: Option<Pos>) -> Self {
        Diagnostic { code: code.to_string(), message: message.into(), file: None, pos, suggestion: None }
    }

    pub fn at(code: &str, message: impl Into<String>, pos: Pos) -> Self {
        Self::new(code, message, Some(pos))
    }

    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// Attach the file name if none is set yet.
    pub fn in_file(mut self, file: &str) -> Self {
        if self.file.is_none() {
            self.file = Some(file.to_string());
        }
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        match (&self.file, self.pos) {
            (Some(file), Some(pos)) => write!(f, " at {file}:{pos}"),
            (None, Some(pos)) => write!(f, " at line {}, column {}", pos.line, pos.col),
            _ => Ok(()),
        }?;
        match &self.suggestion {
            Some(s) => write!(f, "\n  Fix: {s}"),
            None => Ok(()),
        }
    }
}
