//! What a pull request says: the drift report, its fingerprint and branch, and the
//! pure Markdown builders for the PR title, body and the committed drift record.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use driftreactor_event::{Change, Diff, DriftEvent, MatchKind, Via};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::import::ImportBlock;
use crate::redact::Redactor;

/// One event kept as evidence of a drift: who did what, when, how. Built redacted by
/// [`Evidence::from_event`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Bus-unique event id.
    pub event_id: String,
    /// The principal (most specific identity), empty when unknown.
    pub principal: String,
    /// How the call was made (`console`, `cli`, `sdk`, `iac`, `unknown`).
    pub via: Via,
    /// Caller's source IP address, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ip: Option<String>,
    /// When the change happened (provider event time), UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<DateTime<Utc>>,
    /// The service that handled the call (`ec2.amazonaws.com`).
    pub service: String,
    /// The operation (`AuthorizeSecurityGroupIngress`).
    pub operation: String,
    /// `create`, `update`, `delete` or `action`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
    /// The call's request parameters, redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    /// What the event says changed, from what to what (`DriftEvent::diff`), redacted;
    /// `None` when the event is not a drift or the diff was not computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
}

impl Evidence {
    /// The evidence of `event`, with its request parameters and every string passed
    /// through `redactor` (secret-looking keys and known secret values replaced).
    pub fn from_event(event: &DriftEvent, redactor: &Redactor) -> Self {
        let t = |s: &str| redactor.text(s).into_owned();
        let request = event
            .request
            .as_ref()
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
            .map(|v| redactor.json(&v));
        Self {
            event_id: t(&event.id),
            principal: t(&event.principal.id),
            via: event.via,
            source_ip: event.source_ip.as_deref().map(t),
            occurred_at: event.occurred_at,
            service: t(&event.service),
            operation: t(&event.operation),
            change: event.change,
            request,
            diff: event.diff.clone().map(|d| redactor.diff(d)),
        }
    }
}

/// The longest value shown in one cell of a change (characters; longer values are cut
/// with `…`).
const MAX_CHANGE_VALUE_CHARS: usize = 200;

/// One attribute change as a line for humans: `` `path`: `before` → `after` ``
/// (compact JSON, `null` shown as `(absent)`, values cut at 200 characters).
pub fn change_line(c: &driftreactor_event::AttributeChange) -> String {
    let show = |v: &Value| {
        if v.is_null() {
            return "(absent)".to_owned();
        }
        let s = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if s.chars().count() > MAX_CHANGE_VALUE_CHARS {
            s.chars().take(MAX_CHANGE_VALUE_CHARS).collect::<String>() + "…"
        } else {
            s
        }
    };
    format!(
        "`{}`: `{}` → `{}`",
        c.path,
        show(&c.before).replace('`', "'"),
        show(&c.after).replace('`', "'")
    )
}

/// The "what changed, from → to" lines of a drift's evidence for a Slack message:
/// the changes of every event that has known ones (each at most once), at most `max`
/// lines, and a last line saying how many more there are.
pub fn evidence_change_lines(evidence: &[Evidence], max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for c in evidence
        .iter()
        .filter_map(|e| e.diff.as_ref()?.changes.as_ref())
        .flatten()
    {
        let line = change_line(c);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    if lines.len() > max {
        let more = lines.len() - max;
        lines.truncate(max);
        lines.push(format!("… and {more} more"));
    }
    lines
}

/// One attribute a planned change modifies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeChange {
    /// Top-level attribute name (`ingress`).
    pub name: String,
    /// Value before, compact JSON, or `(sensitive)`; truncated.
    pub before: String,
    /// Value after, compact JSON, `(sensitive)` or `(known after apply)`; truncated.
    pub after: String,
}

/// One resource change of a plan (`resource_changes[]` of `show -json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedChange {
    /// Resource instance address.
    pub address: String,
    /// Terraform's actions (`["update"]`, `["delete", "create"]`).
    pub actions: Vec<String>,
    /// The attributes that change (empty for creates and deletes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeChange>,
}

