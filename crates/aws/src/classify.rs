//! Operation names → change kind and read-only; user agent → [`Via`].

use driftreactor_event::{Change, Via};

/// `eventName` without an API-version suffix: `UpdateFunctionConfiguration20150331v2`
/// → `UpdateFunctionConfiguration`, `GetFunction20150331` → `GetFunction`.
pub(crate) fn strip_version(op: &str) -> &str {
    let b = op.as_bytes();
    // optional `v<digits>` tail
    let mut end = b.len();
    let mut i = end;
    while i > 0 && b[i - 1].is_ascii_digit() {
        i -= 1;
    }
    if i < end && i > 0 && b[i - 1] == b'v' {
        end = i - 1;
    }
    let date_end = end;
    let mut j = date_end;
    while j > 0 && b[j - 1].is_ascii_digit() {
        j -= 1;
    }
    if date_end - j == 8 && j > 0 && b[j - 1].is_ascii_alphabetic() {
        return &op[..j];
    }
    op
}

/// The leading verb of an operation name (`DeleteBucketPolicy` → (`Delete`,
/// `BucketPolicy`)).
fn verb(op: &str) -> (&str, &str) {
    let cut = op
        .char_indices()
        .skip(1)
        .find(|(_, c)| c.is_ascii_uppercase())
        .map_or(op.len(), |(i, _)| i);
    op.split_at(cut)
}

/// True when the noun after a Create/Delete verb names a part of a resource that the
/// event's primary resource owns (tags, bucket sub-resources, inline policies, routes),
/// so the call *updates* that resource rather than creating or deleting one.
fn sub_object(noun: &str) -> bool {
    noun.ends_with("Tags")
        || noun.ends_with("Tagging")
        || (noun.starts_with("Bucket") && noun != "Bucket")
        || matches!(
            noun,
            "RolePolicy"
                | "UserPolicy"
                | "GroupPolicy"
                | "RolePermissionsBoundary"
                | "UserPermissionsBoundary"
                | "PolicyVersion"
                | "PublicAccessBlock"
                | "ResourcePolicy"
                | "KeyPolicy"
                | "FunctionConcurrency"
                | "FunctionEventInvokeConfig"
                | "FunctionUrlConfig"
                | "Route"
                | "NetworkAclEntry"
                | "EventSelectors"
                | "RetentionPolicy"
                | "SubscriptionFilter"
                | "MetricFilter"
        )
}

/// The kind of change a mutating operation makes. Create/Run/Allocate/Import/Register/
/// Copy… → create; Delete/Terminate/Deregister/Release and `ScheduleKeyDeletion` →
/// delete; Start/Stop/Reboot… → action; everything else (Put, Modify, Update,
/// Authorize, Revoke, Attach, Tag, …) → update. Creating or deleting a part of a
/// resource (tags, bucket sub-resources, inline policies, routes) is an update.
pub(crate) fn change(op: &str) -> Change {
    if op == "ScheduleKeyDeletion" {
        return Change::Delete;
    }
    let (v, noun) = verb(op);
    match v {
        "Create" | "Run" | "Allocate" | "Import" | "Register" | "Copy" | "Request" | "Launch"
        | "Restore" | "Upload" | "Purchase" | "Provision" | "Issue" => {
            if sub_object(noun) {
                Change::Update
            } else {
                Change::Create
            }
        }
        "Delete" | "Terminate" | "Deregister" | "Release" | "Destroy" => {
            if sub_object(noun) {
                Change::Update
            } else {
                Change::Delete
            }
        }
        "Start" | "Stop" | "Reboot" | "Restart" | "Resume" | "Suspend" | "Pause" | "Hibernate"
        | "Failover" | "Reload" => Change::Action,
        _ => Change::Update,
    }
}

/// Read verbs (`Describe`, `Get`, `List`, `Head`, `BatchGet`, `Lookup`), matched as a
/// whole word (`GetObject`, not `Getaway`), except the known calls that mutate.
pub(crate) fn read_verb(op: &str) -> bool {
    const MUTATING: &[&str] = &["GetId", "GetOpenIdTokenForDeveloperIdentity"];
    if MUTATING.contains(&op) {
        return false;
    }
    ["Describe", "Get", "List", "Head", "BatchGet", "Lookup"]
        .iter()
        .any(|p| {
            op.strip_prefix(p).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_uppercase())
            })
        })
}

