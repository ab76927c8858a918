//! A realistic generated Terraform state (format version 4) of any size, for the
//! state-load benchmarks: AWS-like resources of ~1–2 KB each in `for_each` modules
//! with nested modules, `count` and `for_each` keys, data sources and dependencies,
//! written in Terraform's own 2-space indented layout. Deterministic (fixed seed).

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;

const ACCOUNT: &str = "111122223333";
const REGION: &str = "eu-west-1";
const APPS_PER_INSTANCE: usize = 15;

struct Gen<W: Write> {
    out: W,
    first_resource: bool,
    seq: u64,
}

impl<W: Write> Gen<W> {
    fn hex(&mut self, len: usize) -> String {
        // xorshift, deterministic
        let mut s = String::with_capacity(len);
        while s.len() < len {
            self.seq ^= self.seq << 13;
            self.seq ^= self.seq >> 7;
            self.seq ^= self.seq << 17;
            let _ = write!(s, "{:016x}", self.seq);
        }
        s.truncate(len);
        s
    }

    /// Writes one resource with its instances: `(index_key JSON or "", attributes JSON, deps)`.
    fn resource(
        &mut self,
        module: Option<&str>,
        mode: &str,
        ty: &str,
        name: &str,
        instances: &[(String, String, Vec<String>)],
    ) -> std::io::Result<()> {
        let sep = if self.first_resource { "" } else { "," };
        self.first_resource = false;
        write!(self.out, "{sep}\n    {{\n")?;
        if let Some(m) = module {
            writeln!(
                self.out,
                "      \"module\": {},",
                serde_json::to_string(m).unwrap_or_default()
            )?;
        }
        write!(
            self.out,
            "      \"mode\": \"{mode}\",\n      \"type\": \"{ty}\",\n      \"name\": \"{name}\",\n      \"provider\": \"provider[\\\"registry.terraform.io/hashicorp/aws\\\"]\",\n      \"instances\": ["
        )?;
        for (i, (key, attrs, deps)) in instances.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(self.out, "{sep}\n        {{\n")?;
            if !key.is_empty() {
                writeln!(self.out, "          \"index_key\": {key},")?;
            }
            writeln!(self.out, "          \"schema_version\": 1,")?;
            writeln!(self.out, "          \"attributes\": {attrs},")?;
            if attrs.contains("\"user_data\"") {
                writeln!(
                    self.out,
                    "          \"sensitive_attributes\": [\n            [\n              {{\n                \"type\": \"get_attr\",\n                \"value\": \"user_data\"\n              }}\n            ]\n          ],"
                )?;
            } else {
                writeln!(self.out, "          \"sensitive_attributes\": [],")?;
            }
            write!(
                self.out,
                "          \"private\": \"eyJlMmJmYjczMC1lY2FhLTExZTYtOGY4OC0zNDM2M2JjN2M0YzAiOnsiY3JlYXRlIjo2MDAwMDAwMDAwMDAsImRlbGV0ZSI6MTIwMDAwMDAwMDAwMH0sInNjaGVtYV92ZXJzaW9uIjoiMSJ9\""
            )?;
            if !deps.is_empty() {
                write!(self.out, ",\n          \"dependencies\": [")?;
                for (j, d) in deps.iter().enumerate() {
                    let sep = if j == 0 { "" } else { "," };
                    write!(self.out, "{sep}\n            \"{d}\"")?;
                }
                write!(self.out, "\n          ]")?;
            }
            write!(self.out, "\n        }}")?;
        }
        write!(self.out, "\n      ]\n    }}")
    }
}

fn tags(app: &str, role: &str) -> String {
    format!(
        r#"{{
              "Application": "{app}",
              "CostCenter": "cc-4711",
              "Environment": "production",
              "ManagedBy": "terraform",
              "Name": "{app}-{role}",
              "Owner": "platform-team@example.com",
              "Repository": "github.com/example/infrastructure"
            }}"#
    )
}

