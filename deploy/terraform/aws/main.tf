# EventBridge (CloudTrail management write events) -> SQS, with a dead-letter queue:
# the resources `driftreactor setup aws` creates, as a module. The pattern and the
# policies are the ones crates/aws/src/setup.rs builds (event_pattern, queue_policy,
# redrive_policy).

locals {
  dlq_name  = "${var.name}-dlq"
  rule_name = "${var.name}-cloudtrail"

  # CloudTrail API calls that changed something: not read-only (false or absent) and
  # not failed (no errorCode); only from var.event_sources when given.
  event_pattern = merge(
    {
      "detail-type" = ["AWS API Call via CloudTrail"]
      detail = {
        readOnly  = [false, { exists = false }]
        errorCode = [{ exists = false }]
      }
    },
    length(var.event_sources) > 0 ? { source = sort(distinct(var.event_sources)) } : {},
  )
}

resource "aws_sqs_queue" "dlq" {
  name                      = local.dlq_name
  message_retention_seconds = 1209600 # 14 days, the SQS maximum
  sqs_managed_sse_enabled   = var.kms_master_key_id == null ? true : null
  kms_master_key_id         = var.kms_master_key_id
  tags                      = var.tags
}

resource "aws_sqs_queue" "events" {
  name                       = var.name
  visibility_timeout_seconds = var.visibility_timeout_seconds
  message_retention_seconds  = var.message_retention_seconds
  receive_wait_time_seconds  = 20
  sqs_managed_sse_enabled    = var.kms_master_key_id == null ? true : null
  kms_master_key_id          = var.kms_master_key_id
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq.arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = var.tags
}

resource "aws_cloudwatch_event_rule" "cloudtrail" {
  name           = local.rule_name
  description    = "CloudTrail management write events for driftreactor"
  event_bus_name = var.event_bus_name
  event_pattern  = jsonencode(local.event_pattern)
  tags           = var.tags
}

resource "aws_cloudwatch_event_target" "queue" {
  rule           = aws_cloudwatch_event_rule.cloudtrail.name
  event_bus_name = var.event_bus_name
  target_id      = "driftreactor-sqs"
  arn            = aws_sqs_queue.events.arn
}

data "aws_iam_policy_document" "queue" {
  policy_id = "driftreactor-eventbridge"

  statement {
    sid       = "AllowDriftreactorEventBridgeRule"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.events.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.cloudtrail.arn]
    }
  }

  dynamic "statement" {
    for_each = length(var.consumer_role_arns) > 0 ? [1] : []
    content {
      sid       = "AllowDriftreactorConsumers"
      effect    = "Allow"
      actions   = local.consumer_actions
      resources = [aws_sqs_queue.events.arn]

      principals {
        type        = "AWS"
        identifiers = var.consumer_role_arns
      }
    }
  }
}

locals {
  consumer_actions = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:GetQueueAttributes",
  ]
}

resource "aws_sqs_queue_policy" "events" {
  queue_url = aws_sqs_queue.events.id
  policy    = data.aws_iam_policy_document.queue.json
}

# An identity policy for the consumer (attach it to the IRSA role).
data "aws_iam_policy_document" "consumer" {
  statement {
    sid       = "ConsumeDriftreactorQueue"
    effect    = "Allow"
    actions   = local.consumer_actions
    resources = [aws_sqs_queue.events.arn]
  }

  dynamic "statement" {
    for_each = var.kms_master_key_id == null ? [] : [1]
    content {
      sid       = "DecryptDriftreactorQueue"
      effect    = "Allow"
      actions   = ["kms:Decrypt"]
      resources = [var.kms_master_key_id]
    }
  }
}
