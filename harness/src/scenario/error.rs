//! Validation errors of scenario files: what is wrong, where (file, line,
//! column) and how to fix it.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in one scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: PathBuf,
    /// 1-based line of the offending key or value.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    pub message: String,
    pub hint: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}\n  hint: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message,
            self.hint
        )
    }
}

impl std::error::Error for ScenarioError {}

/// All problems found in one file (at least one).
#[derive(Debug, Clone)]
pub struct ScenarioErrors(pub Vec<ScenarioError>);

impl fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioErrors {}

/// One source text: turns the byte offset of a span into a 1-based (line,
/// column), the one place positions are computed.
#[derive(Clone, Copy)]
pub(crate) struct Source<'a> {
    pub file: &'a Path,
    pub text: &'a str,
}

impl Source<'_> {
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
        (line, col)
    }

    pub fn error(
        &self,
        offset: usize,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ScenarioError {
        let (line, column) = self.line_col(offset);
        ScenarioError {
            file: self.file.to_path_buf(),
            line,
            column,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// The errors found in one file so far, by the validations that go on after
/// a first error.
pub(crate) struct Errors<'a> {
    pub src: Source<'a>,
    pub found: Vec<ScenarioError>,
}

impl<'a> Errors<'a> {
    pub fn new(src: Source<'a>) -> Self {
        Errors {
            src,
            found: Vec::new(),
        }
    }

    /// An error at byte `offset` (the start of a span).
    pub fn add(&mut self, offset: usize, message: impl Into<String>, hint: impl Into<String>) {
        let e = self.src.error(offset, message, hint);
        self.found.push(e);
    }

    pub fn push(&mut self, e: ScenarioError) {
        self.found.push(e);
    }
}

/// A hint for a serde/toml error message, by the shape of the message.
pub(crate) fn hint_for(message: &str) -> String {
    if message.contains("target `") {
        format!("a target is one of {}", super::types::TARGET_FORMS)
    } else if message.contains("unknown field") {
        "remove the key or fix its spelling; the keys each table accepts are listed in scenarios/README.md".into()
    } else if message.contains("missing field") {
        "add the key; scenarios/README.md lists the required keys of each table".into()
    } else if message.contains("unknown variant") {
        "use one of the values listed in the message".into()
    } else if message.contains("duration") {
        "write durations as a whole number and a unit: \"500ms\", \"10s\", \"2m\", \"1h\"".into()
    } else if message.contains("invalid type") {
        "check the value's type against scenarios/README.md (durations and names are quoted strings, counts are integers)".into()
    } else if message.contains("duplicate key") {
        "each key may appear once per table; remove the duplicate".into()
    } else {
        "see scenarios/README.md for the scenario schema".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let s = Source {
            file: Path::new("x.toml"),
            text: "a = 1\nbb = 2\n",
        };
        assert_eq!(s.line_col(0), (1, 1));
        assert_eq!(s.line_col(6), (2, 1));
        assert_eq!(s.line_col(9), (2, 4));
    }
}
