//! GitHub and Slack against the in-process fakes (127.0.0.1, random ports), and the
//! golden PR body.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use driftreactor_event::{Change, DriftEvent, Principal, Provider, ResourceRef, Via};
use driftreactor_notify::fake::{FakeGitHub, FakeSlack};
use driftreactor_notify::{
    AttributeChange, CodeVersion, DriftKind, DriftReport, DriftedAddress, Evidence, GitHub,
    GitHubConfig, Matched, PlanSummary, PlannedChange, Redactor, Slack, SlackConfig, Transition,
    TransitionKind, import_block_for, pr_body,
};
use serde_json::value::RawValue;

const SECRET: &str = "Sup3r-S3cret-From-State";

fn event() -> DriftEvent {
    let mut e = DriftEvent::new(Provider::Aws, "11111111-2222-3333-4444-555555555555");
    e.service = "ec2.amazonaws.com".into();
    e.operation = "AuthorizeSecurityGroupIngress".into();
    e.change = Some(Change::Update);
    e.resources.push(ResourceRef::new("sg-0123456789abcdef0"));
    e.principal = Principal {
        id: "arn:aws:iam::123456789012:user/alice".into(),
        also: vec![],
    };
    e.via = Via::Console;
    e.source_ip = Some("203.0.113.7".into());
    e.occurred_at = Some(Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap());
    e.request = Some(
        RawValue::from_string(format!(
            r#"{{"groupId":"sg-0123456789abcdef0","ipPermissions":{{"items":[{{"ipProtocol":"tcp","fromPort":22,"toPort":22,"ipRanges":{{"items":[{{"cidrIp":"0.0.0.0/0","description":"{SECRET}"}}]}}}}]}},"password":"hunter2"}}"#
        ))
        .unwrap(),
    );
    e
}

fn report(redactor: &Redactor) -> DriftReport {
    DriftReport {
        workspace: "prod".into(),
        kind: DriftKind::Managed,
        addresses: vec![DriftedAddress {
            address: "aws_security_group.web".into(),
            matched: Matched::Managed(driftreactor_event::MatchKind::Primary),
        }],
        dependents: vec!["aws_instance.app".into()],
        evidence: vec![Evidence::from_event(&event(), redactor)],
        plan: Some(PlanSummary {
            targets: vec!["aws_security_group.web".into()],
            changes: vec![PlannedChange {
                address: "aws_security_group.web".into(),
                actions: vec!["update".into()],
                attributes: vec![AttributeChange {
                    name: "ingress".into(),
                    before: "[{\"from_port\":22}]".into(),
                    after: "[]".into(),
                }],
            }],
            refusals: vec![],
            drift: Default::default(),
        }),
        reason: "The policy says `pull_request`.".into(),
        code: None,
    }
}

fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("DRIFTREACTOR_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with DRIFTREACTOR_UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "golden file {} differs", path.display());
}

#[test]
fn pr_body_matches_the_golden_file_and_is_redacted() {
    let redactor = Redactor::new([SECRET.to_owned()]);
    let body = pr_body(&report(&redactor));
    assert!(!body.contains(SECRET), "{body}");
    assert!(!body.contains("hunter2"), "{body}");
    golden("pr_body_managed.md", &body);
}

#[test]
fn pr_body_for_an_unmanaged_create_offers_the_import() {
    let mut e = event();
    e.operation = "CreateSecurityGroup".into();
    e.change = Some(Change::Create);
    e.request = None;
    e.resources = vec![ResourceRef::new(
        "arn:aws:ec2:us-east-1:123456789012:security-group/sg-0abc",
    )];
    let import = import_block_for(&e).unwrap();
    let r = DriftReport {
        workspace: "prod".into(),
        kind: DriftKind::Unmanaged {
            resource: "sg-0abc".into(),
            import: Some(import),
        },
        addresses: vec![DriftedAddress {
            address: "aws_security_group.sg_0abc".into(),
            matched: Matched::UNMANAGED,
        }],
        dependents: vec![],
        evidence: vec![Evidence::from_event(&e, &Redactor::default())],
        plan: None,
        reason: String::new(),
        code: None,
    };
    golden("pr_body_unmanaged.md", &pr_body(&r));
}

