//! Push authentication, re-exported from the crates that own it: the shared OIDC
//! verifier, secret comparison and bearer parser of [`driftreactor_source::push`]
//! (also used by the admin API), and Google's issuers from
//! [`driftreactor_gcp::push_endpoint`].

pub use driftreactor_gcp::push_endpoint::{GOOGLE_ISSUERS, GOOGLE_JWKS_URL};
pub use driftreactor_source::push::{
    AuthError, OidcConfigError, OidcVerifier, UNAUTHENTICATED, UNAUTHENTICATED_WARNING, bearer,
    secret_eq,
};
