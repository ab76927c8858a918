//! Regression tests for issue 11's GCP classes, one per class, on a small state
//! (`tests/data/issue11.tfstate`) and audit entries built from Google's documented
//! shapes (`tests/data/issue11/`):
//!
//! * IAM audit entries: "Audit logging examples — policy changes",
//!   <https://cloud.google.com/iam/docs/audit-logging/examples-policy> (`serviceData`
//!   of type `google.iam.v1.logging.AuditData` with `policyDelta.bindingDeltas[]`:
//!   `action`, `role`, `member`, `condition`), and the AuditLog reference, which
//!   deprecates `serviceData` in favour of `metadata`
//!   (<https://cloud.google.com/logging/docs/reference/audit/auditlog/rest/Shared.Types/AuditLog>);
//! * Compute Engine audit entries (`v1.compute.instanceGroupManagers.resize`,
//!   `v1.compute.disks.resize`): "Compute Engine audit logging",
//!   <https://cloud.google.com/compute/docs/logging/audit-logging>.

use std::path::{Path, PathBuf};

use driftreactor_gcp::GcpIdentity;
use driftreactor_testkit::routing::{self, assert_lines, expect, policy};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

fn replay(files: &[&str]) -> Vec<routing::Line> {
    let g = routing::graph(Box::new(GcpIdentity), &[("gcp", data("issue11.tfstate"))]);
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| data(&format!("issue11/{f}")))
        .collect();
    routing::replay(&g, &policy(""), &files, driftreactor_gcp::normalize)
}

/// Issue 11 class 5 (and class 6 for GCP): a `SetIamPolicy` entry is attributed per
/// binding delta. Equal to a non-authoritative `*_iam_member` (role, member,
/// condition) → that member alone is primary; in a role an authoritative
/// `*_iam_binding` manages → that binding; on a resource with an authoritative
/// `*_iam_policy` → that policy; managed by no state → unmanaged (notify), never
/// drift of every member of the project. The newer `metadata` form reads the same.
#[test]
fn iam_binding_deltas_are_attributed_per_binding() {
    let lines = replay(&[
        "01_member_delta.json",
        "02_binding_role_delta.json",
        "03_conditional_member_delta.json",
        "04_unmanaged_delta.json",
        "05_policy_resource_delta.json",
        "06_metadata_form_delta.json",
    ]);
    assert_lines(
        &lines,
        &[
            // members compare ignoring case; the conditional member of another role
            // is not touched
            expect(
                "01_member_delta.json",
                "drift",
                None,
                "pull_request",
                &["google_project_iam_member.viewer:primary"],
            ),
            expect(
                "02_binding_role_delta.json",
                "drift",
                None,
                "pull_request",
                &["google_project_iam_binding.editors:primary"],
            ),
            expect(
                "03_conditional_member_delta.json",
                "drift",
                None,
                "pull_request",
                &["google_project_iam_member.conditional:primary"],
            ),
            expect("04_unmanaged_delta.json", "unmanaged", None, "notify", &[]),
            expect(
                "05_policy_resource_delta.json",
                "drift",
                None,
                "pull_request",
                &["google_project_iam_policy.p2:primary"],
            ),
            expect(
                "06_metadata_form_delta.json",
                "drift",
                None,
                "pull_request",
                &["google_project_iam_member.viewer:primary"],
            ),
        ],
    );
}

/// Issue 11 class 3 for GCP: objects Terraform manages only through another
/// resource's arguments (a GKE cluster's default node pool's instance group, an
/// instance's boot disk) are drift of their owner, matched as `parent`.
#[test]
fn owned_sub_objects_are_drift_of_their_owner() {
    let lines = replay(&[
        "07_default_pool_mig_resized.json",
        "08_boot_disk_resized.json",
    ]);
    assert_lines(
        &lines,
        &[
            expect(
                "07_default_pool_mig_resized.json",
                "drift",
                None,
                "pull_request",
                &["google_container_cluster.gke:parent"],
            ),
            expect(
                "08_boot_disk_resized.json",
                "drift",
                None,
                "pull_request",
                &["google_compute_instance.vm:parent"],
            ),
        ],
    );
}
