//! Generates the catalog's test cases (`tests/catalog.rs` includes them):
//! one test per scenario file in `scenarios/` x each profile it lists, so a
//! new scenario or profile is a new test without editing a list. The cases
//! `make test` runs are named in `CASES_IN_MAKE_TEST` of `tests/catalog.rs`;
//! every other case is `#[ignore]`d (the whole catalog is `make chaos`).

use std::fmt::Write;
use std::path::Path;

fn main() {
    // The manifest directory of this run, not the one the script was
    // compiled in: a script built from another checkout sharing the target
    // directory would otherwise read that checkout's scenarios.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = Path::new(&manifest);
    let dir = manifest.join("../scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let in_make_test = std::fs::read_to_string(manifest.join("tests/catalog.rs"))
        .expect("harness/tests/catalog.rs, which names the cases make test runs");
    println!("cargo:rerun-if-changed=tests/catalog.rs");
    let selected = selection(&in_make_test);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading the scenarios directory {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "toml"));
    files.sort();
    let mut out = String::new();
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).expect("a scenario file");
        // An unparsable file gets no case here; `the_cases_cover_the_catalog`
        // and scenario validation report it.
        let Ok(t) = text.parse::<toml::Table>() else {
            continue;
        };
        let Some(name) = t.get("name").and_then(|v| v.as_str()) else {
            continue;
        };
        let profiles = t
            .get("cluster")
            .and_then(|c| c.get("profiles"))
            .and_then(|p| p.as_array())
            .cloned()
            .unwrap_or_default();
        for p in profiles.iter().filter_map(|p| p.as_str()) {
            let ident = format!("{name}_under_{p}").replace('-', "_");
            if !selected.contains(&(name.to_string(), p.to_string())) {
                out.push_str(
                    "#[ignore = \"the whole catalog is `make chaos`; run these with --include-ignored\"]\n",
                );
            }
            writeln!(
                out,
                "#[test]\nfn {ident}() {{\n    run_case({name:?}, {p:?});\n}}\n"
            )
            .unwrap();
            writeln!(out, "// case: {name} {p}").unwrap();
        }
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("catalog_cases.rs");
    std::fs::write(dest, out).unwrap();
}

/// The `("scenario", "profile")` pairs of the `CASES_IN_MAKE_TEST` constant.
fn selection(src: &str) -> Vec<(String, String)> {
    let Some(start) = src.find("CASES_IN_MAKE_TEST") else {
        return Vec::new();
    };
    let body = &src[start..];
    let body = &body[..body.find("];").unwrap_or(body.len())];
    body.split('(')
        .skip(1)
        .filter_map(|pair| {
            let mut q = pair.split('"').skip(1).step_by(2);
            Some((q.next()?.to_string(), q.next()?.to_string()))
        })
        .collect()
}
