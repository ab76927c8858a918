//! State in an object store: Amazon S3 (`s3://`), Google Cloud Storage (`gs://`) and
//! Azure Blob Storage (`az://`, `https://ACCOUNT.blob.core.windows.net/`), read with
//! Apache Arrow's `object_store`.
//!
//! # Credentials and endpoints
//! Each store is configured from the environment ([`ObjectOptions::env`], the
//! process's by default), with each cloud's standard chain:
//! - **S3**: every `AWS_*` variable `object_store` knows (`AWS_ACCESS_KEY_ID` /
//!   `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`, `AWS_REGION` /
//!   `AWS_DEFAULT_REGION`, IRSA's `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, ECS
//!   task roles, then the EC2 instance profile). `AWS_ENDPOINT_URL_S3` (else
//!   `AWS_ENDPOINT_URL`) names an S3-compatible endpoint as the AWS CLI and SDKs read
//!   it; plain `http://` is allowed when that endpoint says `http`. Shared config
//!   files (`~/.aws/config` profiles, SSO) are **not** read.
//! - **GCS**: `GOOGLE_APPLICATION_CREDENTIALS` / `GOOGLE_SERVICE_ACCOUNT*`, then
//!   application default credentials, then the metadata server (GKE Workload
//!   Identity). `STORAGE_EMULATOR_HOST` (`http://127.0.0.1:4443`) points at an
//!   emulator, without credentials.
//! - **Azure**: `AZURE_STORAGE_ACCOUNT_NAME` (for `az://`), an account key, SAS,
//!   client secret, workload identity (AKS: `AZURE_FEDERATED_TOKEN_FILE`) or managed
//!   identity, as `object_store` resolves them; `AZURE_STORAGE_CONNECTION_STRING`
//!   (`AccountName`, `AccountKey`, `BlobEndpoint`, or `UseDevelopmentStorage=true`)
//!   and `AZURE_STORAGE_USE_EMULATOR=true` (Azurite at `AZURITE_BLOB_STORAGE_URL`,
//!   default `http://127.0.0.1:10000`, with its well-known development account).
//!
//! # Change detection
//! A read passes the previous ETag as `If-None-Match`: an unchanged object answers
//! 304 and nothing is downloaded. [`StateSource::read_to`] streams a changed object's
//! body into a local file as the store sends it (no buffer of the object's size).
//!
//! # Locks
//! - S3: Terraform's native lock file `KEY.tflock` (`use_lockfile = true`).
//! - GCS: Terraform's gcs backend writes `<prefix>/<workspace>.tflock` beside
//!   `<workspace>.tfstate`: the state object's name with `.tfstate` replaced by
//!   `.tflock` (or `.tflock` appended).
//! - Azure: the azurerm backend takes a lease on the state blob and writes the lock
//!   info into its `terraformlockid` metadata; a `HEAD` of the blob reads
//!   `x-ms-lease-state` and that metadata. S3's DynamoDB lock table (deprecated by
//!   Terraform) is not looked at.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use object_store::{
    ClientOptions, GetOptions, ObjectStore, ObjectStoreExt, RetryConfig, StaticCredentialProvider,
};

use crate::location::{StateLocation, redact};
use crate::source::{
    BoxFuture, ErrorKind, Fetch, Listed, LockInfo, SourceError, Spooled, StateLister, StateSource,
    Version,
};
use crate::spool::SpoolWriter;

/// Azurite's well-known development account (documented by Microsoft, public).
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development account key (documented by Microsoft, public).
const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where the stores take their settings from.
#[derive(Debug, Clone)]
pub struct ObjectOptions {
    /// The environment variables to configure the stores from (see the module docs).
    pub env: BTreeMap<String, String>,
    /// Timeout of one request (default 30 s).
    pub request_timeout: Duration,
    /// Retries of a failed request (default 2; then the read fails and the next
    /// reload tries again).
    pub max_retries: usize,
}

