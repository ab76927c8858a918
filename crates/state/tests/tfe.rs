//! `tfe://` against a local HTTP server speaking the documented HCP Terraform API
//! (there is no local HCP Terraform): JSON:API workspace and state-version documents
//! shaped like the API reference's samples, a download URL served by the same server
//! (as the archivist), a workspace list with pagination and tag search.
//!
//! The token: tests never set environment variables (`set_var` is `unsafe` and races
//! with the other test threads); they name variables every `cargo test` run has:
//! `CARGO_PKG_NAME` (`driftreactor-state`) is the token the fake server accepts,
//! `CARGO_PKG_VERSION` one it refuses.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use driftreactor_state::source::{ErrorKind, Fetch, SourceError, Spooled, Version};
use driftreactor_state::tfe;
use serde_json::{Value, json};

/// The variable holding the token the fake accepts, and its value.
const TOKEN_VAR: &str = "CARGO_PKG_NAME";
const TOKEN: &str = env!("CARGO_PKG_NAME");
/// A variable holding a token the fake refuses (401).
const BAD_TOKEN_VAR: &str = "CARGO_PKG_VERSION";

#[derive(Debug, Clone)]
struct Ws {
    id: String,
    name: String,
    tags: Vec<String>,
    serial: i64,
    sv: String,
    state: Vec<u8>,
    /// `None`: no state version yet (`current-state-version` data null).
    has_state: bool,
    locked_by: Option<(&'static str, String)>,
    locked_reason: Option<String>,
    /// The host the download URL names: `127.0.0.1` (the API host) or `localhost`.
    download_host: &'static str,
    /// The download URL redirects (307) from the API host to `localhost`.
    download_redirect: bool,
    can_read_state: bool,
    always_500: bool,
}

impl Ws {
    fn new(name: &str, tags: &[&str]) -> Self {
        Self {
            id: format!("ws-{name}"),
            name: name.to_owned(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            serial: 1,
            sv: format!("sv-{name}-1"),
            state: state_doc(name, 1),
            has_state: true,
            locked_by: None,
            locked_reason: None,
            download_host: "127.0.0.1",
            download_redirect: false,
            can_read_state: true,
            always_500: false,
        }
    }
}

/// A Terraform state, format version 4, with one resource.
fn state_doc(name: &str, serial: i64) -> Vec<u8> {
    serde_json::to_vec_pretty(&json!({
        "version": 4,
        "terraform_version": "1.11.4",
        "serial": serial,
        "lineage": format!("lineage-{name}"),
        "outputs": {},
        "resources": [{
            "mode": "managed", "type": "terraform_data", "name": name,
            "provider": "provider[\"terraform.io/builtin/terraform\"]",
            "instances": [{"schema_version": 0, "attributes": {"id": format!("{name}-{serial}"), "input": null}, "sensitive_attributes": []}]
        }],
        "check_results": null
    }))
    .unwrap()
}

#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Vec<(String, String)>,
    host: String,
    auth: Option<String>,
}

#[derive(Default)]
struct Inner {
    port: u16,
    workspaces: Vec<Ws>,
    seen: Vec<Seen>,
    /// Statuses (and `Retry-After` seconds) answered to the next API requests.
    faults: VecDeque<(u16, Option<u64>)>,
    /// The fake's own page size for listing (small, to exercise pagination).
    page_size: usize,
}

#[derive(Clone)]
struct Fake(Arc<Mutex<Inner>>);

impl Fake {
    async fn start(workspaces: Vec<Ws>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let fake = Fake(Arc::new(Mutex::new(Inner {
            port,
            workspaces,
            page_size: 1,
            ..Inner::default()
        })));
        let app = Router::new().fallback(handle).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    fn port(&self) -> u16 {
        self.0.lock().unwrap().port
    }

    fn url(&self, org: &str, ws: &str) -> String {
        format!("tfe://127.0.0.1:{}/{org}/{ws}", self.port())
    }

    fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap().seen.clone()
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut Ws)) {
        let mut inner = self.0.lock().unwrap();
        let ws = inner
            .workspaces
            .iter_mut()
            .find(|w| w.name == name)
            .unwrap();
        f(ws);
    }

    fn fault(&self, status: u16, retry_after: Option<u64>) {
        self.0
            .lock()
            .unwrap()
            .faults
            .push_back((status, retry_after));
    }
}