fn gh(fake: &FakeGitHub, redactor: Redactor) -> GitHub {
    let cfg = GitHubConfig {
        repo: Some("acme/infra".into()),
        api_url: fake.url().into(),
        retries: 1,
        workspace_paths: [("prod".to_owned(), "infra/prod".to_owned())].into(),
        ..GitHubConfig::default()
    };
    GitHub::new(&cfg, "ghp_test_token_value".into(), redactor).unwrap()
}

#[tokio::test]
async fn one_pr_per_fingerprint_updated_in_place_then_closed_when_resolved() {
    let fake = FakeGitHub::start().await;
    let redactor = Redactor::new([SECRET.to_owned()]);
    let client = gh(&fake, redactor.clone());
    let mut r = report(&redactor);

    let first = client.upsert(&r).await.unwrap();
    assert!(first.created);
    r.evidence.push(r.evidence[0].clone());
    let second = client.upsert(&r).await.unwrap();
    assert!(!second.created);
    assert_eq!(first.number, second.number);
    let pulls = fake.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0].head, "driftreactor/prod/aws_security_group-web");
    let record = fake
        .file(
            &pulls[0].head,
            "infra/prod/.driftreactor/aws_security_group-web.json",
        )
        .expect("drift record committed");
    assert!(record.contains("AuthorizeSecurityGroupIngress"));

    let closed = client
        .resolve(&r.fingerprint(), "a later plan shows no changes")
        .await
        .unwrap();
    assert_eq!(closed.map(|p| p.number), Some(first.number));
    let pulls = fake.pulls();
    assert_eq!(pulls[0].state, "closed");
    assert_eq!(pulls[0].comments.len(), 1);
    // Resolving again is a no-op.
    assert!(
        client
            .resolve(&r.fingerprint(), "again")
            .await
            .unwrap()
            .is_none()
    );

    for req in fake.requests() {
        assert!(
            !req.body.contains(SECRET) && !req.body.contains("hunter2"),
            "{req:?}"
        );
        assert!(!req.body.contains("ghp_test_token_value"), "{req:?}");
    }
}

/// A plan made in a fetched commit of `[workspaces.git]`: the PR branch starts at that
/// commit, the PR targets the branch it was fetched from, the body names the commit,
/// and the drift record lands in the root's folder of the repository.
#[tokio::test]
async fn a_pr_of_a_git_workspace_starts_at_the_fetched_commit() {
    let fake = FakeGitHub::start().await;
    let client = GitHub::new(
        &GitHubConfig {
            repo: Some("acme/infra".into()),
            api_url: fake.url().into(),
            retries: 1,
            ..GitHubConfig::default()
        },
        "ghp_test_token_value".into(),
        Redactor::default(),
    )
    .unwrap();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let mut r = report(&Redactor::default());
    r.code = Some(CodeVersion {
        repository: "https://github.com/acme/infra.git".into(),
        git_ref: "release".into(),
        branch: Some("release".into()),
        commit: commit.into(),
        path: "envs/prod".into(),
    });
    client.upsert(&r).await.unwrap();
    let pulls = fake.pulls();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].base, "release");
    assert_eq!(fake.branch_sha(&pulls[0].head).as_deref(), Some(commit));
    assert!(
        pulls[0]
            .body
            .contains(&format!("Planned in a clean checkout of commit `{commit}`")),
        "{}",
        pulls[0].body
    );
    assert!(
        fake.file(
            &pulls[0].head,
            "envs/prod/.driftreactor/aws_security_group-web.json"
        )
        .is_some(),
        "{:?}",
        fake.files()
    );
}

