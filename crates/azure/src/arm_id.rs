//! Azure Resource Manager resource IDs: canonical form and ancestry.
//!
//! # Canonical form
//!
//! ARM resource IDs are case-insensitive and hierarchical. The canonical form that
//! [`canonical`] produces, and that both the normalizer and [`crate::AzureIdentity`]
//! index under, is:
//!
//! * the path only: a `https://management.azure.com` (or any other) scheme and host,
//!   a `?api-version=…` query and a `#fragment` are dropped;
//! * one leading `/`, no trailing `/`, empty segments (`//`) removed;
//! * every character lowercased (Unicode lowercase; ARM compares ordinal-ignore-case);
//! * the first segment is `subscriptions` (subscription, resource group and resource
//!   IDs) or `providers` (tenant-level IDs such as management groups); anything else
//!   is not an ARM ID and yields `None`.
//!
//! Example: `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/networkSecurityGroups/Web/`
//! → `/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/web`.
//!
//! # Ancestors
//!
//! [`ancestors`] lists the *resource* ancestors of an ID, nearest first: for a nested
//! child type (`…/networkSecurityGroups/x/securityRules/y`) the enclosing resource
//! (`…/networkSecurityGroups/x`), and for an extension resource
//! (`<scope>/providers/Microsoft.Authorization/roleAssignments/g`) the scope resource
//! and its own ancestors. Resource groups, subscriptions and management groups are
//! **never** ancestors: they are containers, and every unmanaged resource created in a
//! managed resource group would otherwise fall back to a "parent" match on the
//! `azurerm_resource_group`, hiding real unmanaged changes (coverage is measured by
//! counting those). A role assignment or lock scoped directly to a resource group
//! therefore has no parents.

use std::sync::LazyLock;

/// Canonical form of an ARM resource ID (see the module docs), or `None` when `raw`
/// is not an ARM resource ID.
pub fn canonical(raw: &str) -> Option<String> {
    let mut s = crate::trim(raw);
    if let Some(rest) = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
    {
        s = rest.find('/').map_or("", |i| &rest[i..]);
    }
    s = before_query(s);
    if s.starts_with('/') && !s.ends_with('/') && s.is_ascii() && !has_empty_segment(s) {
        // The common case, already in shape: its first segment checked, then copied
        // and lowercased in place.
        let rest = s.get(1..)?;
        let first = rest
            .get(..memchr::memchr(b'/', rest.as_bytes()).unwrap_or(rest.len()))
            .unwrap_or(rest);
        if !(first.eq_ignore_ascii_case("subscriptions") || first.eq_ignore_ascii_case("providers"))
        {
            return None;
        }
        let mut out = String::with_capacity(s.len());
        out.push_str(s);
        out.make_ascii_lowercase();
        return Some(out);
    }
    let mut out = String::with_capacity(s.len() + 1);
    {
        for seg in s.split('/').filter(|seg| !seg.is_empty()) {
            out.push('/');
            if seg.is_ascii() {
                let at = out.len();
                out.push_str(seg);
                if let Some(tail) = out.get_mut(at..) {
                    tail.make_ascii_lowercase();
                }
            } else {
                out.push_str(&seg.to_lowercase());
            }
        }
    }
    let first = out.get(1..)?.split('/').next()?;
    (first == "subscriptions" || first == "providers").then_some(out)
}

/// `s` up to its first `?` or `#` (the path of a URL), all of it when it has none.
pub(crate) fn before_query(s: &str) -> &str {
    // One two-byte search (memchr2) rather than one char-class scan.
    let end = memchr::memchr2(b'?', b'#', s.as_bytes()).unwrap_or(s.len());
    s.get(..end).unwrap_or(s)
}

/// The segments of a canonical ID (without the leading empty one).
fn segments(canonical: &str) -> Vec<&str> {
    canonical.split('/').filter(|s| !s.is_empty()).collect()
}

/// Calls `f` with the segments of `canonical` (see [`segments`]), held on the stack
/// for the IDs of up to 32 segments (no allocation).
fn with_segments<'a, R>(canonical: &'a str, f: impl FnOnce(&[&'a str]) -> R) -> R {
    let mut buf = [""; 32];
    let mut n = 0;
    // The non-empty parts between `/`s, found with one memchr scan (a `/` is an ASCII
    // byte: every cut is a char boundary).
    let mut start = 0;
    let slashes = memchr::memchr_iter(b'/', canonical.as_bytes());
    for end in slashes.chain([canonical.len()]) {
        if let Some(seg) = canonical.get(start..end).filter(|s| !s.is_empty()) {
            match buf.get_mut(n) {
                Some(slot) => *slot = seg,
                None => return f(&segments(canonical)),
            }
            n += 1;
        }
        start = end + 1;
    }
    f(buf.get(..n).unwrap_or_default())
}

/// True when `s` holds `//` (an empty segment).
fn has_empty_segment(s: &str) -> bool {
    let b = s.as_bytes();
    // Every pair of neighbours looked at, without an early exit (IDs are short, and
    // the loop then has no branch per byte).
    b.iter()
        .zip(b.iter().skip(1))
        .fold(false, |found, (&x, &y)| found | ((x == b'/') & (y == b'/')))
}

/// The byte offset of the first `/providers/` in `s`, if any (its searcher built
/// once).
fn find_providers(s: &str) -> Option<usize> {
    static FINDER: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(PROVIDERS));
    FINDER.find(s.as_bytes())
}

