//! `driftreactor setup aws`: the EventBridge → SQS wiring the `aws_sqs` source reads.
//!
//! Creates, idempotently:
//!
//! 1. the dead-letter queue `<queue>-dlq` (14 days retention);
//! 2. the queue, with its redrive policy (`maxReceiveCount`, default 5) to the DLQ;
//! 3. a rule on the default event bus whose pattern selects
//!    `detail-type: AWS API Call via CloudTrail`, drops read-only calls
//!    (`detail.readOnly` false or absent) and failed calls (`detail.errorCode`
//!    absent), optionally only from the given event sources (`aws.ec2`, `aws.s3`, …);
//! 4. the queue policy that lets exactly that rule send to the queue
//!    (`aws:SourceArn` condition);
//! 5. the rule's target, the queue.
//!
//! Each step reads first and writes only when something differs, so a second run
//! reports no changes. [`plan`] is the pure part (patterns and policies as JSON, for
//! `--dry-run`); [`apply`] does the calls.

use aws_sdk_eventbridge::types::{RuleState, Target};
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};

/// The `detail-type` CloudTrail management events carry on EventBridge.
pub const CLOUDTRAIL_DETAIL_TYPE: &str = "AWS API Call via CloudTrail";

/// The id of the rule's target (the queue).
pub const TARGET_ID: &str = "driftreactor-sqs";

/// What to create. Names default from the queue name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupOptions {
    /// The queue the `aws_sqs` source reads.
    pub queue_name: String,
    /// The dead-letter queue; default `<queue_name>-dlq`.
    pub dlq_name: Option<String>,
    /// The EventBridge rule; default `<queue_name>-cloudtrail`.
    pub rule_name: Option<String>,
    /// The event bus; default `default` (where CloudTrail events arrive).
    pub event_bus_name: Option<String>,
    /// Event sources to keep (`aws.ec2`, `aws.s3`, …): the services the Terraform
    /// states use. Empty: every source.
    pub sources: Vec<String>,
    /// Receives before SQS moves a message to the DLQ. Default 5.
    pub max_receive_count: u32,
    /// The queue's visibility timeout, in seconds. Default 60.
    pub visibility_timeout_secs: u32,
}

impl SetupOptions {
    /// Options with the defaults for `queue_name`.
    pub fn new(queue_name: impl Into<String>) -> Self {
        SetupOptions {
            queue_name: queue_name.into(),
            dlq_name: None,
            rule_name: None,
            event_bus_name: None,
            sources: Vec::new(),
            max_receive_count: 5,
            visibility_timeout_secs: 60,
        }
    }

    /// The DLQ's name.
    pub fn dlq_name(&self) -> String {
        self.dlq_name
            .clone()
            .unwrap_or_else(|| format!("{}-dlq", self.queue_name))
    }

    /// The rule's name.
    pub fn rule_name(&self) -> String {
        self.rule_name
            .clone()
            .unwrap_or_else(|| format!("{}-cloudtrail", self.queue_name))
    }

    /// The event bus's name.
    pub fn event_bus_name(&self) -> String {
        self.event_bus_name
            .clone()
            .unwrap_or_else(|| "default".into())
    }
}

/// Errors of `setup aws`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// An option is invalid.
    #[error("setup aws: {0}")]
    Options(String),
    /// An AWS call failed.
    #[error("setup aws: {call} failed: {message}")]
    Aws {
        /// The operation (`CreateQueue`, `PutRule`, …).
        call: &'static str,
        /// The SDK's error with its context.
        message: String,
    },
}

fn aws_err<E: std::error::Error>(call: &'static str, err: E) -> SetupError {
    SetupError::Aws {
        call,
        message: DisplayErrorContext(&err).to_string(),
    }
}

/// The rule's event pattern: CloudTrail API calls, not read-only (false or absent),
/// not failed (no `errorCode`), from `sources` when not empty.
pub fn event_pattern(sources: &[String]) -> Value {
    let mut pattern = json!({
        "detail-type": [CLOUDTRAIL_DETAIL_TYPE],
        "detail": {
            "readOnly": [false, {"exists": false}],
            "errorCode": [{"exists": false}],
        },
    });
    if !sources.is_empty() {
        let mut sorted: Vec<&String> = sources.iter().collect();
        sorted.sort();
        sorted.dedup();
        pattern["source"] = json!(sorted);
    }
    pattern
}

