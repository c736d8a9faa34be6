//! Scenario files and the offline `chaos` commands, without Docker:
//! - every catalog file in `scenarios/` validates (library and `chaos validate`);
//! - every malformed fixture in `tests/fixtures/malformed/` is rejected with
//!   its file, the line marked `# <- error`, the message of its `# error:`
//!   header and the hint of its `# hint:` header;
//! - `chaos list` shows the expected verdicts, `chaos check` exits with the verdict.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use harness::run_model::{
    Bounds, ChangefeedObs, CoordinatorObs, DataFindings, MaintainerObs, NodeObs, Run, Sample,
    Verdict,
};
use harness::scenario::{self, Expected, Profile};
use rstest::rstest;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn malformed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/malformed")
}

/// Runs the `chaos` binary with an engine address that cannot answer, so a
/// command that tried to start anything would fail.
fn chaos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(args)
        .current_dir(root())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .expect("run chaos")
}

#[rstest]
fn malformed_fixture_is_rejected_with_file_line_and_hint(
    #[files("tests/fixtures/malformed/*.toml")] path: PathBuf,
) {
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    let want_message = lines
        .next()
        .and_then(|l| l.strip_prefix("# error: "))
        .expect("`# error:` header");
    let want_hint = lines
        .next()
        .and_then(|l| l.strip_prefix("# hint: "))
        .expect("`# hint:` header");
    let want_line = text
        .lines()
        .position(|l| l.contains("# <- error"))
        .expect("`# <- error` marker")
        + 1;

    let errors = scenario::load(&path).expect_err("a malformed fixture was accepted");
    let e = errors
        .0
        .iter()
        .find(|e| e.message.contains(want_message))
        .unwrap_or_else(|| panic!("no error says {want_message:?}; got:\n{errors}"));
    assert_eq!(e.file, path, "{e}");
    assert_eq!(e.line, want_line, "{e}");
    assert!(e.column >= 1, "{e}");
    assert!(
        e.hint.contains(want_hint),
        "hint {:?} lacks {want_hint:?}",
        e.hint
    );
    let shown = errors.to_string();
    assert!(
        shown.contains(&format!("{}:{want_line}:", path.display())),
        "{shown}"
    );
    assert!(shown.contains("hint: "), "{shown}");
}

#[test]
fn there_are_twenty_eight_malformed_fixtures_each_with_a_distinct_error() {
    let files = scenario::files_in(&malformed_dir()).unwrap();
    assert_eq!(files.len(), 28);
    let mut messages: Vec<String> = files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    messages.sort();
    messages.dedup();
    assert_eq!(
        messages.len(),
        files.len(),
        "two fixtures test the same error"
    );
}

#[rstest]
fn catalog_file_validates(#[files("../scenarios/*.toml")] path: PathBuf) {
    let s = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(!s.steps.is_empty());
    for p in &s.cluster.profiles {
        assert!(s.expect.contains_key(p));
    }
}

#[test]
fn catalog_holds_the_scenarios_of_issue_5_and_the_seed_fails_only_pre_fix() {
    let names: Vec<String> = scenario::files_in(&root().join("scenarios"))
        .unwrap()
        .iter()
        .map(|p| scenario::load(p).unwrap().name)
        .collect();
    for want in [
        "kafka-io-timeout",
        "stale-cascade-remove",
        "node-restart-during-cascade-close",
        "coordinator-switch-during-backoff",
        "kill-maintainer-node",
        "coordinator-partitioned-from-etcd",
        "kafka-broker-restart",
        "drop-messages-with-restarts",
        "latency-spikes",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from scenarios/"
        );
    }
    let seed = scenario::load(&root().join("scenarios/stale-cascade-remove.toml")).unwrap();
    assert_eq!(seed.expect[&Profile::PreFix], Expected::Fail);
    assert_eq!(seed.expect[&Profile::Fix], Expected::Pass);
    assert_eq!(seed.expect[&Profile::Hardened], Expected::Pass);
    assert_eq!(
        seed.failing_checkers,
        vec!["no-broken-maintainer".to_string()]
    );
}

