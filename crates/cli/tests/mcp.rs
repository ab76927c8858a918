//! The MCP server (issue 15, "MCP server") driven by a real MCP client: the official
//! Python SDK (PyPI `mcp`, installed into the venv by `scripts/test`) runs
//! `tests/mcp/client.py`, which lists the tools and calls them, over stdio against
//! `driftreactor mcp` and over streamable HTTP against a running `driftreactor
//! serve`. The answers are checked against the bundled demo fixtures and, on serve,
//! against the HTTP API's answers to the same questions.
//!
//! The Python interpreter is `$DRIFTREACTOR_VENV/bin/python` (set by
//! `scripts/test`), else `target/pyenv/bin/python`; a missing interpreter or SDK fails
//! the test naming it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::{http, listening_addr};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures() -> PathBuf {
    repo()
        .join("fixtures")
        .canonicalize()
        .expect("fixtures/ exists")
}

/// The venv's Python with the MCP SDK, or a panic naming what is missing.
fn python() -> PathBuf {
    let venv = std::env::var_os("DRIFTREACTOR_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/pyenv"));
    let py = venv.join("bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import mcp.client.streamable_http"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import the MCP Python SDK: run scripts/test (it installs PyPI `mcp` into the venv), or `{} -m pip install 'mcp>=1.25,<2'`",
        py.display(),
        py.display()
    );
    py
}

