//! The operation tables of `docs/operations/gcp.md`, rendered from the code's own
//! tables (a test keeps the document current).

use super::log_entry::{DELTA_PATHS, VERBS, Verb};

/// The generated part of `docs/operations/gcp.md`: the method-verb table, where IAM
/// binding deltas are read and how they are attributed, and the owned sub-objects.
pub(crate) fn markdown() -> String {
    let mut out = String::new();
    out.push_str("### Method verbs\n\n");
    out.push_str(
        "The last segment of the audit `methodName`, lowercased, is matched against these \
         prefixes (first row that matches wins); any other verb is an `update`.\n\n",
    );
    out.push_str("| verb prefixes | change |\n|---|---|\n");
    for (prefixes, verb) in VERBS {
        let name = match verb {
            Verb::Read => "none (read only)",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
            Verb::Action => "action",
        };
        let list: Vec<String> = prefixes.iter().map(|p| format!("`{p}`")).collect();
        out.push_str(&format!("| {} | {name} |\n", list.join(", ")));
    }
    out.push_str("\n### IAM policy changes\n\n");
    out.push_str(
        "An entry that logs binding deltas names, per delta, the keys of `crate::iam` \
         instead of the resource: the `*_iam_member` of its (role, member, condition), \
         the `*_iam_binding` of its role (and condition) and the `*_iam_policy` of the \
         resource; a delta none of them manages is `unmanaged`. Deltas are read from:\n\n",
    );
    for path in DELTA_PATHS {
        out.push_str(&format!("- `protoPayload.{}[]`\n", path.join(".")));
    }
    out.push_str("\n### Owned sub-objects (`parent` matches)\n\n");
    out.push_str("| resource type | attributes |\n|---|---|\n");
    for (ty, paths) in crate::identity::OWNED {
        let list: Vec<String> = paths.iter().map(|p| format!("`{p}`")).collect();
        out.push_str(&format!("| `{ty}` | {} |\n", list.join(", ")));
    }
    out.push_str("| `google_container_cluster` | `node_pool.*.name` (as `…/clusters/{name}/nodePools/{pool}`) |\n");
    out
}

#[cfg(test)]
mod tests {
    /// The generated tables of `docs/operations/gcp.md` are those of the code
    /// (`DRIFTREACTOR_BLESS=1` rewrites them).
    #[test]
    fn operations_doc_matches_the_code_tables() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations/gcp.md");
        driftreactor_testkit::docs::check_generated(&path, &super::markdown());
    }
}