fn jsonapi(status: StatusCode, body: Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.api+json"),
    );
    r
}

fn error_doc(status: StatusCode, title: &str) -> Response {
    jsonapi(
        status,
        json!({"errors": [{"status": status.as_u16().to_string(), "title": title}]}),
    )
}

fn workspace_doc(ws: &Ws, port: u16) -> Value {
    let locked_by = match &ws.locked_by {
        Some((kind, id)) => json!({"data": {"id": id, "type": kind}}),
        None => json!({"data": null}),
    };
    let csv = if ws.has_state {
        json!({"data": {"id": ws.sv, "type": "state-versions"},
               "links": {"related": format!("/api/v2/workspaces/{}/current-state-version", ws.id)}})
    } else {
        json!({"data": null})
    };
    json!({
        "id": ws.id,
        "type": "workspaces",
        "attributes": {
            "allow-destroy-plan": true,
            "auto-apply": false,
            "created-at": "2021-08-16T21:22:49.566Z",
            "environment": "default",
            "execution-mode": "agent",
            "locked": ws.locked_by.is_some(),
            "locked-reason": ws.locked_reason,
            "name": ws.name,
            "permissions": {"can-read-state-versions": ws.can_read_state, "can-lock": true},
            "resource-count": 1,
            "tag-names": ws.tags,
            "terraform-version": "1.9.4",
        },
        "links": {
            "self": format!("/api/v2/organizations/acme/workspaces/{}", ws.name),
            "self-html": format!("http://127.0.0.1:{port}/app/acme/workspaces/{}", ws.name)
        },
        "relationships": {
            "current-state-version": csv,
            "locked-by": locked_by,
            "organization": {"data": {"id": "acme", "type": "organizations"}},
        }
    })
}

fn state_version_doc(ws: &Ws, port: u16) -> Value {
    json!({
        "data": {
            "id": ws.sv,
            "type": "state-versions",
            "attributes": {
                "created-at": "2021-06-08T01:22:03.794Z",
                "size": ws.state.len(),
                "hosted-state-download-url": if ws.download_redirect {
                    format!("http://127.0.0.1:{port}/redirect/raw-{}", ws.sv)
                } else {
                    format!("http://{}:{port}/v1/object/raw-{}", ws.download_host, ws.sv)
                },
                "hosted-state-upload-url": null,
                "hosted-json-state-download-url": format!("http://{}:{port}/v1/object/json-{}", ws.download_host, ws.sv),
                "hosted-json-state-upload-url": null,
                "status": "finalized",
                "intermediate": false,
                "resources-processed": true,
                "serial": ws.serial,
                "state-version": 4,
                "terraform-version": "1.11.4"
            },
            "relationships": {"workspace": {"data": {"id": ws.id, "type": "workspaces"}}},
            "links": {"self": format!("/api/v2/state-versions/{}", ws.sv)}
        }
    })
}

