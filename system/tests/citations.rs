//! Every citation of `docs/control-plane.md` in the Rust sources resolves.
//!
//! Code comments cite the control-plane page by label: sections and items
//! (`§3`, `§4.6-3`, ranges such as `§1.5-1.9`), the code facts `F1`..`F10`,
//! the invariants `I1`..`I8` and the simulated scenarios `S1`..`S5`. This
//! test walks every `.rs` file under `system/`, `harness/` and `reports/`
//! (skipping `target/` and hidden directories), extracts the citations, and
//! fails naming `file:line` and the label of each one that no heading of the
//! page carries. Only std: no regex.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The folders whose sources are checked, relative to the workspace root.
const SOURCE_DIRS: &[&str] = &["system", "harness", "reports"];
/// The page the labels must resolve to, relative to the workspace root.
const DOCS: &str = "docs/control-plane.md";
/// Letters that start a label such as `F7` (facts, invariants, scenarios).
const LABEL_LETTERS: &[char] = &['F', 'I', 'S'];

/// One cited label and the 1-based line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Citation {
    line: usize,
    label: String,
}

/// Reads `digits ('.' digits)*` at `i`; a dot counts only when a digit
/// follows, so a sentence's full stop ends the number.
fn number(chars: &[char], mut i: usize) -> Option<(String, usize)> {
    let start = i;
    loop {
        let digits = i;
        while chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == digits {
            return None;
        }
        match (chars.get(i), chars.get(i + 1)) {
            (Some('.'), Some(d)) if d.is_ascii_digit() => i += 1,
            _ => return Some((chars[start..i].iter().collect(), i)),
        }
    }
}

/// Whether a letter label may start after `prev`: at the start of a line,
/// after whitespace or after an opening or separating punctuation mark. This
/// keeps `0xF1`, `FFF1`, `_F2` or `CRC32` from being read as labels.
fn starts_label(prev: Option<char>) -> bool {
    match prev {
        None => true,
        Some(c) => c.is_whitespace() || "([/,\"'`".contains(c),
    }
}

/// The labels cited on one line, each written as in a heading (`§4.6-3`,
/// `F7`). A range `§a-b` whose end has a dot (`§2.3-2.4`) cites both ends;
/// `§a-n` with a plain number is item n of section a.
fn labels_in_line(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut labels = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '§' {
            let Some((first, end)) = number(&chars, i + 1) else {
                i += 1;
                continue;
            };
            i = end;
            if chars.get(i) == Some(&'-') {
                if let Some((second, end)) = number(&chars, i + 1) {
                    i = end;
                    if second.contains('.') {
                        labels.push(format!("§{first}"));
                        labels.push(format!("§{second}"));
                    } else {
                        labels.push(format!("§{first}-{second}"));
                    }
                    continue;
                }
            }
            labels.push(format!("§{first}"));
            continue;
        }
        if LABEL_LETTERS.contains(&c) && starts_label(i.checked_sub(1).map(|p| chars[p])) {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            let digits = j - i - 1;
            let leading_zero = chars.get(i + 1) == Some(&'0');
            let ends_word = chars
                .get(j)
                .is_none_or(|n| !(n.is_alphanumeric() || *n == '_'));
            if (1..=2).contains(&digits) && !leading_zero && ends_word {
                labels.push(chars[i..j].iter().collect());
                i = j;
                continue;
            }
        }
        i += 1;
    }
    labels
}

/// Every citation in a source file.
fn citations(source: &str) -> Vec<Citation> {
    source
        .lines()
        .enumerate()
        .flat_map(|(n, line)| {
            labels_in_line(line)
                .into_iter()
                .map(move |label| Citation { line: n + 1, label })
        })
        .collect()
}

/// The labels the page's headings carry (headings inside fenced code
/// blocks do not count).
fn heading_labels(docs: &str) -> BTreeSet<String> {
    let mut in_fence = false;
    let mut labels = BTreeSet::new();
    for line in docs.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            labels.extend(labels_in_line(line));
        }
    }
    labels
}

