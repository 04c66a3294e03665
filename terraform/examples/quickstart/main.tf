# An account with limits, a user for the application (its creds in
# state), a CI token and a stream, against `contrail dev`. See
# ../README.md for how to run it.

terraform {
  required_providers {
    contrail = {
      source = "contrail/contrail"
    }
  }
}

# endpoint and token come from CONTRAIL_ENDPOINT and CONTRAIL_TOKEN.
provider "contrail" {}

resource "contrail_account" "orders" {
  name            = "orders"
  max_connections = 100
  max_storage     = 10737418240 # 10 GiB
  max_streams     = 10
}

resource "contrail_user" "app" {
  account_id      = contrail_account.orders.id
  name            = "orders-service"
  publish_allow   = ["orders.>", "$JS.API.>", "$JS.ACK.>"]
  subscribe_allow = ["_INBOX.>", "orders.>"]

  # Change the value to rotate the creds: a new user replaces the old,
  # which is revoked.
  rotation = {
    generation = "1"
  }
}

resource "contrail_stream" "orders" {
  account_id       = contrail_account.orders.id
  name             = "ORDERS"
  subjects         = ["orders.>"]
  max_age          = 604800 # a week, in seconds
  max_bytes        = 1073741824
  duplicate_window = 120
  metadata = {
    team = "shop"
  }
}

resource "contrail_api_token" "ci" {
  name        = "ci-deploy"
  ttl_seconds = 86400
}

data "contrail_streams" "orders" {
  account_id = contrail_account.orders.id
  depends_on = [contrail_stream.orders]
}

output "nats_url" {
  value = contrail_account.orders.nats_url
}

output "app_creds" {
  value     = contrail_user.app.creds
  sensitive = true
}

output "streams" {
  value = [for s in data.contrail_streams.orders.streams : s.name]
}