/// Runs the Python client (`args` after the script: `stdio BINARY ARGS…` or `http
/// URL`) with `calls` on stdin and `token` as `$MCP_TOKEN`; its JSON report.
fn client(args: &[&str], token: Option<&str>, calls: &Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let mut cmd = Command::new(python());
    cmd.arg(&script)
        .args(args)
        .env_remove("MCP_TOKEN")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.env("MCP_TOKEN", t);
    }
    let mut child = cmd.spawn().expect("the Python client starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(calls.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON report ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The report's listed tool names, sorted.
fn tool_names(report: &Value) -> Vec<String> {
    let mut names: Vec<String> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// The `i`-th call's structured answer, asserting it is no tool error.
fn answer(report: &Value, i: usize) -> &Value {
    let call = &report["calls"][i];
    assert_eq!(call["isError"], false, "call {i}: {call}");
    &call["structured"]
}

/// The `i`-th call's error text, asserting it is a tool error.
fn tool_error(report: &Value, i: usize) -> String {
    let call = &report["calls"][i];
    assert_eq!(call["isError"], true, "call {i} should fail: {call}");
    call["text"].as_str().unwrap().to_owned()
}

fn addresses(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|e| e["address"].as_str().unwrap())
        .collect()
}

const READ_TOOLS: [&str; 6] = [
    "dependencies",
    "dependents",
    "explain_event",
    "find_resource",
    "list_drift",
    "recent_changes",
];

/// The first demo event's file: the console opening SSH on `aws_security_group.web`.
fn sg_event_file() -> String {
    fixtures()
        .join("aws/events/01_sg_open_ssh_console.json")
        .display()
        .to_string()
}

fn sg_event() -> Value {
    serde_json::from_slice(&std::fs::read(sg_event_file()).unwrap()).unwrap()
}

/// The demo state's one sensitive value (`module.database.aws_db_instance.main`'s
/// `password`): no answer may carry it.
const STATE_SECRET: &str = "s3cr3t-Pa55w0rd-demo";

/// The calls both transports make, in this order (the checks below index them).
fn read_calls() -> Value {
    json!([
        {"tool": "find_resource", "arguments": {"cloud_id": "sg-0123456789abcdef0"}},
        {"tool": "dependents", "arguments": {"workspace": "aws-prod", "address": "aws_security_group.web"}},
        {"tool": "dependencies", "arguments": {"workspace": "aws-prod", "address": "aws_instance.app[\"blue\"]", "depth": 1}},
        {"tool": "explain_event", "arguments": {"event": sg_event(), "name": sg_event_file()}},
        {"tool": "dependents", "arguments": {"address": "aws_security_group.web"}},
        {"tool": "dependents", "arguments": {"workspace": "aws-prod", "address": "aws_security_group.nope"}},
        {"tool": "explain_event", "arguments": {"event": "{\"not\": \"an event\"}"}},
        {"tool": "find_resource", "arguments": {"cloud_id": "sg-0123456789abcdef0", "workspace": "nowhere"}},
        {"tool": "find_resource", "arguments": {"cloud_id": format!("arn:aws:rds:eu-west-1:111122223333:db:{STATE_SECRET}")}},
    ])
}

/// Checks the answers to [`read_calls`] against the demo fixtures.
fn check_read_answers(report: &Value) {
    // find_resource: the group's id maps to the group itself (primary).
    let found = answer(report, 0);
    assert_eq!(found["cloud_id"], "sg-0123456789abcdef0");
    assert!(
        found["resources"].as_array().unwrap().iter().any(|r| {
            r["workspace"] == "aws-prod"
                && r["address"] == "aws_security_group.web"
                && r["match"] == "primary"
        }),
        "{found}"
    );
    // dependents: the blast radius holds the blue instance, with its path.
    let deps = answer(report, 1);
    assert_eq!(deps["workspace"], "aws-prod");
    let blue = deps["dependents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["address"] == "aws_instance.app[\"blue\"]")
        .unwrap_or_else(|| panic!("aws_instance.app[\"blue\"] among the dependents: {deps}"));
    assert_eq!(blue["depth"], 1, "{blue}");
    assert_eq!(
        blue["path"],
        json!(["aws_security_group.web", "aws_instance.app[\"blue\"]"])
    );
    // dependencies, one edge deep: the instance depends on the group.
    let deps = answer(report, 2);
    assert_eq!(deps["depth"], 1);
    assert!(
        addresses(&deps["dependencies"]).contains(&"aws_security_group.web"),
        "{deps}"
    );
    assert!(
        deps["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["depth"] == 1),
        "{deps}"
    );
    // explain_event: the report line replay prints for this event, and why.
    let explained = &answer(report, 3)["explanations"];
    assert_eq!(explained.as_array().unwrap().len(), 1, "{explained}");
    let line = &explained[0]["line"];
    assert_eq!(line["input"], sg_event_file().as_str());
    assert_eq!(line["verdict"], "drift", "{line}");
    assert_eq!(line["action"], "revert", "{line}");
    assert_eq!(line["operation"], "AuthorizeSecurityGroupIngress");
    assert!(
        line["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| { r["address"] == "aws_security_group.web" && r["match"] == "primary" }),
        "{line}"
    );
    assert!(
        addresses(&line["dependents"]).contains(&"aws_instance.app[\"blue\"]"),
        "{line}"
    );
    let target = explained[0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["address"] == "aws_security_group.web")
        .unwrap_or_else(|| panic!("a target aws_security_group.web: {explained}"));
    assert_eq!(target["action"], "revert", "{target}");
    assert!(!target["rule"].is_null(), "the [[policy]] rule: {target}");
    // … exactly what `driftreactor explain --format json` prints for the file.
    let config = fixtures().join("driftreactor.toml");
    let cli = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["explain", "--format", "json", "--config"])
        .arg(&config)
        .arg(sg_event_file())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(explained[0], cli);
    // Errors name the field and the reason.
    let e = tool_error(report, 4);
    assert!(
        e.starts_with("workspace: 3 workspaces are loaded (aws-prod, azure-platform, gcp-shop)"),
        "{e}"
    );
    let e = tool_error(report, 5);
    assert!(
        e.contains("unknown address \"aws_security_group.nope\" in workspace \"aws-prod\""),
        "{e}"
    );
    let rejected = &answer(report, 6)["explanations"][0]["line"];
    assert_eq!(rejected["verdict"], "rejected", "{rejected}");
    assert!(
        rejected["reason"]
            .as_str()
            .unwrap()
            .contains("unrecognized event format"),
        "{rejected}"
    );
    let e = tool_error(report, 7);
    assert!(
        e.starts_with("workspace: unknown workspace `nowhere`"),
        "{e}"
    );
}

/// Every tool's input schema is a JSON object schema with its required fields.
fn check_schemas(report: &Value) {
    let schema = |name: &str| -> &Value {
        &report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("tool {name} listed: {report}"))["inputSchema"]
    };
    for (tool, required) in [
        ("find_resource", json!(["cloud_id"])),
        ("dependents", json!(["address"])),
        ("dependencies", json!(["address"])),
        ("explain_event", json!(["event"])),
    ] {
        let s = schema(tool);
        assert_eq!(s["type"], "object", "{tool}: {s}");
        assert_eq!(s["required"], required, "{tool}: {s}");
    }
    for (tool, props) in [
        ("dependents", ["workspace", "address", "depth"].as_slice()),
        ("list_drift", ["status", "workspace"].as_slice()),
        ("recent_changes", ["since", "workspace"].as_slice()),
    ] {
        let s = schema(tool);
        for p in props {
            assert!(s["properties"].get(*p).is_some(), "{tool}.{p}: {s}");
        }
    }
    for t in report["tools"].as_array().unwrap() {
        if READ_TOOLS.contains(&t["name"].as_str().unwrap()) {
            assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        }
    }
}

/// `driftreactor mcp --config fixtures/driftreactor.toml` over stdio: the read tools
/// (no write tools by default), answers from the demo states and policy, errors that
/// name the field, and the journal tools saying they need a journal (the demo config
/// has none).
#[test]
fn stdio_server_answers_from_the_demo_states_and_journal_tools_need_a_journal() {
    let config = fixtures().join("driftreactor.toml");
    let mut calls = read_calls();
    let more = calls.as_array_mut().unwrap();
    more.push(json!({"tool": "list_drift", "arguments": {}}));
    more.push(json!({"tool": "recent_changes", "arguments": {"since": "1h"}}));
    let report = client(
        &[
            "stdio",
            env!("CARGO_BIN_EXE_driftreactor"),
            "mcp",
            "--config",
            config.to_str().unwrap(),
        ],
        None,
        &calls,
    );
    assert_eq!(report["server"]["name"], "driftreactor");
    assert_eq!(tool_names(&report), READ_TOOLS, "no write tools by default");
    check_schemas(&report);
    check_read_answers(&report);
    for i in [9, 10] {
        let e = tool_error(&report, i);
        assert!(e.contains("needs a journal"), "{e}");
    }
}

/// A serve config over the demo states and policy (absolute paths), with a journal,
/// an Event Grid push endpoint, remediation on (detect-only workspaces: plans are
/// refused, which is fine here), the admin token and `/mcp`'s own token, and the
/// write tools.
fn serve_config(dir: &Path) -> PathBuf {
    let demo = std::fs::read_to_string(fixtures().join("driftreactor.toml")).unwrap();
    let base = fixtures().display().to_string();
    let demo = demo.replace("state = \"", &format!("state = \"{base}/"));
    let config = dir.join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "{demo}\n[journal]\npath = \"journal.sqlite\"\n\n[server]\nadmin_token_env = \"MCP_TEST_ADMIN\"\n\n\
             [mcp]\nwrite_tools = true\ntoken_env = \"MCP_TEST_TOKEN\"\n\n[remediation]\n\n\
             [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"MCP_TEST_PUSH\"\n"
        ),
    )
    .unwrap();
    config
}

