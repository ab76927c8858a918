//! Test helpers for driftreactor: local servers started on 127.0.0.1 random ports and
//! stopped when dropped, in-process fakes of cloud endpoints that have no emulator, and
//! the shared harnesses of the provider crates' tests: the corpus location
//! ([`corpus`]), golden files ([`golden`]), identity plug-ins run by hand ([`identity`])
//! and fixture events routed end to end ([`routing`]).
//!
//! A helper whose tool is missing fails with a message naming what to install, unless
//! the matching `DRIFTREACTOR_SKIP_<WHAT>=1` is set (then the test skips itself).

pub mod aws_e2e;
pub mod azurite;
pub mod corpus;
pub mod docs;
pub mod eventgrid_ns;
pub mod gcs;
pub mod golden;
pub mod identity;
pub mod logs;
pub mod moto;
pub mod pipeline;
pub mod postgres;
pub mod process;
pub mod pubsub;
pub mod routing;
pub mod synth;
pub mod terraform;
