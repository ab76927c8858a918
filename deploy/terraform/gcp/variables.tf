variable "project" {
  description = "The project whose Admin Activity audit logs are routed (and where the topic and subscription live)."
  type        = string
}

variable "name" {
  description = "Base name: the topic NAME, the subscription NAME, the sink NAME-audit, the dead-letter topic NAME-dlq, the asset feed NAME-assets."
  type        = string
  default     = "driftreactor"
}

variable "extra_filter" {
  description = "Appended to the sink's filter with AND (e.g. `protoPayload.serviceName=(\"compute.googleapis.com\" OR \"storage.googleapis.com\")`). Null: every Admin Activity entry."
  type        = string
  default     = null
}

variable "push_endpoint" {
  description = "HTTPS URL of the sidecar's `gcp_pubsub_push` endpoint (e.g. https://driftreactor.example.com/push/gcp): the subscription pushes there with an OIDC token. Null: a pull subscription for the `gcp_pubsub` source."
  type        = string
  default     = null
}

variable "push_service_account_email" {
  description = "Service account whose OIDC token Pub/Sub sends with each push (the source's `oidc.email`). Required with push_endpoint."
  type        = string
  default     = null
}

variable "push_audience" {
  description = "The token's audience (the source's `oidc.audience`). Null: push_endpoint."
  type        = string
  default     = null
}

variable "subscriber_members" {
  description = "Members granted roles/pubsub.subscriber on the subscription (pull): the Workload Identity service account of driftreactor, e.g. serviceAccount:driftreactor@PROJECT.iam.gserviceaccount.com."
  type        = list(string)
  default     = []
}

variable "ack_deadline_seconds" {
  description = "The subscription's ack deadline, in seconds (driftreactor extends leases while it works)."
  type        = number
  default     = 60
}

variable "max_delivery_attempts" {
  description = "Deliveries before a message goes to the dead-letter topic (5 to 100)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "max_delivery_attempts must be between 5 and 100 (Pub/Sub's limits)."
  }
}

variable "message_retention_duration" {
  description = "How long the subscription keeps unacknowledged messages (at most 7 days)."
  type        = string
  default     = "604800s"
}

variable "asset_feed_enabled" {
  description = "Also create a Cloud Asset feed (google_cloud_asset_project_feed) of resource changes to the same topic. Needs the Cloud Asset API enabled."
  type        = bool
  default     = false
}

variable "asset_types" {
  description = "Asset types the feed watches (e.g. compute.googleapis.com/Firewall). Empty with the feed enabled: every supported type (\".*\")."
  type        = list(string)
  default     = []
}

variable "labels" {
  description = "Labels on the topics and the subscription."
  type        = map(string)
  default     = {}
}