#[test]
fn chaos_validate_accepts_the_whole_catalog() {
    let n = scenario::files_in(&root().join("scenarios")).unwrap().len();
    let out = chaos(&["validate", "scenarios"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("{n} file(s), {n} valid, 0 invalid")),
        "{stdout}"
    );
}

#[test]
fn chaos_validate_rejects_malformed_files_with_exit_5_and_names_each() {
    let a = malformed_dir().join("heal-never-injected.toml");
    let b = malformed_dir().join("unknown-action.toml");
    let good = root().join("scenarios/kafka-io-timeout.toml");
    let out = chaos(&[
        "validate",
        good.to_str().unwrap(),
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:44:", a.display())), "{stderr}");
    assert!(stderr.contains(&format!("{}:26:", b.display())), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 file(s), 1 valid, 2 invalid"));
}

#[test]
fn chaos_list_shows_expected_verdicts_per_profile() {
    let out = chaos(&["list"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seed = stdout
        .lines()
        .find(|l| l.starts_with("stale-cascade-remove "))
        .expect("seed listed");
    let cols: Vec<&str> = seed.split_whitespace().collect();
    assert_eq!(&cols[3..], ["fail", "pass", "pass"], "{seed}");
    let restart = stdout
        .lines()
        .find(|l| l.starts_with("stale-cascade-remove-restart "))
        .expect("hazard 4.6-1 listed");
    let cols: Vec<&str> = restart.split_whitespace().collect();
    assert_eq!(&cols[3..], ["fail", "fail", "pass"], "{restart}");
    let drop = stdout
        .lines()
        .find(|l| l.starts_with("drop-messages-with-restarts"))
        .unwrap();
    assert_eq!(
        &drop.split_whitespace().collect::<Vec<_>>()[3..],
        ["-", "pass", "pass"]
    );
}

/// `chaos list --shard K/N` prints disjoint slices that together are the
/// catalog's runs; a bad K/N is a usage error naming the flag and the fix.
#[test]
fn chaos_list_shard_prints_disjoint_slices_of_the_catalog() {
    let rows = |out: &Output| -> Vec<(String, String)> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with("shard "))
            .map(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                (c[0].to_string(), c[1].to_string())
            })
            .collect()
    };
    let mut whole: Vec<(String, String)> = Vec::new();
    for p in scenario::files_in(&root().join("scenarios")).unwrap() {
        let s = scenario::load(&p).unwrap();
        for prof in &s.cluster.profiles {
            whole.push((s.name.clone(), prof.as_str().to_string()));
        }
    }
    whole.sort();
    let mut union = Vec::new();
    for k in 1..=3 {
        let out = chaos(&["list", "--shard", &format!("{k}/3"), "--seed", "5"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let slice = rows(&out);
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!(
            "shard {k}/3 (seed 5): {} of {} run(s)",
            slice.len(),
            whole.len()
        )));
        union.extend(slice);
    }
    union.sort();
    assert_eq!(union, whole, "each run in exactly one of three shards");
    for bad in ["0/3", "4/3", "1/0", "3", "a/b"] {
        let out = chaos(&["list", "--shard", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--shard") && err.contains("`--shard "),
            "{bad}: {err}"
        );
    }
}

/// A run where cf1 is "replicating" on n2 but n2 only hosts a removal-only
/// maintainer: the seed bug in two samples.
fn broken_run() -> Run {
    let mut run = Run::new(
        "stale-cascade-remove",
        "pre-fix",
        1,
        Bounds {
            recover_ms: 1_000,
            maintainer_bootstrap_ms: 1_000,
            removal_only_ms: 60_000,
        },
    );
    run.changefeeds = vec!["cf1".into()];
    run.data = Some(DataFindings::default());
    for t in [0, 2_000] {
        run.samples.push(Sample {
            t_ms: t,
            coordinator: Some(CoordinatorObs {
                node_id: "n1".into(),
                version: 1,
            }),
            nodes: vec![NodeObs {
                node: 2,
                node_id: Some("n2".into()),
                reachable: true,
                coordinator_version: None,
                maintainers: vec![MaintainerObs {
                    changefeed: "cf1".into(),
                    epoch: 1,
                    bootstrap_done: false,
                    removal_only: true,
                    removing: false,
                    checkpoint_ts: 1,
                }],
                errors: vec![],
            }],
            changefeeds: vec![ChangefeedObs {
                name: "cf1".into(),
                state: "warning".into(),
                scheduling: "replicating".into(),
                maintainer_node_id: Some("n2".into()),
                epoch: 2,
                checkpoint_ts: 10,
                upstream_commit_ts: 20,
                lag_ms: 0,
                error: None,
            }],
            errors: vec![],
        });
    }
    run
}

#[test]
fn chaos_check_exits_with_the_verdict() {
    let dir = std::env::temp_dir().join(format!("chaos-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let broken = dir.join("broken.json");
    std::fs::write(&broken, broken_run().to_json().unwrap()).unwrap();
    let out = chaos(&["check", broken.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(Verdict::Fail.exit_code() as i32),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL") && stdout.contains("no-broken-maintainer"),
        "{stdout}"
    );
    assert!(
        stdout.contains("removal-only maintainer of epoch 1 (bootstrap_done=false"),
        "{stdout}"
    );

    let mut errored = broken_run();
    errored.meta.harness_error = Some("toxiproxy did not answer".into());
    let path = dir.join("error.json");
    std::fs::write(&path, errored.to_json().unwrap()).unwrap();
    assert_eq!(
        chaos(&["check", path.to_str().unwrap()]).status.code(),
        Some(3)
    );

    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{\"schema_version\": 42}").unwrap();
    let out = chaos(&["check", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema_version 42"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `[cluster.timing]` keys `scenarios/README.md` documents.
fn documented_timing_keys() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("scenarios/README.md")).unwrap();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `[cluster.timing]`"))
        .expect("the README documents [cluster.timing]");
    let meaning = row.rsplit('|').nth(1).unwrap();
    meaning
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(String::from)
        .collect()
}

/// A catalog scenario with `[cluster.timing]` set to `timing`.
fn with_timing(dir: &Path, name: &str, timing: &str) -> PathBuf {
    let base = std::fs::read_to_string(root().join("scenarios/kafka-io-timeout.toml")).unwrap();
    // The catalog file's own timing block is replaced by `timing`.
    let start = base.find("[cluster.timing]").expect("a timing block");
    let end = base.find("[workload]").expect("a workload block");
    let text = format!(
        "{}[cluster.timing]\n{timing}\n\n{}",
        &base[..start],
        &base[end..]
    );
    // The file keeps the catalog name its `name` key requires.
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join("kafka-io-timeout.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_documented_timing_key_is_runnable_or_refused_by_validate() {
    let dir = std::env::temp_dir().join(format!("cdc-chaos-timing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = documented_timing_keys();
    assert!(keys.len() >= 8, "{keys:?}");
    for key in &keys {
        // 45m (3s for the first backoff, which may not pass the cap)
        // differs from every default, so a key that reaches a setting
        // changes the settings the run hands its containers.
        let value = match key.as_str() {
            "backoff_initial" => "3s",
            "sink_write_timeout" => "45s",
            _ => "45m",
        };
        let path = with_timing(&dir, key, &format!("{key} = \"{value}\""));
        let sc = scenario::load(&path).unwrap_or_else(|e| panic!("{key} = {value} refused: {e}"));
        let plain = scenario::load(&with_timing(&dir, "plain", "")).unwrap();
        let harness_only = key == "sample_period";
        // The sink's write timeout is no node setting: it goes into every
        // changefeed's sink URI.
        let changed = if key == "sink_write_timeout" {
            harness::runner::provision::create_request(&sc, "cf1", 1)
                .unwrap()
                .sink_uri
                .contains("write-timeout=45000ms")
        } else {
            sc.cluster.settings != plain.cluster.settings
        };
        assert!(
            harness_only || changed,
            "{key} is documented and accepted but reaches no cdc-server setting"
        );
        let env = harness::runner::node_settings(&sc, Profile::Fix).to_env();
        assert!(
            env.iter().any(|(k, v)| k == "CDC_PROFILE" && v == "fix"),
            "{env:?}"
        );
        let out = chaos(&["validate", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // What cdc-server cannot take is refused by validate, with the key's line.
    for (timing, why) in [
        ("session_ttl = \"1500ms\"", "whole seconds"),
        ("manager_tick = \"0ms\"", "above zero"),
        ("sink_write_timeout = \"500ms\"", "1s to 5m"),
        (
            "backoff_initial = \"1m\"\nbackoff_max = \"10s\"",
            "above timing.backoff_max",
        ),
    ] {
        let path = with_timing(&dir, "bad", timing);
        let e = scenario::load(&path).expect_err(timing);
        assert!(e.to_string().contains(why), "{timing}: {e}");
        let out = chaos(&["validate", path.to_str().unwrap()]);
        assert!(!out.status.success(), "{timing} validated");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chaos_report_re_renders_recorded_runs_and_rejects_bad_files() {
    let out = std::env::temp_dir().join(format!("cdc-chaos-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let runs: Vec<String> = std::fs::read_dir(root().join("harness/tests/fixtures/runs"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".json"))
        .collect();
    assert!(!runs.is_empty());
    let mut args = vec!["report"];
    args.extend(runs.iter().map(String::as_str));
    let o = out.display().to_string();
    args.extend(["--out", &o]);
    let r = chaos(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg"), "the page has a timeline");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("<testsuite"), "{junit}");

    let bad = out.join("bad.json");
    std::fs::write(&bad, "{\"not\": \"a run\"}").unwrap();
    let r = chaos(&["report", &bad.display().to_string(), "--out", &o]);
    assert_eq!(r.status.code(), Some(3));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("bad.json") && err.contains("not a valid run.json"),
        "{err}"
    );
    let r = chaos(&["report", "/nonexistent/run.json"]);
    assert_ne!(r.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&out);
}

/// `chaos report DIR...` merges shard directories (exit 0, the merged run
/// set in --out) and refuses a missing shard (exit 3, naming it, nothing
/// written).
#[test]
fn chaos_report_merges_shard_directories_and_refuses_a_missing_one() {
    use harness::run_model::Run;
    use reports::manifest::Manifest;
    let root = std::env::temp_dir().join(format!("cdc-chaos-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let fixtures = root_dir_runs();
    let shard = |k: u32, run: &Run| fixture_shard(&root, k, run);
    let d1 = shard(1, &fixtures[0]).display().to_string();
    let d2 = shard(2, &fixtures[1]).display().to_string();
    let out = root.join("merged").display().to_string();
    let r = chaos(&["report", &d1, &d2, "--out", &out]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("merged "));
    let m = Manifest::read(Path::new(&out)).unwrap();
    assert_eq!(m.runs.len(), 2);

    let lone = root.join("lone").display().to_string();
    let r = chaos(&["report", &d1, "--out", &lone]);
    assert_eq!(r.status.code(), Some(3));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("shard(s) 2/2 missing"), "{err}");
    assert!(!Path::new(&lone).exists());
    let _ = std::fs::remove_dir_all(&root);
}

/// Writes shard `k` of 2 holding `run` under `root/shard-k` with its manifest.
fn fixture_shard(root: &Path, k: u32, run: &harness::run_model::Run) -> PathBuf {
    use reports::manifest::{Manifest, ManifestRun, Shard, MANIFEST_VERSION};
    let dir = root.join(format!("shard-{k}"));
    let rel = format!("{}/{}/run.json", run.meta.scenario, run.meta.profile);
    std::fs::create_dir_all(dir.join(&rel).parent().unwrap()).unwrap();
    std::fs::write(dir.join(&rel), run.to_json().unwrap()).unwrap();
    Manifest {
        manifest_version: MANIFEST_VERSION,
        commit: "fixture".into(),
        catalog_hash: "0123456789abcdef".into(),
        images: run.meta.images.clone(),
        seed: run.meta.seed,
        shard: Some(Shard { index: k, count: 2 }),
        started_at: format!("2026-12-02T12:00:0{k}+00:00"),
        runs: vec![ManifestRun {
            scenario: run.meta.scenario.clone(),
            profile: run.meta.profile.clone(),
            seed: run.meta.seed,
            run_json: rel,
        }],
    }
    .write(&dir)
    .unwrap();
    dir
}

/// `scripts/nightly-merge.sh` as `make nightly-merge` runs it (a
/// `NIGHTLY_DIR` relative to the repository): the shards merge and the
/// night joins the history with its manifest and run files; a second merge
/// of the same night replaces it and reads the history.
#[test]
fn the_nightly_merge_script_adds_the_night_to_the_history() {
    let rel = format!("target/tmp/nightly-merge-{}", std::process::id());
    let dir = root().join(&rel);
    let _ = std::fs::remove_dir_all(&dir);
    let fixtures = root_dir_runs();
    fixture_shard(&dir, 1, &fixtures[0]);
    fixture_shard(&dir, 2, &fixtures[1]);
    let merge = || {
        Command::new("bash")
            .arg("scripts/nightly-merge.sh")
            .current_dir(root())
            .env("NIGHTLY_DIR", &rel)
            .env("CHAOS", env!("CARGO_BIN_EXE_chaos"))
            .output()
            .expect("run scripts/nightly-merge.sh")
    };
    for pass in 1..=2 {
        let r = merge();
        let (out, err) = (
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr),
        );
        assert!(r.status.success(), "merge {pass}: {out}\n{err}");
        assert!(out.contains("==> history: "), "merge {pass}: {out}");
        let nights: Vec<PathBuf> = std::fs::read_dir(dir.join("history"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(nights.len(), 1, "{nights:?}");
        assert!(nights[0].join("manifest.json").is_file(), "{nights:?}");
        let runs = walk_files(&nights[0], "run.json");
        assert_eq!(runs, 2, "run files in {}", nights[0].display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk_files(dir: &Path, name: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                walk_files(&p, name)
            } else {
                usize::from(p.file_name().is_some_and(|n| n == name))
            }
        })
        .sum()
}

/// The recorded fixture runs (harness/tests/fixtures/runs).
fn root_dir_runs() -> Vec<Run> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("harness/tests/fixtures/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    reports::load_runs(&paths).unwrap()
}

/// Every mutant of the matrix is claimed: by a catalog scenario (`catches`),
/// by the simulator (a bug switch in the sans-IO state machines, or any
/// profile minus one predicate) or by the unit tier (a checker's bug).
#[test]
fn every_mutant_is_claimed_by_a_scenario_or_a_tier() {
    use harness::mutants::MatrixMutant;
    let catalog: Vec<harness::scenario::Scenario> =
        harness::scenario::files_in(&root().join("scenarios"))
            .unwrap()
            .iter()
            .map(|p| harness::scenario::load(p).unwrap())
            .collect();
    let mut unclaimed = Vec::new();
    for m in harness::mutants::all() {
        let by_scenario = catalog.iter().any(|s| s.catches.contains(&m.name()));
        let by_tier = match m {
            MatrixMutant::Switch(s) => s.in_simulator() || s.in_harness(),
            MatrixMutant::Profile(_) => true,
        };
        if !by_scenario && !by_tier {
            unclaimed.push(m.name());
        }
    }
    assert!(
        unclaimed.is_empty(),
        "mutants nothing claims: {unclaimed:?}"
    );
    // The data-plane and session switches need a container scenario.
    for name in [
        "sink-keeps-queue",
        "session-loss-ignored",
        "dispatcher-checkpoint-before-ack",
    ] {
        assert!(
            catalog.iter().any(|s| s.catches.iter().any(|c| c == name)),
            "{name} is claimed by no scenario"
        );
    }
}
