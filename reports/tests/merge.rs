//! `chaos report DIR...`: shard directories merge into one report.html, one
//! junit.xml and one run set; mismatched manifests, missing shards and
//! duplicated runs are refused, each naming what, where and the fix, with
//! nothing written. No Docker, no browser.

mod common;

use std::path::{Path, PathBuf};

use common::sets;
use reports::manifest::{Manifest, Shard};
use reports::run_model::Run;
use reports::{ReportRequest, Reported};

const NIGHT: [&str; 3] = [
    "2026-12-01T02:00:05+00:00",
    "2026-12-01T02:00:01+00:00",
    "2026-12-01T02:00:09+00:00",
];

fn report(inputs: &[PathBuf], out: &Path) -> anyhow::Result<Reported> {
    reports::report(ReportRequest {
        inputs,
        history: &[],
        out,
    })
}

/// The error of a merge that must be refused, after checking that nothing
/// was written to `out`.
fn refused(inputs: &[PathBuf], out: &Path) -> String {
    let err = format!("{:#}", report(inputs, out).unwrap_err());
    assert!(!out.exists(), "{} was written: {err}", out.display());
    err
}

fn key(r: &Run) -> (String, String, u64) {
    (r.meta.scenario.clone(), r.meta.profile.clone(), r.meta.seed)
}

#[test]
fn three_shards_merge_into_one_report_junit_and_run_set() {
    let root = sets::scratch("merge-ok");
    let dirs = sets::shards(&root, 3, 1, &NIGHT);
    let out = root.join("merged");
    let r = report(&dirs, &out).unwrap();

    let mut want: Vec<_> = sets::catalog(1).iter().map(key).collect();
    want.sort();
    let got: Vec<_> = r.runs.iter().map(key).collect();
    assert_eq!(got, want, "every run once, ordered by scenario x profile");

    let html = std::fs::read_to_string(&r.written.html).unwrap();
    let doc = scraper::Html::parse_document(&html);
    let sel = |s: &str| scraper::Selector::parse(s).unwrap();
    assert_eq!(doc.select(&sel("section.run")).count(), want.len());
    assert_eq!(doc.select(&sel("section.trend")).count(), 0, "no history");
    let junit = std::fs::read_to_string(&r.written.junit).unwrap();
    let xml = roxmltree::Document::parse(&junit).unwrap();
    let suites = xml
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .count();
    assert_eq!(suites, want.len());

    // The merged set: one manifest with every run, copied beside it; the
    // earliest start; no shard.
    let m = Manifest::read(&out).unwrap();
    assert_eq!(
        r.manifest.as_deref(),
        Some(out.join("manifest.json").as_path())
    );
    assert_eq!(m.shard, None);
    assert_eq!(m.started_at, NIGHT[1]);
    assert_eq!(m.runs.len(), want.len());
    for entry in &m.runs {
        let run = reports::load_runs(&[out.join(&entry.run_json)]).unwrap();
        assert_eq!(
            key(&run[0]),
            (entry.scenario.clone(), entry.profile.clone(), entry.seed)
        );
    }
    // The merged set is itself a run set: it merges (alone) again.
    let again = report(std::slice::from_ref(&out), &root.join("again")).unwrap();
    assert_eq!(again.runs.iter().map(key).collect::<Vec<_>>(), want);
}

#[test]
fn a_doctored_manifest_is_refused_naming_both_dirs_and_the_field() {
    type Doctor = fn(&mut Manifest);
    let cases: [(&str, Doctor); 3] = [
        ("commit", |m| m.commit = "fedcba987654".into()),
        ("catalog_hash", |m| {
            m.catalog_hash = "0000000000000000".into()
        }),
        ("images", |m| {
            m.images.insert("cdc-chaos/kafka".into(), "4.2.0".into());
        }),
    ];
    let check = |err: &str, field: &str, a: &Path, b: &Path| {
        assert!(
            err.contains(&format!("differ in `{field}`")),
            "{field}: {err}"
        );
        assert!(err.contains(&a.display().to_string()), "{err}");
        assert!(err.contains(&b.display().to_string()), "{err}");
        assert!(
            err.contains("merge only the shards of one nightly"),
            "{err}"
        );
    };
    for (field, doctor) in cases {
        let root = sets::scratch(&format!("merge-doctored-{field}"));
        let dirs = sets::shards(&root, 2, 1, &NIGHT);
        let mut m = Manifest::read(&dirs[1]).unwrap();
        doctor(&mut m);
        m.write(&dirs[1]).unwrap();
        let err = refused(&dirs, &root.join("merged"));
        check(&err, field, &dirs[0], &dirs[1]);
    }
    // The seed: shard 2 of another night's seed (its runs are of that seed).
    let root = sets::scratch("merge-doctored-seed");
    let one = sets::shards(&root.join("seed-1"), 2, 1, &NIGHT);
    let two = sets::shards(&root.join("seed-2"), 2, 2, &NIGHT);
    let err = refused(&[one[0].clone(), two[1].clone()], &root.join("merged"));
    check(&err, "seed", &one[0], &two[1]);
}

