//! Google Cloud resource names: one canonical form for every spelling.
//!
//! # Canonical form
//!
//! `gcp:{service}:{path}`, where
//!
//! * `{service}` is the API's short name: the first label of its
//!   `{service}.googleapis.com` host (`compute`, `storage`, `iam`, `container`,
//!   `pubsub`, `cloudkms`, `logging`, `bigquery`, `cloudresourcemanager`, `run`, …;
//!   `sqladmin` is folded into `cloudsql`, the audit `serviceName` of Cloud SQL);
//! * `{path}` is the relative resource name, case kept, without scheme, host, API
//!   version, empty segments or trailing `/`.
//!
//! Every spelling of one object maps to the same key:
//!
//! | spelling | example | canonical |
//! |---|---|---|
//! | audit `resourceName`, Terraform `id` | `projects/p/regions/r/subnetworks/s` (+ `serviceName`) | `gcp:compute:projects/p/regions/r/subnetworks/s` |
//! | `self_link` | `https://www.googleapis.com/compute/v1/projects/p/regions/r/subnetworks/s` | same |
//! | Cloud Asset `name` | `//compute.googleapis.com/projects/p/regions/r/subnetworks/s` | same |
//! | bucket (audit, asset, self link, Terraform) | `projects/_/buckets/b`, `//storage.googleapis.com/b`, `https://www.googleapis.com/storage/v1/b/b`, `b` | `gcp:storage:buckets/b` |
//! | object | `projects/_/buckets/b/objects/o` | `gcp:storage:buckets/b/objects/o` |
//! | service account | `projects/p/serviceAccounts/e`, `projects/-/serviceAccounts/e` | `gcp:iam:serviceAccounts/e` (e-mail or unique id; both are global) |
//! | GKE cluster | `projects/p/zones/z/clusters/c`, `projects/p/locations/z/clusters/c` | `gcp:container:projects/p/locations/z/clusters/c` |
//! | project | `projects/p` named by Resource Manager (project IAM) | `gcp:cloudresourcemanager:projects/p` |
//!
//! A bare `projects/p` named by another service (`compute.projects.setCommonInstanceMetadata`,
//! or the parent named by a create call) keeps that service (`gcp:compute:projects/p`):
//! it is that service's project-level setting, not the project IAM policy.
//!
//! # Project numbers
//!
//! Audit `resourceName`s sometimes carry the project *number* where Terraform has the
//! project *id*. When the log entry also names the project id (`resource.labels.project_id`),
//! the number is replaced by the id ([`canonical`]'s `project_id`). When no project id
//! is known the number stays and the key will not match state: a documented limit
//! (driftreactor keeps no number → id map, which would need an API call).

