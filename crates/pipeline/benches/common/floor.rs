//! The floor rows: for each provider, a plain `#[derive(Deserialize)]` of just the
//! fields its normalizer reads (nested objects typed, the values it keeps as they were
//! written left as `RawValue`s, strings borrowed where the JSON has no escapes), and
//! nothing else: no normalization, no routing, no decision. What any typed serde_json
//! reader of those fields costs, measured beside the bare envelope parse of the same
//! bytes ([`super::envelopes`]); a provider row cannot beat its floor.
//!
//! The fields are those of the normalizers' readers: AWS `crates/aws/src/record.rs`
//! ([`super::envelopes::TypedRecord`]), Azure `crates/azure/src/envelope.rs`, GCP
//! `crates/gcp/src/normalize/entry.rs` (a Pub/Sub push envelope's `message.data`
//! decoded from base64, as the GCP normalizer does, and its `LogEntry` read).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::envelopes::{EventBridge, Shape, TypedRecord};

/// Reads `bytes`, an event of `shape`, with the floor struct of its shape; `scratch`
/// holds a push envelope's decoded data. Returns a number read from the result (so
/// the read cannot be optimized away).
///
/// # Errors
/// serde_json's error when `bytes` (or a push envelope's decoded data) is not of the
/// shape; a `data` that is not standard base64 is reported as a custom error.
pub fn read(shape: Shape, bytes: &[u8], scratch: &mut Vec<u8>) -> Result<usize, serde_json::Error> {
    use serde_json::from_slice as p;
    Ok(match shape {
        Shape::EventBridge => {
            let e: EventBridge<'_, TypedRecord<'_>> = p(bytes)?;
            e.detail.event_name.len() + e.detail.resources.len()
        }
        Shape::EventGrid | Shape::CloudEvents => {
            let e: AzureEvent<'_> = p(bytes)?;
            let claims = e.data.and_then(|d| d.claims);
            e.id.len() + usize::from(matches!(claims, Some(Decoded::Obj(_))))
        }
        Shape::LogEntry => entry(bytes)?,
        Shape::AssetFeed => {
            let e: AssetFeed<'_> = p(bytes)?;
            let name = |a: Option<ObjOr<Asset<'_>>>| match a {
                Some(ObjOr::Obj(a)) => a.name.len(),
                _ => 0,
            };
            name(e.asset) + name(e.prior_asset)
        }
        Shape::PubsubPush => {
            let e: Push<'_> = p(bytes)?;
            scratch.clear();
            base64_simd::STANDARD
                .decode_append(e.message.data.as_bytes(), scratch)
                .map_err(|_| serde::de::Error::custom("message.data is not base64"))?;
            e.subscription.len() + e.message.message_id.len() + entry(scratch)?
        }
    })
}

/// The floor read of one audit `LogEntry`.
fn entry(bytes: &[u8]) -> Result<usize, serde_json::Error> {
    let e: LogEntry<'_> = serde_json::from_slice(bytes)?;
    Ok(e.insert_id.len() + e.proto_payload.method_name.len())
}

/// A JSON scalar as a reader keeps it: a string borrowed where it has no escapes, a
/// number or a boolean as its value (no allocation); arrays and objects are refused.
#[derive(Default)]
pub enum Scalar<'a> {
    /// A string.
    Str(Cow<'a, str>),
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
    /// `null`, or absent.
    #[default]
    Null,
}

impl Scalar<'_> {
    /// A string's length, bytes; 1 for any other scalar.
    pub fn len(&self) -> usize {
        match self {
            Self::Str(s) => s.len(),
            _ => 1,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON scalar")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Num(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Num(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Num(v))
            }
            fn visit_unit<E>(self) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Null)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A floor struct named without its lifetime, so a JSON string holding one can be read
/// with the string's own lifetime ([`Decoded`]).
pub trait Family {
    /// The struct, borrowing from `'x`.
    type Of<'x>: Deserialize<'x>;
}

/// An object, or a JSON string holding one that is decoded and read (then dropped),
/// as the Azure reader reads `claims` and `authorization`; any other value skipped.
pub enum Decoded<'a, F: Family> {
    /// An object, read.
    Obj(F::Of<'a>),
    /// A string holding an object (read), or another value (skipped).
    Other,
}

impl<'de: 'a, 'a, F: Family> Deserialize<'de> for Decoded<'a, F>
where
    F::Of<'a>: Deserialize<'de>,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Visit::<'a, F>(std::marker::PhantomData))
    }
}

