//! [`GcpIdentity`]: Terraform `google_*` instances → canonical GCP resource names.

use driftreactor_event::lenient::lenient_str;
use driftreactor_event::{Attributes, StateIdentity, StateInstance};
use serde::Deserialize;

use crate::iam;
use crate::resource_name::{self as rn, canonical};

/// Indexes Terraform resources of the `google` / `google-beta` providers under the
/// canonical names [`crate::normalize`] emits (see [`crate::resource_name`]).
///
/// * identities: `id`, `self_link` and a full-path `name` when they are resource names
///   or API URLs; plus names built from attributes, because older providers write short
///   ids (`p/region/name`, `name`): every `google_compute_*` type in the built-in table
///   (`projects/{project}/{global | regions/{region} | zones/{zone}}/{collection}/{name}`),
///   buckets (`buckets/{name}`), bucket objects, service accounts (e-mail and unique id),
///   projects (id and number), GKE clusters and node pools, Pub/Sub topics and
///   subscriptions, KMS key rings and crypto keys, logging project sinks, BigQuery
///   datasets and tables, Cloud SQL instances, custom roles, Cloud Run services and
///   enabled project services;
/// * parents: ancestors of those names (the key ring of a crypto key, the cluster of
///   a node pool, the dataset of a table) and the objects an IAM / attachment resource
///   hangs off: `google_project_iam_*` → the project (`gcp:cloudresourcemanager:projects/p`),
///   `google_storage_bucket_iam_*` / `_acl` / `_object` / `_notification` → the bucket,
///   `google_service_account_iam_*` / `_key` → the service account,
///   `google_compute_{instance,disk,subnetwork,image}_iam_*` → that resource,
///   `google_compute_router_nat` → its router, `google_compute_network_peering` → its
///   network, `google_compute_attached_disk` → instance and disk, KMS / Pub/Sub /
///   BigQuery `*_iam_*` → their key, key ring, topic, subscription, dataset;
/// * IAM: `*_iam_policy`, `*_iam_binding` and `*_iam_member` are also indexed under
///   the keys of the private `iam` module (policy, role, role and member), so a `SetIamPolicy`
///   binding delta names the one resource that manages it;
/// * owned sub-objects: see `OWNED` in this module;
/// * account: `project` (or the project id in the name), never a project number.
#[derive(Debug, Clone, Copy, Default)]
pub struct GcpIdentity;

/// The attributes identity extraction reads; every other key is skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Attrs {
    #[serde(deserialize_with = "lenient_str")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    self_link: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    name: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    project: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    project_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    number: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    region: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    zone: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    location: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    email: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    unique_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    bucket: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    cluster: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    key_ring: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    key_ring_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    crypto_key_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    topic: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    subscription: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    service_account_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    dataset_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    table_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    role_id: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    service: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    router: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    network: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    subnetwork: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    instance: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    instance_name: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    disk: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    image: Option<String>,
}

impl Attrs {
    fn read(instance: &StateInstance<'_>) -> Self {
        serde_json::from_str(instance.attributes.get()).unwrap_or_default()
    }

    /// The project id: `project`, else `project_id` (google_project), else the one
    /// in `id` / `self_link`.
    fn project(&self) -> Option<String> {
        [&self.project, &self.project_id]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .find(|p| rn::is_project_id(p))
            .map(str::to_owned)
            .or_else(|| {
                [&self.id, &self.self_link]
                    .into_iter()
                    .flatten()
                    .find_map(|raw| {
                        let (_, rest) = raw.split_once("projects/")?;
                        rest.split('/')
                            .next()
                            .filter(|p| rn::is_project_id(p))
                            .map(str::to_owned)
                    })
            })
    }
}

