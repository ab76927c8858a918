//! The `[[sources]]` table of `type = "azure_event_grid_namespace"`: data, pure
//! validation, and `build` (reads the access key).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::client::{Credential, NamespaceClient, check_name};
use super::{NamespaceError, NamespaceSource};

/// The `[[sources]]` table of `type = "azure_event_grid_namespace"`.
///
/// ```toml
/// [[sources]]
/// type = "azure_event_grid_namespace"
/// endpoint = "https://my-ns.westeurope-1.eventgrid.azure.net"
/// topic = "arm-changes"
/// subscription = "driftreactor"
/// access_key_env = "EVENTGRID_KEY"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceSourceConfig {
    /// The namespace endpoint, `https://<namespace>.<region>-1.eventgrid.azure.net`.
    pub endpoint: String,
    /// The namespace topic.
    pub topic: String,
    /// The topic's event subscription (delivery mode: queue).
    pub subscription: String,
    /// The environment variable holding the namespace access key (SAS key).
    #[serde(default)]
    pub access_key_env: Option<String>,
    /// The environment variable holding a Microsoft Entra access token.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// A file holding a Microsoft Entra access token (re-read at each request).
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// Concurrent receivers, 1..=16. Default 1.
    #[serde(default = "default_receivers")]
    pub receivers: usize,
    /// Events per receive call, 1..=100. Default 10.
    #[serde(default = "default_max_events")]
    pub max_events: u32,
    /// Long-poll wait per receive call, in seconds (10..=120). Default 60.
    #[serde(default = "default_max_wait_secs")]
    pub max_wait_secs: u32,
    /// The event subscription's receive lock duration, in seconds (60..=300 on the
    /// service); locks of events still in the pipeline are renewed every half of it.
    /// Default 60.
    #[serde(default = "default_lock_duration_secs")]
    pub lock_duration_secs: u32,
}

const fn default_receivers() -> usize {
    1
}
const fn default_max_events() -> u32 {
    10
}
const fn default_max_wait_secs() -> u32 {
    60
}
const fn default_lock_duration_secs() -> u32 {
    60
}

impl NamespaceSourceConfig {
    /// The credential these fields name (pure: the variables are read later, at each
    /// request or at build time for the access key).
    ///
    /// # Errors
    /// [`NamespaceError::Config`] unless exactly one of `access_key_env`,
    /// `bearer_token_env` and `bearer_token_file` is set.
    fn credential_source(&self) -> Result<CredentialSource<'_>, NamespaceError> {
        let given = [
            self.access_key_env.is_some(),
            self.bearer_token_env.is_some(),
            self.bearer_token_file.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(NamespaceError::Config {
                field: "access_key_env",
                reason: "set exactly one of `access_key_env`, `bearer_token_env` and `bearer_token_file`".into(),
            });
        }
        Ok(
            match (
                &self.access_key_env,
                &self.bearer_token_env,
                &self.bearer_token_file,
            ) {
                (Some(var), _, _) => CredentialSource::KeyEnv(var),
                (_, Some(var), _) => CredentialSource::TokenEnv(var),
                (_, _, Some(path)) => CredentialSource::TokenFile(path),
                _ => unreachable_credential()?,
            },
        )
    }

    /// Checks the fields without any I/O.
    ///
    /// # Errors
    /// [`NamespaceError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), NamespaceError> {
        self.credential_source()?;
        check_name("topic", &self.topic)?;
        check_name("subscription", &self.subscription)?;
        let bad = |field, reason: &str| {
            Err(NamespaceError::Config {
                field,
                reason: reason.to_owned(),
            })
        };
        if !(self.endpoint.starts_with("https://") || self.endpoint.starts_with("http://")) {
            return bad("endpoint", "must be an https:// URL");
        }
        if !(1..=16).contains(&self.receivers) {
            return bad("receivers", "must be between 1 and 16");
        }
        if !(1..=100).contains(&self.max_events) {
            return bad("max_events", "must be between 1 and 100");
        }
        if !(1..=120).contains(&self.max_wait_secs) {
            return bad(
                "max_wait_secs",
                "must be between 1 and 120 seconds (the service takes 10..=120)",
            );
        }
        if self.lock_duration_secs < 2 {
            return bad("lock_duration_secs", "must be at least 2 seconds");
        }
        Ok(())
    }

    /// Reads the access key (when configured) and returns the source, ready to run.
    ///
    /// # Errors
    /// [`NamespaceError::Config`] for invalid fields; [`NamespaceError::Credential`]
    /// when the access key's environment variable is not set.
    pub fn build(&self) -> Result<NamespaceSource, NamespaceError> {
        self.validate()?;
        let credential = match self.credential_source()? {
            CredentialSource::KeyEnv(var) => {
                Credential::AccessKey(std::env::var(var).map_err(|_| {
                    NamespaceError::Credential(format!("environment variable {var} is not set"))
                })?)
            }
            CredentialSource::TokenEnv(var) => Credential::BearerTokenEnv(var.to_owned()),
            CredentialSource::TokenFile(path) => Credential::BearerTokenFile(path.clone()),
        };
        let client =
            NamespaceClient::new(&self.endpoint, &self.topic, &self.subscription, credential)?;
        Ok(NamespaceSource::new(
            client,
            self.receivers,
            self.max_events,
            self.max_wait_secs,
            Duration::from_secs(u64::from(self.lock_duration_secs)),
        ))
    }
}

