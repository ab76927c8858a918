output "system_topic_id" {
  description = "The Event Grid system topic's resource ID."
  value       = azurerm_eventgrid_system_topic.subscription.id
}

output "event_subscription_id" {
  description = "The webhook event subscription's resource ID."
  value       = azurerm_eventgrid_system_topic_event_subscription.push.id
}

output "source_config" {
  description = "The [[sources]] entry for driftreactor.toml (the secret is the webhook URL's code parameter, read from a file or environment variable)."
  value       = <<-EOT
    [[sources]]
    type = "azure_event_grid_push"
    path = "/push/azure"
    secret_file = "/var/run/secrets/driftreactor/eventgrid"
    allowed_origins = ["eventgrid.azure.net"]
  EOT
}
