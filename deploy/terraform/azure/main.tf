# The subscription's resource events (Event Grid system topic of type
# Microsoft.Resources.Subscriptions) -> a webhook event subscription to the sidecar's
# `azure_event_grid_push` endpoint, CloudEvents 1.0 schema, batched, with retries and
# an optional dead-letter container.

resource "azurerm_eventgrid_system_topic" "subscription" {
  name                = var.name
  resource_group_name = var.resource_group_name
  location            = "global"
  source_resource_id  = "/subscriptions/${var.subscription_id}"
  topic_type          = "Microsoft.Resources.Subscriptions"
  tags                = var.tags
}

resource "azurerm_eventgrid_system_topic_event_subscription" "push" {
  name                  = "${var.name}-push"
  system_topic          = azurerm_eventgrid_system_topic.subscription.name
  resource_group_name   = var.resource_group_name
  event_delivery_schema = "CloudEventSchemaV1_0"
  included_event_types  = var.included_event_types

  webhook_endpoint {
    url                               = var.webhook_url
    max_events_per_batch              = var.max_events_per_batch
    preferred_batch_size_in_kilobytes = 64
  }

  dynamic "subject_filter" {
    for_each = var.subject_begins_with == null ? [] : [1]
    content {
      subject_begins_with = var.subject_begins_with
    }
  }

  dynamic "advanced_filter" {
    for_each = length(var.excluded_operation_prefixes) > 0 ? [1] : []
    content {
      string_not_begins_with {
        key    = "data.operationName"
        values = var.excluded_operation_prefixes
      }
    }
  }

  retry_policy {
    max_delivery_attempts = var.max_delivery_attempts
    event_time_to_live    = var.event_time_to_live_minutes
  }

  dynamic "storage_blob_dead_letter_destination" {
    for_each = var.dead_letter_storage_account_id == null ? [] : [1]
    content {
      storage_account_id          = var.dead_letter_storage_account_id
      storage_blob_container_name = var.dead_letter_container
    }
  }
}