/// `file:line: label` for each citation of `source` that no heading carries.
fn unresolved(file: &str, source: &str, headings: &BTreeSet<String>) -> Vec<String> {
    citations(source)
        .into_iter()
        .filter(|c| !headings.contains(&c.label))
        .map(|c| format!("{file}:{}: {}", c.line, c.label))
        .collect()
}

/// The `.rs` files under `dir`, skipping `target/` and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_citation_resolves_to_a_heading_of_the_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("system/ sits in the workspace");
    let docs = fs::read_to_string(root.join(DOCS))
        .unwrap_or_else(|e| panic!("read {DOCS}: {e}; the code cites it"));
    let headings = heading_labels(&docs);
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut checked = 0;
    let mut problems = Vec::new();
    for path in &files {
        let source =
            fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        checked += citations(&source).len();
        problems.extend(unresolved(&rel, &source, &headings));
    }
    println!(
        "{checked} citations in {} files checked against {} heading labels of {DOCS}",
        files.len(),
        headings.len()
    );
    for p in &problems {
        eprintln!("unresolved citation {p}");
    }
    assert!(
        checked >= 30,
        "only {checked} citations found in {} files: the walk or the extraction is broken",
        files.len()
    );
    assert!(
        problems.is_empty(),
        "{} citations name no heading of {DOCS} (add a heading carrying the label, or fix the citation):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

mod extraction {
    use super::*;

    fn labels(line: &str) -> Vec<String> {
        labels_in_line(line)
    }

    #[test]
    fn a_made_up_citation_is_reported_with_its_file_and_line() {
        // The made-up label is escaped so that this file itself does not
        // cite it.
        let source = "//! Real facts (F7) resolve.\n\n// see \u{a7}9.9-9 and \u{a7}4.6-3\n";
        let docs = "# Page\n### F7 The fact\n#### \u{a7}4.6-3 The hazard\n";
        let headings = heading_labels(docs);
        assert_eq!(
            unresolved("fake.rs", source, &headings),
            vec!["fake.rs:3: \u{a7}9.9-9".to_string()]
        );
    }

    #[test]
    fn a_label_in_a_fenced_block_is_no_heading() {
        let docs = "```\n# F7 not a heading\n```\n### F9 a heading\n";
        let headings = heading_labels(docs);
        assert!(headings.contains("F9"));
        assert!(!headings.contains("F7"));
    }

    #[test]
    fn sections_items_and_ranges() {
        assert_eq!(labels("(reference §4.6-3)."), ["§4.6-3"]);
        assert_eq!(labels("§3). Sans-IO"), ["§3"]);
        assert_eq!(labels("hazards of §4.6."), ["§4.6"]);
        assert_eq!(labels("(§1.14 step 7)"), ["§1.14"]);
        assert_eq!(labels("§1.10, §6.1-5"), ["§1.10", "§6.1-5"]);
        assert_eq!(labels("(reference §2.3-2.4)"), ["§2.3", "§2.4"]);
        assert_eq!(labels("§ and §x cite nothing"), Vec::<String>::new());
    }

    #[test]
    fn letter_labels_only_as_words() {
        assert_eq!(labels("// F7: dropped"), ["F7"]);
        assert_eq!(labels("\"F9: any node\""), ["F9"]);
        assert_eq!(
            labels("(docs/control-plane.md §4.1 F9/F10)"),
            ["§4.1", "F9", "F10"]
        );
        assert_eq!(labels("§6.4 I1, I2, I7;"), ["§6.4", "I1", "I2", "I7"]);
        assert_eq!(labels("- S1 (issue 3952)"), ["S1"]);
        for word in [
            "0xF1", "FFF1", "_F2", "F1x", "F0", "F123", "CRC32", "Fix", "S3bucket", "i32", "u64",
        ] {
            assert_eq!(labels(word), Vec::<String>::new(), "{word} is no label");
        }
    }
}