/// The API short name of a resource type (longest prefix wins).
fn service_for(ty: &str) -> Option<&'static str> {
    const TABLE: &[(&str, &str)] = &[
        ("google_compute_", "compute"),
        ("google_storage_", "storage"),
        ("google_service_account", "iam"),
        ("google_project_iam_custom_role", "iam"),
        ("google_organization_iam_custom_role", "iam"),
        ("google_iam_", "iam"),
        ("google_project_iam_", "cloudresourcemanager"),
        ("google_project_service", "serviceusage"),
        ("google_project", "cloudresourcemanager"),
        ("google_folder", "cloudresourcemanager"),
        ("google_organization", "cloudresourcemanager"),
        ("google_container_", "container"),
        ("google_kms_", "cloudkms"),
        ("google_pubsub_", "pubsub"),
        ("google_logging_", "logging"),
        ("google_bigquery_", "bigquery"),
        ("google_sql_", "cloudsql"),
        ("google_cloudfunctions", "cloudfunctions"),
        ("google_cloud_run_", "run"),
        ("google_secret_manager_", "secretmanager"),
        ("google_dns_", "dns"),
        ("google_artifact_registry_", "artifactregistry"),
        ("google_redis_", "redis"),
        ("google_spanner_", "spanner"),
        ("google_bigtable_", "bigtableadmin"),
        ("google_monitoring_", "monitoring"),
        ("google_cloud_scheduler_", "cloudscheduler"),
        ("google_cloud_tasks_", "cloudtasks"),
        ("google_dataproc_", "dataproc"),
        ("google_composer_", "composer"),
        ("google_filestore_", "file"),
        ("google_cloudbuild_", "cloudbuild"),
        ("google_eventarc_", "eventarc"),
        ("google_workflows_", "workflows"),
        ("google_vpc_access_", "vpcaccess"),
    ];
    TABLE
        .iter()
        .filter(|(prefix, _)| ty.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, svc)| *svc)
}

/// Where a compute collection lives.
#[derive(Clone, Copy)]
enum Scope {
    Global,
    Region,
    Zone,
}

/// `google_compute_{suffix}` → (scope, collection).
fn compute_collection(ty: &str) -> Option<(Scope, &'static str)> {
    use Scope::{Global, Region, Zone};
    let suffix = ty.strip_prefix("google_compute_")?;
    Some(match suffix {
        "firewall" => (Global, "firewalls"),
        "network" => (Global, "networks"),
        "route" => (Global, "routes"),
        "instance_template" => (Global, "instanceTemplates"),
        "global_address" => (Global, "addresses"),
        "image" => (Global, "images"),
        "snapshot" => (Global, "snapshots"),
        "backend_service" => (Global, "backendServices"),
        "backend_bucket" => (Global, "backendBuckets"),
        "health_check" => (Global, "healthChecks"),
        "http_health_check" => (Global, "httpHealthChecks"),
        "https_health_check" => (Global, "httpsHealthChecks"),
        "url_map" => (Global, "urlMaps"),
        "target_http_proxy" => (Global, "targetHttpProxies"),
        "target_https_proxy" => (Global, "targetHttpsProxies"),
        "target_ssl_proxy" => (Global, "targetSslProxies"),
        "target_tcp_proxy" => (Global, "targetTcpProxies"),
        "ssl_certificate" | "managed_ssl_certificate" => (Global, "sslCertificates"),
        "ssl_policy" => (Global, "sslPolicies"),
        "security_policy" => (Global, "securityPolicies"),
        "global_forwarding_rule" => (Global, "forwardingRules"),
        "external_vpn_gateway" => (Global, "externalVpnGateways"),
        "subnetwork" => (Region, "subnetworks"),
        "address" => (Region, "addresses"),
        "router" => (Region, "routers"),
        "forwarding_rule" => (Region, "forwardingRules"),
        "region_instance_group_manager" => (Region, "instanceGroupManagers"),
        "region_instance_template" => (Region, "instanceTemplates"),
        "target_pool" => (Region, "targetPools"),
        "region_backend_service" => (Region, "backendServices"),
        "region_health_check" => (Region, "healthChecks"),
        "region_disk" => (Region, "disks"),
        "region_autoscaler" => (Region, "autoscalers"),
        "region_url_map" => (Region, "urlMaps"),
        "vpn_gateway" => (Region, "targetVpnGateways"),
        "ha_vpn_gateway" => (Region, "vpnGateways"),
        "vpn_tunnel" => (Region, "vpnTunnels"),
        "resource_policy" => (Region, "resourcePolicies"),
        "interconnect_attachment" => (Region, "interconnectAttachments"),
        "instance" | "instance_from_template" => (Zone, "instances"),
        "disk" => (Zone, "disks"),
        "instance_group" => (Zone, "instanceGroups"),
        "instance_group_manager" => (Zone, "instanceGroupManagers"),
        "autoscaler" => (Zone, "autoscalers"),
        "reservation" => (Zone, "reservations"),
        "network_endpoint_group" => (Zone, "networkEndpointGroups"),
        _ => return None,
    })
}