/// `/providers/`: the one segment a resource under a provider namespace has.
const PROVIDERS: &[u8] = b"/providers/";

/// True when [`ancestors`] of `id` is empty for sure, told without splitting it: `id`
/// starts with `/` and has no `providers` segment followed by another, or at most three
/// segments after the first such one (a namespace and one type/name pair: the
/// resource itself, or a container). `false` says nothing.
fn has_no_ancestors(id: &str) -> bool {
    if !id.starts_with('/') {
        return false;
    }
    // Every segment follows a `/`; the first `providers` segment with anything after it
    // is the first `/providers/`. After it, `n` slashes hold at most `n + 1` segments.
    match find_providers(id) {
        None => true,
        Some(at) => id
            .as_bytes()
            .get(at + PROVIDERS.len()..)
            .is_some_and(|rest| memchr::memchr_iter(b'/', rest).nth(2).is_none()),
    }
}

/// Resource ancestors of a *canonical* ID, nearest first (see the module docs).
pub fn ancestors(canonical: &str) -> Vec<String> {
    if has_no_ancestors(canonical) {
        return Vec::new();
    }
    ancestors_of_segments(canonical)
}

/// [`ancestors`], from the segments of `canonical`.
fn ancestors_of_segments(canonical: &str) -> Vec<String> {
    with_segments(canonical, |segs| {
        let mut out = Vec::new();
        // Each ancestor is a prefix of the segments that ends on the name of a
        // type/name pair of some `providers/{namespace}` section; they are found
        // farthest first and reversed at the end.
        let mut i = 0;
        while i < segs.len() {
            if segs[i] == "providers" && i + 1 < segs.len() {
                // pairs start after the namespace
                let mut j = i + 2;
                while j + 1 < segs.len() && segs[j] != "providers" {
                    let len = j + 2; // prefix length including this pair
                    if len < segs.len() && ancestors_end(&segs[..len]) != 0 {
                        let mut prefix = String::with_capacity(canonical.len());
                        for seg in &segs[..len] {
                            prefix.push('/');
                            prefix.push_str(seg);
                        }
                        out.push(prefix);
                    }
                    j += 2;
                }
                i = j;
            } else {
                i += 1;
            }
        }
        out.reverse();
        out
    })
}

/// The subscription id (lowercase) of a canonical ID, when it has one.
pub fn subscription(canonical: &str) -> Option<&str> {
    // The common spelling, `/subscriptions/{id}[/…]`, read without splitting.
    if let Some(rest) = canonical.strip_prefix("/subscriptions/")
        && !rest.starts_with('/')
    {
        let end = memchr::memchr(b'/', rest.as_bytes()).unwrap_or(rest.len());
        return rest.get(..end).filter(|s| !s.is_empty());
    }
    let mut it = canonical.split('/').filter(|s| !s.is_empty());
    (it.next()? == "subscriptions")
        .then(|| it.next())
        .flatten()
        .filter(|s| !s.is_empty())
}

/// True when the canonical ID is a subscription, resource group or tenant-level
/// container rather than a resource (it has no `providers/{ns}/{type}/{name}` part).
pub fn is_container(canonical: &str) -> bool {
    with_segments(canonical, ancestors_end) == 0
}

/// Length of the longest resource prefix of the segments (0 when there is none).
fn ancestors_end(segs: &[&str]) -> usize {
    let mut best = 0;
    let mut i = 0;
    while i < segs.len() {
        if segs[i] == "providers" && i + 3 < segs.len() {
            best = i + 4;
            i += 2;
        } else {
            i += 1;
        }
    }
    // management groups are containers even though they live under `providers`
    if segs.first() == Some(&"providers")
        && segs.get(1) == Some(&"microsoft.management")
        && segs.len() <= 4
    {
        return 0;
    }
    best
}

/// The namespace of the last `providers/{namespace}` section (`microsoft.network`),
/// lowercase, when the ID has one.
pub fn last_namespace(canonical: &str) -> Option<&str> {
    with_segments(canonical, |segs| {
        segs.iter()
            .rposition(|s| *s == "providers")
            .and_then(|i| segs.get(i + 1).copied())
    })
}

/// True when the ID names an ARM deployment (`Microsoft.Resources/deployments/…`) or
/// anything below one: a deployment record, not infrastructure.
pub fn is_deployment(canonical: &str) -> bool {
    // The one segment that must be there, looked for first (most IDs have none).
    static FINDER: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"microsoft.resources"));
    if FINDER.find(canonical.as_bytes()).is_none() {
        return false;
    }
    with_segments(canonical, |segs| {
        segs.windows(3)
            .any(|w| w[0] == "providers" && w[1] == "microsoft.resources" && w[2] == "deployments")
    })
}

