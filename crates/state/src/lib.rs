//! Terraform state from where it lives, read conditionally (only when it changed),
//! with Terraform's state lock.
//!
//! The contract every backend implements is in [`source`]: a [`source::StateSource`]
//! per workspace and a [`source::StateLister`] per workspace set. This build holds:
//!
//! - [`tfe`]: HCP Terraform / Terraform Enterprise (`tfe://[HOST/]ORG/WORKSPACE`, and
//!   `tfe://[HOST/]ORG/*` workspace sets with a tag filter), through the documented
//!   state-version API;
//! - [`command`]: a `state_command` (`["terraform", "state", "pull"]`) run in the
//!   workspace folder, the fallback for every other backend.

pub mod command;
pub mod source;
pub mod tfe;