/// The last path segment of a name that may be a full name, a URL or a plain name.
fn last_segment(s: &str) -> &str {
    s.trim_end_matches('/').rsplit('/').next().unwrap_or(s)
}

/// True when `s` is a resource name or URL (not a plain name or short id).
fn is_full_name(s: &str) -> bool {
    [
        "projects/",
        "organizations/",
        "folders/",
        "//",
        "https://",
        "http://",
    ]
    .iter()
    .any(|p| s.starts_with(p))
}

fn push(out: &mut Vec<String>, id: Option<String>) {
    if let Some(id) = id
        && !out.contains(&id)
    {
        out.push(id);
    }
}

/// A reference attribute (full name, URL, or plain name) as a canonical name of
/// `svc`; a plain name is completed with `build`.
fn reference(
    svc: &str,
    raw: Option<&str>,
    build: impl FnOnce(&str) -> Option<String>,
) -> Option<String> {
    let raw = raw?.trim();
    if raw.is_empty() {
        return None;
    }
    if is_full_name(raw) {
        canonical(Some(svc), raw, None)
    } else {
        build(raw).and_then(|path| canonical(Some(svc), &path, None))
    }
}

fn compute_path(
    project: &str,
    scope: Scope,
    location: Option<&str>,
    collection: &str,
    name: &str,
) -> Option<String> {
    let loc = match scope {
        Scope::Global => "global".to_owned(),
        Scope::Region => format!("regions/{}", last_segment(location?)),
        Scope::Zone => format!("zones/{}", last_segment(location?)),
    };
    Some(format!("projects/{project}/{loc}/{collection}/{name}"))
}

fn own_ids(ty: &str, a: &Attrs) -> Vec<String> {
    let mut out = Vec::new();
    let Some(svc) = service_for(ty) else {
        return out;
    };
    let project = a.project();
    let project = project.as_deref();
    for raw in [&a.id, &a.self_link, &a.name].into_iter().flatten() {
        if is_full_name(raw) {
            push(&mut out, canonical(Some(svc), raw, project));
        }
    }
    let name = a.name.as_deref().map(last_segment);
    if let Some((scope, collection)) = compute_collection(ty)
        && let (Some(p), Some(n)) = (project, name)
    {
        let loc = match scope {
            Scope::Zone => a.zone.as_deref(),
            _ => a.region.as_deref(),
        };
        push(
            &mut out,
            compute_path(p, scope, loc, collection, n)
                .and_then(|path| canonical(Some(svc), &path, None)),
        );
        return out;
    }
    let built: Vec<Option<String>> = match ty {
        "google_storage_bucket" => vec![name.map(|n| format!("buckets/{n}"))],
        "google_storage_bucket_object" => vec![
            a.bucket
                .as_deref()
                .zip(a.name.as_deref())
                .map(|(b, n)| format!("buckets/{}/objects/{n}", last_segment(b))),
        ],
        "google_service_account" => vec![
            a.email.as_deref().map(|e| format!("serviceAccounts/{e}")),
            a.unique_id
                .as_deref()
                .map(|u| format!("serviceAccounts/{u}")),
        ],
        "google_project" => vec![
            project.map(|p| format!("projects/{p}")),
            a.number.as_deref().map(|n| format!("projects/{n}")),
        ],
        "google_compute_project_metadata" | "google_compute_project_metadata_item" => {
            vec![project.map(|p| format!("projects/{p}"))]
        }
        "google_container_cluster" => vec![
            project
                .zip(
                    a.location
                        .as_deref()
                        .or(a.zone.as_deref())
                        .or(a.region.as_deref()),
                )
                .zip(name)
                .map(|((p, l), n)| format!("projects/{p}/locations/{l}/clusters/{n}")),
        ],
        "google_container_node_pool" => vec![node_pool_path(a, project, name)],
        "google_pubsub_topic" => vec![
            project
                .zip(name)
                .map(|(p, n)| format!("projects/{p}/topics/{n}")),
        ],
        "google_pubsub_subscription" => {
            vec![
                project
                    .zip(name)
                    .map(|(p, n)| format!("projects/{p}/subscriptions/{n}")),
            ]
        }
        "google_kms_key_ring" => vec![
            project
                .zip(a.location.as_deref())
                .zip(name)
                .map(|((p, l), n)| format!("projects/{p}/locations/{l}/keyRings/{n}")),
        ],
        "google_kms_crypto_key" => vec![
            a.key_ring
                .as_deref()
                .filter(|k| k.starts_with("projects/"))
                .zip(name)
                .map(|(k, n)| format!("{k}/cryptoKeys/{n}")),
        ],
        "google_logging_project_sink" => {
            vec![
                project
                    .zip(name)
                    .map(|(p, n)| format!("projects/{p}/sinks/{n}")),
            ]
        }
        "google_bigquery_dataset" => vec![
            project
                .zip(a.dataset_id.as_deref())
                .map(|(p, d)| format!("projects/{p}/datasets/{d}")),
        ],
        "google_bigquery_table" => vec![
            project
                .zip(a.dataset_id.as_deref())
                .zip(a.table_id.as_deref())
                .map(|((p, d), t)| format!("projects/{p}/datasets/{d}/tables/{t}")),
        ],
        "google_sql_database_instance" => {
            vec![
                project
                    .zip(name)
                    .map(|(p, n)| format!("projects/{p}/instances/{n}")),
            ]
        }
        "google_project_iam_custom_role" => vec![
            project
                .zip(a.role_id.as_deref())
                .map(|(p, r)| format!("projects/{p}/roles/{r}")),
        ],
        "google_project_service" => vec![
            project
                .zip(a.service.as_deref())
                .map(|(p, s)| format!("projects/{p}/services/{s}")),
        ],
        "google_cloud_run_service" | "google_cloud_run_v2_service" => vec![
            project
                .zip(name)
                .map(|(p, n)| format!("namespaces/{p}/services/{n}")),
            project
                .zip(a.location.as_deref())
                .zip(name)
                .map(|((p, l), n)| format!("projects/{p}/locations/{l}/services/{n}")),
        ],
        _ => Vec::new(),
    };
    for path in built.into_iter().flatten() {
        push(&mut out, canonical(Some(svc), &path, None));
    }
    out
}