/// The targeted plan, summarized for humans.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanSummary {
    /// The `-target` addresses.
    pub targets: Vec<String>,
    /// Changes with actions other than `no-op` / `read`.
    pub changes: Vec<PlannedChange>,
    /// Why the guard refused to apply, one sentence each (empty when it passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<String>,
    /// What the plan's refresh found changed outside Terraform (`resource_drift`,
    /// `driftreactor_diff::from_plan_drift`), by address: authoritative, it replaces
    /// the events' diffs in the pull request. Empty when the plan lists no drift.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drift: BTreeMap<String, Vec<driftreactor_event::AttributeChange>>,
}

/// The identity of a drift for pull requests: one open PR per fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Workspace name.
    pub workspace: String,
    /// The drifted addresses, sorted and unique.
    pub addresses: BTreeSet<String>,
}

impl Fingerprint {
    /// The fingerprint of `addresses` in `workspace`.
    pub fn new<I, S>(workspace: impl Into<String>, addresses: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            workspace: workspace.into(),
            addresses: addresses.into_iter().map(Into::into).collect(),
        }
    }

    /// A git-ref-safe slug of the address set: lowercase `[a-z0-9_-]`, addresses joined
    /// by `--`; past 60 characters, the first 40 and a stable 16-hex-digit hash.
    pub fn slug(&self) -> String {
        let joined = self
            .addresses
            .iter()
            .map(|a| slugify(a))
            .collect::<Vec<_>>()
            .join("--");
        if joined.len() <= 60 {
            return joined;
        }
        let key = self
            .addresses
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        format!(
            "{}-{:016x}",
            joined[..40].trim_end_matches('-'),
            fnv1a(key.as_bytes())
        )
    }

    /// The PR branch: `driftreactor/<workspace>/<slug>`.
    pub fn branch(&self) -> String {
        format!("driftreactor/{}/{}", slugify(&self.workspace), self.slug())
    }
}

/// Lowercase `[a-z0-9_-]` with runs of other characters collapsed to one `-`.
pub fn slugify(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let t = out.trim_matches('-');
    if t.is_empty() {
        "x".to_owned()
    } else {
        t.to_owned()
    }
}

/// FNV-1a, 64 bits: a stable hash for slugs (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What kind of drift a report describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DriftKind {
    /// A resource managed in state changed.
    Managed,
    /// Something no state manages was created.
    Unmanaged {
        /// The changed resource as the provider names it.
        resource: String,
        /// The `import` block to adopt it, when its Terraform type is known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        import: Option<ImportBlock>,
    },
}

/// How a drifted address is known: matched by the router, or the import target of
/// an unmanaged resource. Ordered strongest first (`primary` < … < `unmanaged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Matched {
    /// A managed resource the router matched (`primary`, `related`, `parent`).
    Managed(MatchKind),
    /// An unmanaged resource, named by its import address (`unmanaged`).
    Unmanaged(UnmanagedTag),
}

/// The single value of [`Matched::Unmanaged`], spelled `unmanaged` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnmanagedTag {
    /// `unmanaged`.
    Unmanaged,
}

impl Matched {
    /// An unmanaged resource's import target.
    pub const UNMANAGED: Matched = Matched::Unmanaged(UnmanagedTag::Unmanaged);

    /// `primary`, `related`, `parent` or `unmanaged`, as PR bodies show it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Matched::Managed(k) => k.as_str(),
            Matched::Unmanaged(_) => "unmanaged",
        }
    }
}

impl std::fmt::Display for Matched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One drifted address and how the router matched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftedAddress {
    /// Resource address.
    pub address: String,
    /// `primary`, `related`, `parent` or `unmanaged`.
    pub matched: Matched,
}

/// Everything a pull request (and the committed drift record) says about one drift.
/// All strings are expected to be redacted already; the GitHub client redacts again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftReport {
    /// Workspace name.
    pub workspace: String,
    /// Managed drift or unmanaged create.
    pub kind: DriftKind,
    /// The drifted addresses (primary first).
    pub addresses: Vec<DriftedAddress>,
    /// Resources depending on them (blast radius).
    pub dependents: Vec<String>,
    /// Every event of the drift, oldest first.
    pub evidence: Vec<Evidence>,
    /// The targeted plan, when one was run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// Why this is a pull request and not a revert, one sentence
    /// ("policy says pull_request", "the guard refused to apply: …", "escalated: …").
    pub reason: String,
    /// The commit of the IaC repository the plan was made in (`[workspaces.git]`);
    /// the PR branch is created from it. `None` for a workspace planned in a local
    /// `dir` (the branch starts from `[github] base_branch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeVersion>,
}