const MCP_TOKEN: &str = "mcp-reader-token-1";
const ADMIN_TOKEN: &str = "mcp-admin-token-2";

/// serve's `/mcp` (streamable HTTP) with the same client: 401 without a valid token;
/// with `/mcp`'s token the read tools answer as the HTTP API does (also the journal
/// tools, on a drift pushed through the Event Grid endpoint) and the write tools are
/// listed but refuse without the admin token; with the admin token `clear` works.
/// Then `driftreactor mcp` over stdio reads the journal serve left.
#[test]
fn streamable_http_on_serve_needs_the_token_and_answers_as_the_http_api() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let log = dir.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .env("MCP_TEST_TOKEN", MCP_TOKEN)
        .env("MCP_TEST_ADMIN", ADMIN_TOKEN)
        .env("MCP_TEST_PUSH", "push-secret")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(common::append_log(&log))
        .spawn()
        .unwrap();
    let addr = listening_addr(child.stdout.take().unwrap()).unwrap_or_else(|| {
        panic!(
            "serve exited before listening:\n{}",
            common::log_tail(&log, 40)
        )
    });
    let result = std::panic::catch_unwind(|| http_checks(&addr));
    common::stop_cleanly(&mut child, Duration::from_secs(20), || {
        common::log_tail(&log, 40)
    });
    if let Err(e) = result {
        eprintln!("serve log:\n{}", common::log_tail(&log, 60));
        std::panic::resume_unwind(e);
    }

    // `driftreactor mcp` over stdio on the journal serve left: the journal tools
    // answer from it (the config names one).
    let calls = json!([
        {"tool": "list_drift", "arguments": {"status": "all", "workspace": "azure-platform"}},
        {"tool": "recent_changes", "arguments": {"since": "2026-01-01T00:00:00Z"}},
    ]);
    let report = client(
        &[
            "stdio",
            env!("CARGO_BIN_EXE_driftreactor"),
            "mcp",
            "--config",
            config.to_str().unwrap(),
        ],
        None,
        &calls,
    );
    let nsg = "module.network.azurerm_network_security_rule.aks[\"allow-https\"]";
    assert_eq!(
        tool_names(&report),
        READ_TOOLS,
        "no write tools over stdio, even with [mcp] write_tools (no remediator runs there)"
    );
    assert!(
        addresses(&answer(&report, 0)["drift"]).contains(&nsg),
        "{report}"
    );
    assert!(
        addresses(&answer(&report, 1)["changes"]).contains(&nsg),
        "{report}"
    );
}

fn get(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, b"").unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

