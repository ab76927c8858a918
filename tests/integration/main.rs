//! End-to-end tests of the `driftreactor` binary (ripgrep's layout: one integration
//! binary, modules per area). They run the real binary on the repo's fixtures and on
//! the shared corpus of real public samples (`../shared/corpus`, or
//! `DRIFTREACTOR_CORPUS`).

mod corpus_aws;
mod corpus_azure_gcp;
mod regression;
mod remediate_replay;
mod replay_fixtures;
mod util;
