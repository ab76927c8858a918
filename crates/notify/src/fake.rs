//! In-process fakes of GitHub's REST API (the endpoints [`crate::GitHub`] uses) and of
//! a Slack incoming webhook, on 127.0.0.1 and a random port, recording every request.
//! For tests only (feature `fake`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// HTTP method.
    pub method: String,
    /// Path and query, as sent.
    pub uri: String,
    /// Body as text.
    pub body: String,
}

/// A pull request held by [`FakeGitHub`].
#[derive(Debug, Clone)]
pub struct FakePr {
    /// Number.
    pub number: u64,
    /// Head branch.
    pub head: String,
    /// Base branch (what it would merge into).
    pub base: String,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// `open` or `closed`.
    pub state: String,
    /// Comments, oldest first.
    pub comments: Vec<String>,
}

#[derive(Debug, Default)]
struct GhState {
    requests: Vec<Recorded>,
    refs: BTreeMap<String, String>,
    /// (branch, path) → content
    files: BTreeMap<(String, String), String>,
    pulls: Vec<FakePr>,
    seq: u64,
}

type Shared = Arc<Mutex<GhState>>;

/// A fake GitHub REST API. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeGitHub {
    state: Shared,
    url: String,
    task: JoinHandle<()>,
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(uri: &Uri, key: &str) -> Option<String> {
    uri.query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| decode(v))
}

fn pr_json(p: &FakePr) -> Value {
    json!({"number": p.number, "html_url": format!("https://github.test/acme/infra/pull/{}", p.number),
           "state": p.state, "title": p.title, "body": p.body, "head": {"ref": p.head}})
}

async fn gh(State(st): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let mut s = st.lock().unwrap();
    s.requests.push(Recorded {
        method: method.to_string(),
        uri: uri.to_string(),
        body: text.clone(),
    });
    let path = decode(uri.path());
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    // repos / owner / repo / kind / rest
    if parts.len() < 4 || parts[0] != "repos" {
        return (StatusCode::NOT_FOUND, "{}").into_response();
    }
    let rest = parts.get(4).copied().unwrap_or("");
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let ok = |c: StatusCode, v: Value| (c, axum::Json(v)).into_response();
    match (method.as_str(), parts[3]) {
        ("GET", "git") => {
            let branch = rest.trim_start_matches("ref/heads/");
            match s.refs.get(branch) {
                Some(sha) => ok(StatusCode::OK, json!({"object": {"sha": sha}})),
                None => ok(StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
            }
        }
        ("POST", "git") => {
            let r = body["ref"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches("refs/heads/")
                .to_owned();
            if s.refs.contains_key(&r) {
                return ok(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "Reference already exists"}),
                );
            }
            let sha = body["sha"].as_str().unwrap_or_default().to_owned();
            s.refs.insert(r, sha);
            ok(StatusCode::CREATED, json!({}))
        }
        ("GET", "contents") => {
            let branch = query(&uri, "ref").unwrap_or_else(|| "main".into());
            match s.files.get(&(branch, rest.to_owned())) {
                Some(c) => ok(
                    StatusCode::OK,
                    json!({"sha": format!("sha-{}", c.len()), "content": base64::engine::general_purpose::STANDARD.encode(c)}),
                ),
                None => ok(StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
            }
        }
        ("PUT", "contents") => {
            let branch = body["branch"].as_str().unwrap_or("main").to_owned();
            let content = base64::engine::general_purpose::STANDARD
                .decode(body["content"].as_str().unwrap_or_default())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let key = (branch, rest.to_owned());
            let existed = s.files.contains_key(&key);
            if existed && body["sha"].is_null() {
                return ok(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "sha wasn't supplied"}),
                );
            }
            s.files.insert(key, content);
            ok(
                if existed {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                },
                json!({}),
            )
        }
        ("GET", "pulls") => {
            let head = query(&uri, "head").unwrap_or_default();
            let branch = head
                .split_once(':')
                .map_or(head.as_str(), |(_, b)| b)
                .to_owned();
            let state = query(&uri, "state").unwrap_or_else(|| "open".into());
            let list: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| p.head == branch && (state == "all" || p.state == state))
                .map(pr_json)
                .collect();
            ok(StatusCode::OK, Value::Array(list))
        }
        ("POST", "pulls") => {
            let head = body["head"].as_str().unwrap_or_default().to_owned();
            if s.pulls.iter().any(|p| p.head == head && p.state == "open") {
                return ok(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "A pull request already exists"}),
                );
            }
            s.seq += 1;
            let pr = FakePr {
                number: s.seq,
                head,
                base: body["base"].as_str().unwrap_or_default().to_owned(),
                title: body["title"].as_str().unwrap_or_default().to_owned(),
                body: body["body"].as_str().unwrap_or_default().to_owned(),
                state: "open".into(),
                comments: vec![],
            };
            let v = pr_json(&pr);
            s.pulls.push(pr);
            ok(StatusCode::CREATED, v)
        }
        ("PATCH", "pulls") => {
            let n: u64 = rest.parse().unwrap_or_default();
            let Some(pr) = s.pulls.iter_mut().find(|p| p.number == n) else {
                return ok(StatusCode::NOT_FOUND, json!({"message": "Not Found"}));
            };
            if let Some(t) = body["title"].as_str() {
                pr.title = t.to_owned();
            }
            if let Some(b) = body["body"].as_str() {
                pr.body = b.to_owned();
            }
            if let Some(st) = body["state"].as_str() {
                pr.state = st.to_owned();
            }
            let v = pr_json(pr);
            ok(StatusCode::OK, v)
        }
        ("POST", "issues") => {
            let n: u64 = rest
                .split('/')
                .next()
                .unwrap_or_default()
                .parse()
                .unwrap_or_default();
            let Some(pr) = s.pulls.iter_mut().find(|p| p.number == n) else {
                return ok(StatusCode::NOT_FOUND, json!({"message": "Not Found"}));
            };
            pr.comments
                .push(body["body"].as_str().unwrap_or_default().to_owned());
            ok(StatusCode::CREATED, json!({}))
        }
        _ => ok(StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
    }
}

