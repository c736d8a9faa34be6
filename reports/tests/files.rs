//! What `chaos report` does, from files: load recorded runs (naming the file
//! and the problem when one is bad) and write report.html + junit.xml.

mod common;

use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("reports-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn recorded_runs_render_to_both_files() {
    let dir = tmp("ok");
    let paths: Vec<PathBuf> = common::all()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let p = dir.join(format!("run{i}.json"));
            std::fs::write(&p, r.to_json().unwrap()).unwrap();
            p
        })
        .collect();
    let runs = reports::load_runs(&paths).unwrap();
    assert_eq!(runs, common::all());
    let out = reports::write(&runs, &dir.join("out")).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert!(html.contains("stale-cascade-remove"));
    let junit = std::fs::read_to_string(&out.junit).unwrap();
    roxmltree::Document::parse(&junit).unwrap();
}

#[test]
fn a_missing_or_malformed_file_is_named_with_its_problem() {
    let dir = tmp("bad");
    let missing = dir.join("nope.json");
    let err = format!("{:#}", reports::load_runs(&[&missing]).unwrap_err());
    assert!(err.contains("nope.json: cannot read"), "{err}");

    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let err = format!("{:#}", reports::load_runs(&[&garbage]).unwrap_err());
    assert!(err.contains("garbage.json: not a valid run.json"), "{err}");

    let truncated = dir.join("truncated.json");
    std::fs::write(&truncated, r#"{"schema_version": 1, "meta": {}}"#).unwrap();
    let err = format!("{:#}", reports::load_runs(&[&truncated]).unwrap_err());
    assert!(err.contains("truncated.json"), "{err}");
    assert!(err.contains("missing field"), "{err}");
}
