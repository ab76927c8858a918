output "topic_id" {
  description = "The topic the sink (and the asset feed) publish to: projects/PROJECT/topics/NAME."
  value       = google_pubsub_topic.audit.id
}

output "subscription_id" {
  description = "The subscription: projects/PROJECT/subscriptions/NAME (the `gcp_pubsub` source's subscription)."
  value       = google_pubsub_subscription.events.id
}

output "dead_letter_topic_id" {
  description = "The dead-letter topic (poison messages after max_delivery_attempts)."
  value       = google_pubsub_topic.dead_letter.id
}

output "sink_writer_identity" {
  description = "The Log Router sink's writer identity (granted roles/pubsub.publisher on the topic)."
  value       = google_logging_project_sink.audit.writer_identity
}

output "source_config" {
  description = "The [[sources]] entry for driftreactor.toml."
  value = local.push ? join("\n", [
    "[[sources]]",
    "type = \"gcp_pubsub_push\"",
    "oidc = { audience = \"${coalesce(var.push_audience, var.push_endpoint)}\", email = \"${coalesce(var.push_service_account_email, "-")}\" }",
    "",
    ]) : join("\n", [
    "[[sources]]",
    "type = \"gcp_pubsub\"",
    "subscription = \"${google_pubsub_subscription.events.id}\"",
    "",
  ])
}
