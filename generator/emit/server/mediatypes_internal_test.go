package server

import (
	"fmt"
	"testing"

	"github.com/dave/jennifer/jen"
	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/generator/ir"
)

// The policy declares the operation's request media types, as the spec
// writes them, and an operation without a request body an empty list,
// never nil (nil is a Spec without the list: the Content-Type reading).
func TestRuntimeSpecMediaTypes(t *testing.T) {
	op := &ir.Operation{OperationID: "op", Method: "POST", Path: "/p", Policy: ir.Policy{Semantics: ir.Strict, Scope: []string{"principal"}}}
	s := runtimeSpec(op)
	assert.NotNil(t, s.Request.MediaTypes)
	assert.Empty(t, s.Request.MediaTypes)
	code := fmt.Sprintf("%#v", jen.Var().Id("x").Op("=").Add(specLiteral(s)))
	assert.Contains(t, code, "MediaTypes: []string{},")

	op.Body = &ir.Body{ContentTypes: []string{"application/json", "application/x-www-form-urlencoded; charset=utf-8"}}
	s = runtimeSpec(op)
	assert.Equal(t, op.Body.ContentTypes, s.Request.MediaTypes)
	code = fmt.Sprintf("%#v", jen.Var().Id("x").Op("=").Add(specLiteral(s)))
	assert.Contains(t, code, `MediaTypes: []string{"application/json", "application/x-www-form-urlencoded; charset=utf-8"},`)
}
