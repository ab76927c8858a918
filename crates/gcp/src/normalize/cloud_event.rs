//! A CloudEvents 1.0 event (`specversion`) wrapping a Google payload: `data` as an
//! object (dispatched), or `data_base64` (read as Pub/Sub message data). Its `id`
//! stands in for a missing Pub/Sub message id.

use driftreactor_event::lazy::Obj;
use driftreactor_event::{DriftEvent, NormalizeError};

use super::{Envelope, dispatch, pubsub_data::pubsub_data, str_of};

const CLOUDEVENT: &str = "CloudEvents event";

/// Normalizes the CloudEvents event `obj` (inside `env`, `depth` envelopes deep).
pub(super) fn cloud_event(
    obj: &Obj<'_>,
    env: &Envelope<'_>,
    depth: u8,
) -> Result<DriftEvent, NormalizeError> {
    let id = str_of(obj, "id");
    let inner = Envelope {
        message_id: env.message_id.or(id),
        attributes: env.attributes,
    };
    match obj.get("data") {
        Some(data) if data.is_object() => dispatch(data, &inner, depth + 1),
        Some(other) if !other.is_null() => Err(NormalizeError::Field {
            format: CLOUDEVENT,
            field: "data".into(),
            problem: format!("is {}, expected an object", other.describe()),
        }),
        _ => match str_of(obj, "data_base64") {
            Some(b64) => {
                let bytes =
                    crate::push::decode_base64(b64).ok_or_else(|| NormalizeError::Field {
                        format: CLOUDEVENT,
                        field: "data_base64".into(),
                        problem: "is not valid base64".into(),
                    })?;
                pubsub_data(&bytes, &inner, depth + 1)
            }
            None => Err(NormalizeError::missing(CLOUDEVENT, "data")),
        },
    }
}
