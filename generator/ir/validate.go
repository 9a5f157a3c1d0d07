package ir

import (
	"fmt"
	"go/token"
	"sort"
)

// CollisionError reports two things of a spec that would get the same Go
// identifier in generated code.
type CollisionError struct {
	Name  string // the identifier
	What  string // what the second one is, e.g. "request object of POST /a"
	Pos   Pos    // where the second one is
	Other Pos    // where the first one is
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("Go identifier %s of %s collides with one declared at %s:%d:%d", e.Name, e.What, e.Other.File, e.Other.Line, e.Other.Col)
}

// Validate checks that s can be emitted: every generated identifier is a
// valid Go identifier and unique where Go requires it. It returns every
// problem found, nil when there is none.
func (s *Spec) Validate() []error {
	var errs []error
	type owner struct {
		what string
		pos  Pos
	}
	seen := map[string]owner{}
	// claim reports at most one problem an operation: the names derived
	// from one Go name all collide together.
	claim := func(name, what string, pos Pos) bool {
		if name == "" {
			return true
		}
		if !token.IsIdentifier(name) || !token.IsExported(name) {
			errs = append(errs, &InvalidNameError{Name: name, What: what, Pos: pos})
			return false
		}
		if o, ok := seen[name]; ok {
			errs = append(errs, &CollisionError{Name: name, What: what, Pos: pos, Other: o.pos})
			return false
		}
		seen[name] = owner{what, pos}
		return true
	}
	collided := map[*Operation]bool{}
	for _, op := range s.Operations {
		where := op.Where()
		n := op.Names
		ok := claim(n.Handler, "operation "+where, op.Pos) &&
			claim(n.RequestObject, "request object of "+where, op.Pos) &&
			claim(n.ResponseObject, "response object of "+where, op.Pos) &&
			claim(n.Params, "parameters of "+where, op.Pos) &&
			claim(n.ResponseType, "client response of "+where, op.Pos) &&
			claim(n.JSONRequestBody, "JSON request body of "+where, op.Pos)
		if !ok {
			collided[op] = true
		}
		// Methods live on the client types: unique among themselves only,
		// and a method name may equal a type name, so a separate space.
		fields := map[string]Pos{}
		for _, p := range op.PathParams {
			if !token.IsIdentifier(p.GoName) {
				errs = append(errs, &InvalidNameError{Name: p.GoName, What: "path parameter " + p.Name + " of " + where, Pos: p.Pos})
				continue
			}
			if first, ok := fields[p.GoName]; ok {
				errs = append(errs, &CollisionError{Name: p.GoName, What: "path parameter " + p.Name + " of " + where, Pos: p.Pos, Other: first})
				continue
			}
			fields[p.GoName] = p.Pos
		}
	}
	methods := map[string]Pos{}
	for _, op := range s.Operations {
		if collided[op] {
			continue
		}
		for i, m := range []string{op.Names.WithResponse, op.Names.WithBodyWithResponse} {
			if m == "" || (i == 1 && m == op.Names.WithResponse) {
				continue
			}
			if first, ok := methods[m]; ok {
				errs = append(errs, &CollisionError{Name: m, What: "client method of " + op.Where(), Pos: op.Pos, Other: first})
				continue
			}
			methods[m] = op.Pos
		}
	}
	errs = append(errs, s.routeCollisions(collided)...)
	sort.SliceStable(errs, func(i, j int) bool { return posOf(errs[i]).Line < posOf(errs[j]).Line })
	return errs
}

// routeCollisions reports the operations that are not idempotent (the
// Routes without one) whose Go names, as oapi-codegen derives them, are
// also those of an idempotent operation (but one of those collided):
// oapi-codegen declares both, and the generated code would not build
// (Client.CreateOrder redeclared, for an idempotent `create-order` beside
// a plain `createOrder`). Both positions get an error, each naming the
// other; one error a route.
func (s *Spec) routeCollisions(collided map[*Operation]bool) []error {
	// The names of the idempotent operations, in the space each is
	// declared in: methods (of the server interfaces and the clients),
	// and package-level types.
	methods, types := map[string]*Operation{}, map[string]*Operation{}
	for _, op := range s.Operations {
		if collided[op] {
			continue
		}
		n := op.Names
		for _, m := range []string{n.Handler, n.ClientMethod, n.ClientWithBody, n.WithResponse, n.WithBodyWithResponse} {
			if m != "" {
				methods[m] = op
			}
		}
		for _, t := range []string{n.RequestObject, n.ResponseObject, n.Params, n.ResponseType, n.JSONRequestBody} {
			if t != "" {
				types[t] = op
			}
		}
	}
	var errs []error
	for _, r := range s.Routes {
		g := r.GoName
		if r.Idempotent || g == "" || !token.IsIdentifier(g) {
			continue
		}
		// The names oapi-codegen declares for every operation, whatever
		// its parameters and body.
		cands := []struct {
			name  string
			space map[string]*Operation
		}{
			{g, methods}, {g + "WithBody", methods}, {g + "WithResponse", methods}, {g + "WithBodyWithResponse", methods},
			{g + "RequestObject", types}, {g + "ResponseObject", types}, {g + "Response", types},
		}
		for _, c := range cands {
			op, ok := c.space[c.name]
			if !ok {
				continue
			}
			errs = append(errs,
				&CollisionError{Name: c.name, What: "operation " + r.Where(), Pos: r.Pos, Other: op.Pos},
				&CollisionError{Name: c.name, What: "operation " + op.Where(), Pos: op.Pos, Other: r.Pos})
			break
		}
	}
	return errs
}

// InvalidNameError reports a generated name that is not an exported Go identifier.
type InvalidNameError struct {
	Name string
	What string
	Pos  Pos
}

func (e *InvalidNameError) Error() string {
	return fmt.Sprintf("%s gets the Go name %q, which is not an exported Go identifier", e.What, e.Name)
}

func posOf(err error) Pos {
	switch e := err.(type) {
	case *CollisionError:
		return e.Pos
	case *InvalidNameError:
		return e.Pos
	}
	return Pos{}
}
