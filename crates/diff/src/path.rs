//! Terraform attribute paths: `ingress[2].cidr_blocks`, `tags["env"]`.

use std::fmt::Write as _;

/// Attributes whose object values are maps (arbitrary keys), so their keys are written
/// `["key"]` even when they look like attribute names.
const MAP_ATTRIBUTES: &[&str] = &[
    "tags",
    "tags_all",
    "labels",
    "effective_labels",
    "terraform_labels",
    "metadata",
    "variables",
    "environment",
    "parameters",
    "annotations",
    "resource_labels",
];

/// Whether `key` is written as `.key` (an attribute name: `[a-z_][a-z0-9_]*`; with
/// `api_names`, also upper-case letters, for Cloud Asset resource fields) rather
/// than `["key"]`.
fn is_name(key: &str, api_names: bool) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| {
        c == '_' || c.is_ascii_lowercase() || (api_names && c.is_ascii_uppercase())
    }) && chars.all(|c| {
        c == '_'
            || c.is_ascii_lowercase()
            || c.is_ascii_digit()
            || (api_names && c.is_ascii_uppercase())
    })
}

/// The last attribute name of `path` (`ingress` for `ingress[2]`, `tags` for `tags`).
fn last_name(path: &str) -> &str {
    let end = path.rfind(['[', '.']).map_or(path, |i| {
        if path[i..].starts_with('.') {
            &path[i + 1..]
        } else {
            &path[..i]
        }
    });
    end.rsplit('.').next().unwrap_or(end)
}

/// `path` followed by the object key `key`: `.key` for an attribute name (no dot at
/// the root), `["key"]` (JSON string quoting) for a map key or a key that is not a
/// name. `api_names` allows camel-case names (Cloud Asset resource fields).
pub fn key(path: &str, key: &str, api_names: bool) -> String {
    let mut out = path.to_owned();
    let is_map = !path.is_empty() && MAP_ATTRIBUTES.contains(&last_name(path));
    if !is_map && is_name(key, api_names) {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    } else {
        out.push('[');
        out.push_str(&serde_json::Value::String(key.to_owned()).to_string());
        out.push(']');
    }
    out
}

/// `path` followed by the list index `i`: `path[i]`.
pub fn index(path: &str, i: usize) -> String {
    let mut out = path.to_owned();
    let _ = write!(out, "[{i}]");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_terraform_syntax() {
        assert_eq!(key("", "ingress", false), "ingress");
        assert_eq!(index("ingress", 2), "ingress[2]");
        assert_eq!(
            key(&index("ingress", 2), "cidr_blocks", false),
            "ingress[2].cidr_blocks"
        );
        assert_eq!(key("tags", "env", false), r#"tags["env"]"#);
        assert_eq!(key("tags", "Name", false), r#"tags["Name"]"#);
        assert_eq!(key("", "a-b", false), r#"["a-b"]"#);
        assert_eq!(key("", "natIP", true), "natIP");
        assert_eq!(
            key("metadata", "startup-script", false),
            r#"metadata["startup-script"]"#
        );
        assert_eq!(key("x", "q\"uote", false), r#"x["q\"uote"]"#);
    }
}
