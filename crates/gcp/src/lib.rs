//! Gcp support: pure normalization of change-feed payloads into [`DriftEvent`]s and
//! the [`StateIdentity`] plug-in that indexes Terraform resources of this provider.

use driftreactor_event::{DriftEvent, NormalizeError, StateIdentity, StateInstance};

/// Normalizes one Cloud Audit Logs LogEntry, the same wrapped in a Pub/Sub push envelope or a CloudEvents envelope, or one Cloud Asset feed TemporalAsset into a [`DriftEvent`]. Pure, no I/O, never panics.
///
/// Containers (JSON arrays, JSON Lines, `{"Records": [...]}`) are split by the caller.
///
/// # Errors
/// [`NormalizeError`] naming the format, field and reason when the payload is not
/// JSON or not an event of this provider.
pub fn normalize(payload: &[u8]) -> Result<DriftEvent, NormalizeError> {
    let _ = payload;
    unimplemented!("gcp helper")
}

/// Indexes Terraform resources of this provider under the canonical identifiers
/// [`normalize`] emits.
#[derive(Debug, Clone, Copy, Default)]
pub struct GcpIdentity;

impl StateIdentity for GcpIdentity {
    fn handles(&self, resource_type: &str) -> bool {
        let _ = resource_type;
        unimplemented!("gcp helper")
    }
    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let _ = (instance, out);
        unimplemented!("gcp helper")
    }
    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let _ = (instance, out);
        unimplemented!("gcp helper")
    }
}
