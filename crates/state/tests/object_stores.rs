//! The object-store sources against real local servers: moto's S3, Azurite, and
//! fake-gcs-server. Each test checks the same contract: a first read returns the
//! bytes, an unchanged object reads as `Unchanged` (conditional GET), a rewrite as
//! `Changed`; Terraform's lock (lock object / blob lease) is seen while held; a
//! workspace set lists one workspace per matching object and picks up a new one on
//! the next listing; errors carry the kind and the store's answer.

use std::sync::Arc;

use driftreactor_state::object::{ObjectOptions, lister_with, open_with};
use driftreactor_state::{ErrorKind, Fetch, Spooled, StateLocation, StateSource, Version};
use driftreactor_testkit::azurite::Azurite;
use driftreactor_testkit::gcs::FakeGcs;
use driftreactor_testkit::moto::MotoServer;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

fn state(serial: u64) -> Vec<u8> {
    format!(r#"{{"version": 4, "terraform_version": "1.11.4", "serial": {serial}, "lineage": "l", "outputs": {{}}, "resources": []}}"#).into_bytes()
}

const LOCK: &str = r#"{"ID":"4f2c","Operation":"OperationTypeApply","Info":"","Who":"ci@runner","Version":"1.11.4","Created":"2026-12-02T18:00:00Z","Path":""}"#;

/// How a test writes objects: through `object_store`, or fake-gcs-server's JSON API
/// (it has no XML upload).
enum Writer<'a> {
    Store(Arc<dyn ObjectStore>),
    Gcs(&'a FakeGcs, &'static str),
}

impl Writer<'_> {
    async fn put(&self, key: &str, bytes: Vec<u8>) {
        match self {
            Writer::Store(store) => {
                store
                    .put(&Path::parse(key).unwrap(), PutPayload::from(bytes))
                    .await
                    .unwrap();
            }
            Writer::Gcs(gcs, bucket) => gcs.put(bucket, key, bytes).await.unwrap(),
        }
    }

    async fn delete(&self, key: &str) {
        match self {
            Writer::Store(store) => store.delete(&Path::parse(key).unwrap()).await.unwrap(),
            Writer::Gcs(gcs, bucket) => gcs.delete(bucket, key).await.unwrap(),
        }
    }
}

async fn put(store: &Arc<dyn ObjectStore>, key: &str, bytes: Vec<u8>) {
    Writer::Store(store.clone()).put(key, bytes).await;
}

/// The whole read's bytes and version; the streamed read (with the same `previous`)
/// writes the same bytes to a file, with the same version, their length and SHA-256.
async fn changed(src: &dyn StateSource, previous: Option<&Version>) -> (Vec<u8>, Version) {
    use sha2::Digest as _;
    let (bytes, version) = match src.read(previous).await.unwrap() {
        Fetch::Changed { bytes, version } => (bytes, version),
        Fetch::Unchanged => panic!("{}: expected the new bytes", src.location()),
    };
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("state");
    let Spooled::Written(info) = src.read_to(previous, &dest).await.unwrap() else {
        panic!("{}: expected the new bytes streamed", src.location());
    };
    assert_eq!(std::fs::read(&dest).unwrap(), bytes, "{}", src.location());
    assert_eq!(info.version, version);
    assert_eq!(info.len, bytes.len() as u64);
    assert_eq!(info.sha256, <[u8; 32]>::from(sha2::Sha256::digest(&bytes)));
    (bytes, version)
}

/// The streamed read with `previous` is unchanged (a conditional GET) and writes no
/// file.
async fn streams_unchanged(src: &dyn StateSource, previous: &Version) {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("state");
    assert_eq!(
        src.read_to(Some(previous), &dest).await.unwrap(),
        Spooled::Unchanged
    );
    assert!(!dest.exists());
}