/// The version of the Terraform code a plan was made from: a fetched commit of the
/// workspace's Git repository (`[workspaces.git]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeVersion {
    /// The repository URL as configured (it never holds credentials: they are refused
    /// in the URL when the config is read).
    pub repository: String,
    /// The configured `ref` (a branch, a tag, a full ref name or `HEAD`).
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The branch the ref named on the remote, when it named one: pull requests are
    /// opened against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The fetched commit, 40 (SHA-1) or 64 (SHA-256) hex digits.
    pub commit: String,
    /// The Terraform root's folder inside the repository (`envs/prod`; empty: the
    /// repository root).
    pub path: String,
}

impl DriftReport {
    /// The fingerprint (workspace + address set).
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::new(
            self.workspace.clone(),
            self.addresses.iter().map(|a| a.address.clone()),
        )
    }
}

/// The PR title, e.g. `Drift in prod: aws_security_group.web changed by alice`.
pub fn pr_title(report: &DriftReport) -> String {
    let first = report
        .addresses
        .first()
        .map_or("(no address)", |a| a.address.as_str());
    let more = match report.addresses.len() {
        0 | 1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    let who: BTreeSet<&str> = report
        .evidence
        .iter()
        .map(|e| short_principal(&e.principal))
        .collect();
    let who = who.into_iter().collect::<Vec<_>>().join(", ");
    let verb = match report.kind {
        DriftKind::Managed => "changed",
        DriftKind::Unmanaged { .. } => "created outside Terraform",
    };
    if who.is_empty() {
        format!("Drift in {}: {first}{more} {verb}", report.workspace)
    } else {
        format!(
            "Drift in {}: {first}{more} {verb} by {who}",
            report.workspace
        )
    }
}

/// The last path segment of an ARN-like principal (`user/alice` → `alice`).
fn short_principal(p: &str) -> &str {
    if p.is_empty() {
        return "unknown";
    }
    p.rsplit(['/', ':'])
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(p)
}

/// Marker line that identifies driftreactor's PR bodies.
pub const BODY_MARKER: &str = "<!-- driftreactor -->";

/// Escapes `|` and newlines for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The PR body in GitHub-flavored Markdown: what changed, who (principal, via, source
/// IP), when, the operation and its (redacted) request parameters, the primary and
/// related addresses, the blast radius, the targeted plan summary, and the two ways
/// forward. Pure; golden-tested.
pub fn pr_body(report: &DriftReport) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "{BODY_MARKER}");
    let _ = writeln!(b, "## Drift in workspace `{}`\n", report.workspace);
    match &report.kind {
        DriftKind::Managed => {
            let line = format!(
                "Resources managed by Terraform were changed outside Terraform. {}",
                report.reason
            );
            let _ = writeln!(b, "{}\n", line.trim_end());
        }
        DriftKind::Unmanaged { resource, .. } => {
            let line = format!(
                "`{resource}` was created outside Terraform and no state manages it. {}",
                report.reason
            );
            let _ = writeln!(b, "{}\n", line.trim_end());
        }
    }

    let _ = writeln!(b, "### What changed\n");
    let _ = writeln!(
        b,
        "| When (UTC) | Who | Via | Source IP | Operation | Event |"
    );
    let _ = writeln!(b, "|---|---|---|---|---|---|");
    for e in &report.evidence {
        let when = e.occurred_at.map_or_else(
            || "unknown".to_owned(),
            |t| t.format("%Y-%m-%d %H:%M:%S").to_string(),
        );
        let who = if e.principal.is_empty() {
            "unknown"
        } else {
            &e.principal
        };
        let _ = writeln!(
            b,
            "| {when} | `{}` | {} | {} | `{}` ({}) | `{}` |",
            cell(who),
            e.via,
            e.source_ip
                .as_deref()
                .map_or_else(|| "unknown".to_owned(), cell),
            cell(&e.operation),
            cell(&e.service),
            cell(&e.event_id),
        );
    }
    b.push('\n');
    attribute_changes(&mut b, report);
    for e in &report.evidence {
        if let Some(req) = &e.request {
            let pretty = serde_json::to_string_pretty(req).unwrap_or_default();
            let _ = writeln!(
                b,
                "<details><summary>Request parameters of <code>{}</code> (event <code>{}</code>)</summary>\n\n```json\n{}\n```\n</details>\n",
                e.operation, e.event_id, pretty
            );
        }
    }

    let _ = writeln!(b, "### Resources\n");
    for a in &report.addresses {
        let _ = writeln!(b, "- `{}` ({})", a.address, a.matched);
    }
    b.push('\n');
    let _ = writeln!(b, "### Blast radius\n");
    if report.dependents.is_empty() {
        let _ = writeln!(b, "No other resource in state depends on these.\n");
    } else {
        let _ = writeln!(b, "These resources depend on the drifted ones:\n");
        for d in &report.dependents {
            let _ = writeln!(b, "- `{d}`");
        }
        b.push('\n');
    }

    if let Some(code) = &report.code {
        let _ = writeln!(b, "### Code\n");
        let folder = if code.path.is_empty() {
            "the repository root".to_owned()
        } else {
            format!("folder `{}`", code.path)
        };
        let _ = writeln!(
            b,
            "Planned in a clean checkout of commit `{}` (`{}` of `{}`, {folder}); this branch starts from that commit.\n",
            code.commit, code.git_ref, code.repository
        );
    }

    if let Some(plan) = &report.plan {
        let _ = writeln!(b, "### Targeted plan\n");
        let targets = plan
            .targets
            .iter()
            .map(|t| format!("-target={t}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            b,
            "`plan {targets}` would make these changes to return to the code:\n"
        );
        if plan.changes.is_empty() {
            let _ = writeln!(b, "No changes: the drift is gone or immaterial.\n");
        }
        for c in &plan.changes {
            let _ = writeln!(b, "- `{}`: {}", c.address, c.actions.join(", "));
            for a in &c.attributes {
                let _ = writeln!(b, "  - `{}`: `{}` → `{}`", a.name, a.before, a.after);
            }
        }
        if !plan.refusals.is_empty() {
            let _ = writeln!(b, "\nThe guard did not apply it:\n");
            for r in &plan.refusals {
                let _ = writeln!(b, "- {r}");
            }
        }
        b.push('\n');
    }

    let _ = writeln!(b, "### Ways forward\n");
    match &report.kind {
        DriftKind::Managed => {
            let targets = report
                .addresses
                .iter()
                .map(|a| format!("-target='{}'", a.address))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                b,
                "1. **Revert to code**: close this PR and run `terraform apply {targets}` (or let driftreactor revert it: set the policy to `revert`).\n\
                 2. **Accept the change into code**: update the Terraform configuration so that the plan above is empty, push it to this branch, and merge.\n"
            );
            let _ = writeln!(
                b,
                "The evidence is recorded in `.driftreactor/` on this branch; remove that file when you merge."
            );
        }
        DriftKind::Unmanaged { import, .. } => match import {
            Some(i) => {
                let _ = writeln!(
                    b,
                    "1. **Accept it into code**: this branch adds an `import` block for `{}.{}`. Run `terraform plan -generate-config-out=generated.tf` to write its configuration, commit it here, and merge.\n\
                     2. **Remove it**: close this PR and delete the resource (`{}`) in the cloud.",
                    i.resource_type, i.name, i.id
                );
            }
            None => {
                let _ = writeln!(
                    b,
                    "1. **Accept it into code**: add the resource to the configuration and import it (its Terraform type could not be told from the event).\n\
                     2. **Remove it**: close this PR and delete the resource in the cloud."
                );
            }
        },
    }
    b
}