async fn handle(State(fake): State<Fake>, req: Request) -> Response {
    let uri = req.uri().clone();
    let url = reqwest::Url::parse(&format!("http://fake{uri}")).unwrap();
    let query: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let header = |name: header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let auth = header(header::AUTHORIZATION);
    let host = header(header::HOST).unwrap_or_default();
    let mut inner = fake.0.lock().unwrap();
    inner.seen.push(Seen {
        path: uri.path().to_owned(),
        query: query.clone(),
        host,
        auth: auth.clone(),
    });
    let port = inner.port;
    let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();

    // The archivist: signed URLs, no token needed.
    if let ["v1", "object", object] = parts.as_slice() {
        if let Some(sv) = object.strip_prefix("raw-")
            && let Some(ws) = inner.workspaces.iter().find(|w| w.sv == sv)
        {
            return (StatusCode::OK, Body::from(ws.state.clone())).into_response();
        }
        if object.starts_with("json-") {
            // The `terraform show -json` format: not what the graph reads.
            return (
                StatusCode::OK,
                json!({"format_version": "1.0", "values": {"root_module": {}}}).to_string(),
            )
                .into_response();
        }
        return (StatusCode::NOT_FOUND, "no such object").into_response();
    }

    if let ["redirect", object] = parts.as_slice() {
        let mut r = StatusCode::TEMPORARY_REDIRECT.into_response();
        r.headers_mut().insert(
            header::LOCATION,
            HeaderValue::from_str(&format!("http://localhost:{port}/v1/object/{object}")).unwrap(),
        );
        return r;
    }

    if auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        return error_doc(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    if let Some((status, retry_after)) = inner.faults.pop_front() {
        let status = StatusCode::from_u16(status).unwrap();
        let mut r = error_doc(status, "injected");
        if let Some(s) = retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        return r;
    }
    match parts.as_slice() {
        ["api", "v2", "organizations", "acme", "workspaces", name] => {
            match inner.workspaces.iter().find(|w| w.name == *name) {
                Some(ws) if ws.always_500 => error_doc(StatusCode::INTERNAL_SERVER_ERROR, "boom"),
                Some(ws) => jsonapi(StatusCode::OK, json!({"data": workspace_doc(ws, port)})),
                None => error_doc(StatusCode::NOT_FOUND, "not found"),
            }
        }
        ["api", "v2", "organizations", "acme", "workspaces"] => {
            let get = |k: &str| {
                query
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let page: usize = get("page[number]")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1);
            let tags: Vec<String> = get("search[tags]")
                .map(|t| t.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            // `search[wildcard-name]`: `*` on prefix, suffix or both.
            let wildcard = get("search[wildcard-name]").unwrap_or_else(|| "*".into());
            let (lead, trail) = (wildcard.starts_with('*'), wildcard.ends_with('*'));
            let core = wildcard.trim_matches('*').to_owned();
            let name_ok = |n: &str| match (lead, trail) {
                _ if core.is_empty() => true,
                (true, true) => n.contains(&core),
                (true, false) => n.ends_with(&core),
                (false, true) => n.starts_with(&core),
                (false, false) => n == core,
            };
            let matching: Vec<&Ws> = inner
                .workspaces
                .iter()
                .filter(|w| tags.iter().all(|t| w.tags.contains(t)) && name_ok(&w.name))
                .collect();
            let size = inner.page_size;
            let pages = matching.len().div_ceil(size).max(1);
            let data: Vec<Value> = matching
                .iter()
                .skip((page - 1) * size)
                .take(size)
                .map(|w| workspace_doc(w, port))
                .collect();
            let next = (page < pages).then_some(page + 1);
            jsonapi(
                StatusCode::OK,
                json!({
                    "data": data,
                    "links": {"next": next.map(|n| format!("http://127.0.0.1:{port}/api/v2/organizations/acme/workspaces?page%5Bnumber%5D={n}"))},
                    "meta": {"pagination": {"current-page": page, "next-page": next, "prev-page": null,
                                            "page-size": size, "total-pages": pages, "total-count": matching.len()}}
                }),
            )
        }
        ["api", "v2", "workspaces", id, "current-state-version"] => {
            match inner.workspaces.iter().find(|w| w.id == *id && w.has_state) {
                Some(ws) => jsonapi(StatusCode::OK, state_version_doc(ws, port)),
                None => error_doc(StatusCode::NOT_FOUND, "not found"),
            }
        }
        _ => error_doc(StatusCode::NOT_FOUND, "not found"),
    }
}

fn changed(f: Fetch) -> (Vec<u8>, Version) {
    match f {
        Fetch::Changed { bytes, version } => (bytes, version),
        Fetch::Unchanged => panic!("expected Changed, got Unchanged"),
    }
}

/// No error text holds the token or an archivist URL.
fn assert_clean(e: &SourceError) {
    let text = format!("{e} {e:?}");
    assert!(!text.contains(TOKEN), "token in error: {text}");
    assert!(!text.contains("v1/object"), "download URL in error: {text}");
}

#[tokio::test]
async fn reads_the_raw_state_then_unchanged_then_changed_after_a_new_serial() {
    let fake = Fake::start(vec![Ws::new("prod", &["prod"])]).await;
    let source = tfe::open(&fake.url("acme", "prod"), Some(TOKEN_VAR)).unwrap();
    assert_eq!(source.location(), fake.url("acme", "prod"));

    let (bytes, v1) = changed(source.read(None).await.unwrap());
    assert_eq!(
        bytes,
        state_doc("prod", 1),
        "the raw v4 state, not the JSON format"
    );
    assert_eq!(v1.0, "1:sv-prod-1");

    let before = fake.seen().len();
    assert!(matches!(
        source.read(Some(&v1)).await.unwrap(),
        Fetch::Unchanged
    ));
    let after = fake.seen();
    assert_eq!(
        after.len() - before,
        1,
        "an unchanged state costs one request (the workspace): {:?}",
        &after[before..]
    );

    // A new apply: serial 2, a new state version.
    fake.update("prod", |w| {
        w.serial = 2;
        w.sv = "sv-prod-2".into();
        w.state = state_doc("prod", 2);
    });
    let (bytes, v2) = changed(source.read(Some(&v1)).await.unwrap());
    assert_eq!(bytes, state_doc("prod", 2));
    assert_eq!(v2.0, "2:sv-prod-2");
    assert!(matches!(
        source.read(Some(&v2)).await.unwrap(),
        Fetch::Unchanged
    ));

    let seen = fake.seen();
    assert!(
        seen.iter().all(|s| !s.path.contains("json-")),
        "the JSON (show -json) state is never downloaded"
    );
    let downloads: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path.starts_with("/v1/object/"))
        .collect();
    assert_eq!(downloads.len(), 2, "one download per new state version");
    for s in &seen {
        assert_eq!(s.host, format!("127.0.0.1:{}", fake.port()));
        assert_eq!(
            s.auth.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str()),
            "the API host gets the token as Bearer: {}",
            s.path
        );
    }
    assert!(
        seen.iter()
            .any(|s| s.path == "/api/v2/organizations/acme/workspaces/prod")
            && seen
                .iter()
                .any(|s| s.path == "/api/v2/workspaces/ws-prod/current-state-version")
    );
}