async fn listen(router: Router) -> (String, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{addr}"), task)
}

impl FakeGitHub {
    /// Starts the fake with branch `main` at sha `base0`.
    ///
    /// # Panics
    /// When 127.0.0.1 cannot be bound.
    pub async fn start() -> Self {
        let state: Shared = Arc::default();
        state
            .lock()
            .unwrap()
            .refs
            .insert("main".into(), "base0".into());
        let router = Router::new().fallback(gh).with_state(state.clone());
        let (url, task) = listen(router).await;
        Self { state, url, task }
    }

    /// The API base URL (`http://127.0.0.1:PORT`), for `[github] api_url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Every pull request (open and closed).
    pub fn pulls(&self) -> Vec<FakePr> {
        self.state.lock().unwrap().pulls.clone()
    }

    /// The content of `path` on `branch`, if committed.
    pub fn file(&self, branch: &str, path: &str) -> Option<String> {
        self.state
            .lock()
            .unwrap()
            .files
            .get(&(branch.to_owned(), path.to_owned()))
            .cloned()
    }

    /// The commit `branch` points at (`main` starts at `base0`), if it exists.
    pub fn branch_sha(&self, branch: &str) -> Option<String> {
        self.state.lock().unwrap().refs.get(branch).cloned()
    }

    /// Every committed (branch, path).
    pub fn files(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().files.keys().cloned().collect()
    }
}

#[derive(Debug, Default)]
struct SlackState {
    requests: Vec<Recorded>,
    fail_next: usize,
}

/// A fake Slack incoming webhook at `/webhook`. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeSlack {
    state: Arc<Mutex<SlackState>>,
    url: String,
    task: JoinHandle<()>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn slack(
    State(st): State<Arc<Mutex<SlackState>>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let mut s = st.lock().unwrap();
    s.requests.push(Recorded {
        method: method.to_string(),
        uri: uri.to_string(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    if s.fail_next > 0 {
        s.fail_next -= 1;
        return (StatusCode::INTERNAL_SERVER_ERROR, "error").into_response();
    }
    (StatusCode::OK, "ok").into_response()
}

impl FakeSlack {
    /// Starts the fake webhook.
    ///
    /// # Panics
    /// When 127.0.0.1 cannot be bound.
    pub async fn start() -> Self {
        let state: Arc<Mutex<SlackState>> = Arc::default();
        let router = Router::new().fallback(slack).with_state(state.clone());
        let (url, task) = listen(router).await;
        Self {
            state,
            url: format!("{url}/webhook"),
            task,
        }
    }

    /// The webhook URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answer the next `n` posts with 500.
    pub fn fail_next(&self, n: usize) {
        self.state.lock().unwrap().fail_next = n;
    }

    /// Every post so far (failed ones included).
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The JSON bodies of the posts that succeeded... and failed; use
    /// [`FakeSlack::requests`] to tell them apart by order.
    pub fn messages(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter_map(|r| serde_json::from_str(&r.body).ok())
            .collect()
    }
}
