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

/// Maps byte offsets of one source text to 1-based (line, column).
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

    /// The offset of the first line in `region` that assigns `key`
    /// (`key = ...`), if any.
    pub fn find_key(&self, region: std::ops::Range<usize>, key: &str) -> Option<usize> {
        let region = region.start.min(self.text.len())..region.end.min(self.text.len());
        let mut pos = region.start;
        for line in self.text[region.clone()].split_inclusive('\n') {
            let trimmed = line.trim_start();
            if let Some(rest) = trimmed.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    return Some(pos + (line.len() - trimmed.len()));
                }
            }
            pos += line.len();
        }
        None
    }

    /// The offset of the first occurrence of `needle` in `region`.
    pub fn find_text(&self, region: std::ops::Range<usize>, needle: &str) -> Option<usize> {
        let region = region.start.min(self.text.len())..region.end.min(self.text.len());
        self.text[region.clone()]
            .find(needle)
            .map(|i| region.start + i)
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

    #[test]
    fn find_key_needs_an_assignment() {
        let text = "[[step]]\naction = \"x\"\nactionx = 1\n  timeout = \"1s\"\n";
        let s = Source {
            file: Path::new("x.toml"),
            text,
        };
        assert_eq!(
            s.line_col(s.find_key(0..text.len(), "timeout").unwrap()).0,
            4
        );
        assert_eq!(
            s.line_col(s.find_key(0..text.len(), "action").unwrap()).0,
            2
        );
        assert!(s.find_key(0..text.len(), "nope").is_none());
    }
}