/// Builds `/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}/{name}`
/// in canonical form.
pub fn build(sub: &str, rg: &str, ns: &str, ty: &str, name: &str) -> Option<String> {
    if [sub, rg, ns, ty, name]
        .iter()
        .any(|p| p.is_empty() || p.contains('/'))
    {
        return None;
    }
    canonical(&format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{ty}/{name}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_lowercases_and_trims() {
        assert_eq!(
            canonical("/subscriptions/ABC/resourceGroups/RG//providers/Microsoft.Network/networkSecurityGroups/Web/").as_deref(),
            Some("/subscriptions/abc/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/web")
        );
        assert_eq!(
            canonical("https://management.azure.com/subscriptions/S/resourceGroups/RG?api-version=2018-02-01").as_deref(),
            Some("/subscriptions/s/resourcegroups/rg")
        );
        assert_eq!(
            canonical("subscriptions/S").as_deref(),
            Some("/subscriptions/s")
        );
        assert_eq!(canonical("argocd"), None);
        assert_eq!(canonical(""), None);
        assert_eq!(canonical("https://myvault.vault.azure.net/secrets/x"), None);
    }

    #[test]
    fn ancestors_of_child_resource_stop_before_resource_group() {
        let id = canonical("/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/networkSecurityGroups/x/securityRules/y").unwrap();
        assert_eq!(
            ancestors(&id),
            vec![
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/x"
            ]
        );
        let top = canonical("/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/networkSecurityGroups/x").unwrap();
        assert!(ancestors(&top).is_empty());
        assert!(ancestors("/subscriptions/s/resourcegroups/rg").is_empty());
    }

    #[test]
    fn ancestors_of_extension_resource_include_scope_chain() {
        let id = canonical("/subscriptions/S/resourceGroups/RG/providers/Microsoft.Sql/servers/srv/databases/db/providers/Microsoft.Authorization/roleAssignments/g").unwrap();
        assert_eq!(
            ancestors(&id),
            vec![
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.sql/servers/srv/databases/db",
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.sql/servers/srv",
            ]
        );
        let rg_scoped = canonical("/subscriptions/S/resourceGroups/RG/providers/Microsoft.Authorization/roleAssignments/g").unwrap();
        assert!(ancestors(&rg_scoped).is_empty());
    }

    /// The shortcuts ([`has_no_ancestors`], the `/subscriptions/` prefix) give what the
    /// segment walks give.
    #[test]
    fn the_shortcuts_agree_with_the_segment_walks() {
        let ids = [
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/x/securityrules/y",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups/x",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networksecuritygroups",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.sql/servers/srv/databases/db/providers/microsoft.authorization/roleassignments/g",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.authorization/roleassignments/g",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.web/sites/a/providers/microsoft.authorization/locks/l",
            "/subscriptions/s/resourcegroups/rg/providers/providers/providers/providers/x",
            "/subscriptions/s/resourcegroups/rg/providers/ns/providers/t/n/m",
            "/subscriptions/s/providers/ns/t/n/providers",
            "/subscriptions/s/providers/ns/t//n/c/d",
            "/subscriptions/s/providers//ns/t/n",
            "/subscriptions/s/providers/ns/t/n/",
            "/providers/microsoft.management/managementgroups/mg",
            "/providers/microsoft.management/managementgroups/mg/providers/microsoft.authorization/policydefinitions/p",
            "/providers/ns/t/n/c/d",
            "providers/ns/t/n/c/d",
            "subscriptions/s/providers/ns/t/n/c/d",
            "//subscriptions/s/providers/ns/t/n/c/d",
            "/subscriptions/s",
            "/subscriptions/",
            "/subscriptions//x",
            "/subscriptions",
            "/subscriptionsx/y",
            "/x/subscriptions/y",
            "/subscriptions/s/providers",
            "/",
            "",
        ];
        for id in ids {
            assert_eq!(ancestors(id), ancestors_of_segments(id), "{id}");
            let mut it = id.split('/').filter(|s| !s.is_empty());
            let walked = (it.next() == Some("subscriptions"))
                .then(|| it.next())
                .flatten();
            assert_eq!(subscription(id), walked, "{id}");
            assert_eq!(
                is_deployment(id),
                segments(id)
                    .windows(3)
                    .any(|w| w == ["providers", "microsoft.resources", "deployments"]),
                "{id}"
            );
        }
    }

    #[test]
    fn containers_and_deployments() {
        assert!(is_container("/subscriptions/s"));
        assert!(is_container("/subscriptions/s/resourcegroups/rg"));
        assert!(is_container(
            "/providers/microsoft.management/managementgroups/mg"
        ));
        assert!(!is_container(
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.web/sites/a"
        ));
        assert!(is_deployment(
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.resources/deployments/d"
        ));
        assert!(!is_deployment("/subscriptions/s/resourcegroups/rg"));
        assert_eq!(
            subscription("/subscriptions/s/resourcegroups/rg"),
            Some("s")
        );
        assert_eq!(
            subscription("/providers/microsoft.management/managementgroups/mg"),
            None
        );
        assert_eq!(
            last_namespace(
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.web/sites/a/providers/microsoft.authorization/locks/l"
            ),
            Some("microsoft.authorization")
        );
    }
}
