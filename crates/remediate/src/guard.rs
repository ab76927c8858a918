//! The guard: a pure check of a targeted plan (`terraform show -json <planfile>`,
//! the "JSON output format" document, `resource_changes[]`) before it is applied.
//! [`guard_stream`] makes the same check from `terraform plan -json`'s stream (the
//! "Machine-Readable UI" document) so a revert needs no `show` (one provider start-up
//! and schema load less) when the stream carries enough.
//!
//! It passes only when every change (actions other than `no-op` / `read`) is inside a
//! targeted address and is an in-place `update` or a `create` (re-creating a resource
//! deleted out of band). It refuses any change outside the targets (`-target` also
//! plans the targets' dependencies), any `delete`, any replace (`delete`+`create` in
//! either order), any other action (`forget`, …), and a plan marked `errored`.

use driftreactor_notify::{AttributeChange, PlanSummary, PlannedChange};
use serde::Deserialize;
use serde_json::Value;

/// Longest rendering of one attribute value in a summary, in characters.
const MAX_VALUE_CHARS: usize = 200;

/// Why plan JSON could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Not JSON, or not the plan representation.
    #[error("plan JSON is not valid: {0}")]
    Invalid(String),
}

/// What the guard decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanVerdict {
    /// Nothing to do (only `no-op` / `read`, or only output changes).
    NoChanges,
    /// Safe to apply.
    Pass,
    /// Do not apply; see [`PlanSummary::refusals`].
    Refuse,
}

impl PlanVerdict {
    /// The snake-case name (`no_changes`, `pass`, `refuse`) for logs and the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            PlanVerdict::NoChanges => "no_changes",
            PlanVerdict::Pass => "pass",
            PlanVerdict::Refuse => "refuse",
        }
    }
}

/// The guard's answer: the verdict and the human summary of the plan (values are not
/// redacted yet; the caller redacts).
#[derive(Debug, Clone, PartialEq)]
pub struct GuardReport {
    /// The verdict.
    pub verdict: PlanVerdict,
    /// Targets, changes (with attribute diffs) and refusals.
    pub summary: PlanSummary,
}

/// True when `target` (a `-target` address) covers `address`: equal, or `address` is an
/// instance of it (`aws_instance.app` covers `aws_instance.app[0]`) or inside it
/// (`module.net` covers `module.net.aws_vpc.main`).
pub fn covers(target: &str, address: &str) -> bool {
    address == target
        || (address.len() > target.len()
            && address.starts_with(target)
            && matches!(address.as_bytes()[target.len()], b'[' | b'.'))
}

/// Checks `plan_json` against `targets`. Pure.
///
/// # Errors
/// [`GuardError::Invalid`] when the input is not plan JSON (no `resource_changes`
/// array is fine: no changes).
pub fn guard(plan_json: &[u8], targets: &[String]) -> Result<GuardReport, GuardError> {
    let plan: Value =
        serde_json::from_slice(plan_json).map_err(|e| GuardError::Invalid(e.to_string()))?;
    if !plan.is_object() || plan.get("format_version").is_none() {
        return Err(GuardError::Invalid(
            "no `format_version`: not `show -json` output of a plan".into(),
        ));
    }
    let mut summary = PlanSummary {
        targets: targets.to_vec(),
        // What the refresh found changed outside Terraform: authoritative, it replaces
        // the events' diffs in the pull request. A malformed `resource_drift` only
        // loses the diff, never the guard's verdict.
        drift: driftreactor_diff::from_plan_drift(&plan).unwrap_or_default(),
        ..PlanSummary::default()
    };
    if plan["errored"].as_bool() == Some(true) {
        summary
            .refusals
            .push("The plan is marked `errored`: Terraform could not finish planning.".into());
    }
    let empty = Vec::new();
    let changes = match &plan["resource_changes"] {
        Value::Null => &empty,
        Value::Array(a) => a,
        _ => {
            return Err(GuardError::Invalid(
                "`resource_changes` is not an array".into(),
            ));
        }
    };
    for rc in changes {
        let address = rc["address"].as_str().ok_or_else(|| {
            GuardError::Invalid("a `resource_changes` entry has no `address`".into())
        })?;
        let actions: Vec<String> = rc["change"]["actions"]
            .as_array()
            .ok_or_else(|| GuardError::Invalid(format!("`{address}` has no `change.actions`")))?
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        if actions.iter().all(|a| a == "no-op" || a == "read") {
            continue;
        }
        let has = |a: &str| actions.iter().any(|x| x == a);
        check_change(address, &actions, targets, &mut summary.refusals);
        let attributes = if has("update") {
            attribute_changes(&rc["change"])
        } else {
            Vec::new()
        };
        summary.changes.push(PlannedChange {
            address: address.to_owned(),
            actions,
            attributes,
        });
    }
    Ok(GuardReport {
        verdict: verdict(&summary),
        summary,
    })
}

