//! Every plan in `tests/sim-findings/` is a shrunk finding of `chaos sim`
//! under `hardened` (or `hardened` minus the predicate the file is named
//! after) that was diagnosed and fixed in the system (the README there names
//! each cause and the profile predicate that answers it). The plan, stored
//! under `hardened`, must run clean: a finding coming back is a regression.

use std::path::Path;

use cdc_system::sim::swarm::{self, Plan};

#[test]
fn every_fixed_finding_stays_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sim-findings");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/sim-findings") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let plan: Plan = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a plan: {e}", path.display()));
        let found = swarm::run(&plan).findings;
        assert!(
            found.is_empty(),
            "{} (replay: chaos sim --plan {}): {found:?}",
            path.display(),
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} plans in {}", dir.display());
}
