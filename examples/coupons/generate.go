package main

// The API code in ./api is generated from openapi.yaml, in this order:
// oapi-codegen first (the types, the strict server, the client), then idemgen
// (the server wrapper and client helpers, which use oapi-codegen's types, and
// the contract's docs). Both read the same spec. The tools are the versions
// the main module's go.mod lists (its tool directives).

//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml
//go:generate go tool idemgen generate -config idemgen.yaml