impl Default for ObjectOptions {
    /// The process's environment, 30 s per request, 2 retries.
    fn default() -> Self {
        Self {
            env: std::env::vars().collect(),
            request_timeout: Duration::from_secs(30),
            max_retries: 2,
        }
    }
}

impl ObjectOptions {
    /// The options with `env` as the environment (tests, callers with their own).
    pub fn with_env(env: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            env: env.into_iter().collect(),
            ..Self::default()
        }
    }

    fn client_options(&self, allow_http: bool) -> ClientOptions {
        ClientOptions::new()
            .with_timeout(self.request_timeout)
            .with_connect_timeout(Duration::from_secs(5))
            .with_allow_http(allow_http)
    }

    fn retry(&self) -> RetryConfig {
        RetryConfig {
            max_retries: self.max_retries,
            retry_timeout: self.request_timeout * 2,
            ..RetryConfig::default()
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

/// How a store shows Terraform's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockStyle {
    /// `KEY.tflock` beside the state (S3).
    AppendTflock,
    /// `NAME.tfstate` → `NAME.tflock` (GCS).
    ReplaceTfstate,
    /// A lease on the blob, lock info in its metadata (Azure).
    Lease,
}

impl LockStyle {
    fn lock_key(self, key: &str) -> Option<String> {
        match self {
            LockStyle::AppendTflock => Some(format!("{key}.tflock")),
            LockStyle::ReplaceTfstate => Some(match key.strip_suffix(".tfstate") {
                Some(stem) => format!("{stem}.tflock"),
                None => format!("{key}.tflock"),
            }),
            LockStyle::Lease => None,
        }
    }
}

/// A store client with what it needs to read one bucket / container.
#[derive(Debug, Clone)]
struct Store {
    store: Arc<dyn ObjectStore>,
    /// `s3://bucket`, `gs://bucket`, `az://container` or the https account URL.
    base: String,
    lock: LockStyle,
}

fn bad(location: &str, message: impl Into<String>) -> SourceError {
    SourceError {
        kind: ErrorKind::BadLocation,
        location: redact(location),
        message: message.into(),
    }
}

/// One line of an error and its causes, without credentials (the SAS query strings
/// `object_store` never prints; a `sig=` is cut all the same).
fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.find("sig=") {
        Some(i) => format!("{}sig=…", &text[..i]),
        None => text,
    }
}

/// The [`ErrorKind`] and message for a store's error.
fn store_error(location: &str, e: &object_store::Error) -> SourceError {
    let message = one_line(e);
    let kind = match e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::AccessDenied,
        object_store::Error::InvalidPath { .. } => ErrorKind::BadLocation,
        object_store::Error::Generic { .. } => {
            let lower = message.to_ascii_lowercase();
            if lower.contains("403")
                || lower.contains("401")
                || lower.contains("accessdenied")
                || lower.contains("forbidden")
            {
                ErrorKind::AccessDenied
            } else if lower.contains("nosuchbucket")
                || lower.contains("containernotfound")
                || lower.contains("404")
            {
                ErrorKind::NotFound
            } else {
                ErrorKind::Unreachable
            }
        }
        _ => ErrorKind::Other,
    };
    SourceError {
        kind,
        location: redact(location),
        message,
    }
}

/// An http(s) endpoint URL without a trailing slash; `host:port` becomes `http://…`
/// (the form `STORAGE_EMULATOR_HOST` often takes).
fn endpoint_url(value: &str) -> String {
    let v = value.trim().trim_end_matches('/');
    if v.contains("://") {
        v.to_owned()
    } else {
        format!("http://{v}")
    }
}