/// The streamed read makes the same requests and writes what the whole read returns,
/// with its version, length and SHA-256; unchanged, it downloads nothing and writes no
/// file; a download that is not a v4 state is refused the same way and leaves no file.
#[tokio::test]
async fn a_streamed_read_equals_the_whole_read() {
    use sha2::Digest as _;
    let mut old = Ws::new("old", &[]);
    old.state = br#"{"version": 3, "serial": 1, "modules": []}"#.to_vec();
    let fake = Fake::start(vec![Ws::new("prod", &[]), old]).await;
    let source = tfe::open(&fake.url("acme", "prod"), Some(TOKEN_VAR)).unwrap();
    let (bytes, v1) = changed(source.read(None).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("prod.tfstate");
    let before = fake.seen().len();
    let Spooled::Written(info) = source.read_to(None, &dest).await.unwrap() else {
        panic!("expected the state written");
    };
    assert_eq!(
        fake.seen().len() - before,
        3,
        "workspace, state version, download"
    );
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert_eq!(info.version, v1);
    assert_eq!(info.len, bytes.len() as u64);
    assert_eq!(info.sha256, <[u8; 32]>::from(sha2::Sha256::digest(&bytes)));

    let again = dir.path().join("again.tfstate");
    let before = fake.seen().len();
    assert_eq!(
        source.read_to(Some(&v1), &again).await.unwrap(),
        Spooled::Unchanged
    );
    assert_eq!(fake.seen().len() - before, 1, "one request, no download");
    assert!(!again.exists());

    let old = tfe::open(&fake.url("acme", "old"), Some(TOKEN_VAR)).unwrap();
    let whole = old.read(None).await.unwrap_err();
    let bad = dir.path().join("old.tfstate");
    let e = old.read_to(None, &bad).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert_eq!(e.message, whole.message);
    assert!(!bad.exists(), "a refused download leaves no file");
    assert_clean(&e);
}

#[tokio::test]
async fn a_download_url_on_another_host_gets_no_token() {
    let mut ws = Ws::new("prod", &[]);
    ws.download_host = "localhost";
    let fake = Fake::start(vec![ws]).await;
    let source = tfe::open(&fake.url("acme", "prod"), Some(TOKEN_VAR)).unwrap();
    let (bytes, _) = changed(source.read(None).await.unwrap());
    assert_eq!(bytes, state_doc("prod", 1));
    let seen = fake.seen();
    let download = seen
        .iter()
        .find(|s| s.path.starts_with("/v1/object/"))
        .expect("the state was downloaded");
    assert_eq!(download.host, format!("localhost:{}", fake.port()));
    assert_eq!(download.auth, None, "the token goes to the API host only");
    for s in seen.iter().filter(|s| s.path.starts_with("/api/")) {
        assert_eq!(s.auth.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    }
}

#[tokio::test]
async fn a_redirect_to_another_host_drops_the_token() {
    let mut ws = Ws::new("prod", &[]);
    ws.download_redirect = true;
    let fake = Fake::start(vec![ws]).await;
    let source = tfe::open(&fake.url("acme", "prod"), Some(TOKEN_VAR)).unwrap();
    let (bytes, _) = changed(source.read(None).await.unwrap());
    assert_eq!(bytes, state_doc("prod", 1));
    let seen = fake.seen();
    let hop = seen
        .iter()
        .find(|s| s.path.starts_with("/redirect/"))
        .unwrap();
    assert_eq!(
        hop.auth.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let target = seen
        .iter()
        .find(|s| s.path.starts_with("/v1/object/"))
        .unwrap();
    assert_eq!(target.host, format!("localhost:{}", fake.port()));
    assert_eq!(
        target.auth, None,
        "the redirect to another host carries no token"
    );
}

#[tokio::test]
async fn a_token_without_state_permission_is_access_denied() {
    let mut ws = Ws::new("secret", &[]);
    ws.can_read_state = false;
    let fake = Fake::start(vec![ws]).await;
    let e = tfe::open(&fake.url("acme", "secret"), Some(TOKEN_VAR))
        .unwrap()
        .read(None)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::AccessDenied, "{e}");
    assert!(
        e.message.contains("can-read-state-versions") && e.message.contains("acme/secret"),
        "{e}"
    );
    assert!(
        fake.seen()
            .iter()
            .all(|s| !s.path.contains("current-state-version")),
        "no state request without the permission"
    );
    assert_clean(&e);
}

#[tokio::test]
async fn the_workspace_lock_is_reported() {
    let mut by_run = Ws::new("applying", &[]);
    by_run.locked_by = Some(("runs", "run-YfmFLWpgTv31VZsP".into()));
    let mut by_user = Ws::new("held", &[]);
    by_user.locked_by = Some(("users", "user-hjy7ndEkmCtn31ps".into()));
    by_user.locked_reason = Some("Locking for maintenance".into());
    let fake = Fake::start(vec![by_run, by_user, Ws::new("free", &[])]).await;

    let lock = |name: &str| {
        let url = fake.url("acme", name);
        async move {
            tfe::open(&url, Some(TOKEN_VAR))
                .unwrap()
                .lock()
                .await
                .unwrap()
        }
    };
    let run = lock("applying").await.expect("locked by a run");
    assert_eq!(run.id.as_deref(), Some("run-YfmFLWpgTv31VZsP"));
    assert_eq!(run.operation.as_deref(), Some("run"));
    assert_eq!(run.who, None);
    let user = lock("held").await.expect("locked by a user");
    assert_eq!(user.id.as_deref(), Some("user-hjy7ndEkmCtn31ps"));
    assert_eq!(user.who.as_deref(), Some("user-hjy7ndEkmCtn31ps"));
    assert_eq!(user.operation.as_deref(), Some("Locking for maintenance"));
    assert_eq!(lock("free").await, None);

    // The state of a locked workspace is still read.
    let source = tfe::open(&fake.url("acme", "applying"), Some(TOKEN_VAR)).unwrap();
    let (bytes, _) = changed(source.read(None).await.unwrap());
    assert_eq!(bytes, state_doc("applying", 1));
}

#[tokio::test]
async fn a_refused_token_is_access_denied_naming_the_variable() {
    let fake = Fake::start(vec![Ws::new("prod", &[])]).await;
    let source = tfe::open(&fake.url("acme", "prod"), Some(BAD_TOKEN_VAR)).unwrap();
    let e = source.read(None).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::AccessDenied, "{e}");
    assert!(e.message.contains("401"), "{e}");
    assert!(e.message.contains(BAD_TOKEN_VAR), "{e}");
    assert!(e.message.contains("acme/prod"), "{e}");
    assert!(!e.message.contains(env!("CARGO_PKG_VERSION")), "{e}");
    assert_eq!(e.location, fake.url("acme", "prod"));
    assert_clean(&e);
    let e = source.lock().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::AccessDenied, "{e}");
}

