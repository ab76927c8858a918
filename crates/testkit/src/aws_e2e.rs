//! The real Terraform-against-moto loop's shared pieces: a small Terraform root (VPC,
//! subnet, two security groups, an instance, an S3 bucket) whose provider points at
//! moto, a minimal AWS API client for moto (EC2, S3, SQS, EventBridge), and the
//! CloudTrail records of the out-of-band changes the tests make. Used by the library
//! test (`crates/remediate/tests/terraform_e2e.rs`) and the binary test
//! (`crates/cli/tests/serve_remediate.rs`).
//!
//! The helpers panic with the failing call and moto's answer: they are for tests.

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::moto::ACCOUNT_ID as ACCOUNT;
use crate::terraform::Terraform;

/// The region everything lives in.
pub const REGION: &str = "us-east-1";
/// The bucket of the root.
pub const BUCKET: &str = "driftreactor-e2e-logs";
/// An AMI moto ships by default.
pub const AMI: &str = "ami-03cf127a";

/// The Terraform root: `aws_vpc.main`, `aws_subnet.main`, `aws_security_group.web`
/// (ingress 80 from the VPC), `aws_security_group.admin` (ingress 443 from the VPC),
/// `aws_instance.app` (in `web`), `aws_s3_bucket.logs`; outputs `web_id`, `admin_id`.
/// The provider talks to moto at `endpoint` (`http://127.0.0.1:PORT`).
pub fn terraform_root(endpoint: &str) -> String {
    format!(
        r#"terraform {{
  required_providers {{
    aws = {{ source = "hashicorp/aws" }}
  }}
}}

{provider}
resource "aws_vpc" "main" {{
  cidr_block = "10.0.0.0/16"
}}

resource "aws_subnet" "main" {{
  vpc_id     = aws_vpc.main.id
  cidr_block = "10.0.1.0/24"
}}

resource "aws_security_group" "web" {{
  name        = "web"
  description = "web"
  vpc_id      = aws_vpc.main.id
  ingress {{
    from_port   = 80
    to_port     = 80
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }}
  egress {{
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }}
}}

resource "aws_security_group" "admin" {{
  name        = "admin"
  description = "admin"
  vpc_id      = aws_vpc.main.id
  ingress {{
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }}
}}

resource "aws_instance" "app" {{
  ami                    = "{AMI}"
  instance_type          = "t3.micro"
  subnet_id              = aws_subnet.main.id
  vpc_security_group_ids = [aws_security_group.web.id]
}}

resource "aws_s3_bucket" "logs" {{
  bucket = "{BUCKET}"
}}

output "web_id" {{
  value = aws_security_group.web.id
}}

output "admin_id" {{
  value = aws_security_group.admin.id
}}
"#,
        provider = Terraform::moto_provider_block(endpoint, REGION)
    )
}

/// A minimal AWS API client for moto: any credentials work, moto routes by the
/// credential scope's service name.
#[derive(Debug, Clone)]
pub struct MotoApi {
    http: reqwest::Client,
    endpoint: String,
}

