//! `driftreactor setup aws` against moto's server: it creates the queue, DLQ, redrive
//! and queue policies, the rule and its target; a second run changes nothing; and the
//! rule really routes CloudTrail write calls (not failed nor read-only ones, and only
//! from the chosen sources) through the queue to the `aws_sqs` source.
//!
//! Needs `moto_server` (`pip install 'moto[server]'`); skipped only with
//! `DRIFTREACTOR_SKIP_MOTO=1`.

mod common;

use std::time::Duration;

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use aws_sdk_sqs::types::QueueAttributeName;
use common::*;
use driftreactor_aws::setup::{self, Change, SetupOptions};
use driftreactor_aws::sqs::SqsSourceConfig;
use driftreactor_source::{Delivery, ShutdownSignal, Source};
use driftreactor_testkit::moto::MotoServer;
use serde_json::Value;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_creates_queue_dlq_rule_and_target_and_a_second_run_changes_nothing() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sdk = sdk(&moto).await;
    let options = SetupOptions {
        sources: vec!["aws.ec2".into()],
        ..SetupOptions::new("drift-events")
    };
    let first = setup::apply(&options, &sdk).await.unwrap();
    assert!(
        first.steps.iter().all(|(_, c)| *c == Change::Created),
        "{:?}",
        first.steps
    );
    assert!(first.changed());

    let second = setup::apply(&options, &sdk).await.unwrap();
    assert!(
        !second.changed(),
        "second run changed something: {:?}",
        second.steps
    );
    assert_eq!(first.queue_url, second.queue_url);
    assert_eq!(first.rule_arn, second.rule_arn);

    // What is there, read back.
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&first.queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attrs = attrs.attributes().unwrap();
    let redrive: Value = serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).unwrap();
    assert_eq!(
        redrive["deadLetterTargetArn"],
        "arn:aws:sqs:us-east-1:123456789012:drift-events-dlq"
    );
    let policy: Value = serde_json::from_str(&attrs[&QueueAttributeName::Policy]).unwrap();
    assert_eq!(
        policy["Statement"][0]["Principal"]["Service"],
        "events.amazonaws.com"
    );
    assert_eq!(
        policy["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"],
        first.rule_arn.as_str()
    );
    let events = aws_sdk_eventbridge::Client::new(&sdk);
    let rule = events
        .describe_rule()
        .name("drift-events-cloudtrail")
        .send()
        .await
        .unwrap();
    let pattern: Value = serde_json::from_str(rule.event_pattern().unwrap()).unwrap();
    assert_eq!(pattern, setup::event_pattern(&options.sources));
    let targets = events
        .list_targets_by_rule()
        .rule("drift-events-cloudtrail")
        .send()
        .await
        .unwrap();
    assert_eq!(targets.targets().len(), 1);
    assert_eq!(targets.targets()[0].arn(), first.queue_arn);

    // A changed option is an update of just that resource.
    let widened = SetupOptions {
        sources: vec!["aws.ec2".into(), "aws.s3".into()],
        ..options.clone()
    };
    let third = setup::apply(&widened, &sdk).await.unwrap();
    let changed: Vec<_> = third
        .steps
        .iter()
        .filter(|(_, c)| *c != Change::Unchanged)
        .collect();
    assert_eq!(changed.len(), 1, "{:?}", third.steps);
    assert!(changed[0].0.starts_with("rule "), "{changed:?}");
    assert_eq!(changed[0].1, Change::Updated);
}

fn put(detail: Value, source: &str) -> PutEventsRequestEntry {
    PutEventsRequestEntry::builder()
        .source(source)
        .detail_type("AWS API Call via CloudTrail")
        .detail(detail.to_string())
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rule_routes_only_successful_write_calls_from_chosen_sources_to_the_source() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let sdk = sdk(&moto).await;
    let options = SetupOptions {
        sources: vec!["aws.ec2".into()],
        visibility_timeout_secs: 30,
        ..SetupOptions::new("drift-routed")
    };
    let report = setup::apply(&options, &sdk).await.unwrap();

    let events = aws_sdk_eventbridge::Client::new(&sdk);
    let mut no_read_only =
        cloudtrail_detail("ev-noflag", "AuthorizeSecurityGroupIngress", false, None);
    no_read_only.as_object_mut().unwrap().remove("readOnly");
    let out = events
        .put_events()
        .entries(put(
            cloudtrail_detail("ev-write", "AuthorizeSecurityGroupIngress", false, None),
            "aws.ec2",
        ))
        .entries(put(
            cloudtrail_detail(
                "ev-failed",
                "AuthorizeSecurityGroupIngress",
                false,
                Some("Client.UnauthorizedOperation"),
            ),
            "aws.ec2",
        ))
        .entries(put(
            cloudtrail_detail("ev-read", "DescribeSecurityGroups", true, None),
            "aws.ec2",
        ))
        .entries(put(
            cloudtrail_detail("ev-s3", "PutBucketPolicy", false, None),
            "aws.s3",
        ))
        .entries(put(no_read_only, "aws.ec2"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.failed_entry_count(), 0);

    let source = SqsSourceConfig {
        queue_url: Some(report.queue_url.clone()),
        wait_time_secs: 1,
        ..SqsSourceConfig::default()
    }
    .build_with(&sdk)
    .await
    .unwrap();
    let (tx, rx) = mpsc::channel(8);
    let shutdown = ShutdownSignal::new();
    let task = tokio::spawn(Box::new(source).run(tx, shutdown.clone()));
    let answers = fake_pipeline(rx, 0);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    // A wrongly routed event would have been routed before a marker put after them
    // all: once the marker is handled and the queue is empty, every routed event was.
    let marker = events
        .put_events()
        .entries(put(
            cloudtrail_detail("ev-marker", "AuthorizeSecurityGroupIngress", false, None),
            "aws.ec2",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(marker.failed_entry_count(), 0);
    let drained = eventually(Duration::from_secs(45), || async {
        let handled = answers.lock().unwrap().clone();
        handled.len() >= 3
            && handled
                .iter()
                .any(|a| a.event_id.as_deref() == Some("ev-marker"))
            && queue_counts(&sqs, &report.queue_url).await == (0, 0)
    })
    .await;
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert!(drained);

    let answers = answers.lock().unwrap().clone();
    let mut ids: Vec<_> = answers
        .iter()
        .filter_map(|a| a.event_id.clone())
        .filter(|id| id != "ev-marker")
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        ["ev-noflag", "ev-write"],
        "only successful write calls from aws.ec2"
    );
    assert!(answers.iter().all(|a| a.delivery == Delivery::Recorded));
    // The SQS body is the EventBridge envelope (moto's lacks `account`).
    let envelope: Value = serde_json::from_slice(&answers[0].payload).unwrap();
    assert_eq!(envelope["detail-type"], "AWS API Call via CloudTrail");
    assert_eq!(envelope["source"], "aws.ec2");
}
