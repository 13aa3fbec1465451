package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 description of the server's v1 HTTP API
// (api/openapi.json), embedded in the binary and served at GET /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
