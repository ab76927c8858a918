//! A Pub/Sub push envelope (`{"message": {...}, "subscription"}`) sent as the
//! payload itself: read by the one envelope parser ([`crate::push::from_obj`]), its
//! `message.data` normalized as Pub/Sub message data; `publishTime` is the fallback
//! time.

use driftreactor_event::lazy::Obj;
use driftreactor_event::{DriftEvent, NormalizeError};

use super::{Envelope, parse_time, pubsub_data::pubsub_data};

const PUSH: &str = "Pub/Sub push envelope";

/// Normalizes the push envelope `obj` (`depth` envelopes deep).
pub(super) fn push(obj: &Obj<'_>, depth: u8) -> Result<DriftEvent, NormalizeError> {
    let envelope = crate::push::from_obj(obj).map_err(|e| match e {
        crate::push::PushEnvelopeError::Field { field, problem } => NormalizeError::Field {
            format: PUSH,
            field: field.into(),
            problem,
        },
        crate::push::PushEnvelopeError::Json(problem) => NormalizeError::Field {
            format: PUSH,
            field: "message".into(),
            problem,
        },
    })?;
    let Some(bytes) = envelope.data.as_deref() else {
        return Err(NormalizeError::missing(PUSH, "message.data"));
    };
    let env = Envelope {
        message_id: envelope.message_id,
        attributes: Some(&envelope.attributes),
    };
    let mut ev = pubsub_data(bytes, &env, depth + 1)?;
    if ev.occurred_at.is_none() {
        ev.occurred_at = parse_time(envelope.publish_time);
    }
    Ok(ev)
}
