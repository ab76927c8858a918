# Admin Activity audit logs -> Log Router sink -> Pub/Sub topic -> subscription
# (pull for the `gcp_pubsub` source, or push to the sidecar's `gcp_pubsub_push`
# endpoint), with a dead-letter topic; optionally a Cloud Asset feed to the same topic.

data "google_project" "this" {
  project_id = var.project
}

locals {
  # The Pub/Sub service agent: it forwards to the dead-letter topic (and mints push
  # tokens).
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  base_filter  = "logName:\"cloudaudit.googleapis.com%2Factivity\""
  filter       = var.extra_filter == null ? local.base_filter : "${local.base_filter} AND (${var.extra_filter})"
  push         = var.push_endpoint != null
}

resource "google_pubsub_topic" "audit" {
  project = var.project
  name    = var.name
  labels  = var.labels
}

resource "google_pubsub_topic" "dead_letter" {
  project = var.project
  name    = "${var.name}-dlq"
  labels  = var.labels
}

resource "google_logging_project_sink" "audit" {
  project                = var.project
  name                   = "${var.name}-audit"
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.audit.id}"
  filter                 = local.filter
  unique_writer_identity = true
}

# The sink's own identity publishes to the topic.
resource "google_pubsub_topic_iam_member" "sink_writer" {
  project = var.project
  topic   = google_pubsub_topic.audit.name
  role    = "roles/pubsub.publisher"
  member  = google_logging_project_sink.audit.writer_identity
}

resource "google_pubsub_subscription" "events" {
  project                    = var.project
  name                       = var.name
  topic                      = google_pubsub_topic.audit.id
  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = var.message_retention_duration
  labels                     = var.labels

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  dynamic "push_config" {
    for_each = local.push ? [1] : []
    content {
      push_endpoint = var.push_endpoint

      oidc_token {
        service_account_email = var.push_service_account_email
        audience              = coalesce(var.push_audience, var.push_endpoint)
      }
    }
  }

  lifecycle {
    precondition {
      condition     = !local.push || var.push_service_account_email != null
      error_message = "push_endpoint needs push_service_account_email (driftreactor checks the push's OIDC token)."
    }
  }
}

resource "google_pubsub_subscription_iam_member" "subscribers" {
  for_each     = toset(var.subscriber_members)
  project      = var.project
  subscription = google_pubsub_subscription.events.name
  role         = "roles/pubsub.subscriber"
  member       = each.value
}

# Dead-lettering: the Pub/Sub service agent publishes to the dead-letter topic and
# acknowledges on the subscription.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  project      = var.project
  subscription = google_pubsub_subscription.events.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# Push authentication: the Pub/Sub service agent mints the push service account's
# OIDC tokens.
resource "google_service_account_iam_member" "push_token_creator" {
  count              = local.push ? 1 : 0
  service_account_id = "projects/${var.project}/serviceAccounts/${var.push_service_account_email}"
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

# Optional: a Cloud Asset feed (TemporalAsset messages) to the same topic; the Cloud
# Asset service agent publishes.
resource "google_cloud_asset_project_feed" "assets" {
  count           = var.asset_feed_enabled ? 1 : 0
  project         = var.project
  billing_project = var.project
  feed_id         = "${var.name}-assets"
  content_type    = "RESOURCE"
  asset_types     = length(var.asset_types) > 0 ? var.asset_types : [".*"]

  feed_output_config {
    pubsub_destination {
      topic = google_pubsub_topic.audit.id
    }
  }

  depends_on = [google_pubsub_topic_iam_member.asset_publisher]
}

resource "google_pubsub_topic_iam_member" "asset_publisher" {
  count   = var.asset_feed_enabled ? 1 : 0
  project = var.project
  topic   = google_pubsub_topic.audit.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudasset.iam.gserviceaccount.com"
}