/// Writes a state of about `instances` managed resource instances (rounded down to
/// whole application modules of 15 instances, plus 7 shared ones) to `path`.
///
/// Returns the number of managed instances written.
///
/// # Errors
/// The I/O error when the file cannot be written.
pub fn write_state(path: &Path, instances: usize) -> std::io::Result<usize> {
    let file = std::fs::File::create(path)?;
    let mut g = Gen {
        out: BufWriter::with_capacity(1 << 20, file),
        first_resource: true,
        seq: 0x9E37_79B9_7F4A_7C15,
    };
    write!(
        g.out,
        "{{\n  \"version\": 4,\n  \"terraform_version\": \"1.9.8\",\n  \"serial\": 4242,\n  \"lineage\": \"0f6a1c2e-7d3b-4e8a-9c1d-2b3a4c5d6e7f\",\n  \"outputs\": {{}},\n  \"resources\": ["
    )?;
    let mut count = 0usize;

    // Shared root resources: one VPC, six private subnets (count).
    let vpc_id = format!("vpc-{}", g.hex(17));
    let vpc_attrs = format!(
        r#"{{
            "arn": "arn:aws:ec2:{REGION}:{ACCOUNT}:vpc/{vpc_id}",
            "cidr_block": "10.0.0.0/16",
            "enable_dns_hostnames": true,
            "enable_dns_support": true,
            "id": "{vpc_id}",
            "instance_tenancy": "default",
            "owner_id": "{ACCOUNT}",
            "tags": {tags}
          }}"#,
        tags = tags("shared", "vpc")
    );
    g.resource(
        None,
        "managed",
        "aws_vpc",
        "main",
        &[(String::new(), vpc_attrs, vec![])],
    )?;
    count += 1;
    let subnets: Vec<_> = (0..6)
        .map(|i| {
            let id = format!("subnet-{}", g.hex(17));
            let attrs = format!(
                r#"{{
            "arn": "arn:aws:ec2:{REGION}:{ACCOUNT}:subnet/{id}",
            "availability_zone": "{REGION}{az}",
            "cidr_block": "10.0.{i}.0/24",
            "id": "{id}",
            "map_public_ip_on_launch": false,
            "owner_id": "{ACCOUNT}",
            "tags": {tags},
            "vpc_id": "{vpc_id}"
          }}"#,
                az = ["a", "b", "c"][i % 3],
                tags = tags("shared", "subnet")
            );
            (i.to_string(), attrs, vec!["aws_vpc.main".to_owned()])
        })
        .collect();
    g.resource(None, "managed", "aws_subnet", "private", &subnets)?;
    count += subnets.len();

    let mut app = 0usize;
    while count + APPS_PER_INSTANCE <= instances {
        let name = format!("app-{app:05}");
        let module = format!("module.app[\"{name}\"]");
        let sg_id = format!("sg-{}", g.hex(17));
        let role_name = format!("{name}-role-{}", g.hex(8));
        let bucket = format!("example-{name}-data-{}", g.hex(8));

        // Data source in the module: never a node, but parsed.
        g.resource(
            Some(&module),
            "data",
            "aws_iam_policy_document",
            "assume",
            &[(
                String::new(),
                r#"{"id": "123", "json": "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"Service\":\"ec2.amazonaws.com\"},\"Action\":\"sts:AssumeRole\"}]}"}"#.to_owned(),
                vec![],
            )],
        )?;

        let sg = format!(
            r#"{{
            "arn": "arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/{sg_id}",
            "description": "Security group of {name}",
            "egress": [
              {{
                "cidr_blocks": ["0.0.0.0/0"],
                "description": "",
                "from_port": 0,
                "ipv6_cidr_blocks": [],
                "prefix_list_ids": [],
                "protocol": "-1",
                "security_groups": [],
                "self": false,
                "to_port": 0
              }}
            ],
            "id": "{sg_id}",
            "name": "{name}",
            "owner_id": "{ACCOUNT}",
            "revoke_rules_on_delete": false,
            "tags": {tags},
            "timeouts": null,
            "vpc_id": "{vpc_id}"
          }}"#,
            tags = tags(&name, "sg")
        );
        g.resource(
            Some(&module),
            "managed",
            "aws_security_group",
            "this",
            &[(String::new(), sg, vec!["aws_vpc.main".to_owned()])],
        )?;

        let rules: Vec<_> = [
            "tcp-443-10.0.0.0/8",
            "tcp-80-10.0.0.0/8",
            "tcp-22-192.168.0.0/16",
            "udp-53-10.0.0.0/8",
        ]
        .iter()
        .map(|k| {
            let id = format!("sgrule-{}", g.seq % 4_000_000_000);
            let _ = g.hex(1);
            let attrs = format!(
                r#"{{
            "cidr_blocks": ["{cidr}"],
            "description": "managed rule {k}",
            "from_port": {port},
            "id": "{id}",
            "ipv6_cidr_blocks": null,
            "prefix_list_ids": null,
            "protocol": "{proto}",
            "security_group_id": "{sg_id}",
            "security_group_rule_id": "sgr-{r}",
            "self": false,
            "source_security_group_id": null,
            "timeouts": null,
            "to_port": {port},
            "type": "ingress"
          }}"#,
                cidr = k.splitn(3, '-').nth(2).unwrap_or(""),
                port = k.split('-').nth(1).unwrap_or("0"),
                proto = &k[..3],
                r = g.hex(17),
            );
            (
                format!("\"{k}\""),
                attrs,
                vec![
                    format!("module.app.aws_security_group.this"),
                    "aws_vpc.main".to_owned(),
                ],
            )
        })
        .collect();
        g.resource(
            Some(&module),
            "managed",
            "aws_security_group_rule",
            "ingress",
            &rules,
        )?;

        let role = format!(
            r#"{{
            "arn": "arn:aws:iam::{ACCOUNT}:role/{role_name}",
            "assume_role_policy": "{{\"Statement\":[{{\"Action\":\"sts:AssumeRole\",\"Effect\":\"Allow\",\"Principal\":{{\"Service\":\"ec2.amazonaws.com\"}}}}],\"Version\":\"2012-10-17\"}}",
            "create_date": "2024-05-01T10:11:12Z",
            "description": "",
            "force_detach_policies": false,
            "id": "{role_name}",
            "inline_policy": [],
            "managed_policy_arns": ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore", "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"],
            "max_session_duration": 3600,
            "name": "{role_name}",
            "path": "/",
            "permissions_boundary": "",
            "tags": {tags},
            "unique_id": "AROA{u}"
          }}"#,
            tags = tags(&name, "role"),
            u = g.hex(17).to_uppercase()
        );
        g.resource(
            Some(&module),
            "managed",
            "aws_iam_role",
            "this",
            &[(
                String::new(),
                role,
                vec![format!("module.app.data.aws_iam_policy_document.assume")],
            )],
        )?;
        let attachments: Vec<_> = [
            "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
            "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
        ]
        .iter()
        .map(|p| {
            let attrs = format!(
                r#"{{
            "id": "{role_name}-{h}",
            "policy_arn": "{p}",
            "role": "{role_name}"
          }}"#,
                h = g.hex(26)
            );
            (
                format!("\"{p}\""),
                attrs,
                vec!["module.app.aws_iam_role.this".to_owned()],
            )
        })
        .collect();
        g.resource(
            Some(&module),
            "managed",
            "aws_iam_role_policy_attachment",
            "this",
            &attachments,
        )?;

        let web: Vec<_> = (0..3)
            .map(|i| {
                let id = format!("i-{}", g.hex(17));
                let vol = format!("vol-{}", g.hex(17));
                let eni = format!("eni-{}", g.hex(17));
                let attrs = format!(
                    r#"{{
            "ami": "ami-0c55b159cbfafe1f0",
            "arn": "arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{id}",
            "associate_public_ip_address": false,
            "availability_zone": "{REGION}a",
            "disable_api_termination": false,
            "ebs_optimized": true,
            "iam_instance_profile": "{role_name}",
            "id": "{id}",
            "instance_state": "running",
            "instance_type": "m6i.large",
            "metadata_options": [
              {{
                "http_endpoint": "enabled",
                "http_put_response_hop_limit": 2,
                "http_tokens": "required",
                "instance_metadata_tags": "disabled"
              }}
            ],
            "monitoring": true,
            "primary_network_interface_id": "{eni}",
            "private_dns": "ip-10-0-{i}-{o}.{REGION}.compute.internal",
            "private_ip": "10.0.{i}.{o}",
            "root_block_device": [
              {{
                "delete_on_termination": true,
                "device_name": "/dev/xvda",
                "encrypted": true,
                "iops": 3000,
                "kms_key_id": "arn:aws:kms:{REGION}:{ACCOUNT}:key/{k}",
                "tags": {{}},
                "throughput": 125,
                "volume_id": "{vol}",
                "volume_size": 50,
                "volume_type": "gp3"
              }}
            ],
            "subnet_id": "subnet-0123456789abcdef{i}",
            "tags": {tags},
            "tenancy": "default",
            "user_data": "{ud}",
            "vpc_security_group_ids": ["{sg_id}"]
          }}"#,
                    o = 10 + i,
                    k = g.hex(32),
                    ud = g.hex(40),
                    tags = tags(&name, "web")
                );
                (
                    i.to_string(),
                    attrs,
                    vec![
                        "aws_subnet.private".to_owned(),
                        "module.app.aws_iam_role.this".to_owned(),
                        "module.app.aws_security_group.this".to_owned(),
                        "module.app.data.aws_iam_policy_document.assume".to_owned(),
                    ],
                )
            })
            .collect();
        g.resource(Some(&module), "managed", "aws_instance", "web", &web)?;

        let bucket_attrs = format!(
            r#"{{
            "acceleration_status": "",
            "arn": "arn:aws:s3:::{bucket}",
            "bucket": "{bucket}",
            "bucket_domain_name": "{bucket}.s3.amazonaws.com",
            "bucket_regional_domain_name": "{bucket}.s3.{REGION}.amazonaws.com",
            "force_destroy": false,
            "hosted_zone_id": "Z1BKCTXD74EZPE",
            "id": "{bucket}",
            "object_lock_enabled": false,
            "region": "{REGION}",
            "request_payer": "BucketOwner",
            "server_side_encryption_configuration": [
              {{
                "rule": [
                  {{
                    "apply_server_side_encryption_by_default": [
                      {{ "kms_master_key_id": "", "sse_algorithm": "AES256" }}
                    ],
                    "bucket_key_enabled": false
                  }}
                ]
              }}
            ],
            "tags": {tags},
            "versioning": [ {{ "enabled": true, "mfa_delete": false }} ]
          }}"#,
            tags = tags(&name, "data")
        );
        g.resource(
            Some(&module),
            "managed",
            "aws_s3_bucket",
            "data",
            &[(String::new(), bucket_attrs, vec![])],
        )?;
        let policy = format!(
            r#"{{
            "bucket": "{bucket}",
            "id": "{bucket}",
            "policy": "{{\"Statement\":[{{\"Action\":\"s3:*\",\"Condition\":{{\"Bool\":{{\"aws:SecureTransport\":\"false\"}}}},\"Effect\":\"Deny\",\"Principal\":\"*\",\"Resource\":[\"arn:aws:s3:::{bucket}\",\"arn:aws:s3:::{bucket}/*\"]}}],\"Version\":\"2012-10-17\"}}"
          }}"#
        );
        g.resource(
            Some(&module),
            "managed",
            "aws_s3_bucket_policy",
            "data",
            &[(
                String::new(),
                policy,
                vec!["module.app.aws_s3_bucket.data".to_owned()],
            )],
        )?;

        let dns_module = format!("{module}.module.dns");
        let records: Vec<_> = (0..2)
            .map(|i| {
                let attrs = format!(
                    r#"{{
            "alias": [],
            "fqdn": "web{i}.{name}.internal.example.com",
            "health_check_id": "",
            "id": "Z0123456789ABCDEFGHIJ_web{i}.{name}.internal.example.com_A",
            "multivalue_answer_routing_policy": false,
            "name": "web{i}.{name}.internal.example.com",
            "records": ["10.0.{i}.10"],
            "set_identifier": "",
            "ttl": 300,
            "type": "A",
            "zone_id": "Z0123456789ABCDEFGHIJ"
          }}"#
                );
                (
                    i.to_string(),
                    attrs,
                    vec!["module.app.aws_instance.web".to_owned()],
                )
            })
            .collect();
        g.resource(
            Some(&dns_module),
            "managed",
            "aws_route53_record",
            "this",
            &records,
        )?;
        count += APPS_PER_INSTANCE;
        app += 1;
    }
    write!(g.out, "\n  ],\n  \"check_results\": null\n}}\n")?;
    g.out.flush()?;
    Ok(count)
}
