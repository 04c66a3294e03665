// Package openapi embeds openapi.yaml, the contract of the control plane's
// REST API, so the server can serve it and tests can hold every request
// and response to it.
package openapi

import _ "embed"

// Spec is the OpenAPI 3.1 document.
//
//go:embed openapi.yaml
var Spec []byte