#[tokio::test]
async fn a_missing_workspace_or_organization_is_not_found_naming_it() {
    let fake = Fake::start(vec![Ws::new("prod", &[])]).await;
    for (org, ws) in [("acme", "nope"), ("globex", "prod")] {
        let source = tfe::open(&fake.url(org, ws), Some(TOKEN_VAR)).unwrap();
        let e = source.read(None).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
        assert!(e.message.contains(&format!("workspace {org}/{ws}")), "{e}");
        assert!(e.message.contains("404"), "{e}");
        assert_clean(&e);
    }
}

#[tokio::test]
async fn a_workspace_without_state_and_a_non_v4_state_are_named() {
    let mut empty = Ws::new("empty", &[]);
    empty.has_state = false;
    let mut old = Ws::new("old", &[]);
    old.state = br#"{"version": 3, "serial": 1, "modules": []}"#.to_vec();
    let fake = Fake::start(vec![empty, old]).await;

    let e = tfe::open(&fake.url("acme", "empty"), Some(TOKEN_VAR))
        .unwrap()
        .read(None)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(
        e.message.contains("acme/empty") && e.message.contains("no state version"),
        "{e}"
    );

    let e = tfe::open(&fake.url("acme", "old"), Some(TOKEN_VAR))
        .unwrap()
        .read(None)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotAState, "{e}");
    assert!(e.message.contains("format version 3"), "{e}");
    assert!(e.message.contains("sv-old-1"), "{e}");
    assert_clean(&e);
}