/// The verdict of a summary: any refusal refuses; no change is no changes.
fn verdict(summary: &PlanSummary) -> PlanVerdict {
    if !summary.refusals.is_empty() {
        PlanVerdict::Refuse
    } else if summary.changes.is_empty() {
        PlanVerdict::NoChanges
    } else {
        PlanVerdict::Pass
    }
}

/// The guard's rules for one change (`actions` other than only `no-op` / `read`) of
/// `address`: appends to `refusals` what makes it unsafe to apply.
fn check_change(address: &str, actions: &[String], targets: &[String], refusals: &mut Vec<String>) {
    let has = |a: &str| actions.iter().any(|x| x == a);
    let list = actions.join(", ");
    if !targets.iter().any(|t| covers(t, address)) {
        refusals.push(format!(
            "`{address}` ({list}) is outside the targeted addresses (`-target` also plans dependencies)."
        ));
    }
    if has("delete") && has("create") {
        refusals.push(format!(
            "`{address}` would be replaced (destroyed and re-created)."
        ));
    } else if has("delete") {
        refusals.push(format!("`{address}` would be destroyed."));
    } else if let Some(other) = actions
        .iter()
        .find(|a| !matches!(a.as_str(), "update" | "create"))
    {
        refusals.push(format!(
            "`{address}` has action `{other}`, which the guard never applies."
        ));
    }
}

/// What [`guard_stream`] made of a `plan -json` stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamGuard {
    /// The stream carries every change of the plan (its `change_summary` counts agree
    /// with its `planned_change` messages): the guard's report. Its changes carry no
    /// attribute values and its drift is empty: those are only in `show -json`.
    Report(GuardReport),
    /// The stream is not enough to decide (not Terraform's stream, no
    /// `change_summary`, counts that disagree, a move or an import, an action this
    /// version does not know): decide from `show -json` with [`guard`]. The reason.
    NotEnough(String),
}

/// One message of Terraform's machine-readable UI stream (the fields the guard reads).
#[derive(Debug, Deserialize)]
struct UiMessage {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    ui: Option<String>,
    #[serde(default)]
    change: Option<UiChange>,
    #[serde(default)]
    changes: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    diagnostic: Option<UiDiagnostic>,
}

/// `change` of a `planned_change` message.
#[derive(Debug, Deserialize)]
struct UiChange {
    resource: UiResource,
    action: String,
    #[serde(default)]
    previous_resource: Option<Value>,
    #[serde(default)]
    importing: Option<Value>,
}

/// `change.resource`.
#[derive(Debug, Deserialize)]
struct UiResource {
    addr: String,
}

/// `diagnostic` of a `diagnostic` message.
#[derive(Debug, Deserialize)]
struct UiDiagnostic {
    #[serde(default)]
    severity: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    detail: String,
}

/// The error diagnostics of a `plan -json` stream (`"summary: detail"`, in order):
/// with `-json` Terraform writes them there instead of stderr. Lines that are not
/// messages are skipped. Not redacted.
pub fn stream_errors(stream: &[u8]) -> Vec<String> {
    stream
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<UiMessage>(l).ok())
        .filter_map(|m| m.diagnostic)
        .filter(|d| d.severity == "error")
        .map(|d| format!("{}: {}", d.summary, d.detail))
        .collect()
}

