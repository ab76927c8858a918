//! `GcpIdentity` over the corpus google states and hand-written instances.

use driftreactor_event::StateIdentity;
use driftreactor_gcp::GcpIdentity;
use driftreactor_testkit::corpus;
use driftreactor_testkit::identity::{self, Indexed, State, raw};
use serde_json::value::RawValue;

fn index(ty: &str, provider: &str, attributes: &RawValue) -> Indexed {
    identity::index(&GcpIdentity, ty, provider, attributes)
}

fn by_address(state: &State, ty: &str, name: &str) -> Indexed {
    state.index(&GcpIdentity, ty, name)
}

fn load(rel: &str) -> State {
    State::load(&corpus::file(rel))
}

#[test]
fn single_compute_instance() {
    let state = load("tfstate/google_single_compute_instance_small.tfstate.json");
    let vm = by_address(&state, "google_compute_instance", "default");
    assert_eq!(
        vm.identities,
        ["gcp:compute:projects/custom-valve-332208/zones/us-west4-b/instances/test"]
    );
    assert!(vm.parents.is_empty());
    assert_eq!(vm.account.as_deref(), Some("custom-valve-332208"));
}

#[test]
fn module_bucket() {
    let state = load("tfstate/google_small_module_random.tfstate.json");
    let b = by_address(&state, "google_storage_bucket", "test_bucket");
    assert_eq!(b.identities, ["gcp:storage:buckets/test_bucket_4567-cmfd"]);
    assert_eq!(b.account.as_deref(), Some("temporal-field-419719"));
}

#[test]
fn legacy_gke_state() {
    let state = load("tfstate/google_gke_tf012_legacy_provider_format.tfstate.json");
    let net = by_address(&state, "google_compute_network", "network");
    assert_eq!(
        net.identities,
        ["gcp:compute:projects/fluted-legacy-306402/global/networks/gke-demo"]
    );
    let sub = by_address(&state, "google_compute_subnetwork", "subnetwork");
    assert_eq!(
        sub.identities,
        ["gcp:compute:projects/fluted-legacy-306402/regions/us-west2/subnetworks/gke-demo-subnet"]
    );
    let sa = by_address(&state, "google_service_account", "cluster_service_account");
    assert_eq!(
        sa.identities[0],
        "gcp:iam:serviceAccounts/tf-gke-fluted-legacy-3-rgtg@fluted-legacy-306402.iam.gserviceaccount.com"
    );
    assert_eq!(
        sa.identities.len(),
        2,
        "email and unique id: {:?}",
        sa.identities
    );
    let member = by_address(
        &state,
        "google_project_iam_member",
        "cluster_service_account-gcr",
    );
    // No resource identity of its own; the IAM key of its (role, member) binding on
    // the project (issue 11: a binding delta names the one member).
    assert_eq!(
        member.identities,
        [
            "gcp:cloudresourcemanager:projects/fluted-legacy-306402#iam/roles/storage.objectViewer/serviceaccount:tf-gke-fluted-legacy-3-rgtg@fluted-legacy-306402.iam.gserviceaccount.com"
        ]
    );
    assert_eq!(
        member.parents,
        ["gcp:cloudresourcemanager:projects/fluted-legacy-306402"]
    );
    assert_eq!(member.account.as_deref(), Some("fluted-legacy-306402"));
    assert!(!GcpIdentity.handles("random_id"));
}

#[test]
fn short_ids_of_older_providers_are_rebuilt_from_attributes() {
    let fw = raw(r#"{"id": "allow-ssh", "name": "allow-ssh", "project": "p"}"#);
    assert_eq!(
        index("google_compute_firewall", "provider.google", &fw).identities,
        ["gcp:compute:projects/p/global/firewalls/allow-ssh"]
    );
    let sub =
        raw(r#"{"id": "p/us-east1/app", "name": "app", "project": "p", "region": "us-east1"}"#);
    assert_eq!(
        index("google_compute_subnetwork", "provider.google", &sub).identities,
        ["gcp:compute:projects/p/regions/us-east1/subnetworks/app"]
    );
    let gke = raw(
        r#"{"id": "projects/p/locations/us-east1/clusters/c", "name": "c", "project": "p", "location": "us-east1",
        "self_link": "https://container.googleapis.com/v1/projects/p/zones/us-east1/clusters/c"}"#,
    );
    assert_eq!(
        index("google_container_cluster", "p", &gke).identities,
        ["gcp:container:projects/p/locations/us-east1/clusters/c"]
    );
    let np = raw(
        r#"{"id": "us-east1/c/pool", "name": "pool", "cluster": "c", "project": "p", "location": "us-east1"}"#,
    );
    let i = index("google_container_node_pool", "p", &np);
    assert_eq!(
        i.identities,
        ["gcp:container:projects/p/locations/us-east1/clusters/c/nodePools/pool"]
    );
    assert_eq!(
        i.parents,
        ["gcp:container:projects/p/locations/us-east1/clusters/c"]
    );
}

#[test]
fn iam_and_attachment_parents() {
    let bm = raw(
        r#"{"id": "b/assets/roles/storage.objectViewer/allUsers", "bucket": "b/assets", "role": "roles/storage.objectViewer"}"#,
    );
    let i = index("google_storage_bucket_iam_member", "p", &bm);
    assert!(i.identities.is_empty());
    assert_eq!(i.parents, ["gcp:storage:buckets/assets"]);

    let sam =
        raw(r#"{"service_account_id": "projects/p/serviceAccounts/ci@p.iam.gserviceaccount.com"}"#);
    assert_eq!(
        index("google_service_account_iam_member", "p", &sam).parents,
        ["gcp:iam:serviceAccounts/ci@p.iam.gserviceaccount.com"]
    );
    let vm_iam = raw(r#"{"instance_name": "vm", "zone": "us-east1-b", "project": "p"}"#);
    assert_eq!(
        index("google_compute_instance_iam_member", "p", &vm_iam).parents,
        ["gcp:compute:projects/p/zones/us-east1-b/instances/vm"]
    );
    let key = raw(
        r#"{"id": "projects/p/locations/global/keyRings/r/cryptoKeys/k", "name": "k",
        "key_ring": "projects/p/locations/global/keyRings/r"}"#,
    );
    let i = index("google_kms_crypto_key", "p", &key);
    assert_eq!(
        i.identities,
        ["gcp:cloudkms:projects/p/locations/global/keyRings/r/cryptoKeys/k"]
    );
    assert_eq!(
        i.parents,
        ["gcp:cloudkms:projects/p/locations/global/keyRings/r"]
    );
    let nat = raw(
        r#"{"id": "p/us-east1/router/nat", "router": "router", "region": "us-east1", "project": "p"}"#,
    );
    assert_eq!(
        index("google_compute_router_nat", "p", &nat).parents,
        ["gcp:compute:projects/p/regions/us-east1/routers/router"]
    );
}

#[test]
fn odd_attributes_yield_fewer_identities_not_panics() {
    for json in [
        r#"{}"#,
        r#"{"id": 5, "project": []}"#,
        r#"[1]"#,
        r#"null"#,
        r#"{"name": {"a": 1}}"#,
    ] {
        let i = index("google_compute_instance", "p", &raw(json));
        assert!(i.identities.is_empty(), "{json}");
        assert!(i.account.is_none(), "{json}");
    }
    // a project number is never an account
    let n = raw(r#"{"project": "123456789012", "name": "x", "zone": "z"}"#);
    assert!(index("google_compute_instance", "p", &n).account.is_none());
}
