// Package keytypesapi is the client emitter's golden case for key
// parameters whose Go type is not plain string (testdata/client/key-types):
// oapi-codegen's output (api.gen.go), the server wrapper
// (idempotency.gen.go) and the client helpers (idempotency_client.gen.go),
// driven by keytypes_test.go.
package keytypesapi

// NoteKey is the Go type of createNote's key header (x-go-type: NoteKey).
// Its String method hides the key, as a type for secrets may: the key is
// its text, never what String prints.
type NoteKey string

func (NoteKey) String() string { return "NoteKey(redacted)" }

// TicketKey is the Go type of openTicket's key query parameter (x-go-type: TicketKey).
type TicketKey string