/// Checks the `planned_change` messages of a `terraform plan -json` stream against
/// `targets` with the rules of [`guard`] (Terraform 1.x, UI format `1.x`). Pure.
///
/// Each `planned_change` action maps to the actions of `show -json`: `create`,
/// `update`, `delete`, `replace` (`delete` + `create`), `remove` (`forget`); `noop`
/// and `read` are no change. The stream is trusted only when its `change_summary`
/// counts (`add` = creates + replaces, `change` = updates, `remove` = deletes +
/// replaces, every other count 0) agree with those messages; otherwise, and for moves
/// and imports (which `show -json` reports as `no-op` changes with more to say),
/// [`StreamGuard::NotEnough`].
pub fn guard_stream(stream: &[u8], targets: &[String]) -> StreamGuard {
    let not_enough = |why: String| StreamGuard::NotEnough(why);
    let mut summary = PlanSummary {
        targets: targets.to_vec(),
        ..PlanSummary::default()
    };
    let mut version = false;
    let mut counts: Option<serde_json::Map<String, Value>> = None;
    let (mut adds, mut updates, mut removes) = (0u64, 0u64, 0u64);
    for (n, line) in stream.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let msg: UiMessage = match serde_json::from_slice(line) {
            Ok(m) => m,
            Err(e) => return not_enough(format!("line {} is not a UI message: {e}", n + 1)),
        };
        match msg.kind.as_str() {
            "version" => {
                version = msg.ui.as_deref().is_some_and(|u| u.starts_with("1."));
            }
            "change_summary" => counts = msg.changes,
            "planned_change" => {
                let Some(c) = msg.change else {
                    return not_enough(format!(
                        "line {}: `planned_change` without `change`",
                        n + 1
                    ));
                };
                if c.previous_resource.is_some() || c.importing.is_some() {
                    return not_enough(format!("`{}` is moved or imported", c.resource.addr));
                }
                let actions: &[&str] = match c.action.as_str() {
                    "noop" | "read" => continue,
                    "create" => {
                        adds += 1;
                        &["create"]
                    }
                    "update" => {
                        updates += 1;
                        &["update"]
                    }
                    "delete" => {
                        removes += 1;
                        &["delete"]
                    }
                    "replace" => {
                        adds += 1;
                        removes += 1;
                        &["delete", "create"]
                    }
                    "remove" => &["forget"],
                    other => {
                        return not_enough(format!(
                            "`{}` has action `{other}`, unknown to the stream guard",
                            c.resource.addr
                        ));
                    }
                };
                let actions: Vec<String> = actions.iter().map(|a| (*a).to_owned()).collect();
                check_change(&c.resource.addr, &actions, targets, &mut summary.refusals);
                summary.changes.push(PlannedChange {
                    address: c.resource.addr,
                    actions,
                    attributes: Vec::new(),
                });
            }
            _ => {}
        }
    }
    if !version {
        return not_enough("no `version` message of UI format 1.x".into());
    }
    let Some(counts) = counts else {
        return not_enough("no `change_summary` message".into());
    };
    for (key, value) in &counts {
        let Some(n) = value.as_u64() else {
            continue; // `operation` and other non-counts
        };
        let expected = match key.as_str() {
            "add" => adds,
            "change" => updates,
            "remove" => removes,
            _ => 0,
        };
        if n != expected {
            return not_enough(format!(
                "`change_summary.{key}` is {n}, the `planned_change` messages say {expected}"
            ));
        }
    }
    for key in ["add", "change", "remove"] {
        if !counts.contains_key(key) {
            return not_enough(format!("`change_summary` has no `{key}`"));
        }
    }
    StreamGuard::Report(GuardReport {
        verdict: verdict(&summary),
        summary,
    })
}

/// True when a `*_sensitive` / `after_unknown` marker says the attribute (or anything
/// inside it) is marked.
fn marked(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Array(a) => a.iter().any(marked),
        Value::Object(o) => o.values().any(marked),
        _ => false,
    }
}

fn render(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= MAX_VALUE_CHARS {
        return s;
    }
    let cut: String = s.chars().take(MAX_VALUE_CHARS).collect();
    format!("{cut}…")
}

