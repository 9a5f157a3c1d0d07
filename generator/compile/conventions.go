package compile

import (
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// keyWords are words that mark a name as a per-request key.
var keyWords = []string{"idempotency", "idempotent", "requestid", "dedup", "deduplication", "nonce", "clienttoken", "clientreference"}

// LooksLikeKeyName reports whether a header, query or body member name is a
// per-request idempotency key by the conventions seen in real APIs:
// Idempotency-Key (and X-/vendor-prefixed variants), PayPal-Request-Id-style
// <Vendor>-Request-Id headers, idempotency_key / idempotencyKey members,
// client tokens. X-Request-Id and Request-Id are tracing ids, not keys.
func LooksLikeKeyName(name string) bool {
	n := contract.NormName(name)
	if n == "requestid" || n == "xrequestid" || strings.HasPrefix(n, "is") && strings.Contains(n, "idempot") {
		return false
	}
	for _, w := range keyWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// looksLikeBusinessID reports whether a key's name looks like a business
// identifier (order_id, paymentNumber, invoice-ref, OrderID): a value that
// names the thing being created, not this one request. Its last word, at
// a separator or a change of case, must be an identifier's (id, uuid,
// number, no, ref, reference, code) after some other word: rid, uuid or
// promocode are single words and not flagged.
func looksLikeBusinessID(name string) bool {
	if LooksLikeKeyName(name) || strings.Contains(contract.NormName(name), "request") {
		return false
	}
	w := nameWords(name)
	if len(w) < 2 {
		return false
	}
	switch w[len(w)-1] {
	case "id", "uuid", "number", "no", "ref", "reference", "code":
		return true
	}
	return false
}

// nameWords splits a name into its lower-cased words: at separators (any
// character but a letter or a digit), before an upper-case letter that
// follows a lower-case one or a digit, and before the last upper-case
// letter of a run followed by a lower-case one ("HTTPServer": http,
// server).
func nameWords(name string) []string {
	var words []string
	var cur []rune
	rs := []rune(name)
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	isUpper := func(c rune) bool { return c >= 'A' && c <= 'Z' }
	isLower := func(c rune) bool { return c >= 'a' && c <= 'z' }
	isDigit := func(c rune) bool { return c >= '0' && c <= '9' }
	for i, c := range rs {
		if !isUpper(c) && !isLower(c) && !isDigit(c) {
			flush()
			continue
		}
		if isUpper(c) && i > 0 && (isLower(rs[i-1]) || isDigit(rs[i-1]) ||
			isUpper(rs[i-1]) && i+1 < len(rs) && isLower(rs[i+1])) {
			flush()
		}
		cur = append(cur, c)
	}
	flush()
	return words
}

// KeyCandidate is a key an operation already declares by a known convention.
type KeyCandidate struct {
	Carrier  ir.Carrier
	Name     string // header or query name, or body JSON pointer
	Required bool
}

// DetectKeys lists the idempotency keys op declares by convention: header
// or query parameters named like keys, and string members of its JSON body
// named like keys (a boolean such as is_idempotent is not a key).
func DetectKeys(op *openapi3.Operation, pathParams openapi3.Parameters) []KeyCandidate {
	var out []KeyCandidate
	for _, r := range mergeParamRefs(pathParams, op.Parameters, "", "") {
		p := r.v
		if p.In != "header" && p.In != "query" {
			continue
		}
		if !LooksLikeKeyName(p.Name) || !stringish(p.Schema) {
			continue
		}
		out = append(out, KeyCandidate{Carrier: ir.Carrier(p.In), Name: p.Name, Required: p.Required})
	}
	if s := jsonBodySchema(op); s != nil {
		for _, b := range branches(s) {
			for _, name := range sortedKeys(b.Properties) {
				r := b.Properties[name]
				if r == nil || r.Value == nil || !LooksLikeKeyName(name) || !stringish(r) {
					continue
				}
				out = append(out, KeyCandidate{Carrier: ir.CarrierBody, Name: "/" + load.Escape(name), Required: slices.Contains(b.Required, name)})
			}
		}
	}
	return out
}

func stringish(r *openapi3.SchemaRef) bool {
	if r == nil || r.Value == nil || r.Value.Type == nil || len(r.Value.Type.Slice()) == 0 {
		return true
	}
	return r.Value.Type.Includes("string")
}

// jsonBodySchema returns the schema of op's JSON request body: application/json
// first, else the first JSON media type in name order.
func jsonBodySchema(op *openapi3.Operation) *openapi3.Schema {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	content := op.RequestBody.Value.Content
	if mt := content.Get("application/json"); mt != nil && mt.Schema != nil {
		return mt.Schema.Value
	}
	for _, ct := range sortedKeys(content) {
		if isJSON(ct) && content[ct] != nil && content[ct].Schema != nil {
			return content[ct].Schema.Value
		}
	}
	return nil
}

// Candidates lists the members of op's JSON request body that the
// volatile-candidate and unordered-candidate warnings name when a contract
// declares no volatile or unordered pointers (where the fingerprint
// decides something: ir.Operation.FingerprintDecides): members named like
// client clocks, retry counters or trace ids, and arrays with uniqueItems.
// keyPtr, the body key's pointer (or ""), is left out. `idemgen init`
// proposes them.
func Candidates(op *openapi3.Operation, keyPtr string) (volatile, unordered []string) {
	body := jsonBodySchema(op)
	if body == nil {
		return nil, nil
	}
	for _, m := range walk(body, 8) {
		if m.path == keyPtr {
			continue
		}
		if contract.VolatileName(m.name) && !slices.Contains(volatile, m.path) {
			volatile = append(volatile, m.path)
		}
	}
	for _, m := range walk(body, 8) {
		if m.schema.UniqueItems && isArray(m.schema) && !slices.Contains(unordered, m.path) {
			covered := false
			for _, v := range volatile {
				covered = covered || covers(v, m.path)
			}
			if !covered {
				unordered = append(unordered, m.path)
			}
		}
	}
	return volatile, unordered
}
