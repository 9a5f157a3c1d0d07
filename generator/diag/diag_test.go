package diag_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
)

func TestSortedDedup(t *testing.T) {
	var l diag.List
	l.Warnf(ir.Pos{File: "b.yaml", Line: 1, Col: 1}, "z-rule", "w")
	l.Errorf(ir.Pos{File: "a.yaml", Line: 10, Col: 2}, "b-rule", "e1")
	l.Errorf(ir.Pos{File: "a.yaml", Line: 10, Col: 2}, "a-rule", "e2")
	l.Errorf(ir.Pos{File: "a.yaml", Line: 2, Col: 9}, "a-rule", "e3")
	l.Errorf(ir.Pos{File: "a.yaml", Line: 10, Col: 2}, "a-rule", "e2") // duplicate
	got := l.Sorted()
	var lines []string
	for _, d := range got {
		lines = append(lines, d.String())
	}
	assert.Equal(t, []string{
		"a.yaml:2:9: error: e3 [a-rule]",
		"a.yaml:10:2: error: e2 [a-rule]",
		"a.yaml:10:2: error: e1 [b-rule]",
		"b.yaml:1:1: warning: w [z-rule]",
	}, lines)
	ne, nw := got.Count()
	assert.Equal(t, 3, ne)
	assert.Equal(t, 1, nw)
}

func TestErrAndUnsupported(t *testing.T) {
	var l diag.List
	l.Warnf(ir.Pos{File: "a", Line: 1}, "w", "only a warning")
	assert.NoError(t, l.Err())
	l.Unsupportedf(ir.Pos{File: "a", Line: 2, Col: 3}, "key-in-cookie", "a key in a cookie")
	err := l.Err()
	var el *diag.ErrorList
	require.True(t, errors.As(err, &el))
	assert.True(t, el.Unsupported())
	assert.Equal(t, "a:2:3: error: not supported yet: a key in a cookie [key-in-cookie]", err.Error())
	l.Errorf(ir.Pos{File: "a", Line: 3, Col: 1}, "bad-enum", "bad")
	require.True(t, errors.As(l.Err(), &el))
	assert.False(t, el.Unsupported())
	assert.Contains(t, el.Error(), "(and 1 more error)")
	l.Errorf(ir.Pos{File: "a", Line: 4, Col: 1}, "bad-enum", "bad")
	require.True(t, errors.As(l.Err(), &el))
	assert.Contains(t, el.Error(), "(and 2 more errors)")
}

func TestWriteJSON(t *testing.T) {
	var l diag.List
	l.Errorf(ir.Pos{File: "a.yaml", Line: 4, Col: 5, Pointer: "/paths/~1a/post/x-idempotency/window"}, "bad-duration", "no")
	l.Warnf(ir.Pos{File: "a.yaml", Line: 6, Col: 7}, "put-delete", "idempotent already")
	l[1].Ops = []string{"PUT /a"}
	l.Unsupportedf(ir.Pos{File: "a.yaml", Line: 8, Col: 9}, "key-in-cookie", "a cookie")
	var buf bytes.Buffer
	require.NoError(t, l.WriteJSON(&buf))
	var got []map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, []map[string]any{
		{"file": "a.yaml", "line": 4.0, "col": 5.0, "pointer": "/paths/~1a/post/x-idempotency/window",
			"severity": "error", "kind": "invalid", "rule": "bad-duration", "message": "no"},
		{"file": "a.yaml", "line": 6.0, "col": 7.0, "severity": "warning", "kind": "warning", "rule": "put-delete",
			"message": "idempotent already", "operations": []any{"PUT /a"}},
		{"file": "a.yaml", "line": 8.0, "col": 9.0, "severity": "error", "kind": "unsupported", "rule": "key-in-cookie", "message": "a cookie"},
	}, got)
}

func ExampleList() {
	var l diag.List
	l.Warnf(ir.Pos{File: "openapi.yaml", Line: 30, Col: 9}, "put-delete", "PUT is idempotent already")
	l.Errorf(ir.Pos{File: "openapi.yaml", Line: 12, Col: 17}, "bad-duration", `window: "10 minutes" is not a duration`)
	_ = l.Sorted().WriteText(os.Stdout)
	// Output:
	// openapi.yaml:12:17: error: window: "10 minutes" is not a duration [bad-duration]
	// openapi.yaml:30:9: warning: PUT is idempotent already [put-delete]
}

func TestStringOneLine(t *testing.T) {
	d := diag.Diagnostic{Pos: ir.Pos{File: "x.yaml", Line: 3, Col: 4}, Severity: diag.Warning, Rule: "r", Message: "first\n  second\n\n third\n"}
	assert.Equal(t, "x.yaml:3:4: warning: first second third [r]", d.String())
}
