//! The changefeed system under test.
//!
//! This crate will hold the re-implementation of TiCDC's new-architecture
//! control plane (coordinator, maintainer, dispatcher manager, dispatcher,
//! operators, bootstrap, epochs) and its Kafka data plane, following
//! `../shared/reference/ticdc-control-plane.md`. The foundation issue only
//! lays out the crate; the data-plane and control-plane issues fill it in.
