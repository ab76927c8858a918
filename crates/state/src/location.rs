//! [`StateLocation`]: a `[[workspaces]] state` value, a path or a URL.

use std::path::PathBuf;

use crate::source::{ErrorKind, SourceError};

/// Where one workspace's state is: a local file or an object in a store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateLocation {
    /// A local file (Terraform state format version 4).
    File(PathBuf),
    /// `s3://BUCKET/KEY`: an object in Amazon S3 (or an S3-compatible store named by
    /// `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`).
    S3 {
        /// The bucket.
        bucket: String,
        /// The object key (`env/prod/terraform.tfstate`).
        key: String,
    },
    /// `gs://BUCKET/OBJECT`: an object in Google Cloud Storage.
    Gcs {
        /// The bucket.
        bucket: String,
        /// The object name.
        object: String,
    },
    /// `az://CONTAINER/BLOB` (account from `AZURE_STORAGE_ACCOUNT_NAME`, or the
    /// emulator) or `https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB`.
    Azure {
        /// The storage account, when the URL names it.
        account: Option<String>,
        /// The container.
        container: String,
        /// The blob name.
        blob: String,
    },
    /// `tfe://[HOST/]ORG/WORKSPACE`: an HCP Terraform / Terraform Enterprise workspace
    /// (the URL as written).
    Tfe(String),
}

/// `text` without anything that could be a credential: the query string and a
/// `user:password@` part are dropped.
pub fn redact(text: &str) -> String {
    let mut out = text.split(['?', '#']).next().unwrap_or(text).to_owned();
    if let Some((scheme, rest)) = out.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && !userinfo.contains('/')
    {
        out = format!("{scheme}://{host}");
    }
    out
}

fn bad(text: &str, message: impl Into<String>) -> SourceError {
    SourceError {
        kind: ErrorKind::BadLocation,
        location: redact(text),
        message: message.into(),
    }
}

/// `BUCKET/KEY` → (bucket, key), both non-empty.
fn split_bucket<'a>(
    text: &str,
    rest: &'a str,
    what: &str,
) -> Result<(&'a str, &'a str), SourceError> {
    let (bucket, key) = rest.split_once('/').ok_or_else(|| {
        bad(
            text,
            format!("no {what} after the bucket (expected SCHEME://BUCKET/{what})"),
        )
    })?;
    if bucket.is_empty() {
        return Err(bad(text, "the bucket is empty"));
    }
    if key.is_empty() || key.ends_with('/') {
        return Err(bad(text, format!("the {what} is empty")));
    }
    Ok((bucket, key))
}

impl StateLocation {
    /// Parses a location: `s3://`, `gs://`, `az://`, `https://ACCOUNT.blob.core.windows.net/…`
    /// and `tfe://` URLs; anything without `SCHEME://` is a local path (kept as
    /// written: the config file resolves relative paths before).
    ///
    /// # Errors
    /// [`ErrorKind::BadLocation`] with the reason: an unknown scheme, an empty bucket,
    /// key or container, an `https://` URL that is not an Azure Blob Storage URL, a
    /// query string (SAS tokens are read from the environment, never from the config).
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        let Some((scheme, rest)) = text.split_once("://") else {
            if text.trim().is_empty() {
                return Err(bad(text, "is empty"));
            }
            return Ok(StateLocation::File(PathBuf::from(text)));
        };
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            // `C:\…://` or similar: a path, not a URL.
            return Ok(StateLocation::File(PathBuf::from(text)));
        }
        if rest.contains(['?', '#']) {
            return Err(bad(
                text,
                "a query string or fragment is not read (give credentials such as a SAS token through the environment)",
            ));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "s3" => {
                let (bucket, key) = split_bucket(text, rest, "KEY")?;
                Ok(StateLocation::S3 {
                    bucket: bucket.into(),
                    key: key.into(),
                })
            }
            "gs" => {
                let (bucket, object) = split_bucket(text, rest, "OBJECT")?;
                Ok(StateLocation::Gcs {
                    bucket: bucket.into(),
                    object: object.into(),
                })
            }
            "az" => {
                let (container, blob) = split_bucket(text, rest, "BLOB")?;
                Ok(StateLocation::Azure {
                    account: None,
                    container: container.into(),
                    blob: blob.into(),
                })
            }
            "https" => {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                let Some(account) = host.strip_suffix(".blob.core.windows.net") else {
                    return Err(bad(
                        text,
                        "an https:// state location must be an Azure Blob Storage URL (https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB)",
                    ));
                };
                if account.is_empty() || account.contains(['.', '@', ':']) {
                    return Err(bad(text, "the storage account is not valid"));
                }
                let (container, blob) = split_bucket(text, path, "BLOB").map_err(|mut e| {
                    e.message = e.message.replace("bucket", "container");
                    e
                })?;
                Ok(StateLocation::Azure {
                    account: Some(account.into()),
                    container: container.into(),
                    blob: blob.into(),
                })
            }
            "tfe" => {
                if rest.split('/').filter(|p| !p.is_empty()).count() < 2 {
                    return Err(bad(text, "expected tfe://[HOST/]ORG/WORKSPACE"));
                }
                Ok(StateLocation::Tfe(text.to_owned()))
            }
            other => Err(bad(
                text,
                format!(
                    "unsupported scheme `{other}://` (a path, s3://, gs://, az://, https://ACCOUNT.blob.core.windows.net/ or tfe://)"
                ),
            )),
        }
    }

    /// True for a local file.
    pub fn is_file(&self) -> bool {
        matches!(self, StateLocation::File(_))
    }

    /// The location as a URL or path, as configured (no credentials are ever part of
    /// a parsed location).
    pub fn display(&self) -> String {
        match self {
            StateLocation::File(p) => p.display().to_string(),
            StateLocation::S3 { bucket, key } => format!("s3://{bucket}/{key}"),
            StateLocation::Gcs { bucket, object } => format!("gs://{bucket}/{object}"),
            StateLocation::Azure {
                account: None,
                container,
                blob,
            } => format!("az://{container}/{blob}"),
            StateLocation::Azure {
                account: Some(a),
                container,
                blob,
            } => format!("https://{a}.blob.core.windows.net/{container}/{blob}"),
            StateLocation::Tfe(url) => url.clone(),
        }
    }

    /// A workspace name for a location given without one (`replay --state URL`): the
    /// last path part without `.tfstate` / `.json` (`s3://b/env/prod.tfstate` →
    /// `prod`), except Terraform's default `terraform.tfstate` (`.json`), named after
    /// the key prefix part before it (`s3://b/env/prod/terraform.tfstate` → `prod`;
    /// `terraform` at the bucket's root); the workspace of a `tfe://` URL.
    pub fn default_workspace(&self) -> String {
        let text = self.display();
        let last = text.rsplit('/').find(|p| !p.is_empty()).unwrap_or(&text);
        let stem = last.strip_suffix(".json").unwrap_or(last);
        let stem = stem.strip_suffix(".tfstate").unwrap_or(stem);
        if stem == "terraform" {
            // Terraform's default object name: the key prefix part before it names it.
            let key = match self {
                StateLocation::File(p) => p.to_string_lossy().into_owned(),
                StateLocation::S3 { key, .. } => key.clone(),
                StateLocation::Gcs { object, .. } => object.clone(),
                StateLocation::Azure { blob, .. } => blob.clone(),
                StateLocation::Tfe(_) => String::new(),
            };
            if let Some(folder) = key.rsplit('/').filter(|p| !p.is_empty()).nth(1) {
                return folder.to_owned();
            }
        }
        stem.to_owned()
    }
}

