//! Reports of chaos runs.
//!
//! Owns the record of a run ([`run_model`], what `run.json` holds) and its
//! rendering into one self-contained HTML page ([`html`]) and a JUnit XML
//! file ([`junit`]). Depends on no other crate of the workspace: the harness
//! depends on this crate, and a recorded run is rendered from its file alone.

pub mod html;
pub mod junit;
pub mod run_model;
pub mod timeline;