fn s3_store(bucket: &str, opts: &ObjectOptions) -> Result<Store, SourceError> {
    let base = format!("s3://{bucket}");
    let mut b = AmazonS3Builder::new();
    for (k, v) in &opts.env {
        if k.starts_with("AWS_")
            && let Ok(key) = k.to_ascii_lowercase().parse::<AmazonS3ConfigKey>()
        {
            b = b.with_config(key, v);
        }
    }
    let endpoint = opts
        .var("AWS_ENDPOINT_URL_S3")
        .or_else(|| opts.var("AWS_ENDPOINT_URL"))
        .map(endpoint_url);
    let mut allow_http = false;
    if let Some(endpoint) = &endpoint {
        allow_http = endpoint.starts_with("http://");
        b = b.with_endpoint(endpoint);
    }
    if opts.var("AWS_REGION").is_none() && opts.var("AWS_DEFAULT_REGION").is_none() {
        b = b.with_region("us-east-1");
    }
    let store = b
        .with_bucket_name(bucket)
        .with_client_options(opts.client_options(allow_http))
        .with_retry(opts.retry())
        .build()
        .map_err(|e| bad(&base, one_line(&e)))?;
    Ok(Store {
        store: Arc::new(store),
        base,
        lock: LockStyle::AppendTflock,
    })
}

fn gcs_store(bucket: &str, opts: &ObjectOptions) -> Result<Store, SourceError> {
    let base = format!("gs://{bucket}");
    let mut b = GoogleCloudStorageBuilder::new();
    if let Some(path) = opts.var("GOOGLE_APPLICATION_CREDENTIALS") {
        b = b.with_application_credentials(path);
    }
    for (k, v) in &opts.env {
        if k.starts_with("GOOGLE_")
            && let Ok(key) = k.to_ascii_lowercase().parse::<GoogleConfigKey>()
        {
            b = b.with_config(key, v);
        }
    }
    let mut allow_http = false;
    if let Some(host) = opts.var("STORAGE_EMULATOR_HOST") {
        let url = endpoint_url(host);
        allow_http = url.starts_with("http://");
        b = b
            .with_base_url(&url)
            .with_skip_signature(true)
            .with_credentials(Arc::new(StaticCredentialProvider::new(GcpCredential {
                bearer: String::new(),
            })));
    }
    let store = b
        .with_bucket_name(bucket)
        .with_client_options(opts.client_options(allow_http))
        .with_retry(opts.retry())
        .build()
        .map_err(|e| bad(&base, one_line(&e)))?;
    Ok(Store {
        store: Arc::new(store),
        base,
        lock: LockStyle::ReplaceTfstate,
    })
}

/// `Key=Value;…` of an Azure storage connection string.
fn connection_string(text: &str) -> BTreeMap<String, String> {
    text.split(';')
        .filter_map(|part| part.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect()
}

fn azure_store(
    account: Option<&str>,
    container: &str,
    opts: &ObjectOptions,
) -> Result<Store, SourceError> {
    let base = match account {
        Some(a) => format!("https://{a}.blob.core.windows.net/{container}"),
        None => format!("az://{container}"),
    };
    let mut b = MicrosoftAzureBuilder::new();
    for (k, v) in &opts.env {
        if k.starts_with("AZURE_")
            && k != "AZURE_STORAGE_USE_EMULATOR"
            && let Ok(key) = k.to_ascii_lowercase().parse::<AzureConfigKey>()
        {
            b = b.with_config(key, v);
        }
    }
    if let Some(endpoint) = opts.var("MSI_ENDPOINT") {
        b = b.with_msi_endpoint(endpoint);
    }
    let mut allow_http = false;
    let emulator_url = |opts: &ObjectOptions| {
        endpoint_url(
            opts.var("AZURITE_BLOB_STORAGE_URL")
                .unwrap_or("http://127.0.0.1:10000"),
        )
    };
    let use_emulator = opts
        .var("AZURE_STORAGE_USE_EMULATOR")
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let mut account_name = account.map(str::to_owned);
    if let Some(cs) = opts.var("AZURE_STORAGE_CONNECTION_STRING") {
        let cs = connection_string(cs);
        if cs
            .get("usedevelopmentstorage")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            let url = format!("{}/{EMULATOR_ACCOUNT}", emulator_url(opts));
            allow_http = url.starts_with("http://");
            b = b.with_endpoint(url).with_access_key(EMULATOR_KEY);
            account_name = Some(EMULATOR_ACCOUNT.into());
        } else {
            if let Some(name) = cs.get("accountname") {
                account_name.get_or_insert_with(|| name.clone());
            }
            if let Some(key) = cs.get("accountkey") {
                b = b.with_access_key(key);
            }
            if let Some(sas) = cs.get("sharedaccesssignature") {
                b = b.with_config(AzureConfigKey::SasKey, sas);
            }
            if let Some(endpoint) = cs.get("blobendpoint") {
                let url = endpoint_url(endpoint);
                allow_http = url.starts_with("http://");
                b = b.with_endpoint(url);
            }
        }
    } else if use_emulator {
        let url = format!("{}/{EMULATOR_ACCOUNT}", emulator_url(opts));
        allow_http = url.starts_with("http://");
        b = b.with_endpoint(url);
        if opts.var("AZURE_STORAGE_ACCOUNT_KEY").is_none()
            && opts.var("AZURE_STORAGE_ACCESS_KEY").is_none()
        {
            b = b.with_access_key(EMULATOR_KEY);
        }
        account_name = Some(EMULATOR_ACCOUNT.into());
    }
    if let Some(name) = &account_name {
        b = b.with_account(name);
    } else if opts.var("AZURE_STORAGE_ACCOUNT_NAME").is_none()
        && opts.var("AZURE_STORAGE_ACCOUNT").is_none()
    {
        return Err(bad(
            &base,
            "no storage account: set AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_USE_EMULATOR, or use https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB",
        ));
    }
    let store = b
        .with_container_name(container)
        .with_client_options(opts.client_options(allow_http))
        .with_retry(opts.retry())
        .with_http_connector(LeaseHeaders)
        .build()
        .map_err(|e| bad(&base, one_line(&e)))?;
    Ok(Store {
        store: Arc::new(store),
        base,
        lock: LockStyle::Lease,
    })
}