fn http_checks(addr: &str) {
    // No token, a wrong token: 401, before any MCP is spoken.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    for auth in [None, Some("Bearer not-the-token")] {
        let headers = match auth {
            Some(a) => {
                format!("Accept: application/json, text/event-stream\r\nAuthorization: {a}\r\n")
            }
            None => "Accept: application/json, text/event-stream\r\n".to_owned(),
        };
        let (status, body) =
            common::request(addr, "POST", "/mcp", &headers, init.to_string().as_bytes()).unwrap();
        assert_eq!(status, 401, "{auth:?}: {body}");
        assert!(body.contains("a valid bearer token is required"), "{body}");
    }

    // A drift for the journal tools: the portal editing a managed NSG rule.
    let push =
        std::fs::read(fixtures().join("azure/events/01_nsg_rule_edited_portal.json")).unwrap();
    let (status, body) = http(addr, "POST", "/push/azure?code=push-secret", &push).unwrap();
    assert_eq!(status, 200, "push: {body}");
    let nsg = "module.network.azurerm_network_security_rule.aks[\"allow-https\"]";
    let deadline = Instant::now() + Duration::from_secs(30);
    let http_drift = loop {
        let d = get(addr, "/v1/drift?status=all");
        if addresses(&d["drift"]).contains(&nsg) {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "no drift row for {nsg} within 30 s: {d}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    let url = format!("http://{addr}/mcp");
    let mut calls = read_calls();
    let more = calls.as_array_mut().unwrap();
    more.push(json!({"tool": "list_drift", "arguments": {"status": "all"}}));
    // The fixture event happened on 2026-01-30 (a change counts since its own time).
    more.push(json!({"tool": "recent_changes", "arguments": {"since": "2026-01-01T00:00:00Z", "workspace": "azure-platform"}}));
    more.push(json!({"tool": "list_drift", "arguments": {"status": "bogus"}}));
    more.push(json!({"tool": "clear", "arguments": {"workspace": "azure-platform", "address": nsg, "reconcile": false}}));
    let report = client(&["http", &url], Some(MCP_TOKEN), &calls);
    let mut expected: Vec<&str> = READ_TOOLS.to_vec();
    expected.extend(["clear", "reconcile"]);
    expected.sort_unstable();
    assert_eq!(tool_names(&report), expected);
    check_schemas(&report);
    check_read_answers(&report);

    // The same answers as the HTTP API.
    assert_eq!(
        answer(&report, 0),
        &get(addr, "/v1/resources?cloud_id=sg-0123456789abcdef0")
    );
    assert_eq!(
        answer(&report, 1),
        &get(addr, "/v1/graph/aws-prod/aws_security_group.web/dependents")
    );
    // The remediator moves the row's status on concurrently (open → remediating →
    // …): the rest of the row is the same.
    let without_status = |rows: &Value| -> Value {
        let mut rows = rows.clone();
        for r in rows.as_array_mut().unwrap() {
            let r = r.as_object_mut().unwrap();
            for k in ["status", "status_at", "status_reason"] {
                assert!(r.remove(k).is_some(), "{k} in the drift row");
            }
        }
        rows
    };
    assert_eq!(
        without_status(&answer(&report, 9)["drift"]),
        without_status(&http_drift["drift"])
    );
    // recent_changes: the pushed event, grouped under its address.
    let changes = &answer(&report, 10)["changes"];
    let change = changes
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["address"] == nsg)
        .unwrap_or_else(|| panic!("{nsg} among the recent changes: {changes}"));
    assert_eq!(change["workspace"], "azure-platform");
    assert_eq!(change["event_count"], 1, "{change}");
    assert_eq!(change["events"][0]["verdict"], "drift", "{change}");
    assert_eq!(
        change["events"][0]["principal"], "alice@contoso.example",
        "{change}"
    );
    assert!(
        changes
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["workspace"] == "azure-platform"),
        "{changes}"
    );
    let e = tool_error(&report, 11);
    assert!(e.starts_with("status: `bogus` is not one of"), "{e}");
    // The write tools need the admin token, not /mcp's.
    let e = tool_error(&report, 12);
    assert!(e.contains("a valid admin bearer token is required"), "{e}");

    // With the admin token: clear (no plan) answers as POST …/clear?reconcile=false.
    let calls = json!([
        {"tool": "clear", "arguments": {"workspace": "azure-platform", "address": nsg, "reconcile": false}},
    ]);
    let report = client(&["http", &url], Some(ADMIN_TOKEN), &calls);
    assert_eq!(
        answer(&report, 0),
        &json!({"cleared": true, "workspace": "azure-platform", "address": nsg, "reconcile": false})
    );
}

/// A `[mcp]` key that does not exist stops `driftreactor mcp` before it speaks MCP,
/// naming the file, the section and the key (exit status 2).
#[test]
fn an_unknown_mcp_key_is_refused_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("driftreactor.toml");
    let state = fixtures().join("aws/state/prod.tfstate");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"prod\"\nstate = \"{}\"\n\n[mcp]\nwrite_tool = true\n",
            state.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["mcp", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "nothing on the protocol stream");
    assert!(err.contains(&config.display().to_string()), "{err}");
    assert!(err.contains("mcp") && err.contains("write_tool"), "{err}");
}
