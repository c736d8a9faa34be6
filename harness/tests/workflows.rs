//! The GitHub workflows (`.github/workflows/*.yml`), without Docker:
//! - actionlint (`make setup` installs it in `.build/bin`; this test fails
//!   naming `make setup` without it) accepts them, and rejects deliberately
//!   broken copies, so `make actionlint` in `make test` can fail;
//! - the YAML stays thin: every `run:` is one line calling a `make` target
//!   the Makefile defines (or a script of the repository), every action is
//!   pinned to a major version, and every artifact upload runs `if: always()`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn workflows() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join(".github/workflows"))
        .expect(".github/workflows exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    out.sort();
    out
}

fn actionlint(files: &[PathBuf]) -> Output {
    let bin = root().join(".build/bin/actionlint");
    assert!(
        bin.exists(),
        "{} is missing: run `make setup` (it go-installs the pinned actionlint)",
        bin.display()
    );
    // As `make actionlint` runs it: without shellcheck and pyflakes.
    Command::new(bin)
        .args(["-shellcheck=", "-pyflakes="])
        .args(files)
        .output()
        .expect("run actionlint")
}

#[test]
fn both_workflows_exist_and_pass_actionlint() {
    let files = workflows();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into())
        .collect();
    assert_eq!(names, ["ci.yml", "nightly-chaos.yml"]);
    let out = actionlint(&files);
    assert!(
        out.status.success(),
        "actionlint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Broken copies in a scratch directory: each must fail actionlint with
/// its problem named.
#[test]
fn actionlint_rejects_a_broken_workflow() {
    let dir = std::env::temp_dir().join(format!("cdc-chaos-workflows-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let nightly =
        std::fs::read_to_string(root().join(".github/workflows/nightly-chaos.yml")).unwrap();
    for (name, from, to, says) in [
        (
            "unknown-needs",
            "needs: [catalog, sim]",
            "needs: [catalog, simulation]",
            "simulation",
        ),
        (
            "undefined-matrix-key",
            "SHARD=${{ matrix.shard }}/4",
            "SHARD=${{ matrix.shards }}/4",
            "shards",
        ),
        (
            "bad-event",
            "workflow_dispatch:",
            "workflow_dispatched:",
            "workflow_dispatched",
        ),
    ] {
        assert!(
            nightly.contains(from),
            "{name}: the workflow changed; pick another break"
        );
        let broken = dir.join(format!("{name}.yml"));
        std::fs::write(&broken, nightly.replacen(from, to, 1)).unwrap();
        let out = actionlint(std::slice::from_ref(&broken));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name} passed actionlint:\n{text}"
        );
        assert!(text.contains(says), "{name}: {text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The steps of a workflow: each `- ` item under a `steps:` key, as its lines.
fn steps(text: &str) -> Vec<Vec<&str>> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out: Vec<Vec<&str>> = Vec::new();
    let mut item_indent: Option<usize> = None;
    let mut in_steps = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t == "steps:" {
            in_steps = true;
            item_indent = None;
            continue;
        }
        if !in_steps {
            continue;
        }
        match item_indent {
            Some(i) if indent(line) < i => in_steps = false,
            Some(i) if indent(line) == i && t.starts_with("- ") => out.push(vec![line]),
            Some(_) => out.last_mut().expect("an item").push(line),
            None if t.starts_with("- ") => {
                item_indent = Some(indent(line));
                out.push(vec![line]);
            }
            None => in_steps = false,
        }
    }
    out
}

/// What keeps a workflow from being thin: multi-line or non-make `run:`s,
/// make targets the Makefile lacks, unpinned actions, uploads that a
/// failure would skip.
fn thinness_problems(text: &str, targets: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for step in steps(text) {
        let field = |key: &str| {
            step.iter().find_map(|l| {
                let t = l.trim_start().trim_start_matches("- ");
                t.strip_prefix(key).map(str::trim)
            })
        };
        if let Some(run) = field("run:") {
            if run.starts_with('|') || run.starts_with('>') {
                problems.push(format!("a multi-line run: {run}"));
            } else if let Some(rest) = run.strip_prefix("make ") {
                let target = rest.split_whitespace().next().unwrap_or("");
                if !targets.contains(target) {
                    problems.push(format!("`make {target}` is not a Makefile target"));
                }
            } else if !run.starts_with("scripts/") && !run.starts_with("bash scripts/") {
                problems.push(format!("a run that is neither make nor a script: {run}"));
            }
        }
        if let Some(uses) = field("uses:") {
            let pinned = uses.split_once("@v").is_some_and(|(_, v)| {
                !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.')
            });
            if !pinned {
                problems.push(format!("an action not pinned to a version: {uses}"));
            }
            if uses.starts_with("actions/upload-artifact@") && field("if:") != Some("always()") {
                problems.push(format!(
                    "an upload without `if: always()`: {}",
                    step.join("\n")
                ));
            }
        }
    }
    problems
}

fn makefile_targets() -> BTreeSet<String> {
    std::fs::read_to_string(root().join("Makefile"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('\t') && !l.starts_with('.') && !l.contains(":="))
        .filter_map(|l| l.split_once(':').map(|(t, _)| t.trim().to_string()))
        .filter(|t| !t.is_empty() && !t.contains(' ') && !t.contains('='))
        .collect()
}

#[test]
fn the_workflows_stay_thin() {
    let targets = makefile_targets();
    for t in [
        "setup",
        "test",
        "chaos",
        "fresh-check",
        "nightly-shard",
        "nightly-merge",
        "sim",
    ] {
        assert!(targets.contains(t), "{t} in {targets:?}");
    }
    let mut runs = 0;
    for f in workflows() {
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(
            thinness_problems(&text, &targets),
            Vec::<String>::new(),
            "{}",
            f.display()
        );
        runs += steps(&text)
            .iter()
            .filter(|s| s.iter().any(|l| l.contains("run:")))
            .count();
    }
    assert!(
        runs >= 6,
        "{runs} run steps found: the step parser missed some"
    );
}

/// The thinness check can fail: each problem in a doctored workflow is found.
#[test]
fn the_thinness_check_finds_what_it_looks_for() {
    let targets = makefile_targets();
    let text = "\
jobs:
  a:
    steps:
      - uses: actions/checkout@main
      - run: |
          cargo test
      - run: make no-such-target
      - run: cargo build
      - uses: actions/upload-artifact@v4
        with:
          name: x
      - name: fine
        run: make test
";
    let problems = thinness_problems(text, &targets);
    assert_eq!(problems.len(), 5, "{problems:#?}");
    for want in [
        "not pinned",
        "multi-line",
        "`make no-such-target` is not a Makefile target",
        "neither make nor a script",
        "without `if: always()`",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{want}: {problems:#?}"
        );
    }
}
