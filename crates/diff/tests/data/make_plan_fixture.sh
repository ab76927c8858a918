#!/bin/sh
# Regenerates plan_resource_drift.json beside this script: a real Terraform plan's
# `resource_drift` (terraform 1.11.4, hashicorp/aws 5.100.0 from the filesystem
# mirror) against moto_server. It applies a security group (one ingress rule, tags)
# and an IAM role with an inline assume-role policy, changes them out of band through
# the AWS API (boto3: opens port 22 to 0.0.0.0/0, retags, rewrites the trust policy),
# runs `terraform plan -refresh-only -out p` and keeps `format_version`,
# `terraform_version` and `resource_drift` of `terraform show -json p`.
#
# Needs: terraform, moto_server and python3 with boto3 on PATH; the mirror root in
# DRIFTREACTOR_TF_MIRROR (default /opt/tf-plugins). Run from anywhere:
#   crates/diff/tests/data/make_plan_fixture.sh
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
MIRROR=${DRIFTREACTOR_TF_MIRROR:-/opt/tf-plugins}
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
moto_server -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null; rm -rf "$WORK"' EXIT
until curl -sf "http://127.0.0.1:$PORT/moto-api/" >/dev/null; do sleep 0.2; done

cat >"$WORK/cli.tfrc" <<HCL
provider_installation {
  filesystem_mirror {
    path    = "$MIRROR"
    include = ["registry.terraform.io/hashicorp/*"]
  }
  direct { exclude = ["registry.terraform.io/hashicorp/*"] }
}
HCL
cat >"$WORK/main.tf" <<HCL
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
}
provider "aws" {
  region                      = "eu-west-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  endpoints {
    ec2 = "http://127.0.0.1:$PORT"
    iam = "http://127.0.0.1:$PORT"
    sts = "http://127.0.0.1:$PORT"
  }
}
resource "aws_vpc" "main" {
  cidr_block = "10.0.0.0/16"
}
resource "aws_security_group" "web" {
  name   = "web"
  vpc_id = aws_vpc.main.id
  ingress {
    description = "https"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/8"]
  }
  tags = { env = "prod", team = "web" }
}
resource "aws_iam_role" "app" {
  name = "app"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" }]
  })
}
output "sg" { value = aws_security_group.web.id }
HCL
cd "$WORK"
export TF_CLI_CONFIG_FILE="$WORK/cli.tfrc" TF_IN_AUTOMATION=1
terraform init -input=false -no-color >/dev/null
terraform apply -auto-approve -input=false -no-color >/dev/null
SG=$(terraform output -raw sg)
PORT=$PORT SG=$SG python3 - <<'PY'
import json, os, boto3
kw = dict(endpoint_url=f"http://127.0.0.1:{os.environ['PORT']}", region_name="eu-west-1",
          aws_access_key_id="test", aws_secret_access_key="test")
ec2 = boto3.client("ec2", **kw)
sg = os.environ["SG"]
ec2.authorize_security_group_ingress(GroupId=sg, IpPermissions=[{
    "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
    "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "temp debug"}]}])
ec2.create_tags(Resources=[sg], Tags=[{"Key": "env", "Value": "dev"}, {"Key": "owner", "Value": "alice"}])
iam = boto3.client("iam", **kw)
iam.update_assume_role_policy(RoleName="app", PolicyDocument=json.dumps({
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"},
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "sts:AssumeRole"}]}))
PY
terraform plan -refresh-only -input=false -no-color -out=p >/dev/null
terraform show -json p | python3 -c '
import json, sys
plan = json.load(sys.stdin)
keep = {k: plan[k] for k in ("format_version", "terraform_version", "resource_drift") if k in plan}
json.dump(keep, sys.stdout, indent=2, sort_keys=True)
print()' >"$HERE/plan_resource_drift.json"
echo "wrote $HERE/plan_resource_drift.json"