/// Opens the object-store location `location` with the process's environment.
///
/// # Errors
/// [`ErrorKind::BadLocation`] for a location that is not an object-store URL, or a
/// store that cannot be configured (naming what is missing).
pub fn open(location: &StateLocation) -> Result<Box<dyn StateSource>, SourceError> {
    open_with(location, &ObjectOptions::default())
}

/// As [`open`], with the environment and timeouts of `opts`.
///
/// # Errors
/// As [`open`].
pub fn open_with(
    location: &StateLocation,
    opts: &ObjectOptions,
) -> Result<Box<dyn StateSource>, SourceError> {
    let (store, key) = match location {
        StateLocation::S3 { bucket, key } => (s3_store(bucket, opts)?, key),
        StateLocation::Gcs { bucket, object } => (gcs_store(bucket, opts)?, object),
        StateLocation::Azure {
            account,
            container,
            blob,
        } => (azure_store(account.as_deref(), container, opts)?, blob),
        other => return Err(bad(&other.display(), "not an object-store location")),
    };
    Ok(Box::new(ObjectSource::new(&store, key)?))
}

/// One state object.
#[derive(Debug)]
pub struct ObjectSource {
    store: Store,
    path: Path,
    lock_path: Option<Path>,
    location: String,
}

impl ObjectSource {
    fn new(store: &Store, key: &str) -> Result<Self, SourceError> {
        let location = format!("{}/{key}", store.base);
        let path = Path::parse(key).map_err(|e| bad(&location, one_line(&e)))?;
        let lock_path = match store.lock.lock_key(key) {
            Some(k) => Some(Path::parse(k).map_err(|e| bad(&location, one_line(&e)))?),
            None => None,
        };
        Ok(Self {
            store: store.clone(),
            path,
            lock_path,
            location,
        })
    }

