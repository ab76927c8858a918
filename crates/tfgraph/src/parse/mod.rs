//! Terraform state format version 4: the raw shapes of `resources[]` elements, the
//! instance addresses, and the [`Loader`] that turns resource elements into nodes,
//! identifiers and dependency edges.
//!
//! Elements are deserialized one at a time by [`crate::reader`]; strings are borrowed
//! from the read buffer where they have no escapes; `attributes` stay unparsed
//! ([`RawValue`](serde_json::value::RawValue)) and are only handed to the
//! [`StateIdentity`](crate::StateIdentity) plug-ins.
//!
//! One module per concern: [`raw`] (the deserialized shapes), [`address`] (instance
//! keys, module paths, dependency keys), [`loader`] (nodes, identifiers, edges).

mod address;
mod loader;
mod raw;

pub(crate) use loader::{Header, Interner, Loaded, Loader, Prepared};
pub(crate) use raw::RawResource;
