package rollout_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/rollout"
)

// TestRulesIgnorable: every rule of the package is a warning rule, which
// an ignore may name.
func TestRulesIgnorable(t *testing.T) {
	for _, r := range rollout.Rules {
		assert.Contains(t, diag.WarningRules(), r)
	}
}

// TestMatch: operations pair by operationId, then by method and path with
// the parameters' names left out; an ambiguous or missing one is left out.
func TestMatch(t *testing.T) {
	op := func(id, method, path string) *ir.Operation {
		return &ir.Operation{OperationID: id, Method: method, Path: path, GoName: "G" + id}
	}
	oldA, oldB, oldC, oldD := op("a", "POST", "/a"), op("", "PUT", "/b/{id}"), op("c", "POST", "/c"), op("gone", "POST", "/gone")
	newA, newB, newC, newN := op("a", "POST", "/moved"), op("", "PUT", "/b/{bId}"), op("renamed", "POST", "/c"), op("new", "POST", "/new")
	pairs := rollout.Match(&ir.Spec{Operations: []*ir.Operation{oldA, oldB, oldC, oldD}}, &ir.Spec{Operations: []*ir.Operation{newA, newB, newC, newN}})
	assert.ElementsMatch(t, [][2]*ir.Operation{{oldA, newA}, {oldB, newB}, {oldC, newC}}, pairs)
}

// TestMatchSwapped: two operations that swapped operationIds pair by
// method and path (where a retry goes), so the change of name is seen.
func TestMatchSwapped(t *testing.T) {
	op := func(id, path string) *ir.Operation {
		return &ir.Operation{OperationID: id, Method: "POST", Path: path}
	}
	oldA, oldB := op("a", "/a"), op("b", "/b")
	newA, newB := op("b", "/a"), op("a", "/b")
	pairs := rollout.Match(&ir.Spec{Operations: []*ir.Operation{oldA, oldB}}, &ir.Spec{Operations: []*ir.Operation{newA, newB}})
	assert.ElementsMatch(t, [][2]*ir.Operation{{oldA, newA}, {oldB, newB}}, pairs)
}

// TestMatchMovedOntoPairedPath: A moved to B's old path and B to a new
// one: B pairs by id, and A, with nothing left at its new path, by id
// too (it used to be compared with nothing).
func TestMatchMovedOntoPairedPath(t *testing.T) {
	op := func(id, path string) *ir.Operation {
		return &ir.Operation{OperationID: id, Method: "POST", Path: path}
	}
	oldA, oldB := op("A", "/a"), op("B", "/b")
	newA, newB := op("A", "/b"), op("B", "/c")
	pairs := rollout.Match(&ir.Spec{Operations: []*ir.Operation{oldA, oldB}}, &ir.Spec{Operations: []*ir.Operation{newA, newB}})
	assert.ElementsMatch(t, [][2]*ir.Operation{{oldA, newA}, {oldB, newB}}, pairs)

	// With a new operation at A's old path, that one pairs with A's base
	// by path (its name change is reported) and A is left out.
	newC := op("C", "/a")
	pairs = rollout.Match(&ir.Spec{Operations: []*ir.Operation{oldA, oldB}}, &ir.Spec{Operations: []*ir.Operation{newC, newA, newB}})
	assert.ElementsMatch(t, [][2]*ir.Operation{{oldA, newC}, {oldB, newB}}, pairs)
}