impl MotoApi {
    /// A client for moto at `endpoint` (`http://127.0.0.1:PORT`).
    pub fn new(endpoint: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            endpoint: endpoint.to_owned(),
        }
    }

    fn auth(service: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"
        )
    }

    /// A Query-protocol call (EC2); returns the XML body.
    ///
    /// # Panics
    /// When moto does not answer 2xx.
    pub async fn query(&self, service: &str, params: &[(&str, &str)]) -> String {
        let resp = self
            .http
            .post(&self.endpoint)
            .header("Authorization", Self::auth(service))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(params))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{service} {params:?}: {e}"));
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert!(status.is_success(), "{service} {params:?}: {status} {text}");
        text
    }

    /// A JSON-protocol call (`X-Amz-Target`, e.g. `AmazonSQS.CreateQueue` with version
    /// `1.0`, `AWSEvents.PutRule` with `1.1`); returns the JSON body.
    ///
    /// # Panics
    /// When moto does not answer 2xx JSON.
    pub async fn json(&self, service: &str, version: &str, target: &str, body: Value) -> Value {
        let resp = self
            .http
            .post(&self.endpoint)
            .header("Authorization", Self::auth(service))
            .header("Content-Type", format!("application/x-amz-json-{version}"))
            .header("X-Amz-Target", target)
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert!(status.is_success(), "{target}: {status} {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{target}: {e}: {text}"))
    }

    /// Opens tcp `port` on `group_id` to `0.0.0.0/0` (`AuthorizeSecurityGroupIngress`).
    pub async fn open_port(&self, group_id: &str, port: &str) {
        self.query(
            "ec2",
            &[
                ("Action", "AuthorizeSecurityGroupIngress"),
                ("Version", "2016-11-15"),
                ("GroupId", group_id),
                ("IpPermissions.1.IpProtocol", "tcp"),
                ("IpPermissions.1.FromPort", port),
                ("IpPermissions.1.ToPort", port),
                ("IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"),
            ],
        )
        .await;
    }

    /// Ingress `fromPort`s of a group, sorted (the `ipPermissions` element of
    /// `DescribeSecurityGroups`; egress is `ipPermissionsEgress`).
    pub async fn ingress_ports(&self, group_id: &str) -> Vec<u16> {
        let xml = self
            .query(
                "ec2",
                &[
                    ("Action", "DescribeSecurityGroups"),
                    ("Version", "2016-11-15"),
                    ("GroupId.1", group_id),
                ],
            )
            .await;
        let ingress = xml
            .split("<ipPermissions>")
            .nth(1)
            .and_then(|s| s.split("</ipPermissions>").next())
            .unwrap_or_default()
            .to_owned();
        let mut ports: Vec<u16> = ingress
            .split("<fromPort>")
            .skip(1)
            .filter_map(|s| s.split('<').next()?.parse().ok())
            .collect();
        ports.sort_unstable();
        ports
    }

    /// Deletes `bucket` (S3 `DeleteBucket`, path style).
    ///
    /// # Panics
    /// When moto refuses.
    pub async fn delete_bucket(&self, bucket: &str) {
        let resp = self
            .http
            .delete(format!("{}/{bucket}", self.endpoint))
            .header("Authorization", Self::auth("s3"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("DeleteBucket: {e}"));
        assert!(
            resp.status().is_success(),
            "DeleteBucket: {}",
            resp.status()
        );
    }

    /// True when `bucket` exists (`HeadBucket`).
    pub async fn bucket_exists(&self, bucket: &str) -> bool {
        self.http
            .head(format!("{}/{bucket}", self.endpoint))
            .header("Authorization", Self::auth("s3"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// Creates the SQS queue `queue` and an EventBridge rule (named after it) for
    /// CloudTrail API calls targeting it; returns the queue URL.
    pub async fn wire_eventbridge(&self, queue: &str) -> String {
        let q = self
            .json(
                "sqs",
                "1.0",
                "AmazonSQS.CreateQueue",
                json!({"QueueName": queue}),
            )
            .await;
        let url = q["QueueUrl"].as_str().unwrap_or_default().to_owned();
        self.json(
            "events",
            "1.1",
            "AWSEvents.PutRule",
            json!({"Name": queue, "EventPattern": json!({"detail-type": ["AWS API Call via CloudTrail"]}).to_string()}),
        )
        .await;
        self.json(
            "events",
            "1.1",
            "AWSEvents.PutTargets",
            json!({"Rule": queue, "Targets": [{"Id": "q", "Arn": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}")}]}),
        )
        .await;
        url
    }

    /// Puts `record` on the default event bus as EventBridge delivers CloudTrail API
    /// calls (`detail-type` `AWS API Call via CloudTrail`, `source` `aws.<service>` from
    /// the record's `eventSource`).
    ///
    /// # Panics
    /// When the entry fails.
    pub async fn put_cloudtrail(&self, record: &Value) {
        let service = record["eventSource"]
            .as_str()
            .and_then(|s| s.split('.').next())
            .unwrap_or("ec2");
        let r = self
            .json(
                "events",
                "1.1",
                "AWSEvents.PutEvents",
                json!({"Entries": [{"Source": format!("aws.{service}"), "DetailType": "AWS API Call via CloudTrail", "Detail": record.to_string()}]}),
            )
            .await;
        assert_eq!(r["FailedEntryCount"], 0, "{r}");
    }

    /// Receives (and deletes) one message of `queue_url`; its body.
    ///
    /// # Panics
    /// When nothing arrives within about 20 s.
    pub async fn receive_one(&self, queue_url: &str) -> Vec<u8> {
        for _ in 0..20 {
            let r = self
                .json(
                    "sqs",
                    "1.0",
                    "AmazonSQS.ReceiveMessage",
                    json!({"QueueUrl": queue_url, "MaxNumberOfMessages": 1, "WaitTimeSeconds": 1}),
                )
                .await;
            if let Some(m) = r["Messages"].as_array().and_then(|a| a.first()) {
                self.json(
                    "sqs",
                    "1.0",
                    "AmazonSQS.DeleteMessage",
                    json!({"QueueUrl": queue_url, "ReceiptHandle": m["ReceiptHandle"]}),
                )
                .await;
                return m["Body"].as_str().unwrap_or_default().as_bytes().to_vec();
            }
        }
        panic!("no message arrived on {queue_url}");
    }
}

fn form(params: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The CloudTrail record (`AuthorizeSecurityGroupIngress` by the IAM user `oncall` from
/// the console, now) of opening tcp `port` on `group_id` to the world.
pub fn cloudtrail_open_port(group_id: &str, port: u16, event_id: &str) -> Value {
    json!({
        "eventVersion": "1.10",
        "userIdentity": {"type": "IAMUser", "principalId": "AIDAEXAMPLE", "arn": format!("arn:aws:iam::{ACCOUNT}:user/oncall"),
                         "accountId": ACCOUNT, "userName": "oncall", "sessionContext": {"attributes": {"mfaAuthenticated": "true"}}},
        "eventTime": Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        "eventSource": "ec2.amazonaws.com",
        "eventName": "AuthorizeSecurityGroupIngress",
        "awsRegion": REGION,
        "sourceIPAddress": "198.51.100.23",
        "userAgent": "AWS Internal",
        "requestParameters": {"groupId": group_id, "ipPermissions": {"items": [{"ipProtocol": "tcp", "fromPort": port, "toPort": port,
                              "groups": {}, "ipRanges": {"items": [{"cidrIp": "0.0.0.0/0"}]}, "ipv6Ranges": {}, "prefixListIds": {}}]}},
        "responseElements": {"_return": true},
        "requestID": "req-1",
        "eventID": event_id,
        "readOnly": false,
        "eventType": "AwsApiCall",
        "managementEvent": true,
        "recipientAccountId": ACCOUNT,
        "eventCategory": "Management",
        "sessionCredentialFromConsole": "true"
    })
}

/// The CloudTrail record of deleting `bucket` from the console.
pub fn cloudtrail_delete_bucket(bucket: &str, event_id: &str) -> Value {
    let mut r = cloudtrail_open_port("unused", 0, event_id);
    r["eventSource"] = json!("s3.amazonaws.com");
    r["eventName"] = json!("DeleteBucket");
    r["requestParameters"] =
        json!({"bucketName": bucket, "Host": format!("{bucket}.s3.amazonaws.com")});
    r["resources"] = json!([{"type": "AWS::S3::Bucket", "ARN": format!("arn:aws:s3:::{bucket}")}]);
    r
}