/// An object read as `T`; any other value (a string such as `"..."`, an array, a
/// scalar) skipped, as the GCP reader records only its kind.
pub enum ObjOr<T> {
    /// An object, read.
    Obj(T),
    /// Another value.
    Other,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjOr<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = ObjOr<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<ObjOr<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(m)).map(ObjOr::Obj)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, s: A) -> Result<ObjOr<T>, A::Error> {
                serde::de::IgnoredAny.visit_seq(s).map(|_| ObjOr::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other)
            }
            fn visit_unit<E>(self) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Reads the JSON text `v` as `F` with the text's lifetime, then drops it (what a
/// reader keeps of it is a few short strings); text that is not `F` is skipped.
fn decode<F: Family>(v: &str) {
    let _ = serde_json::from_str::<F::Of<'_>>(v);
}

/// The visitor of [`Decoded`].
struct Visit<'a, F>(std::marker::PhantomData<(&'a (), F)>);

impl<'de: 'a, 'a, F: Family> serde::de::Visitor<'de> for Visit<'a, F>
where
    F::Of<'a>: Deserialize<'de>,
{
    type Value = Decoded<'a, F>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Decoded<'a, F>, A::Error> {
        <F::Of<'a>>::deserialize(serde::de::value::MapAccessDeserializer::new(m)).map(Decoded::Obj)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, s: A) -> Result<Decoded<'a, F>, A::Error> {
        serde::de::IgnoredAny.visit_seq(s).map(|_| Decoded::Other)
    }
    fn visit_str<E>(self, v: &str) -> Result<Decoded<'a, F>, E> {
        decode::<F>(v);
        Ok(Decoded::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Decoded<'a, F>, E> {
        Ok(Decoded::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Decoded<'a, F>, E> {
        Ok(Decoded::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Decoded<'a, F>, E> {
        Ok(Decoded::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Decoded<'a, F>, E> {
        Ok(Decoded::Other)
    }
    fn visit_unit<E>(self) -> Result<Decoded<'a, F>, E> {
        Ok(Decoded::Other)
    }
}

/// An Event Grid or CloudEvents event: the keys of both schemas the Azure reader reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AzureEvent<'a> {
    #[serde(default, borrow)]
    pub specversion: Option<Scalar<'a>>,
    #[serde(borrow)]
    pub id: Scalar<'a>,
    #[serde(default, borrow)]
    pub event_type: Option<Scalar<'a>>,
    #[serde(rename = "type", default, borrow)]
    pub ty: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub event_time: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub time: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub topic: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub source: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub subject: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub data: Option<AzureData<'a>>,
}

/// The `data` of an ARM resource event.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AzureData<'a> {
    #[serde(default, borrow)]
    pub resource_uri: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub operation_name: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub resource_provider: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub subscription_id: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub status: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub claims: Option<Decoded<'a, ClaimsOf>>,
    #[serde(default, borrow)]
    pub authorization: Option<Decoded<'a, AuthorizationOf>>,
    #[serde(default, borrow)]
    pub http_request: Option<&'a RawValue>,
}

/// The token claims the Azure reader reads.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct AzureClaims<'a> {
    #[serde(
        rename = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn",
        default,
        borrow
    )]
    pub upn: Scalar<'a>,
    #[serde(rename = "upn", default, borrow)]
    pub upn_short: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub unique_name: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub appid: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub azp: Option<Scalar<'a>>,
    #[serde(
        rename = "http://schemas.microsoft.com/identity/claims/objectidentifier",
        default,
        borrow
    )]
    pub object_id: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub oid: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub ipaddr: Option<Scalar<'a>>,
}

/// [`AzureClaims`] without its lifetime.
pub struct ClaimsOf;

impl Family for ClaimsOf {
    type Of<'x> = AzureClaims<'x>;
}

/// [`AzureAuthorization`] without its lifetime.
pub struct AuthorizationOf;

impl Family for AuthorizationOf {
    type Of<'x> = AzureAuthorization<'x>;
}

/// `data.authorization`.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct AzureAuthorization<'a> {
    #[serde(default, borrow)]
    pub evidence: Option<ObjOr<AzureEvidence<'a>>>,
}

/// `data.authorization.evidence`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AzureEvidence<'a> {
    #[serde(default, borrow)]
    pub principal_id: Option<Scalar<'a>>,
}

/// An audit `LogEntry`: the keys the GCP reader reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct LogEntry<'a> {
    #[serde(default, borrow)]
    pub insert_id: Scalar<'a>,
    #[serde(default, borrow)]
    pub log_name: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub timestamp: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub receive_timestamp: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub severity: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub resource: Option<ObjOr<MonitoredResource<'a>>>,
    #[serde(borrow)]
    pub proto_payload: AuditLog<'a>,
    #[serde(default, borrow)]
    pub operation: Option<ObjOr<Operation<'a>>>,
}

