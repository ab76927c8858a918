output "queue_url" {
  description = "URL of the queue (the `aws_sqs` source's queue_url)."
  value       = aws_sqs_queue.events.id
}

output "queue_arn" {
  description = "ARN of the queue."
  value       = aws_sqs_queue.events.arn
}

output "dlq_url" {
  description = "URL of the dead-letter queue (poison messages land here after max_receive_count receives)."
  value       = aws_sqs_queue.dlq.id
}

output "dlq_arn" {
  description = "ARN of the dead-letter queue."
  value       = aws_sqs_queue.dlq.arn
}

output "rule_arn" {
  description = "ARN of the EventBridge rule."
  value       = aws_cloudwatch_event_rule.cloudtrail.arn
}

output "event_pattern" {
  description = "The rule's event pattern (JSON), the same as `driftreactor setup aws --dry-run` prints."
  value       = jsonencode(local.event_pattern)
}

output "consumer_policy_json" {
  description = "An IAM identity policy (JSON) that lets driftreactor consume the queue: attach it to the service's role."
  value       = data.aws_iam_policy_document.consumer.json
}

output "source_config" {
  description = "The [[sources]] entry for driftreactor.toml."
  value       = <<-EOT
    [[sources]]
    type = "aws_sqs"
    queue_url = "${aws_sqs_queue.events.id}"
    visibility_timeout_secs = ${var.visibility_timeout_seconds}
  EOT
}