/// The queue policy letting the rule `rule_arn` (and only it) send to `queue_arn`.
pub fn queue_policy(queue_arn: &str, rule_arn: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Id": "driftreactor-eventbridge",
        "Statement": [{
            "Sid": "AllowDriftreactorEventBridgeRule",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
        }],
    })
}

/// The queue's redrive policy.
pub fn redrive_policy(dlq_arn: &str, max_receive_count: u32) -> Value {
    json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})
}

/// What `--dry-run` prints: names, the rule pattern and the policies. ARNs use
/// `region` / `account` when known, else the placeholders `<region>` / `<account-id>`.
pub fn plan(options: &SetupOptions, region: Option<&str>, account: Option<&str>) -> Value {
    let region = region.unwrap_or("<region>");
    let account = account.unwrap_or("<account-id>");
    let queue_arn = format!("arn:aws:sqs:{region}:{account}:{}", options.queue_name);
    let dlq_arn = format!("arn:aws:sqs:{region}:{account}:{}", options.dlq_name());
    let rule_arn = rule_arn(
        region,
        account,
        &options.event_bus_name(),
        &options.rule_name(),
    );
    json!({
        "queue": {"name": options.queue_name, "arn": queue_arn,
                  "visibility_timeout_secs": options.visibility_timeout_secs},
        "dead_letter_queue": {"name": options.dlq_name(), "arn": dlq_arn},
        "redrive_policy": redrive_policy(&dlq_arn, options.max_receive_count),
        "rule": {"name": options.rule_name(), "event_bus": options.event_bus_name(), "arn": rule_arn,
                 "event_pattern": event_pattern(&options.sources)},
        "queue_policy": queue_policy(&queue_arn, &rule_arn),
        "target": {"id": TARGET_ID, "arn": queue_arn},
    })
}

fn rule_arn(region: &str, account: &str, bus: &str, rule: &str) -> String {
    if bus == "default" {
        format!("arn:aws:events:{region}:{account}:rule/{rule}")
    } else {
        format!("arn:aws:events:{region}:{account}:rule/{bus}/{rule}")
    }
}

/// What [`apply`] did to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It did not exist and was created.
    Created,
    /// It existed and differed; it was updated.
    Updated,
    /// It existed as wanted.
    Unchanged,
}

/// The outcome of [`apply`]: what was done per resource, and the ARNs / URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupReport {
    /// `(resource description, change)` in the order applied.
    pub steps: Vec<(String, Change)>,
    /// The queue's URL (for the `aws_sqs` source's `queue_url`).
    pub queue_url: String,
    /// The queue's ARN.
    pub queue_arn: String,
    /// The DLQ's URL.
    pub dlq_url: String,
    /// The rule's ARN.
    pub rule_arn: String,
}

impl SetupReport {
    /// True when any step created or updated something.
    pub fn changed(&self) -> bool {
        self.steps.iter().any(|(_, c)| *c != Change::Unchanged)
    }
}

