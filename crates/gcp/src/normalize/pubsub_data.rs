//! The `data` of one Pub/Sub message: a JSON object of any shape (dispatched), or
//! the plain-string welcome message a new Cloud Asset feed publishes first (a
//! handshake, not a change).

use driftreactor_event::{DriftEvent, NormalizeError, NotAChange, Provider};

use driftreactor_event::lazy::Val;

use super::{EXPAND, Envelope, dispatch, parse_time};

/// Normalizes Pub/Sub message `data` wrapped in `env`; an event without a time takes
/// the `logging.googleapis.com/timestamp` attribute.
pub(super) fn pubsub_data(
    data: &[u8],
    env: &Envelope<'_>,
    depth: u8,
) -> Result<DriftEvent, NormalizeError> {
    let trimmed = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    let trimmed = trimmed.trim_ascii();
    if trimmed.is_empty() {
        return Err(NormalizeError::UnknownFormat(
            "Pub/Sub message data is empty".into(),
        ));
    }
    if trimmed.first() == Some(&b'{') {
        let mut ev = dispatch(&Val::parse(trimmed, EXPAND)?, env, depth + 1)?;
        if ev.occurred_at.is_none() {
            ev.occurred_at = parse_time(
                env.attributes
                    .and_then(|a| a.get("logging.googleapis.com/timestamp"))
                    .map(String::as_str),
            );
        }
        return Ok(ev);
    }
    if let Some(text) = welcome(trimmed) {
        return Ok(handshake(env.message_id, text));
    }
    Err(NormalizeError::UnknownFormat(
        match std::str::from_utf8(trimmed) {
            Ok(text) => format!(
                "Pub/Sub message data is neither a JSON object nor the Cloud Asset feed welcome \
             message: {:?}",
                text.chars().take(60).collect::<String>()
            ),
            Err(_) => format!(
                "Pub/Sub message data is binary ({} bytes), not a JSON object",
                trimmed.len()
            ),
        },
    ))
}

/// The plain-string welcome message a new Cloud Asset feed publishes first: UTF-8
/// text, not JSON, that speaks of a feed being set up ("…successfully configured
/// real time feed…"). Recognized by wording, case-insensitively: it mentions `feed`
/// and one of `successfully`, `configured`, `welcome`.
pub(super) fn welcome(data: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(data).ok()?.trim();
    if text.starts_with(['{', '[', '"']) || text.len() > 4096 {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    (lower.contains("feed")
        && ["successfully", "configured", "welcome"]
            .iter()
            .any(|w| lower.contains(w)))
    .then_some(text)
}

/// The handshake event of a feed welcome `text` (id: the message id, else
/// `cloudasset-feed-welcome`).
pub(super) fn handshake(message_id: Option<&str>, text: &str) -> DriftEvent {
    let mut ev = DriftEvent::new(
        Provider::Gcp,
        message_id.unwrap_or("cloudasset-feed-welcome"),
    );
    ev.service = "cloudasset.googleapis.com".into();
    ev.operation = "feed.welcome".into();
    ev.not_a_change = Some(NotAChange::Handshake);
    ev.request = serde_json::value::to_raw_value(text).ok();
    ev
}
