//! Normalizes one EventBridge envelope, routes it against a state and prints the
//! matches and the blast radius: the three pure steps, one call each.
//!
//! Run with `cargo run -p driftreactor-examples --example route_one_event`.

use std::path::Path;

use driftreactor_pipeline::identities;
use driftreactor_tfgraph::GraphBuilder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/aws");
    let mut builder = GraphBuilder::new(identities());
    builder.add_state_file("aws-prod", &fixtures.join("state/prod.tfstate"))?;
    let graph = builder.build();

    let payload = std::fs::read(fixtures.join("events/01_sg_open_ssh_console.json"))?;
    let event = driftreactor_aws::normalize(&payload)?;
    println!(
        "{} {} by {} via {:?}",
        event.service, event.operation, event.principal.id, event.via
    );
    for r in &event.resources {
        println!("  changed: {}", r.id);
    }
    let routed = driftreactor_router::route(&graph, &event);
    for m in &routed.matches {
        println!("  {:?} match: {} / {}", m.kind, m.workspace, m.address);
    }
    for d in &routed.dependents {
        println!("  depends on it: {} / {}", d.workspace, d.address);
    }
    Ok(())
}