/// True for API version segments (`v1`, `v2beta1`, `v1p1beta1`, `beta`, `alpha`).
pub(crate) fn is_version(seg: &str) -> bool {
    if seg == "beta" || seg == "alpha" {
        return true;
    }
    let Some(rest) = seg.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let tail = &rest[digits..];
    tail.is_empty()
        || tail
            .trim_start_matches(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            .is_empty()
            && (tail.contains("beta") || tail.contains("alpha") || tail.starts_with('p'))
}

/// The `/`-separated segments of `path`, as `path.split('/')` gives them, found by a
/// plain byte loop: names have short segments, for which one `memchr` call per
/// segment costs more than the bytes it skips.
pub(crate) fn segments(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(path);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.bytes().position(|b| b == b'/') {
            // `/` is ASCII: both cuts fall on character boundaries.
            Some(i) => {
                rest = r.get(i + 1..);
                r.get(..i)
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// The number of `/`-separated segments of `path` (`path.split('/').count()`).
pub(crate) fn segment_count(path: &str) -> usize {
    path.bytes().filter(|b| *b == b'/').count() + 1
}

/// True for a project number (all digits), which cannot be a project id.
pub(crate) fn is_project_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A usable project id: non-empty, not a number, not a wildcard (`_`, `-`).
pub(crate) fn is_project_id(s: &str) -> bool {
    !s.is_empty() && !is_project_number(s) && s != "_" && s != "-" && !s.contains('/')
}

/// The short service name of `compute.googleapis.com` / `compute`.
pub(crate) fn short_service(service: &str) -> &str {
    let s = service.trim();
    let s = s.strip_suffix(".googleapis.com").unwrap_or(s);
    if s == "sqladmin" { "cloudsql" } else { s }
}

/// Canonical form (see the module docs) of `raw`, a full resource name
/// (`//svc.googleapis.com/…`), an API URL (`https://…`), or a relative name read with
/// `service` (`compute.googleapis.com` or `compute`). `project_id` replaces a project
/// number in the path when given. `None` when `raw` is empty or relative with no
/// service known.
pub fn canonical(service: Option<&str>, raw: &str, project_id: Option<&str>) -> Option<String> {
    let s = raw.trim();
    if s.is_empty() {
        return None;
    }
    // Most names are relative, of a service without path rewrites, already in shape
    // (no empty segment, no project number to replace): copied as they are.
    if let Some(service) = service
        && !s.starts_with("//")
        && !s.starts_with("https://")
        && !s.starts_with("http://")
    {
        let svc = short_service(service);
        if !svc.is_empty()
            && !matches!(svc, "storage" | "iam" | "container")
            && in_shape(s, project_id)
        {
            let mut out = String::with_capacity(5 + svc.len() + s.len());
            out.push_str("gcp:");
            out.push_str(svc);
            out.push(':');
            out.push_str(s);
            return Some(out);
        }
    }
    let mut is_url = false;
    let (svc, path): (&str, &str) = if let Some(rest) = s.strip_prefix("//") {
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        (short_service(host), path)
    } else if let Some(rest) = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
    {
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let path = path.split(['?', '#']).next().unwrap_or_default();
        is_url = true;
        if host == "www.googleapis.com" {
            // www.googleapis.com/{svc}/{version}/…
            let (svc, path) = path.split_once('/').unwrap_or((path, ""));
            (short_service(svc), path)
        } else if host.ends_with(".googleapis.com") {
            (short_service(host), path)
        } else {
            return None;
        }
    } else {
        (short_service(service?), s)
    };
    if svc.is_empty() {
        return None;
    }
    // Segments borrowed from `raw` (only the rewrites below are other strings).
    let mut segs: Vec<&str> = segments(path).filter(|p| !p.is_empty()).collect();
    // Drop leading API noise of URLs: versions, the service's own name, `sql`.
    while let Some(first) = segs.first().filter(|_| is_url) {
        if is_version(first) || *first == svc || *first == "sql" {
            segs.remove(0);
        } else {
            break;
        }
    }
    if let Some(pid) = project_id.filter(|p| is_project_id(p)) {
        for i in 0..segs.len().saturating_sub(1) {
            if segs[i] == "projects" && is_project_number(segs[i + 1]) {
                segs[i + 1] = pid;
            }
        }
    }
    let segs = service_path(svc, segs);
    if segs.is_empty() {
        return None;
    }
    let mut out =
        String::with_capacity(5 + svc.len() + segs.iter().map(|s| s.len() + 1).sum::<usize>());
    out.push_str("gcp:");
    out.push_str(svc);
    out.push(':');
    for (i, seg) in segs.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(seg);
    }
    Some(out)
}

/// True when the relative name `s` is its own canonical path: no empty segment, and
/// no `projects/{number}` that `project_id` (a usable id) would replace.
fn in_shape(s: &str, project_id: Option<&str>) -> bool {
    // One walk over the segments: an empty one is a leading, trailing or doubled `/`.
    let numbers = project_id.is_some_and(is_project_id);
    let mut prev = "";
    for seg in segments(s) {
        if seg.is_empty() || numbers && prev == "projects" && is_project_number(seg) {
            return false;
        }
        prev = seg;
    }
    true
}

/// Per-service path rewrites (see the table in the module docs).
fn service_path<'s>(svc: &str, mut segs: Vec<&'s str>) -> Vec<&'s str> {
    match svc {
        "storage" => {
            if segs.len() >= 3 && segs[0] == "projects" && segs[2] == "buckets" {
                segs.drain(..2);
            }
            if segs.first().is_some_and(|s| *s == "b") && segs.len() >= 2 {
                segs[0] = "buckets";
                if segs.get(2).is_some_and(|s| *s == "o") {
                    segs[2] = "objects";
                }
            } else if segs.len() == 1 && segs[0] != "buckets" {
                segs.insert(0, "buckets");
            }
            // object names may contain `/`: keep everything after `objects`
            segs
        }
        "iam" => {
            if segs.len() >= 4 && segs[0] == "projects" && segs[2] == "serviceAccounts" {
                segs.drain(..2);
            }
            segs
        }
        "container" => {
            if segs.len() >= 4
                && segs[0] == "projects"
                && (segs[2] == "zones" || segs[2] == "regions")
            {
                segs[2] = "locations";
            }
            segs
        }
        _ => segs,
    }
}

/// Splits `gcp:svc:path` into (`svc`, `path`).
pub(crate) fn split(canonical: &str) -> Option<(&str, &str)> {
    let rest = canonical.strip_prefix("gcp:")?;
    // A byte loop: the service is a short word.
    let i = rest.bytes().position(|b| b == b':')?;
    Some((rest.get(..i)?, rest.get(i + 1..)?))
}

/// The ancestors of a canonical name, nearest first: enclosing objects named by
/// `collection/name` pairs (the key ring of a crypto key, the cluster of a node pool,
/// the bucket of an object, the service account of a key, the dataset of a table).
/// Containers (projects, folders, organizations, Cloud Run v1 namespaces, locations,
/// regions, zones) are never ancestors.
pub fn ancestors(canonical: &str) -> Vec<String> {
    let Some((svc, path)) = split(canonical) else {
        return Vec::new();
    };
    // Most names have no ancestor: told from the first segments and the count.
    let Some((n, start)) = ancestor_start(svc, path) else {
        return Vec::new();
    };
    // Every ancestor is `gcp:{svc}:` and the first segments of the path, joined by
    // `/` as they are written: a prefix of `canonical`, cut before a `/`. Cut there,
    // no segment is copied twice.
    let base = canonical.len() - path.len();
    let cut = |slash: usize| canonical.get(..base + slash).map(str::to_owned);
    if svc == "storage" {
        // `gcp:storage:buckets/{bucket}`: cut before the second `/`.
        return path
            .match_indices('/')
            .nth(1)
            .and_then(|(i, _)| cut(i))
            .into_iter()
            .collect();
    }
    // The ancestor of the first `end` segments (`end` = n − 2, n − 4, … ≥ start + 2,
    // nearest first) ends before the `/` of index `end − 1`, the `k`-th `/` from the
    // end with `k` = n − end (n − 1 slashes in all): even `k` from 2 on.
    path.rmatch_indices('/')
        .enumerate()
        .map(|(i, (at, _))| (n - (i + 1), at))
        .take_while(|(end, _)| *end >= start + 2)
        .filter(|(end, _)| (n - end).is_multiple_of(2))
        .filter_map(|(_, at)| cut(at))
        .collect()
}

/// `None` when [`ancestors`] of `gcp:{svc}:{path}` is empty for sure; else the count
/// of segments of `path` and the index of the first segment after its containers.
fn ancestor_start(svc: &str, path: &str) -> Option<(usize, usize)> {
    let n = segment_count(path);
    let mut it = segments(path);
    let first = it.next().unwrap_or_default();
    if svc == "storage" {
        return (n > 2 && first == "buckets").then_some((n, 0));
    }
    let mut start = 0;
    if n >= 2
        && matches!(
            first,
            "projects" | "folders" | "organizations" | "namespaces"
        )
    {
        start = 2;
        match it.nth(1) {
            Some("global") => start = 3,
            Some("regions" | "zones" | "locations") if n >= 4 => start = 4,
            _ => {}
        }
    }
    let pairs = n - start;
    (pairs >= 4 && pairs.is_multiple_of(2)).then_some((n, start))
}

/// The project id of a canonical name (`projects/{id}/…`), when it is an id (not a
/// number or wildcard).
pub fn project_of(canonical: &str) -> Option<&str> {
    let (_, path) = split(canonical)?;
    let mut it = segments(path);
    while let Some(seg) = it.next() {
        if seg == "projects" {
            return it.next().filter(|p| is_project_id(p));
        }
    }
    None
}

/// The location (zone, region or `locations/x`) of a canonical name, except `global`.
pub fn location_of(canonical: &str) -> Option<&str> {
    let (_, path) = split(canonical)?;
    // The segment after the first `zones` / `regions` / `locations` that has one.
    let mut it = segments(path);
    while let Some(seg) = it.next() {
        if matches!(seg, "zones" | "regions" | "locations") {
            return it.next().filter(|l| *l != "global" && *l != "-");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(svc: Option<&str>, raw: &str) -> String {
        canonical(svc, raw, None).unwrap_or_else(|| format!("<none for {raw}>"))
    }

    #[test]
    fn every_spelling_of_a_subnetwork_is_one_key() {
        let want = "gcp:compute:projects/p/regions/r/subnetworks/s";
        assert_eq!(
            c(
                Some("compute.googleapis.com"),
                "projects/p/regions/r/subnetworks/s"
            ),
            want
        );
        assert_eq!(
            c(
                None,
                "https://www.googleapis.com/compute/v1/projects/p/regions/r/subnetworks/s"
            ),
            want
        );
        assert_eq!(
            c(
                None,
                "https://www.googleapis.com/compute/beta/projects/p/regions/r/subnetworks/s/"
            ),
            want
        );
        assert_eq!(
            c(
                None,
                "https://compute.googleapis.com/compute/v1/projects/p/regions/r/subnetworks/s"
            ),
            want
        );
        assert_eq!(
            c(
                None,
                "//compute.googleapis.com/projects/p/regions/r/subnetworks/s"
            ),
            want
        );
    }

    #[test]
    fn buckets_objects_and_service_accounts() {
        assert_eq!(
            c(Some("storage.googleapis.com"), "projects/_/buckets/b"),
            "gcp:storage:buckets/b"
        );
        assert_eq!(
            c(None, "//storage.googleapis.com/b"),
            "gcp:storage:buckets/b"
        );
        assert_eq!(
            c(None, "https://www.googleapis.com/storage/v1/b/b"),
            "gcp:storage:buckets/b"
        );
        assert_eq!(c(Some("storage"), "b"), "gcp:storage:buckets/b");
        assert_eq!(
            c(Some("storage"), "projects/_/buckets/b/objects/dir/o.txt"),
            "gcp:storage:buckets/b/objects/dir/o.txt"
        );
        assert_eq!(
            ancestors("gcp:storage:buckets/b/objects/dir/o.txt"),
            vec!["gcp:storage:buckets/b"]
        );
        assert_eq!(
            c(
                Some("iam"),
                "projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com"
            ),
            "gcp:iam:serviceAccounts/sa@p.iam.gserviceaccount.com"
        );
    }

    #[test]
    fn container_zones_become_locations() {
        assert_eq!(
            c(
                Some("container.googleapis.com"),
                "projects/p/zones/us-central1-a/clusters/c"
            ),
            "gcp:container:projects/p/locations/us-central1-a/clusters/c"
        );
        assert_eq!(
            c(
                None,
                "https://container.googleapis.com/v1/projects/p/locations/us-central1/clusters/c/nodePools/np"
            ),
            "gcp:container:projects/p/locations/us-central1/clusters/c/nodePools/np"
        );
        assert_eq!(
            ancestors("gcp:container:projects/p/locations/l/clusters/c/nodePools/np"),
            vec!["gcp:container:projects/p/locations/l/clusters/c"]
        );
    }

    #[test]
    fn project_numbers_are_replaced_when_the_id_is_known() {
        assert_eq!(
            canonical(
                Some("compute"),
                "projects/123456/zones/z/instances/i",
                Some("my-proj")
            )
            .as_deref(),
            Some("gcp:compute:projects/my-proj/zones/z/instances/i")
        );
        assert_eq!(
            canonical(
                Some("compute"),
                "projects/123456/zones/z/instances/i",
                Some("654321")
            )
            .as_deref(),
            Some("gcp:compute:projects/123456/zones/z/instances/i")
        );
    }

    #[test]
    fn segments_as_split_gives_them() {
        for path in [
            "",
            "/",
            "//",
            "a",
            "a/",
            "/a",
            "a/b",
            "a//b/",
            "é/ü/",
            "projects/p/zones/z",
        ] {
            assert_eq!(
                segments(path).collect::<Vec<_>>(),
                path.split('/').collect::<Vec<_>>(),
                "{path}"
            );
            assert_eq!(segment_count(path), path.split('/').count(), "{path}");
        }
        for name in [
            "gcp:a:b",
            "gcp:a:",
            "gcp::b",
            "gcp:a",
            "gcp:a:b:c",
            "x:a:b",
            "gcp:é:ü",
        ] {
            assert_eq!(
                split(name),
                name.strip_prefix("gcp:").and_then(|r| r.split_once(':')),
                "{name}"
            );
        }
    }

    #[test]
    fn ancestors_skip_containers() {
        assert!(ancestors("gcp:compute:projects/p/zones/z/instances/i").is_empty());
        assert!(ancestors("gcp:cloudresourcemanager:projects/p").is_empty());
        assert_eq!(
            ancestors("gcp:cloudkms:projects/p/locations/l/keyRings/r/cryptoKeys/k"),
            vec!["gcp:cloudkms:projects/p/locations/l/keyRings/r"]
        );
        assert_eq!(
            ancestors("gcp:bigquery:projects/p/datasets/d/tables/t"),
            vec!["gcp:bigquery:projects/p/datasets/d"]
        );
    }

    /// The segment-walking `ancestors` / `location_of` give what the Vec-of-segments
    /// versions they replaced gave.
    #[test]
    fn ancestors_and_locations_as_the_vec_versions() {
        fn ancestors_vec(canonical: &str) -> Vec<String> {
            let Some((svc, path)) = split(canonical) else {
                return Vec::new();
            };
            let segs: Vec<&str> = path.split('/').collect();
            let mut out = Vec::new();
            if svc == "storage" {
                if segs.len() > 2 && segs[0] == "buckets" {
                    out.push(format!("gcp:storage:buckets/{}", segs[1]));
                }
                return out;
            }
            let mut start = 0;
            if segs.len() >= 2
                && matches!(
                    segs[0],
                    "projects" | "folders" | "organizations" | "namespaces"
                )
            {
                start = 2;
                match segs.get(2) {
                    Some(&"global") => start = 3,
                    Some(&("regions" | "zones" | "locations")) if segs.len() >= 4 => start = 4,
                    _ => {}
                }
            }
            let pairs = &segs[start..];
            if pairs.len() < 4 || !pairs.len().is_multiple_of(2) {
                return out;
            }
            let mut end = segs.len() - 2;
            while end >= start + 2 {
                out.push(format!("gcp:{svc}:{}", segs[..end].join("/")));
                end -= 2;
            }
            out
        }
        fn location_vec(canonical: &str) -> Option<&str> {
            let (_, path) = split(canonical)?;
            let segs: Vec<&str> = path.split('/').collect();
            segs.windows(2)
                .find(|w| matches!(w[0], "zones" | "regions" | "locations"))
                .map(|w| w[1])
                .filter(|l| *l != "global" && *l != "-")
        }
        let heads = [
            "",
            "projects/p",
            "projects/p/global",
            "projects/p/zones/z",
            "projects/p/zones",
            "projects/p/regions/global",
            "projects/p/locations/-",
            "folders/f",
            "organizations/o",
            "namespaces/n",
            "buckets/b",
            "buckets",
            "zones/z",
            "x",
        ];
        let tails = [
            "",
            "/a",
            "/a/b",
            "/a/b/c",
            "/a/b/c/d",
            "/a/b/c/d/e",
            "/a/b/c/d/e/f",
            "/zones/y/a/b",
            "/regions",
            "/locations/l/k/r/c/k",
            "/",
            "//",
        ];
        for svc in ["compute", "storage", "cloudkms", "x"] {
            for h in heads {
                for t in tails {
                    let name = format!("gcp:{svc}:{h}{t}");
                    assert_eq!(ancestors(&name), ancestors_vec(&name), "{name}");
                    assert_eq!(location_of(&name), location_vec(&name), "{name}");
                }
            }
        }
        for bad in ["", "gcp:", "gcp:x", "aws:x:y", "gcp::"] {
            assert_eq!(ancestors(bad), ancestors_vec(bad));
            assert_eq!(location_of(bad), location_vec(bad));
        }
    }

    /// `canonical` gives what it gave before names in shape were copied as they are.
    #[test]
    fn canonical_as_the_segment_version() {
        fn canonical_vec(
            service: Option<&str>,
            raw: &str,
            project_id: Option<&str>,
        ) -> Option<String> {
            let s = raw.trim();
            if s.is_empty() {
                return None;
            }
            let mut is_url = false;
            let (svc, path): (&str, &str) = if let Some(rest) = s.strip_prefix("//") {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                (short_service(host), path)
            } else if let Some(rest) = s
                .strip_prefix("https://")
                .or_else(|| s.strip_prefix("http://"))
            {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                let path = path.split(['?', '#']).next().unwrap_or_default();
                is_url = true;
                if host == "www.googleapis.com" {
                    let (svc, path) = path.split_once('/').unwrap_or((path, ""));
                    (short_service(svc), path)
                } else if host.ends_with(".googleapis.com") {
                    (short_service(host), path)
                } else {
                    return None;
                }
            } else {
                (short_service(service?), s)
            };
            if svc.is_empty() {
                return None;
            }
            let mut segs: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            while let Some(first) = segs.first().filter(|_| is_url) {
                if is_version(first) || *first == svc || *first == "sql" {
                    segs.remove(0);
                } else {
                    break;
                }
            }
            if let Some(pid) = project_id.filter(|p| is_project_id(p)) {
                for i in 0..segs.len().saturating_sub(1) {
                    if segs[i] == "projects" && is_project_number(segs[i + 1]) {
                        segs[i + 1] = pid;
                    }
                }
            }
            let segs = service_path(svc, segs);
            if segs.is_empty() {
                return None;
            }
            Some(format!("gcp:{svc}:{}", segs.join("/")))
        }
        let services = [
            None,
            Some("compute.googleapis.com"),
            Some(" run "),
            Some("sqladmin"),
            Some("storage"),
            Some("iam.googleapis.com"),
            Some("container"),
            Some(""),
            Some(".googleapis.com"),
        ];
        let raws = [
            "projects/p/zones/z/instances/i",
            "projects/123/zones/z/instances/i",
            "projects/p/projects/123",
            "projects/123/projects/456",
            "projects/123",
            "123/projects",
            "/projects/p",
            "projects/p/",
            "projects//p",
            " projects/p ",
            "b",
            "projects/_/buckets/b/objects/o",
            "projects/-/serviceAccounts/e",
            "projects/p/zones/z/clusters/c",
            "//compute.googleapis.com/projects/p",
            "https://www.googleapis.com/compute/v1/projects/123/global/x/y",
            "http://x.googleapis.com/v1/a",
            "https://example.com/x",
            "x",
            "/",
            "",
            "é/ü",
        ];
        for svc in services {
            for raw in raws {
                for pid in [None, Some("p"), Some("123"), Some("projects"), Some("-")] {
                    assert_eq!(
                        canonical(svc, raw, pid),
                        canonical_vec(svc, raw, pid),
                        "{svc:?} {raw:?} {pid:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn versions() {
        for v in [
            "v1",
            "v2",
            "beta",
            "alpha",
            "v1beta1",
            "v1p1beta1",
            "v2alpha",
        ] {
            assert!(is_version(v), "{v}");
        }
        for v in ["compute", "vpc", "v", "projects", "vault1"] {
            assert!(!is_version(v), "{v}");
        }
    }

    #[test]
    fn locations_and_projects() {
        assert_eq!(
            location_of("gcp:compute:projects/p/zones/z1/instances/i"),
            Some("z1")
        );
        assert_eq!(
            location_of("gcp:compute:projects/p/global/firewalls/f"),
            None
        );
        assert_eq!(
            project_of("gcp:compute:projects/p/global/firewalls/f"),
            Some("p")
        );
        assert_eq!(
            project_of("gcp:compute:projects/123/global/firewalls/f"),
            None
        );
        assert_eq!(canonical(None, "projects/p", None), None);
        assert_eq!(canonical(None, "https://example.com/x", None), None);
    }
}