#[tokio::test]
async fn slack_groups_per_workspace_and_retries_failures() {
    let fake = FakeSlack::start().await;
    fake.fail_next(1);
    let (slack, _task) = Slack::spawn(
        fake.url().into(),
        Duration::from_secs(3600),
        &SlackConfig::default(),
        Redactor::new([SECRET.to_owned()]),
    )
    .unwrap();
    let t = |ws: &str, kind| Transition {
        workspace: ws.into(),
        addresses: vec!["aws_security_group.web".into()],
        kind,
        at: Utc::now(),
    };
    slack.notify(t(
        "prod",
        TransitionKind::NewDrift {
            principals: vec![format!("alice {SECRET}")],
            operations: vec!["AuthorizeSecurityGroupIngress".into()],
            action: driftreactor_event::Action::Revert,
            changes: vec![format!("`ingress[1]`: `(absent)` → `{SECRET}`")],
        },
    ));
    slack.notify(t("prod", TransitionKind::Reverted));
    slack.notify(t("staging", TransitionKind::Resolved));
    slack.flush().await;
    let reqs = fake.requests();
    // One failed post retried, then one message per workspace.
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    let msgs = fake.messages();
    let prod: Vec<_> = msgs
        .iter()
        .filter(|m| m["blocks"][0]["text"]["text"] == "driftreactor: prod")
        .collect();
    assert_eq!(prod.len(), 2); // the failed attempt and its retry carry the same message
    assert_eq!(prod[1]["blocks"].as_array().unwrap().len(), 3);
    assert!(reqs.iter().all(|r| !r.body.contains(SECRET)));
}

/// The PR body says what changed, from → to: the plan's `resource_drift` when a plan
/// found drift (authoritative), else each event's own diff, and a secret-looking
/// attribute or a known secret never shows.
#[test]
fn pr_body_shows_attribute_changes_plan_first() {
    use driftreactor_event::{AttributeChange as Change, ChangesFrom, Diff};
    let redactor = Redactor::new([SECRET.to_owned()]);
    let mut e = event();
    e.diff = Some(Diff::known(
        vec![
            Change::new(
                "ingress[1]",
                serde_json::Value::Null,
                serde_json::json!({"cidr_blocks": ["0.0.0.0/0"], "description": SECRET}),
            ),
            Change::new(
                "tags[\"api_token\"]",
                serde_json::Value::Null,
                "tok-123456".into(),
            ),
        ],
        ChangesFrom::Event,
    ));
    let mut r = report(&redactor);
    r.evidence = vec![Evidence::from_event(&e, &redactor)];
    let plan = r.plan.take();
    let body = pr_body(&r);
    assert!(body.contains("### Attribute changes"), "{body}");
    assert!(
        body.contains(
            "- `AuthorizeSecurityGroupIngress` (event `11111111-2222-3333-4444-555555555555`):"
        ),
        "{body}"
    );
    assert!(
        body.contains("  - `ingress[1]`: `(absent)` → `[REDACTED]`"),
        "{body}"
    );
    assert!(
        body.contains("  - `tags[\"api_token\"]`: `(absent)` → `[REDACTED]`"),
        "{body}"
    );
    assert!(
        !body.contains(SECRET) && !body.contains("tok-123456"),
        "{body}"
    );

    let mut plan = plan.unwrap();
    plan.drift.insert(
        "aws_security_group.web".into(),
        vec![Change::new("tags[\"env\"]", "prod".into(), "dev".into())],
    );
    r.plan = Some(plan);
    let body = pr_body(&r);
    assert!(
        body.contains("From the plan's refresh (`resource_drift`)"),
        "{body}"
    );
    assert!(
        body.contains("- `aws_security_group.web`\n  - `tags[\"env\"]`: `prod` → `dev`"),
        "{body}"
    );
    assert!(
        !body.contains("`ingress[1]`: `(absent)`"),
        "the plan's diff replaces the event's: {body}"
    );
}