#[tokio::test]
async fn no_token_is_access_denied_naming_the_variable_to_set() {
    let e = tfe::open(
        "tfe://127.0.0.1:9/acme/prod",
        Some("DRIFTREACTOR_TEST_SURELY_UNSET_TOKEN"),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::AccessDenied);
    assert!(
        e.message.contains("DRIFTREACTOR_TEST_SURELY_UNSET_TOKEN"),
        "{e}"
    );

    let e = tfe::open("tfe://127.0.0.1:9/acme/prod", None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AccessDenied);
    assert!(e.message.contains("tfe_token_env"), "{e}");

    if std::env::vars().all(|(k, _)| !k.eq_ignore_ascii_case("TF_TOKEN_app_terraform_io")) {
        let e = tfe::open("tfe://acme/prod", None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::AccessDenied);
        assert!(e.message.contains("TF_TOKEN_app_terraform_io"), "{e}");
        let e = tfe::lister("tfe://tfe.my-corp.example/acme/*", &[], None).unwrap_err();
        assert!(e.message.contains("TF_TOKEN_tfe_my__corp_example"), "{e}");
    }
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried() {
    let fake = Fake::start(vec![Ws::new("prod", &[])]).await;
    fake.fault(503, None);
    fake.fault(429, Some(1));
    let source = tfe::open(&fake.url("acme", "prod"), Some(TOKEN_VAR)).unwrap();
    let started = std::time::Instant::now();
    let (bytes, _) = changed(source.read(None).await.unwrap());
    assert_eq!(bytes, state_doc("prod", 1));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was waited for"
    );
    let workspace_gets = fake
        .seen()
        .iter()
        .filter(|s| s.path == "/api/v2/organizations/acme/workspaces/prod")
        .count();
    assert_eq!(workspace_gets, 3, "503, 429, then the answer");
}

#[tokio::test]
async fn a_retry_after_beyond_the_bound_is_not_waited_for() {
    let fake = Fake::start(vec![Ws::new("prod", &[])]).await;
    fake.fault(429, Some(3600));
    let source = tfe::open(&fake.url("acme", "prod"), Some(TOKEN_VAR)).unwrap();
    let started = std::time::Instant::now();
    let e = source.read(None).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    assert!(
        e.message.contains("429") && e.message.contains("Retry-After 3600 s"),
        "{e}"
    );
    assert_eq!(fake.seen().len(), 1, "no retry");
    // The next read (the next reload) asks again and gets the state.
    let (bytes, _) = changed(source.read(None).await.unwrap());
    assert_eq!(bytes, state_doc("prod", 1));
}