/// Read / conditional read / rewrite / lock, and the three-then-four listing, on one
/// store; `lock_key` is where Terraform's lock object goes (None: Azure, checked by the
/// caller with a lease).
async fn contract(store: Writer<'_>, base: &str, opts: &ObjectOptions, lock_key: Option<&str>) {
    let key = "env/prod/terraform.tfstate";
    store.put(key, state(1)).await;
    let src = open_with(
        &StateLocation::parse(&format!("{base}/{key}")).unwrap(),
        opts,
    )
    .unwrap();
    assert_eq!(src.location(), format!("{base}/{key}"));
    let (bytes, v1) = changed(&*src, None).await;
    assert_eq!(bytes, state(1));
    assert!(matches!(
        src.read(Some(&v1)).await.unwrap(),
        Fetch::Unchanged
    ));
    streams_unchanged(&*src, &v1).await;
    store.put(key, state(2)).await;
    let (bytes, v2) = changed(&*src, Some(&v1)).await;
    assert_eq!(bytes, state(2));
    assert_ne!(v1, v2);

    if let Some(lock_key) = lock_key {
        assert_eq!(src.lock().await.unwrap(), None);
        store.put(lock_key, LOCK.as_bytes().to_vec()).await;
        let held = src.lock().await.unwrap().expect("lock object present");
        assert_eq!(held.id.as_deref(), Some("4f2c"));
        assert_eq!(held.who.as_deref(), Some("ci@runner"));
        assert_eq!(held.operation.as_deref(), Some("OperationTypeApply"));
        store.delete(lock_key).await;
        assert_eq!(src.lock().await.unwrap(), None);
    }

    // A missing object is NotFound, with the location.
    let missing = open_with(
        &StateLocation::parse(&format!("{base}/env/nope/terraform.tfstate")).unwrap(),
        opts,
    )
    .unwrap();
    let err = missing.read(None).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains("env/nope/terraform.tfstate"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("state");
    let streamed = missing.read_to(None, &dest).await.unwrap_err();
    assert_eq!(
        (streamed.kind, &streamed.location),
        (err.kind, &err.location)
    );
    assert!(!dest.exists(), "a failed streamed read leaves no file");

    // A workspace set: three states, then a fourth.
    store.put("env/staging/terraform.tfstate", state(1)).await;
    store.put("env/dev/terraform.tfstate", state(1)).await;
    store.put("env/dev/other.txt", b"x".to_vec()).await;
    let set = lister_with(&format!("{base}/env/*/terraform.tfstate"), opts).unwrap();
    let names = |l: &[driftreactor_state::Listed]| {
        l.iter().map(|w| w.workspace.clone()).collect::<Vec<_>>()
    };
    let found = set.list().await.unwrap();
    assert_eq!(names(&found), ["dev", "prod", "staging"]);
    let (bytes, _) = changed(&*found[1].source, None).await;
    assert_eq!(bytes, state(2));
    store.put("env/qa/terraform.tfstate", state(1)).await;
    assert_eq!(
        names(&set.list().await.unwrap()),
        ["dev", "prod", "qa", "staging"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_on_moto() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let client = reqwest::Client::new();
    for bucket in ["tfstate", "layout"] {
        client
            .put(format!("{}/{bucket}", moto.endpoint()))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
    }
    let opts = ObjectOptions::with_env([
        ("AWS_ENDPOINT_URL".to_owned(), moto.endpoint()),
        ("AWS_ACCESS_KEY_ID".to_owned(), "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), "test".to_owned()),
        ("AWS_REGION".to_owned(), "us-east-1".to_owned()),
    ]);
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(moto.endpoint())
            .with_allow_http(true)
            .with_bucket_name("tfstate")
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap(),
    );
    contract(
        Writer::Store(store),
        "s3://tfstate",
        &opts,
        Some("env/prod/terraform.tfstate.tflock"),
    )
    .await;

    // The S3 backend's workspace layout: `env:/<workspace>/<key>`.
    let layout: Arc<dyn ObjectStore> = Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(moto.endpoint())
            .with_allow_http(true)
            .with_bucket_name("layout")
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap(),
    );
    put(&layout, "app.tfstate", state(1)).await;
    put(&layout, "env:/blue/app.tfstate", state(1)).await;
    put(&layout, "env:/green/app.tfstate", state(1)).await;
    put(&layout, "env:/green/app.tfstate.tflock", LOCK.into()).await;
    let set = lister_with("s3://layout/env:/*/app.tfstate", &opts).unwrap();
    let found = set.list().await.unwrap();
    let names: Vec<_> = found.iter().map(|w| w.workspace.as_str()).collect();
    assert_eq!(names, ["blue", "green"]);
    assert!(found[1].source.lock().await.unwrap().is_some());

    // No such bucket: NotFound with S3's answer; bad credentials are not needed by moto.
    let src = open_with(
        &StateLocation::parse("s3://nobucket/x.tfstate").unwrap(),
        &opts,
    )
    .unwrap();
    let err = src.read(None).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound, "{err}");

    // Unreachable endpoint.
    // (Static credentials: never the instance metadata service.)
    let down = ObjectOptions {
        max_retries: 0,
        ..ObjectOptions::with_env([
            (
                "AWS_ENDPOINT_URL_S3".to_owned(),
                format!(
                    "http://127.0.0.1:{}",
                    driftreactor_testkit::process::free_port()
                ),
            ),
            ("AWS_ACCESS_KEY_ID".to_owned(), "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "test".to_owned()),
        ])
    };
    let src = open_with(
        &StateLocation::parse("s3://tfstate/x.tfstate").unwrap(),
        &down,
    )
    .unwrap();
    let err = src.read(None).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unreachable, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_blob_on_azurite() {
    let Some(azurite) = Azurite::start_or_skip() else {
        return;
    };
    azurite.create_container("tfstate").await.unwrap();
    let opts = ObjectOptions::with_env([(
        "AZURE_STORAGE_CONNECTION_STRING".to_owned(),
        azurite.connection_string(),
    )]);
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::azure::MicrosoftAzureBuilder::new()
            .with_account(driftreactor_testkit::azurite::ACCOUNT)
            .with_access_key(driftreactor_testkit::azurite::ACCOUNT_KEY)
            .with_endpoint(azurite.blob_endpoint())
            .with_allow_http(true)
            .with_container_name("tfstate")
            .build()
            .unwrap(),
    );
    contract(Writer::Store(store), "az://tfstate", &opts, None).await;

    // The azurerm backend's lock: a lease on the state blob, the lock info in its
    // `terraformlockid` metadata.
    let src = open_with(
        &StateLocation::parse("az://tfstate/env/prod/terraform.tfstate").unwrap(),
        &opts,
    )
    .unwrap();
    assert_eq!(src.lock().await.unwrap(), None);
    let status = azurite
        .signed(
            reqwest::Method::PUT,
            "/tfstate/env/prod/terraform.tfstate",
            &[("comp", "lease")],
            &[
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "-1"),
            ],
        )
        .await
        .unwrap();
    assert!(status.is_success(), "lease: {status}");
    assert!(src.lock().await.unwrap().is_some(), "lease not seen");

    // The emulator switch reads the same account.
    let emu = ObjectOptions::with_env([
        ("AZURE_STORAGE_USE_EMULATOR".to_owned(), "true".to_owned()),
        (
            "AZURITE_BLOB_STORAGE_URL".to_owned(),
            format!("http://127.0.0.1:{}", azurite.port()),
        ),
    ]);
    let src = open_with(
        &StateLocation::parse("az://tfstate/env/dev/terraform.tfstate").unwrap(),
        &emu,
    )
    .unwrap();
    assert_eq!(changed(&*src, None).await.0, state(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_on_fake_gcs_server() {
    let Some(gcs) = FakeGcs::start_or_skip() else {
        return;
    };
    gcs.create_bucket("tfstate").await.unwrap();
    let opts = ObjectOptions::with_env([("STORAGE_EMULATOR_HOST".to_owned(), gcs.endpoint())]);
    let store = Writer::Gcs(&gcs, "tfstate");
    // Terraform's gcs backend: `<prefix>/<workspace>.tfstate`, lock `<workspace>.tflock`.
    store.put("prefix/default.tfstate", state(1)).await;
    let src = open_with(
        &StateLocation::parse("gs://tfstate/prefix/default.tfstate").unwrap(),
        &opts,
    )
    .unwrap();
    assert_eq!(src.lock().await.unwrap(), None);
    store.put("prefix/default.tflock", LOCK.into()).await;
    assert_eq!(
        src.lock().await.unwrap().and_then(|l| l.id).as_deref(),
        Some("4f2c")
    );
    contract(
        store,
        "gs://tfstate",
        &opts,
        Some("env/prod/terraform.tflock"),
    )
    .await;
}
