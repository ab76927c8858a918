//! Replays the bundled AWS scenario through the library API and prints one line per
//! event: what the `driftreactor replay` command does, in a dozen lines.
//!
//! Run with `cargo run -p driftreactor-examples --example replay_eventbridge`.

use std::path::Path;
use std::sync::Arc;

use driftreactor_decide::{Policy, PolicyConfig};
use driftreactor_pipeline::{Pipeline, Replay, identities};
use driftreactor_tfgraph::GraphBuilder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/aws");
    let mut graph = GraphBuilder::new(identities());
    graph.add_state_file("aws-prod", &fixtures.join("state/prod.tfstate"))?;
    let policy: PolicyConfig = toml::from_str(
        r#"
        [principals]
        iac = ["arn:aws:iam::*:role/terraform-ci"]
        [[policy]]
        type = "aws_security_group*"
        action = "revert"
        "#,
    )?;
    let mut replay = Replay::new(Pipeline::new(
        Arc::new(graph.build()),
        Policy::compile(&policy)?,
    ));

    let mut files: Vec<_> = std::fs::read_dir(fixtures.join("events"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    for file in files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        for line in replay.process_input(&name, &std::fs::read(&file)?) {
            let addresses: Vec<String> = line.resources.iter().map(|r| r.address.clone()).collect();
            println!(
                "{:<48} {:<10} {:<13} {}",
                line.input,
                line.verdict.as_str(),
                line.action.as_str(),
                if addresses.is_empty() {
                    line.reason.unwrap_or_default()
                } else {
                    addresses.join(", ")
                }
            );
        }
    }
    Ok(())
}
