//! Aws support: pure normalization of change-feed payloads into [`DriftEvent`]s and
//! the [`StateIdentity`] plug-in that indexes Terraform resources of this provider.

#[cfg(feature = "sqs")]
pub mod setup;
#[cfg(feature = "sqs")]
pub mod sqs;

use driftreactor_event::{DriftEvent, NormalizeError, StateIdentity, StateInstance};

/// Normalizes one EventBridge envelope (`detail-type: AWS API Call via CloudTrail` or any other detail-type) or one bare CloudTrail record into a [`DriftEvent`]. Pure, no I/O, never panics.
///
/// Containers (JSON arrays, JSON Lines, `{"Records": [...]}`) are split by the caller.
///
/// # Errors
/// [`NormalizeError`] naming the format, field and reason when the payload is not
/// JSON or not an event of this provider.
pub fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    let _ = payload;
    unimplemented!("aws helper")
}

/// Indexes Terraform resources of this provider under the canonical identifiers
/// [`normalize`] emits.
#[derive(Debug, Clone, Copy, Default)]
pub struct AwsIdentity;

impl StateIdentity for AwsIdentity {
    fn handles(&self, resource_type: &str) -> bool {
        let _ = resource_type;
        unimplemented!("aws helper")
    }
    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let _ = (instance, out);
        unimplemented!("aws helper")
    }
    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let _ = (instance, out);
        unimplemented!("aws helper")
    }
}
