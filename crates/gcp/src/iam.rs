//! IAM policy bindings as identifiers: one key per thing a `google_*_iam_*` resource
//! manages, shared by the normalizer (a `SetIamPolicy` entry's binding deltas) and
//! [`crate::GcpIdentity`] (the state's IAM resources).
//!
//! Terraform manages a resource's IAM policy three ways (google provider,
//! "IAM policy for …" pages): `*_iam_policy` is authoritative for the whole policy,
//! `*_iam_binding` for one role (with an optional condition), `*_iam_member`
//! non-authoritatively for one (role, member, condition). Each is indexed under its
//! key, on the canonical name of the resource whose policy it is (see
//! [`crate::resource_name`]):
//!
//! | resource | key |
//! |---|---|
//! | `*_iam_policy` | `{resource}#iam` |
//! | `*_iam_binding` | `{resource}#iam/{role}` (+ `?condition={title}\|{expression}`) |
//! | `*_iam_member` | `{resource}#iam/{role}/{member}` (+ the condition) |
//!
//! Members compare ignoring case (IAM e-mail addresses are case-insensitive); roles and
//! conditions as written. A binding delta (`policyDelta.bindingDeltas[]`: action, role,
//! member, condition) names all three keys of its (role, member, condition), so the
//! one member, the one binding or the policy that manages it is the primary match, and
//! a delta no state manages matches nothing.

/// An IAM condition: its title and CEL expression (the description does not make two
/// conditions different bindings in Terraform's view; title and expression do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Condition<'a> {
    pub title: &'a str,
    pub expression: &'a str,
}

fn condition_suffix(out: &mut String, condition: Option<Condition<'_>>) {
    if let Some(c) = condition.filter(|c| !c.title.is_empty() || !c.expression.is_empty()) {
        out.push_str("?condition=");
        out.push_str(c.title.trim());
        out.push('|');
        out.push_str(c.expression.trim());
    }
}

/// The key of an authoritative `*_iam_policy` of `resource`.
pub(crate) fn policy_key(resource: &str) -> String {
    format!("{resource}#iam")
}

/// The key of an authoritative `*_iam_binding` of `role` on `resource`.
pub(crate) fn binding_key(resource: &str, role: &str, condition: Option<Condition<'_>>) -> String {
    let mut out = format!("{resource}#iam/{}", role.trim());
    condition_suffix(&mut out, condition);
    out
}

/// The key of a non-authoritative `*_iam_member` (`role`, `member`) on `resource`.
pub(crate) fn member_key(
    resource: &str,
    role: &str,
    member: &str,
    condition: Option<Condition<'_>>,
) -> String {
    member_text(resource, role, &member.trim().to_lowercase(), condition)
}

/// [`member_key`] with the member as written, for display.
pub(crate) fn member_display(
    resource: &str,
    role: &str,
    member: &str,
    condition: Option<Condition<'_>>,
) -> String {
    member_text(resource, role, member.trim(), condition)
}

fn member_text(
    resource: &str,
    role: &str,
    member: &str,
    condition: Option<Condition<'_>>,
) -> String {
    let mut out = format!("{resource}#iam/{}/{member}", role.trim());
    condition_suffix(&mut out, condition);
    out
}