/// The "Attribute changes" section: the plan's `resource_drift` when a plan ran and
/// found drift (authoritative), else what each event says (or why it cannot say).
fn attribute_changes(b: &mut String, report: &DriftReport) {
    let plan_drift = report
        .plan
        .as_ref()
        .map(|p| &p.drift)
        .filter(|d| !d.is_empty());
    let from_events: Vec<&Evidence> = report
        .evidence
        .iter()
        .filter(|e| e.diff.is_some())
        .collect();
    if plan_drift.is_none() && from_events.is_empty() {
        return;
    }
    let _ = writeln!(b, "### Attribute changes\n");
    if let Some(drift) = plan_drift {
        let _ = writeln!(
            b,
            "From the plan's refresh (`resource_drift`), what changed outside Terraform:\n"
        );
        for (address, changes) in drift {
            let _ = writeln!(b, "- `{address}`");
            if changes.is_empty() {
                let _ = writeln!(b, "  - no attribute change shown");
            }
            for c in changes {
                let _ = writeln!(b, "  - {}", change_line(c));
            }
        }
        b.push('\n');
        return;
    }
    for e in from_events {
        let Some(diff) = &e.diff else { continue };
        match (&diff.changes, diff.changes_unknown) {
            (Some(changes), _) if changes.is_empty() => {
                let _ = writeln!(
                    b,
                    "- `{}` (event `{}`): sets the values the state already holds",
                    cell(&e.operation),
                    cell(&e.event_id)
                );
            }
            (Some(changes), _) => {
                let _ = writeln!(
                    b,
                    "- `{}` (event `{}`):",
                    cell(&e.operation),
                    cell(&e.event_id)
                );
                for c in changes {
                    let _ = writeln!(b, "  - {}", change_line(c));
                }
            }
            (None, why) => {
                let why = match why {
                    Some(driftreactor_event::ChangesUnknown::OmittedByCloudtrail) => {
                        "CloudTrail omitted the request parameters (oversized request)"
                    }
                    Some(driftreactor_event::ChangesUnknown::NoStateAttributes) => {
                        "the state holds no value to compare with"
                    }
                    _ => "the event does not carry the new values",
                };
                let _ = writeln!(
                    b,
                    "- `{}` (event `{}`): not known: {why}",
                    cell(&e.operation),
                    cell(&e.event_id)
                );
            }
        }
    }
    b.push('\n');
}