fn node_pool_path(a: &Attrs, project: Option<&str>, name: Option<&str>) -> Option<String> {
    let cluster = a.cluster.as_deref()?;
    let name = name?;
    if cluster.starts_with("projects/") {
        return Some(format!("{cluster}/nodePools/{name}"));
    }
    let loc = a
        .location
        .as_deref()
        .or(a.zone.as_deref())
        .or(a.region.as_deref())?;
    Some(format!(
        "projects/{}/locations/{loc}/clusters/{}/nodePools/{name}",
        project?,
        last_segment(cluster)
    ))
}

fn parent_ids(ty: &str, a: &Attrs, own: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for id in own {
        for up in rn::ancestors(id) {
            push(&mut out, Some(up));
        }
    }
    let project = a.project();
    let project = project.as_deref();
    let compute = |scope: Scope, loc: Option<&str>, collection: &str, raw: Option<&str>| {
        reference("compute", raw, |n| {
            compute_path(project?, scope, loc, collection, n)
        })
    };
    let region = a.region.as_deref();
    let zone = a.zone.as_deref();
    let found: Vec<Option<String>> =
        if ty.starts_with("google_project_iam_") && ty != "google_project_iam_custom_role" {
            vec![project.and_then(|p| {
                canonical(Some("cloudresourcemanager"), &format!("projects/{p}"), None)
            })]
        } else if ty.starts_with("google_storage_bucket_iam_")
            || matches!(
                ty,
                "google_storage_bucket_acl"
                    | "google_storage_default_object_acl"
                    | "google_storage_bucket_object"
                    | "google_storage_notification"
                    | "google_storage_object_acl"
            )
        {
            let bucket = a
                .bucket
                .as_deref()
                .map(|b| b.strip_prefix("b/").unwrap_or(b));
            vec![reference("storage", bucket, |b| {
                Some(format!("buckets/{b}"))
            })]
        } else if ty.starts_with("google_service_account_iam_")
            || ty == "google_service_account_key"
        {
            vec![reference("iam", a.service_account_id.as_deref(), |s| {
                Some(format!("serviceAccounts/{s}"))
            })]
        } else if ty.starts_with("google_compute_instance_iam_") {
            vec![compute(
                Scope::Zone,
                zone,
                "instances",
                a.instance_name.as_deref(),
            )]
        } else if ty.starts_with("google_compute_disk_iam_") {
            vec![compute(Scope::Zone, zone, "disks", a.name.as_deref())]
        } else if ty.starts_with("google_compute_subnetwork_iam_") {
            vec![compute(
                Scope::Region,
                region,
                "subnetworks",
                a.subnetwork.as_deref(),
            )]
        } else if ty.starts_with("google_compute_image_iam_") {
            vec![compute(Scope::Global, None, "images", a.image.as_deref())]
        } else if ty == "google_compute_router_nat"
            || ty == "google_compute_router_interface"
            || ty == "google_compute_router_peer"
        {
            vec![compute(
                Scope::Region,
                region,
                "routers",
                a.router.as_deref(),
            )]
        } else if ty == "google_compute_network_peering" {
            vec![compute(
                Scope::Global,
                None,
                "networks",
                a.network.as_deref(),
            )]
        } else if ty == "google_compute_attached_disk" {
            vec![
                compute(Scope::Zone, zone, "instances", a.instance.as_deref()),
                compute(Scope::Zone, zone, "disks", a.disk.as_deref()),
            ]
        } else if ty == "google_container_node_pool" {
            let cluster = a.cluster.as_deref();
            let loc = a.location.as_deref().or(zone).or(region);
            vec![reference("container", cluster, |c| {
                Some(format!(
                    "projects/{}/locations/{}/clusters/{c}",
                    project?, loc?
                ))
            })]
        } else if ty.starts_with("google_kms_crypto_key_iam_") {
            vec![reference("cloudkms", a.crypto_key_id.as_deref(), |_| None)]
        } else if ty.starts_with("google_kms_key_ring_iam_") {
            vec![reference("cloudkms", a.key_ring_id.as_deref(), |_| None)]
        } else if ty == "google_kms_crypto_key" {
            vec![reference("cloudkms", a.key_ring.as_deref(), |_| None)]
        } else if ty.starts_with("google_pubsub_topic_iam_") {
            vec![reference("pubsub", a.topic.as_deref(), |t| {
                Some(format!("projects/{}/topics/{t}", project?))
            })]
        } else if ty.starts_with("google_pubsub_subscription_iam_") {
            vec![reference("pubsub", a.subscription.as_deref(), |s| {
                Some(format!("projects/{}/subscriptions/{s}", project?))
            })]
        } else if ty.starts_with("google_bigquery_dataset_iam_")
            || ty == "google_bigquery_dataset_access"
        {
            vec![reference("bigquery", a.dataset_id.as_deref(), |d| {
                Some(format!("projects/{}/datasets/{d}", project?))
            })]
        } else {
            Vec::new()
        };
    for id in found.into_iter().flatten() {
        if !own.contains(&id) {
            push(&mut out, Some(id));
        }
    }
    out
}