/// ASCII case-insensitive substring search.
pub(crate) fn contains_ci(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// How the call was made, from the user agent, `sessionCredentialFromConsole` and
/// `userIdentity.invokedBy`: IaC tools first (their agents embed an SDK), then the
/// console, then the CLI, then SDKs.
pub(crate) fn via(ua: Option<&str>, from_console: bool, invoked_by: Option<&str>) -> Via {
    let ua = ua.unwrap_or("");
    if ua.contains("Terraform/")
        || ua.contains("OpenTofu/")
        || ua.contains("terraform-provider-")
        || ((ua.contains("ulumi") || ua.contains("ULUMI")) && contains_ci(ua, "pulumi"))
        || ua.contains("cloudformation.amazonaws.com")
        || invoked_by == Some("cloudformation.amazonaws.com")
    {
        return Via::Iac;
    }
    if from_console
        || matches!(
            ua,
            "console.amazonaws.com" | "signin.amazonaws.com" | "AWS Internal"
        )
        || ua.starts_with("[S3Console")
        || ua.starts_with("Mozilla/")
        || ua.contains("onsole")
        || (ua.contains("ONSOLE") && contains_ci(ua, "console"))
    {
        return Via::Console;
    }
    if ua.contains("aws-cli/") || ua.starts_with("ec2-api-tools") {
        return Via::Cli;
    }
    if ua.contains("aws-sdk-")
        || ua.contains("Boto3/")
        || ua.contains("Botocore/")
        || ua.contains("botocore/")
        || ua.contains("aws-internal/")
    {
        return Via::Sdk;
    }
    Via::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_suffixes_are_stripped() {
        assert_eq!(
            strip_version("UpdateFunctionConfiguration20150331v2"),
            "UpdateFunctionConfiguration"
        );
        assert_eq!(strip_version("AddPermission20150331v2"), "AddPermission");
        assert_eq!(strip_version("GetFunction20150331"), "GetFunction");
        assert_eq!(strip_version("CreateFooV2"), "CreateFooV2");
        assert_eq!(strip_version("ListObjectsV2"), "ListObjectsV2");
        assert_eq!(strip_version("v2"), "v2");
        assert_eq!(strip_version("12345678"), "12345678");
        assert_eq!(strip_version(""), "");
    }

    #[test]
    fn change_kinds() {
        use Change::*;
        for (op, want) in [
            ("CreateSecurityGroup", Create),
            ("RunInstances", Create),
            ("AllocateAddress", Create),
            ("ImportKeyPair", Create),
            ("CreateTags", Update),
            ("DeleteTags", Update),
            ("DeleteBucket", Delete),
            ("DeleteBucketPolicy", Update),
            ("PutBucketPolicy", Update),
            ("TerminateInstances", Delete),
            ("DeregisterImage", Delete),
            ("RevokeSecurityGroupIngress", Update),
            ("AuthorizeSecurityGroupIngress", Update),
            ("StartInstances", Action),
            ("StopInstances", Action),
            ("RebootInstances", Action),
            ("ScheduleKeyDeletion", Delete),
            ("DeleteRolePolicy", Update),
            ("DeleteLoginProfile", Delete),
            ("CreateRoute", Update),
            ("ModifyDBInstance", Update),
            ("AttachRolePolicy", Update),
        ] {
            assert_eq!(change(op), want, "{op}");
        }
    }

    #[test]
    fn read_verbs() {
        for op in [
            "DescribeInstances",
            "GetSecretValue",
            "ListSecrets",
            "HeadObject",
            "BatchGetItem",
            "LookupEvents",
        ] {
            assert!(read_verb(op), "{op}");
        }
        for op in ["Getaway", "Listen", "PutObject", "GetId", "Describe2"] {
            assert!(!read_verb(op), "{op}");
        }
    }

    #[test]
    fn vias() {
        let tf = "APN/1.0 HashiCorp/1.0 Terraform/1.9.8 (+https://www.terraform.io) terraform-provider-aws/5.80.0 aws-sdk-go-v2/1.32.6";
        assert_eq!(via(Some(tf), false, None), Via::Iac);
        assert_eq!(
            via(Some("OpenTofu/1.8.0 aws-sdk-go-v2"), false, None),
            Via::Iac
        );
        assert_eq!(
            via(Some("aws-cli/2.17.60 md/awscrt"), false, None),
            Via::Cli
        );
        assert_eq!(
            via(
                Some("[aws-cli/1.11.10 Python/2.7.8 botocore/1.4.67]"),
                false,
                None
            ),
            Via::Cli
        );
        assert_eq!(
            via(Some("Boto3/1.35.1 md/Botocore#1.35.1"), false, None),
            Via::Sdk
        );
        assert_eq!(via(Some("aws-sdk-java/1.11"), false, None), Via::Sdk);
        assert_eq!(
            via(Some("console.amazonaws.com"), false, None),
            Via::Console
        );
        assert_eq!(via(Some("AWS Internal"), false, None), Via::Console);
        assert_eq!(
            via(
                Some("[S3Console/0.4, aws-internal/3 aws-sdk-java]"),
                false,
                None
            ),
            Via::Console
        );
        assert_eq!(
            via(Some("EC2ConsoleBackend, aws-sdk-java/Linux"), false, None),
            Via::Console
        );
        assert_eq!(via(Some("Boto3/1.35.1"), true, None), Via::Console);
        assert_eq!(via(Some("stratus-red-team_x"), false, None), Via::Unknown);
        assert_eq!(via(None, false, None), Via::Unknown);
        assert_eq!(
            via(Some("cloudformation.amazonaws.com"), false, None),
            Via::Iac
        );
    }
}
