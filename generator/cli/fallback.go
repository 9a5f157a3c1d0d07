package cli

import (
	"slices"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// pathFallbacks returns, for generate running the emitters names with the
// settings params, a function that finds the operations the plain
// server's one-line wiring (x.Handler, echo's and gin's
// x.RegisterHandlers) protects by path instead of by operation: idemgen
// cannot tell the Go type of one of their path parameters, so it cannot
// write their ServerInterface method. Each gets a warning
// [path-fallback] at that parameter. None for a strict server or
// server.router none, whose wiring does not depend on it.
func pathFallbacks(names []string, params map[string]string) func(*load.Document, *ir.Spec) diag.List {
	return func(_ *load.Document, spec *ir.Spec) diag.List {
		if spec == nil || !slices.Contains(names, server.Name) {
			return nil
		}
		cfg, err := server.ParseConfig(params)
		if err != nil || cfg.Strict || cfg.Router == "none" {
			return nil
		}
		var out diag.List
		for _, op := range spec.Operations {
			p := server.PathFallback(op)
			if p == nil {
				continue
			}
			w := server.FallbackWiring(cfg.Router, cfg.FirstToLast)
			caveat := w.Caveat
			if w.Hint != "" {
				caveat += " " + w.Hint
			}
			out.Warnf(ir.FirstPos(p.Pos, op.Pos), rulePathFallback,
				"%s is protected by path, not by operation, in the plain server's one-line wiring (%s): idemgen cannot tell the Go type of its path parameter %s (an x-go-type, an object, a union, a nullable value, an enum declared on the path item or in a component parameter), which its ServerInterface method takes. The wiring protects such operations by %s. %s Give the parameter a plain schema (string, integer, number, boolean, or an array of them, with its enum on the schema), or generate the strict server",
				op.Where(), w.Call, p.Name, w.How, caveat)
		}
		return out
	}
}
