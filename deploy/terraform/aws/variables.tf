variable "name" {
  description = "Name of the SQS queue the `aws_sqs` source reads; the dead-letter queue is NAME-dlq and the EventBridge rule NAME-cloudtrail (as `driftreactor setup aws --queue-name NAME` names them)."
  type        = string
  default     = "driftreactor-events"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,76}$", var.name))
    error_message = "name must be 1 to 76 characters of letters, digits, - and _ (SQS queue names are at most 80 and the DLQ adds -dlq)."
  }
}

variable "event_bus_name" {
  description = "The event bus the rule is on. CloudTrail management events arrive on the default bus."
  type        = string
  default     = "default"
}

variable "event_sources" {
  description = "Event sources to keep (`aws.ec2`, `aws.s3`, …): the services your Terraform states use. Empty: every source."
  type        = list(string)
  default     = []
}

variable "max_receive_count" {
  description = "Receives before SQS moves a message to the dead-letter queue (poison messages are never deleted by driftreactor; the redrive policy moves them)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count must be between 1 and 1000."
  }
}

variable "visibility_timeout_seconds" {
  description = "The queue's visibility timeout, in seconds; keep it equal to the source's `visibility_timeout_secs` (default 60)."
  type        = number
  default     = 60
}

variable "message_retention_seconds" {
  description = "How long the queue keeps a message, in seconds (SQS default 4 days). The dead-letter queue keeps messages 14 days. The journal's retain_days must outlast this (serve refuses less than 14 days)."
  type        = number
  default     = 345600
}

variable "kms_master_key_id" {
  description = "A KMS key for SSE-KMS on both queues (the EventBridge service then needs kms:GenerateDataKey and kms:Decrypt on it, and driftreactor kms:Decrypt). Null: SQS-managed encryption (SSE-SQS)."
  type        = string
  default     = null
}

variable "consumer_role_arns" {
  description = "IAM roles allowed to consume the queue (the IRSA role of the driftreactor service account, an instance role): the queue policy grants them ReceiveMessage, DeleteMessage, ChangeMessageVisibility, GetQueueUrl and GetQueueAttributes. Empty: grant it with an identity policy instead (output consumer_policy_json)."
  type        = list(string)
  default     = []
}

variable "tags" {
  description = "Tags on the queues and the rule."
  type        = map(string)
  default     = {}
}