impl std::fmt::Display for StateLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_parse() {
        assert_eq!(
            StateLocation::parse("s3://tfstate/env/prod/terraform.tfstate").unwrap(),
            StateLocation::S3 {
                bucket: "tfstate".into(),
                key: "env/prod/terraform.tfstate".into()
            }
        );
        assert_eq!(
            StateLocation::parse("gs://b/p/default.tfstate").unwrap(),
            StateLocation::Gcs {
                bucket: "b".into(),
                object: "p/default.tfstate".into()
            }
        );
        assert_eq!(
            StateLocation::parse("az://tfstate/prod.terraform.tfstate").unwrap(),
            StateLocation::Azure {
                account: None,
                container: "tfstate".into(),
                blob: "prod.terraform.tfstate".into()
            }
        );
        let https = "https://acme.blob.core.windows.net/tfstate/prod.tfstate";
        assert_eq!(
            StateLocation::parse(https).unwrap(),
            StateLocation::Azure {
                account: Some("acme".into()),
                container: "tfstate".into(),
                blob: "prod.tfstate".into()
            }
        );
        assert_eq!(StateLocation::parse(https).unwrap().display(), https);
        assert!(StateLocation::parse("tfe://acme/prod").unwrap().display() == "tfe://acme/prod");
        assert_eq!(
            StateLocation::parse("/etc/dr/prod.tfstate").unwrap(),
            StateLocation::File("/etc/dr/prod.tfstate".into())
        );
    }

    #[test]
    fn bad_locations_say_why() {
        for (text, why) in [
            ("s3://bucket", "no KEY"),
            ("s3:///key", "bucket is empty"),
            ("s3://bucket/", "KEY is empty"),
            ("ftp://host/file", "unsupported scheme `ftp://`"),
            ("https://example.com/state", "Azure Blob Storage URL"),
            (
                "https://a.blob.core.windows.net/c/b?sig=secret",
                "query string",
            ),
            ("tfe://acme", "tfe://[HOST/]ORG/WORKSPACE"),
            ("", "is empty"),
        ] {
            let e = StateLocation::parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadLocation, "{text}");
            assert!(e.message.contains(why), "{text}: {}", e.message);
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }

    #[test]
    fn default_workspace_is_the_last_part() {
        let name = |t: &str| StateLocation::parse(t).unwrap().default_workspace();
        assert_eq!(name("s3://b/env/prod.tfstate"), "prod");
        assert_eq!(name("s3://b/env/prod/terraform.tfstate"), "prod");
        assert_eq!(name("gs://b/env/staging/terraform.tfstate.json"), "staging");
        assert_eq!(name("s3://b/terraform.tfstate"), "terraform");
        assert_eq!(name("gs://b/x.tfstate.json"), "x");
        assert_eq!(name("tfe://acme/web"), "web");
    }

    #[test]
    fn redact_drops_credentials() {
        assert_eq!(redact("https://u:p@host/x?sig=1"), "https://host/x");
        assert_eq!(redact("s3://b/k"), "s3://b/k");
    }
}
