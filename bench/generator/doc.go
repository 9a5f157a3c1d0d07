// Package generator measures `idemgen generate` on the largest real spec
// (testdata/specs/modern-treasury.yaml with the overlay that annotates every
// POST and PATCH), running every emitter registered in this build, next to
// oapi-codegen's own in-process generation of the same spec (types,
// strict-server, std-http-server and client), whose output idemgen's plugs
// into.
package generator