/// Which IAM key a `google_*_iam_*` type is indexed under (see [`crate::iam`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum IamKind {
    Policy,
    Binding,
    Member,
}

fn iam_kind(ty: &str) -> Option<IamKind> {
    if !ty.contains("_iam_") || ty.ends_with("_custom_role") {
        return None;
    }
    if ty.ends_with("_iam_policy") {
        Some(IamKind::Policy)
    } else if ty.ends_with("_iam_binding") {
        Some(IamKind::Binding)
    } else if ty.ends_with("_iam_member") {
        Some(IamKind::Member)
    } else {
        None
    }
}

/// The IAM attributes of a `google_*_iam_*` instance, read apart from [`Attrs`] so a
/// condition of an unexpected shape costs only these keys.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct IamAttrs {
    #[serde(deserialize_with = "lenient_str")]
    role: Option<String>,
    #[serde(deserialize_with = "lenient_str")]
    member: Option<String>,
    condition: serde_json::Value,
}

/// The IAM key(s) of an `*_iam_policy` / `*_iam_binding` / `*_iam_member` instance on
/// the resource whose policy it manages (the object [`parent_ids`] names).
fn iam_ids(instance: &StateInstance<'_>, a: &Attrs, out: &mut Vec<String>) {
    let ty = instance.resource_type;
    let Some(kind) = iam_kind(ty) else { return };
    let Some(resource) = parent_ids(ty, a, &[]).into_iter().next() else {
        return;
    };
    if kind == IamKind::Policy {
        push(out, Some(iam::policy_key(&resource)));
        return;
    }
    let i: IamAttrs = serde_json::from_str(instance.attributes.get()).unwrap_or_default();
    let Some(role) = i.role.as_deref().filter(|r| !r.trim().is_empty()) else {
        return;
    };
    // `condition` is a list of at most one block in state.
    let cond = i
        .condition
        .as_array()
        .and_then(|c| c.first())
        .map(|c| iam::Condition {
            title: c
                .get("title")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default(),
            expression: c
                .get("expression")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default(),
        });
    match kind {
        IamKind::Binding => push(out, Some(iam::binding_key(&resource, role, cond))),
        _ => {
            if let Some(member) = i.member.as_deref().filter(|m| !m.trim().is_empty()) {
                push(out, Some(iam::member_key(&resource, role, member, cond)));
            }
        }
    }
}

