//! Terraform addresses: instance keys printed the way Terraform prints them
//! ([`push_index_key`], [`push_quoted`]), module paths split into their steps
//! ([`split_modules`]), and the configuration address a `dependencies` entry names
//! ([`dependency_config_key`]).

use std::fmt::Write as _;

use super::raw::IndexKey;

/// Appends `s` as an HCL/Terraform quoted string literal, the way Terraform prints
/// string instance keys in addresses: `\` `"` and `\n` `\r` `\t` escaped, `${` and
/// `%{` doubled to `$${` / `%%{`, other non-printable characters as `\uXXXX`.
pub(crate) fn push_quoted(out: &mut String, s: &str) {
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' => {
                out.push(c);
                if chars.peek() == Some(&'{') {
                    out.push(c);
                }
            }
            c if c.is_control() => {
                let n = u32::from(c);
                if n < 0x1_0000 {
                    let _ = write!(out, "\\u{n:04x}");
                } else {
                    let _ = write!(out, "\\U{n:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends the `[key]` suffix of an instance address.
pub(crate) fn push_index_key(out: &mut String, key: &IndexKey<'_>) {
    match key {
        IndexKey::Int(i) => {
            let _ = write!(out, "[{i}]");
        }
        IndexKey::Str(s) => {
            out.push('[');
            push_quoted(out, s);
            out.push(']');
        }
    }
}

/// One `module.NAME[KEY]` step of a module instance path; `key` is the raw text
/// between the brackets (`"management"` with its quotes, or `0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleStep {
    pub(super) name: String,
    pub(super) key: Option<String>,
}

/// Splits the leading `module.a["x"].module.b` part of `path` into steps and
/// returns them with the rest of the string (after the dot that follows the last
/// module step). Tolerant: text that does not follow the grammar ends the module part.
pub(crate) fn split_modules(path: &str) -> (Vec<ModuleStep>, &str) {
    let mut steps = Vec::new();
    let mut rest = path;
    while let Some(after) = rest.strip_prefix("module.") {
        let name_end = after.find(['.', '[']).unwrap_or(after.len());
        let name = &after[..name_end];
        let mut tail = &after[name_end..];
        let mut key = None;
        if tail.starts_with('[') {
            match bracket_end(tail) {
                Some(end) => {
                    key = Some(tail[1..end].to_owned());
                    tail = &tail[end + 1..];
                }
                None => break,
            }
        }
        steps.push(ModuleStep {
            name: name.to_owned(),
            key,
        });
        match tail.strip_prefix('.') {
            Some(t) => rest = t,
            None => {
                rest = tail;
                break;
            }
        }
    }
    (steps, rest)
}

/// Index of the `]` closing the `[` at the start of `s`, skipping quoted strings.
fn bracket_end(s: &str) -> Option<usize> {
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if in_quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quote = false;
            }
        } else if c == '"' {
            in_quote = true;
        } else if c == ']' {
            return Some(i);
        }
    }
    None
}

/// The configuration address (`module.a.module.b.aws_vpc.this`, no instance keys)
/// a `dependencies` entry names, or `None` for data sources and unreadable entries.
pub(crate) fn dependency_config_key(dep: &str) -> Option<String> {
    let (steps, rest) = split_modules(dep);
    if rest.starts_with("data.") || rest.is_empty() {
        return None;
    }
    let rest = rest.split('[').next().unwrap_or(rest);
    let mut key = String::with_capacity(dep.len());
    for s in &steps {
        key.push_str("module.");
        key.push_str(&s.name);
        key.push('.');
    }
    key.push_str(rest);
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn key(s: &str) -> String {
        let mut out = String::new();
        push_index_key(&mut out, &IndexKey::Str(Cow::Borrowed(s)));
        out
    }

    #[test]
    fn string_keys_use_terraform_quoting() {
        assert_eq!(key("blue"), r#"["blue"]"#);
        assert_eq!(key(r#"a"b\c"#), r#"["a\"b\\c"]"#);
        assert_eq!(
            key("us-west2/gke-demo-subnet"),
            r#"["us-west2/gke-demo-subnet"]"#
        );
        assert_eq!(key("${x} %{y} $z"), r#"["$${x} %%{y} $z"]"#);
        assert_eq!(key("a\nb\u{1}"), r#"["a\nb\u0001"]"#);
        let mut out = String::new();
        push_index_key(&mut out, &IndexKey::Int(3));
        assert_eq!(out, "[3]");
    }

    #[test]
    fn module_paths_split_with_keys() {
        let (steps, rest) =
            split_modules(r#"module.eks.module.node_group["a.b[c]\"d"].module.user_data.aws_x.y"#);
        let names: Vec<_> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["eks", "node_group", "user_data"]);
        assert_eq!(steps[1].key.as_deref(), Some(r#""a.b[c]\"d""#));
        assert_eq!(rest, "aws_x.y");
    }

    #[test]
    fn dependency_keys_drop_instance_keys_and_data_sources() {
        assert_eq!(
            dependency_config_key("module.eks.module.eks_managed_node_group.aws_iam_role.this")
                .as_deref(),
            Some("module.eks.module.eks_managed_node_group.aws_iam_role.this")
        );
        assert_eq!(
            dependency_config_key(r#"module.a["x"].aws_s3_bucket.b[0]"#).as_deref(),
            Some("module.a.aws_s3_bucket.b")
        );
        assert_eq!(
            dependency_config_key("data.aws_availability_zones.available"),
            None
        );
        assert_eq!(
            dependency_config_key("module.ec2.data.aws_ssm_parameter.ecs_ami"),
            None
        );
        assert_eq!(
            dependency_config_key("aws_vpc.main").as_deref(),
            Some("aws_vpc.main")
        );
    }
}