/// Creates or updates the wiring (see the module docs). Idempotent.
///
/// # Errors
/// [`SetupError::Aws`] naming the failing call.
pub async fn apply(
    options: &SetupOptions,
    sdk: &aws_config::SdkConfig,
) -> Result<SetupReport, SetupError> {
    if options.queue_name.is_empty() {
        return Err(SetupError::Options("--queue-name must not be empty".into()));
    }
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let events = aws_sdk_eventbridge::Client::new(sdk);
    let mut steps = Vec::new();

    // 1. The DLQ.
    let dlq_name = options.dlq_name();
    let (dlq_url, change) = ensure_queue(
        &sqs,
        &dlq_name,
        &[(QueueAttributeName::MessageRetentionPeriod, "1209600".into())],
    )
    .await?;
    steps.push((format!("dead-letter queue {dlq_name}"), change));
    let dlq_arn = queue_arn(&sqs, &dlq_url).await?;

    // 2. The queue with its redrive policy.
    let redrive = redrive_policy(&dlq_arn, options.max_receive_count);
    let (queue_url, change) = ensure_queue(
        &sqs,
        &options.queue_name,
        &[
            (
                QueueAttributeName::VisibilityTimeout,
                options.visibility_timeout_secs.to_string(),
            ),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ],
    )
    .await?;
    steps.push((
        format!("queue {} (redrive to {dlq_name})", options.queue_name),
        change,
    ));
    let queue_arn = queue_arn(&sqs, &queue_url).await?;

    // 3. The rule.
    let bus = options.event_bus_name();
    let rule_name = options.rule_name();
    let pattern = event_pattern(&options.sources);
    let (rule_arn, change) = ensure_rule(&events, &bus, &rule_name, &pattern).await?;
    steps.push((format!("rule {rule_name} on bus {bus}"), change));

    // 4. The queue policy for that rule.
    let policy = queue_policy(&queue_arn, &rule_arn);
    let change = ensure_queue_attributes(
        &sqs,
        &queue_url,
        &[(QueueAttributeName::Policy, policy.to_string())],
    )
    .await?;
    steps.push((
        format!("queue policy of {} (allow the rule)", options.queue_name),
        change,
    ));

    // 5. The target.
    let change = ensure_target(&events, &bus, &rule_name, &queue_arn).await?;
    steps.push((format!("target {TARGET_ID} of rule {rule_name}"), change));

    Ok(SetupReport {
        steps,
        queue_url,
        queue_arn,
        dlq_url,
        rule_arn,
    })
}

/// Finds or creates the queue; makes its `attributes` match. Returns its URL.
async fn ensure_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> Result<(String, Change), SetupError> {
    match sqs.get_queue_url().queue_name(name).send().await {
        Ok(out) => {
            let url = out.queue_url().unwrap_or_default().to_owned();
            let change = ensure_queue_attributes(sqs, &url, attributes).await?;
            Ok((url, change))
        }
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_queue_does_not_exist()) =>
        {
            let mut create = sqs.create_queue().queue_name(name);
            for (key, value) in attributes {
                create = create.attributes(key.clone(), value.clone());
            }
            let out = create.send().await.map_err(|e| aws_err("CreateQueue", e))?;
            Ok((
                out.queue_url().unwrap_or_default().to_owned(),
                Change::Created,
            ))
        }
        Err(err) => Err(aws_err("GetQueueUrl", err)),
    }
}

async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<String, SetupError> {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| aws_err("GetQueueAttributes", e))?;
    out.attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned()
        .ok_or_else(|| SetupError::Aws {
            call: "GetQueueAttributes",
            message: format!("no QueueArn for {url}"),
        })
}

/// Sets the attributes that differ (JSON attributes compared as JSON, with numbers
/// and numeric strings equal). `Created` when all of them were absent before. `Created` when all of them were absent before.
async fn ensure_queue_attributes(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    wanted: &[(QueueAttributeName, String)],
) -> Result<Change, SetupError> {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| aws_err("GetQueueAttributes", e))?;
    let current = out.attributes().cloned().unwrap_or_default();
    let mut set = sqs.set_queue_attributes().queue_url(url);
    let mut differs = false;
    let mut all_absent = true;
    for (key, value) in wanted {
        let existing = current.get(key).map(String::as_str);
        if !attribute_equal(existing, value) {
            set = set.attributes(key.clone(), value.clone());
            differs = true;
            all_absent &= existing.is_none_or(str::is_empty);
        }
    }
    if !differs {
        return Ok(Change::Unchanged);
    }
    set.send()
        .await
        .map_err(|e| aws_err("SetQueueAttributes", e))?;
    // Setting attributes that were not there (a new queue policy) is a creation.
    Ok(if all_absent {
        Change::Created
    } else {
        Change::Updated
    })
}

fn attribute_equal(current: Option<&str>, wanted: &str) -> bool {
    let Some(current) = current else { return false };
    if current == wanted {
        return true;
    }
    match (
        serde_json::from_str::<Value>(current),
        serde_json::from_str::<Value>(wanted),
    ) {
        (Ok(a), Ok(b)) => canonical(a) == canonical(b),
        _ => false,
    }
}

