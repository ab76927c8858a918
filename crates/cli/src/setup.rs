//! `driftreactor setup aws`: create (idempotently) the EventBridge rule, SQS queue,
//! DLQ and policies the `aws_sqs` source reads; `--dry-run` prints them as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use driftreactor_aws::setup::{self, Change, SetupOptions};

/// `driftreactor setup <cloud>`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cloud: Cloud,
}

#[derive(Debug, Subcommand)]
enum Cloud {
    /// Create the EventBridge rule → SQS queue (+ DLQ, redrive and queue policies) that
    /// the `aws_sqs` source reads. Idempotent: a second run changes nothing.
    Aws(AwsArgs),
}

/// Options of `driftreactor setup aws`.
#[derive(Debug, clap::Args)]
struct AwsArgs {
    /// The queue the `aws_sqs` source reads.
    #[arg(long)]
    queue_name: String,
    /// The dead-letter queue [default: QUEUE_NAME-dlq].
    #[arg(long)]
    dlq_name: Option<String>,
    /// The EventBridge rule [default: QUEUE_NAME-cloudtrail].
    #[arg(long)]
    rule_name: Option<String>,
    /// The event bus [default: default].
    #[arg(long)]
    event_bus: Option<String>,
    /// Keep only CloudTrail events from this EventBridge source (`aws.ec2`, …);
    /// repeatable. Default: every source.
    #[arg(long = "source", value_name = "SOURCE")]
    sources: Vec<String>,
    /// Keep only the sources of the resource types in these Terraform state files
    /// (format v4); repeatable. Adds to `--source`.
    #[arg(long = "state", value_name = "FILE")]
    states: Vec<PathBuf>,
    /// Receives before SQS moves a message to the DLQ.
    #[arg(long, default_value_t = 5)]
    max_receive_count: u32,
    /// The queue's visibility timeout, in seconds.
    #[arg(long, default_value_t = 60)]
    visibility_timeout_secs: u32,
    /// The AWS region [default: from the environment / profile].
    #[arg(long)]
    region: Option<String>,
    /// An endpoint URL overriding AWS's (moto, LocalStack).
    #[arg(long)]
    endpoint_url: Option<String>,
    /// Print the rule pattern and the policies as JSON; change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `driftreactor setup …`.
///
/// # Errors
/// Bad options, unreadable state files, failing AWS calls.
pub fn run(args: Args) -> Result<ExitCode> {
    match args.cloud {
        Cloud::Aws(aws) => run_aws(aws),
    }
}

fn run_aws(args: AwsArgs) -> Result<ExitCode> {
    let mut sources = args.sources.clone();
    if !args.states.is_empty() {
        let types = state_resource_types(&args.states)?;
        match setup::event_sources_for_types(types.iter().map(String::as_str)) {
            Ok(found) => sources.extend(found),
            Err(unknown) => {
                eprintln!(
                    "driftreactor: warning: no known event source for resource type {unknown}; \
                     the rule will not filter on sources"
                );
                sources.clear();
            }
        }
        if sources.is_empty() {
            eprintln!(
                "driftreactor: warning: the states name no AWS resources; the rule will not filter on sources"
            );
        }
    }
    let options = SetupOptions {
        queue_name: args.queue_name.clone(),
        dlq_name: args.dlq_name.clone(),
        rule_name: args.rule_name.clone(),
        event_bus_name: args.event_bus.clone(),
        sources,
        max_receive_count: args.max_receive_count,
        visibility_timeout_secs: args.visibility_timeout_secs,
    };
    if options.queue_name.is_empty() {
        bail!("--queue-name must not be empty");
    }
    if args.dry_run {
        warn_missed_global_sources(
            args.region
                .clone()
                .or_else(|| std::env::var("AWS_REGION").ok())
                .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
                .as_deref(),
            &options,
        );
        let plan = setup::plan(&options, args.region.as_deref(), None);
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(async {
        let sdk = driftreactor_aws::sqs::load_sdk_config(
            args.region.as_deref(),
            args.endpoint_url.as_deref(),
        )
        .await;
        warn_missed_global_sources(sdk.region().map(|r| r.as_ref()), &options);
        setup::apply(&options, &sdk).await
    })?;
    for (what, change) in &report.steps {
        let verb = match change {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
        };
        println!("{verb:<9} {what}");
    }
    if report.changed() {
        println!("queue_url = \"{}\"", report.queue_url);
    } else {
        println!("no changes; queue_url = \"{}\"", report.queue_url);
    }
    Ok(ExitCode::SUCCESS)
}

/// Warns on stderr when the rule's region cannot receive events of global services
/// (IAM, Organizations, Route 53, CloudFront, …) the rule selects: EventBridge gets
/// those only in us-east-1, so they need a second setup there.
fn warn_missed_global_sources(region: Option<&str>, options: &SetupOptions) {
    let missed = setup::missed_global_sources(region, &options.sources);
    if missed.is_empty() {
        return;
    }
    eprintln!(
        "driftreactor: warning: EventBridge receives CloudTrail events of global services ({}) \
         only in us-east-1, so a rule in {} never sees them; also run this command with \
         `--region us-east-1` and add that queue as a second `aws_sqs` source",
        missed.join(", "),
        region.unwrap_or("this region"),
    );
}

/// The managed resource types in Terraform state files, read by the one state loader
/// (`driftreactor_pipeline::estate`, state format v4; its errors name the file).
fn state_resource_types(paths: &[PathBuf]) -> Result<Vec<String>> {
    use driftreactor_pipeline::estate::{self, LoadOptions, StateFile};
    let states: Vec<StateFile> = paths
        .iter()
        .map(|path| StateFile::new(path.display().to_string(), path))
        .collect();
    let estate = estate::load(&states, LoadOptions::default())?;
    let mut types: Vec<String> = estate
        .states
        .into_iter()
        .flat_map(|s| s.resource_types)
        .collect();
    types.sort_unstable();
    types.dedup();
    Ok(types)
}
