variable "subscription_id" {
  description = "The Azure subscription (its GUID) whose resource events are delivered (the system topic's source, /subscriptions/ID)."
  type        = string
}

variable "resource_group_name" {
  description = "An existing resource group to hold the system topic."
  type        = string
}

variable "name" {
  description = "Name of the system topic; the event subscription is NAME-push."
  type        = string
  default     = "driftreactor"
}

variable "webhook_url" {
  description = "The sidecar's `azure_event_grid_push` endpoint, with its shared secret: https://driftreactor.example.com/push/azure?code=SECRET. Event Grid validates it when the subscription is created (the CloudEvents OPTIONS handshake), so the sidecar must be up and reachable over HTTPS then."
  type        = string
  sensitive   = true

  validation {
    condition     = startswith(var.webhook_url, "https://")
    error_message = "webhook_url must be an https:// URL (Event Grid delivers to HTTPS webhooks only)."
  }
}

variable "included_event_types" {
  description = "Event types delivered: successful writes, deletes and actions on resources."
  type        = list(string)
  default = [
    "Microsoft.Resources.ResourceWriteSuccess",
    "Microsoft.Resources.ResourceDeleteSuccess",
    "Microsoft.Resources.ResourceActionSuccess",
  ]
}

variable "subject_begins_with" {
  description = "Only events whose subject (the resource ID) starts with this, e.g. /subscriptions/ID/resourceGroups/prod. Null: every resource of the subscription."
  type        = string
  default     = null
}

variable "excluded_operation_prefixes" {
  description = "data.operationName prefixes to drop at the source (an advanced filter), e.g. Microsoft.Resources/deployments/ for ARM deployment bookkeeping. Empty: none."
  type        = list(string)
  default     = []
}

variable "max_events_per_batch" {
  description = "Events per delivery (1 to 5000); driftreactor journals a batch atomically. Keep batches under [server] body_limit_bytes (default 1 MiB)."
  type        = number
  default     = 10
}

variable "max_delivery_attempts" {
  description = "Delivery attempts before an event is dead-lettered (or dropped without a dead-letter container)."
  type        = number
  default     = 30
}

variable "event_time_to_live_minutes" {
  description = "How long Event Grid keeps retrying an event, in minutes (at most 1440)."
  type        = number
  default     = 1440
}

variable "dead_letter_storage_account_id" {
  description = "A storage account for dead-lettered events (its container dead_letter_container). Null: no dead-lettering."
  type        = string
  default     = null
}

variable "dead_letter_container" {
  description = "The blob container in dead_letter_storage_account_id."
  type        = string
  default     = "driftreactor-deadletter"
}

variable "tags" {
  description = "Tags on the system topic."
  type        = map(string)
  default     = {}
}