#[tokio::test]
async fn lasting_server_errors_and_a_dead_host_are_unreachable() {
    let mut broken = Ws::new("broken", &[]);
    broken.always_500 = true;
    let fake = Fake::start(vec![broken]).await;
    let e = tfe::open(&fake.url("acme", "broken"), Some(TOKEN_VAR))
        .unwrap()
        .read(None)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    assert!(
        e.message.contains("500") && e.message.contains("acme/broken"),
        "{e}"
    );
    let tries = fake.seen().len();
    assert_eq!(tries, 1 + tfe::RETRIES, "the first attempt and the retries");

    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = tfe::open(
        &format!("tfe://127.0.0.1:{port}/acme/prod"),
        Some(TOKEN_VAR),
    )
    .unwrap()
    .read(None)
    .await
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    assert!(e.message.contains("cannot connect"), "{e}");
    assert_clean(&e);
}

#[tokio::test]
async fn a_workspace_set_lists_by_glob_and_tags_across_pages() {
    let fake = Fake::start(vec![
        Ws::new("app-prod", &["prod", "app"]),
        Ws::new("db-prod", &["prod"]),
        Ws::new("app-dev", &["dev", "app"]),
        Ws::new("web-prod", &["app", "prod"]),
        Ws::new("batch", &["prod", "app"]),
    ])
    .await;
    let port = fake.port();
    let pattern = format!("tfe://127.0.0.1:{port}/acme/*-prod");
    let tags = vec!["prod".to_owned(), "app".to_owned()];
    let lister = tfe::lister(&pattern, &tags, Some(TOKEN_VAR)).unwrap();
    assert_eq!(lister.pattern(), pattern);
    let listed = lister.list().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|l| l.workspace.as_str()).collect();
    assert_eq!(names, ["app-prod", "web-prod"]);
    assert_eq!(
        listed[1].source.location(),
        format!("tfe://127.0.0.1:{port}/acme/web-prod")
    );
    let (bytes, _) = changed(listed[1].source.read(None).await.unwrap());
    assert_eq!(bytes, state_doc("web-prod", 1));

    let lists: Vec<Seen> = fake
        .seen()
        .into_iter()
        .filter(|s| s.path == "/api/v2/organizations/acme/workspaces")
        .collect();
    assert_eq!(lists.len(), 2, "2 matching workspaces, 1 a page: {lists:?}");
    for (i, s) in lists.iter().enumerate() {
        let q = |k: &str| {
            s.query
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(q("search[tags]"), Some("prod,app"));
        assert_eq!(q("search[wildcard-name]"), Some("*-prod"));
        assert_eq!(q("page[number]"), Some((i + 1).to_string().as_str()));
        assert_eq!(q("page[size]"), Some("100"));
    }

    // Every workspace, sorted; a new one appears at the next listing.
    let all = tfe::lister(
        &format!("tfe://127.0.0.1:{port}/acme/*"),
        &[],
        Some(TOKEN_VAR),
    )
    .unwrap();
    let names = |l: Vec<driftreactor_state::source::Listed>| {
        l.into_iter().map(|l| l.workspace).collect::<Vec<_>>()
    };
    assert_eq!(
        names(all.list().await.unwrap()),
        ["app-dev", "app-prod", "batch", "db-prod", "web-prod"]
    );
    fake.0
        .lock()
        .unwrap()
        .workspaces
        .push(Ws::new("new-prod", &["prod"]));
    assert_eq!(all.list().await.unwrap().len(), 6);

    // A refused token fails the listing with the kind and the organization.
    let bad = tfe::lister(&pattern, &tags, Some(BAD_TOKEN_VAR)).unwrap();
    let e = bad.list().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::AccessDenied, "{e}");
    assert!(e.message.contains("organization acme"), "{e}");
    assert_clean(&e);
}

#[test]
fn bad_patterns_and_tags_are_bad_locations() {
    let e = tfe::lister("tfe://acme/[", &[], Some(TOKEN_VAR)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadLocation, "{e}");
    let e = tfe::lister("tfe://acme/*", &["a b".into()], Some(TOKEN_VAR)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadLocation, "{e}");
    assert!(e.message.contains("\"a b\""), "{e}");
    let e = tfe::open("tfe://acme/*", Some(TOKEN_VAR)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadLocation, "{e}");
}