enum CredentialSource<'a> {
    KeyEnv(&'a str),
    TokenEnv(&'a str),
    TokenFile(&'a PathBuf),
}

fn unreachable_credential<'a>() -> Result<CredentialSource<'a>, NamespaceError> {
    Err(NamespaceError::Config {
        field: "access_key_env",
        reason: "no credential configured".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NamespaceSourceConfig {
        serde_json::from_value(serde_json::json!({
            "endpoint": "https://ns.westeurope-1.eventgrid.azure.net",
            "topic": "arm-changes",
            "subscription": "driftreactor",
            "access_key_env": "DRIFTREACTOR_TEST_UNSET_KEY_VAR",
        }))
        .unwrap()
    }

    #[test]
    fn defaults_and_validation() {
        let c = config();
        assert_eq!(
            (
                c.receivers,
                c.max_events,
                c.max_wait_secs,
                c.lock_duration_secs
            ),
            (1, 10, 60, 60)
        );
        c.validate().unwrap();
        let err = NamespaceSourceConfig {
            access_key_env: None,
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let err = NamespaceSourceConfig {
            bearer_token_env: Some("T".into()),
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let err = NamespaceSourceConfig {
            topic: "a b".into(),
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("`topic`"), "{err}");
        let err = NamespaceSourceConfig {
            max_events: 101,
            ..config()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("max_events"), "{err}");
    }

    #[test]
    fn a_missing_key_variable_is_named() {
        let err = config().build().unwrap_err();
        assert!(
            err.to_string().contains("DRIFTREACTOR_TEST_UNSET_KEY_VAR"),
            "{err}"
        );
    }

    /// The serve crate reads `[[sources]]` tables into an enum tagged by `type`; the
    /// config's `deny_unknown_fields` must not trip on the tag.
    #[test]
    fn reads_inside_a_type_tagged_sources_table() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Sources {
            #[serde(rename = "azure_event_grid_namespace")]
            This(NamespaceSourceConfig),
        }
        let Sources::This(config) = serde_json::from_str::<Sources>(r#"{"type": "azure_event_grid_namespace", "endpoint": "https://ns.eventgrid.azure.net", "topic": "top", "subscription": "sub", "access_key_env": "K"}"#).unwrap();
        config.validate().unwrap();
        assert!(
            serde_json::from_str::<Sources>(
                r#"{"type": "azure_event_grid_namespace", "bogus": 1}"#
            )
            .is_err()
        );
    }
}