    /// A GET unless the object's ETag is `previous` (`If-None-Match`): the response
    /// (body not read yet) and the object's version, or `None` when unchanged.
    async fn get_changed(
        &self,
        previous: Option<&Version>,
    ) -> Result<Option<(object_store::GetResult, Version)>, SourceError> {
        let opts = GetOptions {
            if_none_match: previous.map(|v| v.0.clone()),
            ..GetOptions::default()
        };
        let got = match self.store.store.get_opts(&self.path, opts).await {
            Ok(got) => got,
            Err(object_store::Error::NotModified { .. }) => return Ok(None),
            Err(e) => return Err(store_error(&self.location, &e)),
        };
        let version = Version(got.meta.e_tag.clone().unwrap_or_else(|| {
            format!(
                "{}-{}",
                got.meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
                got.meta.size
            )
        }));
        // A store that ignores `If-None-Match` still says the same ETag.
        if previous == Some(&version) {
            return Ok(None);
        }
        Ok(Some((got, version)))
    }

    async fn lease(&self) -> Result<Option<LockInfo>, SourceError> {
        let opts = GetOptions {
            head: true,
            ..GetOptions::default()
        };
        let got = match self.store.store.get_opts(&self.path, opts).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_error(&self.location, &e)),
        };
        let Some(lease) = got.extensions.get::<Lease>() else {
            return Ok(None);
        };
        if !lease.state.eq_ignore_ascii_case("leased") {
            return Ok(None);
        }
        // The azurerm backend's lock info: base64 of the lock's JSON.
        let info = lease
            .lock_id
            .as_deref()
            .and_then(|b64| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.decode(b64).ok()
            })
            .and_then(|json| parse_lock(&json))
            .unwrap_or_default();
        Ok(Some(info))
    }
}

/// Terraform's lock info document (`ID`, `Operation`, `Info`, `Who`, `Version`,
/// `Created`, `Path`), as every backend writes it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TfLock {
    #[serde(rename = "ID", default)]
    id: Option<String>,
    #[serde(default)]
    who: Option<String>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    created: Option<String>,
}

/// The [`LockInfo`] of a lock document; `None` when it is not Terraform's JSON.
pub fn parse_lock(bytes: &[u8]) -> Option<LockInfo> {
    let l: TfLock = serde_json::from_slice(bytes).ok()?;
    let some = |s: Option<String>| s.filter(|s| !s.is_empty());
    Some(LockInfo {
        id: some(l.id),
        who: some(l.who),
        operation: some(l.operation),
        created: some(l.created),
    })
}

impl StateSource for ObjectSource {
    fn location(&self) -> &str {
        &self.location
    }

    fn read<'a>(
        &'a self,
        previous: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Fetch, SourceError>> {
        Box::pin(async move {
            let Some((got, version)) = self.get_changed(previous).await? else {
                return Ok(Fetch::Unchanged);
            };
            let bytes = got
                .bytes()
                .await
                .map_err(|e| store_error(&self.location, &e))?;
            Ok(Fetch::Changed {
                bytes: bytes.to_vec(),
                version,
            })
        })
    }

    /// Streams the object's body into `dest` chunk by chunk as the store sends it.
    fn read_to<'a>(
        &'a self,
        previous: Option<&'a Version>,
        dest: &'a std::path::Path,
    ) -> BoxFuture<'a, Result<Spooled, SourceError>> {
        Box::pin(async move {
            let Some((got, version)) = self.get_changed(previous).await? else {
                return Ok(Spooled::Unchanged);
            };
            let mut body = got.into_stream();
            let mut out = SpoolWriter::create(dest, &self.location).await?;
            while let Some(chunk) = body
                .try_next()
                .await
                .map_err(|e| store_error(&self.location, &e))?
            {
                out.write(&chunk).await?;
            }
            Ok(Spooled::Written(out.finish().await?.keep(version)))
        })
    }

    fn lock<'a>(&'a self) -> BoxFuture<'a, Result<Option<LockInfo>, SourceError>> {
        Box::pin(async move {
            let Some(lock_path) = &self.lock_path else {
                return self.lease().await;
            };
            match self.store.store.get(lock_path).await {
                Ok(got) => {
                    let bytes = got
                        .bytes()
                        .await
                        .map_err(|e| store_error(&self.location, &e))?;
                    // A lock file that is not Terraform's JSON still means "held".
                    Ok(Some(parse_lock(&bytes).unwrap_or_default()))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(store_error(&self.location, &e)),
            }
        })
    }
}