/// Numeric strings become numbers, so `"5"` equals `5` (SQS echoes either).
fn canonical(value: Value) -> Value {
    match value {
        Value::String(s) => s
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or(Value::String(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        other => other,
    }
}

async fn ensure_rule(
    events: &aws_sdk_eventbridge::Client,
    bus: &str,
    name: &str,
    pattern: &Value,
) -> Result<(String, Change), SetupError> {
    let description = "driftreactor: CloudTrail write calls to the drift queue";
    let existing = match events
        .describe_rule()
        .name(name)
        .event_bus_name(bus)
        .send()
        .await
    {
        Ok(out) => Some(out),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            None
        }
        Err(err) => return Err(aws_err("DescribeRule", err)),
    };
    let change = match &existing {
        None => Change::Created,
        Some(rule) => {
            let same_pattern = rule
                .event_pattern()
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .is_some_and(|p| &p == pattern);
            let enabled = rule.state() == Some(&RuleState::Enabled);
            match (same_pattern && enabled, rule.arn()) {
                (true, Some(arn)) => return Ok((arn.to_owned(), Change::Unchanged)),
                _ => Change::Updated,
            }
        }
    };
    let out = events
        .put_rule()
        .name(name)
        .event_bus_name(bus)
        .event_pattern(pattern.to_string())
        .state(RuleState::Enabled)
        .description(description)
        .send()
        .await
        .map_err(|e| aws_err("PutRule", e))?;
    Ok((out.rule_arn().unwrap_or_default().to_owned(), change))
}

async fn ensure_target(
    events: &aws_sdk_eventbridge::Client,
    bus: &str,
    rule: &str,
    queue_arn: &str,
) -> Result<Change, SetupError> {
    let out = events
        .list_targets_by_rule()
        .rule(rule)
        .event_bus_name(bus)
        .send()
        .await
        .map_err(|e| aws_err("ListTargetsByRule", e))?;
    let existing = out.targets().iter().find(|t| t.id() == TARGET_ID);
    let change = match existing {
        Some(target)
            if target.arn() == queue_arn
                && target.input().is_none()
                && target.input_path().is_none() =>
        {
            return Ok(Change::Unchanged);
        }
        Some(_) => Change::Updated,
        None => Change::Created,
    };
    let target = Target::builder()
        .id(TARGET_ID)
        .arn(queue_arn)
        .build()
        .map_err(|e| aws_err("PutTargets", e))?;
    let out = events
        .put_targets()
        .rule(rule)
        .event_bus_name(bus)
        .targets(target)
        .send()
        .await
        .map_err(|e| aws_err("PutTargets", e))?;
    if out.failed_entry_count() > 0 {
        let reasons: Vec<String> = out
            .failed_entries()
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.error_code().unwrap_or_default(),
                    e.error_message().unwrap_or_default()
                )
            })
            .collect();
        return Err(SetupError::Aws {
            call: "PutTargets",
            message: reasons.join("; "),
        });
    }
    Ok(change)
}