/// The sub-objects a `google_*` resource manages through its own arguments
/// ([`StateIdentity::owned`]): per resource type, the attribute paths (see
/// [`Attributes::strings`]) of the objects it creates and configures as part of itself,
/// so that a change of one is drift of the owner (`parent` match). The whole, explicit
/// list (from the google provider's attribute references):
///
/// * `google_container_cluster`: its node pools (`node_pool.name`, the default pool
///   included) and their managed instance groups (`node_pool.instance_group_urls`,
///   `node_pool.managed_instance_group_urls`);
/// * `google_container_node_pool`: its managed instance groups (`instance_group_urls`,
///   `managed_instance_group_urls`);
/// * `google_compute_instance`: the boot disk it creates (`boot_disk.source`);
/// * `google_compute_instance_group_manager`, `google_compute_region_instance_group_manager`:
///   the instance group it manages (`instance_group`).
pub(crate) const OWNED: &[(&str, &[&str])] = &[
    (
        "google_container_cluster",
        &[
            "node_pool.*.instance_group_urls.*",
            "node_pool.*.managed_instance_group_urls.*",
        ],
    ),
    (
        "google_container_node_pool",
        &["instance_group_urls.*", "managed_instance_group_urls.*"],
    ),
    ("google_compute_instance", &["boot_disk.*.source"]),
    ("google_compute_instance_group_manager", &["instance_group"]),
    (
        "google_compute_region_instance_group_manager",
        &["instance_group"],
    ),
];

impl StateIdentity for GcpIdentity {
    fn handles(&self, resource_type: &str) -> bool {
        resource_type.starts_with("google_")
    }

    fn identities(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a = Attrs::read(instance);
        for id in own_ids(instance.resource_type, &a) {
            if !out.contains(&id) {
                out.push(id);
            }
        }
        iam_ids(instance, &a, out);
    }

    fn owned(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let ty = instance.resource_type;
        let Some((_, paths)) = OWNED.iter().find(|(t, _)| *t == ty) else {
            return;
        };
        let attributes = Attributes::parse(instance.attributes);
        let mut raw = Vec::new();
        for path in *paths {
            attributes.strings(path, &mut raw);
        }
        for url in raw {
            push(out, canonical(Some("compute"), &url, None));
        }
        if ty == "google_container_cluster" {
            let a = Attrs::read(instance);
            let own = own_ids(ty, &a);
            if let Some(cluster) = own
                .iter()
                .find(|id| id.starts_with("gcp:container:") && id.contains("/clusters/"))
            {
                let mut pools = Vec::new();
                attributes.strings("node_pool.*.name", &mut pools);
                for pool in pools {
                    push(out, Some(format!("{cluster}/nodePools/{pool}")));
                }
            }
        }
    }

    fn parents(&self, instance: &StateInstance<'_>, out: &mut Vec<String>) {
        let a = Attrs::read(instance);
        let own = own_ids(instance.resource_type, &a);
        for id in parent_ids(instance.resource_type, &a, &own) {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }

    fn account(&self, instance: &StateInstance<'_>) -> Option<String> {
        Attrs::read(instance).project()
    }
}