/// The lease headers of an Azure blob response, put into the response's extensions
/// by [`LeaseHeaders`] (`object_store` does not expose leases).
#[derive(Debug, Clone)]
struct Lease {
    /// `x-ms-lease-state`: `available`, `leased`, `expired`, `breaking`, `broken`.
    state: String,
    /// `x-ms-meta-terraformlockid`: the azurerm backend's lock info (base64 JSON).
    lock_id: Option<String>,
}

/// An [`HttpConnector`] over reqwest that copies the lease headers of each response
/// into its extensions, where [`ObjectSource::lease`] reads them.
#[derive(Debug, Default, Clone, Copy)]
struct LeaseHeaders;

impl HttpConnector for LeaseHeaders {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(LeaseService(inner)))
    }
}

#[derive(Debug)]
struct LeaseService(HttpClient);

#[async_trait::async_trait]
impl HttpService for LeaseService {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let mut resp = self.0.execute(req).await?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if let Some(state) = header("x-ms-lease-state") {
            let lock_id = header("x-ms-meta-terraformlockid");
            resp.extensions_mut().insert(Lease { state, lock_id });
        }
        Ok(resp)
    }
}

/// Opens the lister of an object-store pattern with the process's environment (see
/// [`crate::lister`]).
///
/// # Errors
/// [`ErrorKind::BadLocation`] naming the pattern: not an object-store URL, no glob in
/// the key, a malformed glob.
pub fn lister(pattern: &str) -> Result<Box<dyn StateLister>, SourceError> {
    lister_with(pattern, &ObjectOptions::default())
}

/// As [`lister`], with the environment and timeouts of `opts`.
///
/// # Errors
/// As [`lister`].
pub fn lister_with(
    pattern: &str,
    opts: &ObjectOptions,
) -> Result<Box<dyn StateLister>, SourceError> {
    // The glob characters would not parse as an object path: split them off first.
    // (`?` is a glob here, not a query string: hidden from the URL parser.)
    let location = StateLocation::parse(&pattern.replace('?', "\u{1}"))?;
    let (store, key) = match &location {
        StateLocation::S3 { bucket, key } => (s3_store(bucket, opts)?, key.clone()),
        StateLocation::Gcs { bucket, object } => (gcs_store(bucket, opts)?, object.clone()),
        StateLocation::Azure {
            account,
            container,
            blob,
        } => (
            azure_store(account.as_deref(), container, opts)?,
            blob.clone(),
        ),
        _ => {
            return Err(bad(
                pattern,
                "a workspace set's `state` must be an s3://, gs://, az:// / https://…blob.core.windows.net or tfe:// pattern",
            ));
        }
    };
    let key = key.replace('\u{1}', "?");
    let Some(first) = key.find(['*', '?', '[', '{']) else {
        return Err(bad(
            pattern,
            "the key has no glob (`*`, `?`, `[…]`, `{a,b}`): give one workspace's state in [[workspaces]] instead",
        ));
    };
    let last = key.rfind(['*', '?', ']', '}']).unwrap_or(first);
    let literal_prefix = key[..first].to_owned();
    let literal_suffix = key[last + 1..].to_owned();
    let list_prefix = literal_prefix
        .rfind('/')
        .map_or(String::new(), |i| literal_prefix[..i].to_owned());
    let glob = globset::GlobBuilder::new(&key)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            bad(
                pattern,
                format!("`{key}` is not a valid glob ({})", e.kind()),
            )
        })?
        .compile_matcher();
    let list_prefix = if list_prefix.is_empty() {
        None
    } else {
        Some(Path::parse(&list_prefix).map_err(|e| bad(pattern, one_line(&e)))?)
    };
    Ok(Box::new(ObjectLister {
        pattern: redact(pattern),
        store,
        list_prefix,
        glob,
        literal_prefix,
        literal_suffix,
    }))
}