/// Terraform resource-type prefixes (`aws_<prefix>…`) and the EventBridge `source` of
/// the CloudTrail events that change them. Longest prefix wins.
const EVENT_SOURCES: &[(&str, &str)] = &[
    ("acm_", "aws.acm"),
    ("alb", "aws.elasticloadbalancing"),
    ("ami", "aws.ec2"),
    ("api_gateway_", "aws.apigateway"),
    ("apigatewayv2_", "aws.apigateway"),
    ("appautoscaling_", "aws.application-autoscaling"),
    ("autoscaling_", "aws.autoscaling"),
    ("backup_", "aws.backup"),
    ("cloudformation_", "aws.cloudformation"),
    ("cloudfront_", "aws.cloudfront"),
    ("cloudtrail", "aws.cloudtrail"),
    ("cloudwatch_event_", "aws.events"),
    ("cloudwatch_log_", "aws.logs"),
    ("cloudwatch_metric_alarm", "aws.monitoring"),
    ("cloudwatch_dashboard", "aws.monitoring"),
    ("codebuild_", "aws.codebuild"),
    ("codepipeline", "aws.codepipeline"),
    ("cognito_", "aws.cognito-idp"),
    ("customer_gateway", "aws.ec2"),
    ("db_", "aws.rds"),
    ("default_", "aws.ec2"),
    ("dynamodb_", "aws.dynamodb"),
    ("ebs_", "aws.ec2"),
    ("ec2_", "aws.ec2"),
    ("ecr_", "aws.ecr"),
    ("ecs_", "aws.ecs"),
    ("efs_", "aws.elasticfilesystem"),
    ("egress_only_internet_gateway", "aws.ec2"),
    ("eip", "aws.ec2"),
    ("eks_", "aws.eks"),
    ("elasticache_", "aws.elasticache"),
    ("elasticsearch_", "aws.es"),
    ("elb", "aws.elasticloadbalancing"),
    ("flow_log", "aws.ec2"),
    ("glue_", "aws.glue"),
    ("iam_", "aws.iam"),
    ("instance", "aws.ec2"),
    ("internet_gateway", "aws.ec2"),
    ("key_pair", "aws.ec2"),
    ("kinesis_", "aws.kinesis"),
    ("kms_", "aws.kms"),
    ("lambda_", "aws.lambda"),
    ("launch_template", "aws.ec2"),
    ("lb", "aws.elasticloadbalancing"),
    ("main_route_table_association", "aws.ec2"),
    ("nat_gateway", "aws.ec2"),
    ("network_", "aws.ec2"),
    ("opensearch_", "aws.es"),
    ("placement_group", "aws.ec2"),
    ("rds_", "aws.rds"),
    ("redshift_", "aws.redshift"),
    ("route", "aws.ec2"),
    ("route53_", "aws.route53"),
    ("s3_", "aws.s3"),
    ("secretsmanager_", "aws.secretsmanager"),
    ("security_group", "aws.ec2"),
    ("sfn_", "aws.states"),
    ("sns_", "aws.sns"),
    ("sqs_", "aws.sqs"),
    ("ssm_", "aws.ssm"),
    ("subnet", "aws.ec2"),
    ("transit_gateway", "aws.ec2"),
    ("vpc", "aws.ec2"),
    ("vpn_", "aws.ec2"),
    ("wafv2_", "aws.wafv2"),
];

/// Event sources of AWS global services, whose CloudTrail events EventBridge receives
/// only in the partition's home region (us-east-1 for `aws`; see "Receiving events
/// from AWS global services" in the EventBridge user guide).
pub const GLOBAL_EVENT_SOURCES: [&str; 6] = [
    "aws.iam",
    "aws.organizations",
    "aws.account",
    "aws.route53",
    "aws.cloudfront",
    "aws.globalaccelerator",
];

/// The global-service event sources a rule in `region` (an AWS region name) would
/// never see: those of `sources` (every one of them when `sources` is empty, a rule
/// without a source filter) when `region` is not the partition's home region
/// (`us-east-1`, `us-gov-west-1`, `cn-north-1`). Empty when the region is the home
/// region or unknown (`None`).
pub fn missed_global_sources(region: Option<&str>, sources: &[String]) -> Vec<&'static str> {
    let Some(region) = region else {
        return Vec::new();
    };
    let home = if region.starts_with("us-gov-") {
        "us-gov-west-1"
    } else if region.starts_with("cn-") {
        "cn-north-1"
    } else {
        "us-east-1"
    };
    if region == home {
        return Vec::new();
    }
    GLOBAL_EVENT_SOURCES
        .into_iter()
        .filter(|g| sources.is_empty() || sources.iter().any(|s| s == g))
        .collect()
}