/// `resource` of a `LogEntry`.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct MonitoredResource<'a> {
    #[serde(rename = "type", default, borrow)]
    pub ty: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub labels: Option<ObjOr<ResourceLabels<'a>>>,
}

/// `resource.labels`.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct ResourceLabels<'a> {
    #[serde(default, borrow)]
    pub project_id: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub zone: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub region: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub location: Option<Scalar<'a>>,
}

/// `operation` of a `LogEntry`.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct Operation<'a> {
    #[serde(default, borrow)]
    pub id: Option<Scalar<'a>>,
}

/// `protoPayload`, an `AuditLog`; the values the normalizer keeps as written are
/// `RawValue`s.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AuditLog<'a> {
    #[serde(rename = "@type", default, borrow)]
    pub ty: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub service_name: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub method_name: Scalar<'a>,
    #[serde(default, borrow)]
    pub resource_name: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub status: Option<ObjOr<Status<'a>>>,
    #[serde(default, borrow)]
    pub authentication_info: Option<ObjOr<AuthenticationInfo<'a>>>,
    #[serde(default, borrow)]
    pub request_metadata: Option<ObjOr<RequestMetadata<'a>>>,
    #[serde(default, borrow)]
    pub request: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub response: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub authorization_info: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub service_data: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub metadata: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub resource_location: Option<&'a RawValue>,
}

/// `protoPayload.status`.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct Status<'a> {
    #[serde(default, borrow)]
    pub code: Option<Scalar<'a>>,
}

/// `protoPayload.authenticationInfo`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AuthenticationInfo<'a> {
    #[serde(default, borrow)]
    pub principal_email: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub principal_subject: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub service_account_delegation_info: Option<Vec<ObjOr<DelegationLink<'a>>>>,
}

/// One `serviceAccountDelegationInfo` element.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct DelegationLink<'a> {
    #[serde(default, borrow)]
    pub first_party_principal: Option<ObjOr<FirstParty<'a>>>,
}

/// `firstPartyPrincipal` of a delegation link.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct FirstParty<'a> {
    #[serde(default, borrow)]
    pub principal_email: Option<Scalar<'a>>,
}

/// `protoPayload.requestMetadata`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct RequestMetadata<'a> {
    #[serde(default, borrow)]
    pub caller_supplied_user_agent: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub caller_ip: Option<Scalar<'a>>,
}

/// A Cloud Asset feed message (`TemporalAsset`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AssetFeed<'a> {
    #[serde(default, borrow)]
    pub asset: Option<ObjOr<Asset<'a>>>,
    #[serde(default, borrow)]
    pub prior_asset: Option<ObjOr<Asset<'a>>>,
    #[serde(default, borrow)]
    pub prior_asset_state: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub deleted: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub window: Option<ObjOr<Window<'a>>>,
}

/// An asset of a feed message (its `resource.data` is not read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct Asset<'a> {
    #[serde(default, borrow)]
    pub name: Scalar<'a>,
    #[serde(default, borrow)]
    pub asset_type: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub update_time: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub resource: Option<ObjOr<AssetResource<'a>>>,
    #[serde(default, borrow)]
    pub iam_policy: Option<&'a RawValue>,
}

/// `asset.resource`.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct AssetResource<'a> {
    #[serde(default, borrow)]
    pub location: Option<Scalar<'a>>,
}

/// `window` of a feed message.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct Window<'a> {
    #[serde(default, borrow)]
    pub start_time: Option<Scalar<'a>>,
}

/// A Pub/Sub push envelope, its `message.data` base64 text to decode.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct Push<'a> {
    #[serde(borrow)]
    pub message: PushMessage<'a>,
    #[serde(default, borrow)]
    pub subscription: Scalar<'a>,
}

/// The `message` of a [`Push`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct PushMessage<'a> {
    #[serde(borrow)]
    pub data: Cow<'a, str>,
    #[serde(default, borrow)]
    pub message_id: Scalar<'a>,
    #[serde(default, borrow)]
    pub publish_time: Option<Scalar<'a>>,
    #[serde(default, borrow)]
    pub attributes: Option<ObjOr<PushAttributes<'a>>>,
}

/// `message.attributes`: the timestamp attribute the GCP reader reads.
#[derive(Deserialize)]
#[allow(dead_code)]
pub struct PushAttributes<'a> {
    #[serde(rename = "logging.googleapis.com/timestamp", default, borrow)]
    pub timestamp: Option<Scalar<'a>>,
}