#[test]
fn missing_shards_are_named() {
    let root = sets::scratch("merge-missing");
    let dirs = sets::shards(&root, 3, 1, &NIGHT);
    let err = refused(&[dirs[0].clone(), dirs[2].clone()], &root.join("merged"));
    assert!(err.contains("shard(s) 2/3 missing"), "{err}");
    assert!(
        err.contains(&format!("1/3 in {}", dirs[0].display())),
        "{err}"
    );
    assert!(
        err.contains("chaos run --all --shard K/3 --seed 1"),
        "{err}"
    );
    let err = refused(&dirs[1..2], &root.join("merged"));
    assert!(err.contains("shard(s) 1/3, 3/3 missing"), "{err}");
}

#[test]
fn a_run_in_two_directories_is_refused_naming_both() {
    let root = sets::scratch("merge-dup");
    let dirs = sets::shards(&root, 2, 1, &NIGHT);
    // Shard 2 also holds a run of shard 1.
    let stolen = reports::load_runs(&[dirs[0].join("kafka-io-timeout/fix/run.json")]).unwrap();
    let mut m = Manifest::read(&dirs[1]).unwrap();
    let mut held: Vec<Run> = m
        .runs
        .iter()
        .map(|e| {
            reports::load_runs(&[dirs[1].join(&e.run_json)])
                .unwrap()
                .remove(0)
        })
        .collect();
    held.extend(stolen);
    m.runs.clear();
    sets::write_set(&dirs[1], m, &held);
    let err = refused(&dirs, &root.join("merged"));
    assert!(
        err.contains("the run kafka-io-timeout x fix x seed 1 is in both"),
        "{err}"
    );
    assert!(
        err.contains(
            &dirs[0]
                .join("kafka-io-timeout/fix/run.json")
                .display()
                .to_string()
        ),
        "{err}"
    );
    assert!(
        err.contains(
            &dirs[1]
                .join("kafka-io-timeout/fix/run.json")
                .display()
                .to_string()
        ),
        "{err}"
    );
    // A run.json file given beside the directory that holds it, too.
    let whole = sets::write_set(
        &root.join("whole"),
        sets::manifest(1, None, NIGHT[0]),
        &sets::catalog(1),
    );
    let file = whole.join("kafka-io-timeout/fix/run.json");
    let err = refused(&[whole.clone(), file.clone()], &root.join("merged"));
    assert!(err.contains("is in both"), "{err}");
    assert!(err.contains(&file.display().to_string()), "{err}");
}

#[test]
fn shards_of_different_sets_or_given_twice_are_refused() {
    let root = sets::scratch("merge-sets");
    let two = sets::shards(&root.join("two"), 2, 1, &NIGHT);
    let three = sets::shards(&root.join("three"), 3, 1, &NIGHT);
    let err = refused(&[two[0].clone(), three[1].clone()], &root.join("merged"));
    assert!(
        err.contains("(shard 1/2)") && err.contains("(shard 2/3)"),
        "{err}"
    );
    assert!(err.contains("share N"), "{err}");

    let err = refused(
        &[two[0].clone(), two[0].clone(), two[1].clone()],
        &root.join("merged"),
    );
    assert!(err.contains("shard 1/2 is given twice"), "{err}");

    let whole = sets::write_set(&root.join("whole"), sets::manifest(1, None, NIGHT[0]), &[]);
    let err = refused(&[two[0].clone(), whole.clone()], &root.join("merged"));
    assert!(err.contains("a whole set, no --shard"), "{err}");
    assert!(err.contains(&whole.display().to_string()), "{err}");
}

#[test]
fn a_run_that_is_not_what_its_manifest_says_or_a_missing_manifest_is_refused() {
    let root = sets::scratch("merge-liar");
    let dirs = sets::shards(&root, 2, 1, &NIGHT);
    let mut m = Manifest::read(&dirs[0]).unwrap();
    m.runs[0].profile = "hardened".into();
    m.write(&dirs[0]).unwrap();
    let err = refused(&dirs, &root.join("merged"));
    assert!(err.contains("but") && err.contains("lists it as"), "{err}");
    assert!(err.contains("x hardened x seed 1"), "{err}");

    let bare = root.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let err = refused(std::slice::from_ref(&bare), &root.join("merged"));
    assert!(
        err.contains("manifest.json: cannot read (no such file)"),
        "{err}"
    );
    assert!(err.contains(&bare.display().to_string()), "{err}");

    let mut m = Manifest::read(&dirs[1]).unwrap();
    m.runs[0].run_json = "../../etc/passwd".into();
    m.runs[0].scenario = "../x".into();
    m.write(&dirs[1]).unwrap();
    let err = refused(&dirs[1..], &root.join("merged"));
    assert!(err.contains("not a plain file name"), "{err}");
}

#[test]
fn out_must_not_be_an_input() {
    let root = sets::scratch("merge-out");
    let dirs = sets::shards(&root, 1, 1, &NIGHT);
    let before = std::fs::read_to_string(dirs[0].join("manifest.json")).unwrap();
    let err = format!("{:#}", report(&dirs, &dirs[0]).unwrap_err());
    assert!(err.contains("is one of the directories read"), "{err}");
    assert_eq!(
        before,
        std::fs::read_to_string(dirs[0].join("manifest.json")).unwrap()
    );
    // One shard of one is a whole set: it merges.
    let r = report(&dirs, &root.join("merged")).unwrap();
    assert_eq!(r.runs.len(), sets::catalog(1).len());
    assert_eq!(
        Manifest::read(&dirs[0]).unwrap().shard,
        Some(Shard { index: 1, count: 1 })
    );
}
