//! Reports of chaos runs.
//!
//! Owns the rendering of a run's `run.json` into one self-contained HTML page
//! and a JUnit XML file. Filled in by the reports issue; the foundation only
//! lays out the crate so the workspace has its final shape.