/// The workspaces of a glob over an object store's keys.
#[derive(Debug)]
struct ObjectLister {
    pattern: String,
    store: Store,
    list_prefix: Option<Path>,
    glob: globset::GlobMatcher,
    literal_prefix: String,
    literal_suffix: String,
}

impl ObjectLister {
    /// The workspace name of a matching key: the key without the pattern's literal
    /// prefix and suffix (`env/*/terraform.tfstate` + `env/prod/terraform.tfstate` →
    /// `prod`).
    fn name_of(&self, key: &str) -> Option<String> {
        let name = key
            .strip_prefix(&self.literal_prefix)?
            .strip_suffix(&self.literal_suffix)?;
        (!name.is_empty()).then(|| name.to_owned())
    }
}

impl StateLister for ObjectLister {
    fn pattern(&self) -> &str {
        &self.pattern
    }

    fn list<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Listed>, SourceError>> {
        Box::pin(async move {
            let metas: Vec<_> = self
                .store
                .store
                .list(self.list_prefix.as_ref())
                .try_collect()
                .await
                .map_err(|e| store_error(&self.pattern, &e))?;
            let mut found = BTreeMap::new();
            for meta in metas {
                let key = meta.location.as_ref();
                if key.ends_with(".tflock") || !self.glob.is_match(key) {
                    continue;
                }
                if let Some(name) = self.name_of(key) {
                    found.insert(name, ObjectSource::new(&self.store, key)?);
                }
            }
            Ok(found
                .into_iter()
                .map(|(workspace, source)| Listed {
                    workspace,
                    source: Box::new(source) as Box<dyn StateSource>,
                })
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_follow_each_backend() {
        assert_eq!(
            LockStyle::AppendTflock
                .lock_key("env/prod/terraform.tfstate")
                .as_deref(),
            Some("env/prod/terraform.tfstate.tflock")
        );
        assert_eq!(
            LockStyle::ReplaceTfstate
                .lock_key("prefix/default.tfstate")
                .as_deref(),
            Some("prefix/default.tflock")
        );
        assert_eq!(LockStyle::Lease.lock_key("x"), None);
    }

    #[test]
    fn terraform_lock_info_is_read() {
        let json = br#"{"ID":"5e1a","Operation":"OperationTypeApply","Info":"","Who":"ci@runner","Version":"1.11.4","Created":"2026-12-02T18:00:00Z","Path":"tfstate/env/prod/terraform.tfstate"}"#;
        assert_eq!(
            parse_lock(json),
            Some(LockInfo {
                id: Some("5e1a".into()),
                who: Some("ci@runner".into()),
                operation: Some("OperationTypeApply".into()),
                created: Some("2026-12-02T18:00:00Z".into()),
            })
        );
        assert_eq!(parse_lock(b"not json"), None);
    }

    #[test]
    fn a_pattern_without_a_glob_or_with_a_bad_one_is_refused() {
        let opts = ObjectOptions::with_env([]);
        let e = lister_with("s3://b/env/prod/terraform.tfstate", &opts).unwrap_err();
        assert!(e.message.contains("no glob"), "{e}");
        let e = lister_with("s3://b/env/{a/x", &opts).unwrap_err();
        assert!(e.message.contains("not a valid glob"), "{e}");
        let e = lister_with("states/*.tfstate", &opts).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadLocation);
    }

    #[test]
    fn azure_without_an_account_names_what_to_set() {
        let e = open_with(
            &StateLocation::parse("az://c/b.tfstate").unwrap(),
            &ObjectOptions::with_env([]),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadLocation);
        assert!(e.message.contains("AZURE_STORAGE_ACCOUNT_NAME"), "{e}");
    }

    #[test]
    fn connection_strings_are_split() {
        let cs = connection_string(
            "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a==;BlobEndpoint=http://127.0.0.1:1/dev;",
        );
        assert_eq!(cs["accountname"], "dev");
        assert_eq!(cs["accountkey"], "a==");
        assert_eq!(cs["blobendpoint"], "http://127.0.0.1:1/dev");
    }
}