/// The EventBridge sources whose CloudTrail events can change resources of
/// `resource_types` (Terraform types such as `aws_security_group`), sorted and
/// deduplicated; non-AWS types are ignored. `Err` with the first AWS type the table
/// does not know: then filter on no source rather than miss events.
///
/// # Errors
/// The unknown resource type.
pub fn event_sources_for_types<'a>(
    resource_types: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, String> {
    let mut sources = std::collections::BTreeSet::new();
    for resource_type in resource_types {
        let Some(rest) = resource_type.strip_prefix("aws_") else {
            continue;
        };
        let source = EVENT_SOURCES
            .iter()
            .filter(|(prefix, _)| rest.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, source)| *source)
            .ok_or_else(|| resource_type.to_owned())?;
        sources.insert(source.to_owned());
    }
    Ok(sources.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_selects_cloudtrail_write_calls_that_succeeded() {
        let pattern = event_pattern(&[]);
        assert_eq!(pattern["detail-type"], json!([CLOUDTRAIL_DETAIL_TYPE]));
        assert_eq!(pattern["detail"]["errorCode"], json!([{"exists": false}]));
        assert_eq!(
            pattern["detail"]["readOnly"],
            json!([false, {"exists": false}])
        );
        assert!(pattern.get("source").is_none());
        let filtered = event_pattern(&["aws.s3".into(), "aws.ec2".into(), "aws.s3".into()]);
        assert_eq!(filtered["source"], json!(["aws.ec2", "aws.s3"]));
    }

    #[test]
    fn plan_names_default_from_the_queue() {
        let plan = plan(&SetupOptions::new("drift"), Some("eu-west-1"), None);
        assert_eq!(plan["dead_letter_queue"]["name"], "drift-dlq");
        assert_eq!(plan["rule"]["name"], "drift-cloudtrail");
        assert_eq!(
            plan["rule"]["arn"],
            "arn:aws:events:eu-west-1:<account-id>:rule/drift-cloudtrail"
        );
        assert_eq!(
            plan["queue_policy"]["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"],
            plan["rule"]["arn"]
        );
        assert_eq!(plan["redrive_policy"]["maxReceiveCount"], 5);
    }

    #[test]
    fn global_sources_are_missed_outside_the_home_region() {
        let iam_ec2 = vec!["aws.ec2".to_owned(), "aws.iam".to_owned()];
        assert_eq!(
            missed_global_sources(Some("eu-west-1"), &iam_ec2),
            ["aws.iam"]
        );
        assert!(missed_global_sources(Some("us-east-1"), &iam_ec2).is_empty());
        assert!(missed_global_sources(None, &iam_ec2).is_empty());
        assert!(missed_global_sources(Some("eu-west-1"), &["aws.ec2".to_owned()]).is_empty());
        // No source filter: every global source is missed.
        assert_eq!(
            missed_global_sources(Some("ap-south-1"), &[]),
            GLOBAL_EVENT_SOURCES
        );
        assert!(missed_global_sources(Some("us-gov-west-1"), &iam_ec2).is_empty());
        assert_eq!(
            missed_global_sources(Some("us-gov-east-1"), &iam_ec2),
            ["aws.iam"]
        );
    }

    #[test]
    fn event_sources_follow_the_resource_types() {
        let types = [
            "aws_security_group",
            "aws_instance",
            "aws_s3_bucket_policy",
            "aws_iam_role",
            "google_x",
            "aws_lb_listener",
        ];
        assert_eq!(
            event_sources_for_types(types).unwrap(),
            ["aws.ec2", "aws.elasticloadbalancing", "aws.iam", "aws.s3"]
        );
        assert_eq!(
            event_sources_for_types(["aws_cloudwatch_log_group"]).unwrap(),
            ["aws.logs"]
        );
        assert_eq!(
            event_sources_for_types(["aws_cloudwatch_event_rule"]).unwrap(),
            ["aws.events"]
        );
        assert_eq!(
            event_sources_for_types(["aws_frobnicator"]).unwrap_err(),
            "aws_frobnicator"
        );
    }

    #[test]
    fn attributes_compare_as_json_with_numeric_strings() {
        assert!(attribute_equal(
            Some(r#"{"maxReceiveCount":"5","deadLetterTargetArn":"a"}"#),
            r#"{"deadLetterTargetArn":"a","maxReceiveCount":5}"#
        ));
        assert!(attribute_equal(Some("60"), "60"));
        assert!(!attribute_equal(Some("30"), "60"));
        assert!(!attribute_equal(None, "60"));
    }
}