/// The drift record committed under `.driftreactor/` on the PR branch: the report as
/// pretty JSON with a trailing newline.
pub fn drift_record(report: &DriftReport) -> String {
    let mut s = serde_json::to_string_pretty(report).unwrap_or_else(|_| "{}".to_owned());
    s.push('\n');
    s
}

/// The comment posted when the drift resolves, before the PR is closed.
pub fn resolved_comment(how: &str) -> String {
    format!("{BODY_MARKER}\nThe drift is resolved: {how}. Closing this pull request.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_branches_are_ref_safe_and_stable() {
        let f = Fingerprint::new(
            "Prod EU",
            [
                "module.net.aws_security_group.web[\"blue\"]",
                "aws_vpc.main",
            ],
        );
        assert_eq!(
            f.branch(),
            "driftreactor/prod-eu/aws_vpc-main--module-net-aws_security_group-web-blue"
        );
        let many = Fingerprint::new("p", (0..20).map(|i| format!("aws_instance.app[{i}]")));
        let s = many.slug();
        assert!(s.len() <= 60, "{s}");
        assert_eq!(s, many.slug());
        assert_ne!(
            s,
            Fingerprint::new("p", (0..21).map(|i| format!("aws_instance.app[{i}]"))).slug()
        );
    }

    #[test]
    fn title_names_the_address_and_the_principal() {
        let r = DriftReport {
            workspace: "prod".into(),
            kind: DriftKind::Managed,
            addresses: vec![DriftedAddress {
                address: "aws_security_group.web".into(),
                matched: Matched::Managed(MatchKind::Primary),
            }],
            dependents: vec![],
            evidence: vec![Evidence {
                event_id: "e1".into(),
                principal: "arn:aws:iam::1:user/alice".into(),
                via: Via::Console,
                source_ip: None,
                occurred_at: None,
                service: "ec2.amazonaws.com".into(),
                operation: "AuthorizeSecurityGroupIngress".into(),
                change: Some(Change::Update),
                request: None,
                diff: None,
            }],
            plan: None,
            reason: String::new(),
            code: None,
        };
        assert_eq!(
            pr_title(&r),
            "Drift in prod: aws_security_group.web changed by alice"
        );
    }
}