/// Top-level attributes whose value differs between `before` and `after`, with
/// sensitive values hidden and unknown values named.
fn attribute_changes(change: &Value) -> Vec<AttributeChange> {
    let (Some(before), Some(after)) = (change["before"].as_object(), change["after"].as_object())
    else {
        return Vec::new();
    };
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let b = before.get(name).unwrap_or(&Value::Null);
        let a = after.get(name).unwrap_or(&Value::Null);
        let unknown = marked(&change["after_unknown"][name.as_str()]);
        if a == b && !unknown {
            continue;
        }
        let sensitive = marked(&change["before_sensitive"][name.as_str()])
            || marked(&change["after_sensitive"][name.as_str()]);
        let (before, after) = if sensitive {
            ("(sensitive)".to_owned(), "(sensitive)".to_owned())
        } else if unknown {
            (render(b), "(known after apply)".to_owned())
        } else {
            (render(b), render(a))
        };
        out.push(AttributeChange {
            name: name.clone(),
            before,
            after,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/plans")
            .join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn t(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn covers_instances_and_modules_but_not_prefixes() {
        assert!(covers("aws_instance.app", "aws_instance.app"));
        assert!(covers("aws_instance.app", "aws_instance.app[0]"));
        assert!(covers("module.net", "module.net.aws_vpc.main"));
        assert!(!covers("aws_instance.app", "aws_instance.app2"));
        assert!(!covers("module.net", "module.network.aws_vpc.main"));
        assert!(!covers("aws_instance.app[0]", "aws_instance.app[1]"));
    }

    #[test]
    fn targeted_update_passes_and_lists_the_changed_attributes() {
        // Shape of terraform 1.11 `show -json` after opening port 22 on a group.
        let r = guard(&golden("sg_update.json"), &t(&["aws_security_group.web"])).unwrap();
        assert_eq!(r.verdict, PlanVerdict::Pass, "{:?}", r.summary.refusals);
        assert_eq!(r.summary.changes.len(), 1);
        let c = &r.summary.changes[0];
        assert_eq!(
            (c.address.as_str(), c.actions.clone()),
            ("aws_security_group.web", t(&["update"]))
        );
        let names: Vec<_> = c.attributes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["ingress"]);
    }

    /// The plan's `resource_drift` (a real terraform + moto plan, the diff crate's
    /// fixture) is read into the summary: it replaces the events' diffs in the PR.
    #[test]
    fn the_plans_resource_drift_is_summarized_by_address() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../diff/tests/data/plan_resource_drift.json");
        let plan = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let r = guard(&plan, &t(&["aws_security_group.web"])).unwrap();
        let sg = &r.summary.drift["aws_security_group.web"];
        assert!(
            sg.iter()
                .any(|c| c.path.starts_with("ingress[") && c.before.is_null()),
            "{sg:#?}"
        );
        assert!(r.summary.drift.contains_key("aws_iam_role.app"));
    }

    #[test]
    fn no_op_and_read_only_is_no_changes() {
        let r = guard(&golden("no_op.json"), &t(&["aws_security_group.web"])).unwrap();
        assert_eq!(r.verdict, PlanVerdict::NoChanges);
        assert!(r.summary.changes.is_empty());
    }

    #[test]
    fn a_change_outside_the_targets_is_refused() {
        let r = guard(
            &golden("extra_address.json"),
            &t(&["aws_security_group.web"]),
        )
        .unwrap();
        assert_eq!(r.verdict, PlanVerdict::Refuse);
        assert!(
            r.summary.refusals[0].contains("`aws_vpc.main`"),
            "{:?}",
            r.summary.refusals
        );
    }

    #[test]
    fn replace_and_delete_are_refused_even_when_targeted() {
        let r = guard(&golden("replace.json"), &t(&["aws_instance.app"])).unwrap();
        assert_eq!(r.verdict, PlanVerdict::Refuse);
        assert!(
            r.summary.refusals[0].contains("replaced"),
            "{:?}",
            r.summary.refusals
        );
        let r = guard(&golden("delete.json"), &t(&["aws_s3_bucket.logs"])).unwrap();
        assert_eq!(r.verdict, PlanVerdict::Refuse);
        assert!(
            r.summary.refusals[0].contains("destroyed"),
            "{:?}",
            r.summary.refusals
        );
    }

    #[test]
    fn sensitive_and_unknown_values_are_not_shown() {
        let r = guard(
            &golden("sensitive_update.json"),
            &t(&["aws_db_instance.main"]),
        )
        .unwrap();
        assert_eq!(r.verdict, PlanVerdict::Pass);
        let attrs = &r.summary.changes[0].attributes;
        let pw = attrs.iter().find(|a| a.name == "password").unwrap();
        assert_eq!(
            (pw.before.as_str(), pw.after.as_str()),
            ("(sensitive)", "(sensitive)")
        );
        let ep = attrs.iter().find(|a| a.name == "endpoint").unwrap();
        assert_eq!(ep.after, "(known after apply)");
        let text = format!("{attrs:?}");
        assert!(!text.contains("db-password-in-state"), "{text}");
    }

    fn report(s: StreamGuard) -> GuardReport {
        match s {
            StreamGuard::Report(r) => r,
            StreamGuard::NotEnough(why) => panic!("the stream was not enough: {why}"),
        }
    }

    /// Streams of `terraform plan -json` (1.11.4, hashicorp/aws 5.100.0 against moto)
    /// after port 22 was opened on `web` out of band: targeted at `web` it passes like
    /// `show -json` of the same plan; targeted at the instance (which depends on `web`)
    /// the update is outside the targets; with the bucket removed from the code and
    /// targeted, a destroy. Both refused, as the `show -json` guard refuses them.
    #[test]
    fn a_recorded_plan_stream_passes_a_targeted_update_and_refuses_the_rest() {
        let sg = t(&["aws_security_group.web"]);
        let r = report(guard_stream(&golden("stream_sg_update.jsonl"), &sg));
        assert_eq!(r.verdict, PlanVerdict::Pass, "{:?}", r.summary.refusals);
        let from_show = guard(&golden("sg_update.json"), &sg).unwrap();
        let pairs = |r: &GuardReport| -> Vec<(String, Vec<String>)> {
            r.summary
                .changes
                .iter()
                .map(|c| (c.address.clone(), c.actions.clone()))
                .collect()
        };
        assert_eq!(pairs(&r), pairs(&from_show));
        assert_eq!(
            crate::reconcile::plan_line(&r.summary),
            "1 to change: aws_security_group.web (update)"
        );

        let r = report(guard_stream(
            &golden("stream_untargeted.jsonl"),
            &t(&["aws_instance.app"]),
        ));
        assert_eq!(r.verdict, PlanVerdict::Refuse);
        assert!(
            r.summary.refusals[0]
                .contains("`aws_security_group.web` (update) is outside the targeted addresses"),
            "{:?}",
            r.summary.refusals
        );

        let r = report(guard_stream(
            &golden("stream_delete.jsonl"),
            &t(&["aws_s3_bucket.logs"]),
        ));
        assert_eq!(r.verdict, PlanVerdict::Refuse);
        assert_eq!(
            r.summary.refusals,
            ["`aws_s3_bucket.logs` would be destroyed."]
        );
    }

    /// What the stream cannot prove is left to `show -json`: a `planned_change` missing
    /// from the stream (counts disagree), no summary, moves and imports, unknown
    /// actions, not a stream at all.
    #[test]
    fn a_stream_that_does_not_prove_the_plan_is_not_enough() {
        let sg = t(&["aws_security_group.web"]);
        let stream = String::from_utf8(golden("stream_sg_update.jsonl")).unwrap();
        let keep = |f: &dyn Fn(&str) -> bool| -> Vec<u8> {
            stream
                .lines()
                .filter(|l| f(l))
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes()
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("planned_change", keep(&|l| !l.contains("\"type\":\"planned_change\""))),
            ("change_summary", keep(&|l| !l.contains("\"type\":\"change_summary\""))),
            ("version", keep(&|l| !l.contains("\"type\":\"version\""))),
            (
                "moved",
                stream
                    .replace("\"action\":\"update\"},\"type\":\"planned_change\"", "\"action\":\"update\",\"previous_resource\":{\"addr\":\"aws_security_group.old\"}},\"type\":\"planned_change\"")
                    .into_bytes(),
            ),
            (
                "teleport",
                stream
                    .replace("\"action\":\"update\"},\"type\":\"planned_change\"", "\"action\":\"teleport\"},\"type\":\"planned_change\"")
                    .into_bytes(),
            ),
            ("line 1", b"not json\n".to_vec()),
            ("line 1", golden("sg_update.json")),
            ("version", Vec::new()),
        ];
        for (why, bytes) in cases {
            match guard_stream(&bytes, &sg) {
                StreamGuard::NotEnough(reason) => {
                    assert!(
                        reason.contains(why) || (why == "moved" && reason.contains("moved")),
                        "{why}: {reason}"
                    )
                }
                StreamGuard::Report(r) => {
                    panic!("{why}: decided {:?} from an incomplete stream", r.verdict)
                }
            }
        }
    }

    #[test]
    fn the_streams_error_diagnostics_are_read_for_classification() {
        let stream = br#"{"@level":"info","type":"version","ui":"1.2"}
{"@level":"warn","type":"diagnostic","diagnostic":{"severity":"warning","summary":"Resource targeting is in effect","detail":"..."}}
{"@level":"error","type":"diagnostic","diagnostic":{"severity":"error","summary":"Error acquiring the state lock","detail":"Lock Info: ID 1234"}}
"#;
        assert_eq!(
            stream_errors(stream),
            ["Error acquiring the state lock: Lock Info: ID 1234"]
        );
    }

    #[test]
    fn garbage_and_errored_plans() {
        assert!(guard(b"not json", &[]).is_err());
        assert!(guard(b"{}", &[]).is_err());
        let r = guard(br#"{"format_version":"1.2","errored":true}"#, &[]).unwrap();
        assert_eq!(r.verdict, PlanVerdict::Refuse);
    }
}
