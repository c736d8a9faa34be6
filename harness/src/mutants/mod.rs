//! The mutant matrix's vocabulary on the harness side: every mutant a
//! scenario may claim (`catches`), derived from the system's bug switches
//! ([`cdc_system::mutant::Mutant`]) and from every "profile minus one
//! predicate" ([`cdc_system::profile::Profile::minus_one`]); no list is kept
//! by hand. The matrix runner itself is [`matrix`]; this module is a leaf
//! that the scenario parser reads `catches` against.

use cdc_system::mutant::Mutant;
use cdc_system::profile::Profile;

pub mod matrix;

/// One mutant of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixMutant {
    /// A bug switch, on in a `mutants` build.
    Switch(Mutant),
    /// A profile with one predicate off (every build has it).
    Profile(Profile),
}

impl MatrixMutant {
    pub fn name(&self) -> String {
        match self {
            MatrixMutant::Switch(m) => m.name().to_string(),
            MatrixMutant::Profile(p) => p.to_string(),
        }
    }
}

/// Every mutant: the bug switches, then the profiles minus one predicate.
pub fn all() -> Vec<MatrixMutant> {
    use strum::IntoEnumIterator;
    Mutant::iter()
        .map(MatrixMutant::Switch)
        .chain(Profile::minus_one().into_iter().map(MatrixMutant::Profile))
        .collect()
}

/// Every mutant's name.
pub fn names() -> Vec<String> {
    all().iter().map(MatrixMutant::name).collect()
}

/// The mutant named `name`.
pub fn find(name: &str) -> Option<MatrixMutant> {
    all().into_iter().find(|m| m.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_cover_switches_and_profiles() {
        let n = names();
        let mut sorted = n.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), n.len());
        assert!(n.contains(&"sink-keeps-queue".to_string()));
        assert!(n.contains(&"hardened-without-epochs-checked".to_string()));
        assert!(n.contains(&"fix-without-add-requires-bootstrap-done".to_string()));
        assert!(find("nope").is_none());
    }
}
