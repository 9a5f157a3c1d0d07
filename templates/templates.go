// Package templates holds the embedded text/template sources of idemgen's
// non-Go outputs: the API documentation of the x-idempotency contracts
// (idempotency.md.tmpl, emitter "docs") and the contract summary that
// `idemgen spec` writes into each operation's description (summary.md.tmpl).
// Both render the same sentences from shared.md.tmpl, so the documentation
// and the augmented spec never say different things.
//
// The templates are executed by package generator/emit/docs, which defines
// their functions; this package only carries the files.
package templates

import "embed"

// FS holds every template (*.tmpl at the package root).
//
//go:embed *.tmpl
var FS embed.FS

// Names of the templates in FS.
const (
	Shared  = "shared.md.tmpl"      // partials used by both documents
	Docs    = "idempotency.md.tmpl" // the API documentation (IDEMPOTENCY.md)
	Summary = "summary.md.tmpl"     // the contract summary in an operation's description
)
