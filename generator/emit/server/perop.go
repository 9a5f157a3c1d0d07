package server

import (
	"slices"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/generator/emit/internal/gogen"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/naming"
)

// The plain servers' one-line wiring (Handler, echo's and gin's
// RegisterHandlers) protects by operation, as StrictMiddleware does: it
// hands oapi-codegen's HandlerWithOptions (RegisterHandlers) a wrapper of
// the service that embeds its ServerInterface and overrides each idempotent
// operation's method, with oapi-codegen's signature, to run the engine
// around the service's own. Which operation a request is for is then the
// router's choice, whatever path it routed on (a gorilla subrouter, an echo
// group, a mounted chi router): nothing is matched by path. An operation
// whose signature idemgen cannot write (a path parameter whose Go type it
// cannot tell: ir.Param.GoType "") keeps the path matching of
// HTTPMiddleware (fallback).

// PathFallback returns, for an operation the plain (non-strict) one-line
// wiring protects by path rather than by operation, the path parameter
// whose Go type idemgen cannot tell (so it cannot write the operation's
// ServerInterface method); nil for one it protects by operation.
func PathFallback(op *ir.Operation) *ir.Param { return gogen.UntypedPathParam(op) }

// fallbackOps returns the indexes of the operations of spec the plain
// wiring protects by path (PathFallback not nil), in spec order: gen's
// fallback.
func fallbackOps(spec *ir.Spec) []int {
	var out []int
	for i, op := range spec.Operations {
		if PathFallback(op) != nil {
			out = append(out, i)
		}
	}
	return out
}

// opServerLocals are the names the generated methods declare themselves or
// refer to (their receiver and leading parameters, the packages and
// predeclared types they use): no path argument takes one.
var opServerLocals = []string{"s", "w", "r", "ctx", "params", "http", "echo", "v4", "gin", "idem", "strings", "openapi_types", "time", "json", "error", "string", "any", "bool", "int"}

// opServerKind is what the generated server wrapper's methods look like
// for a framework.
type opServerKind struct {
	typ     string     // the wrapper type's name
	lead    []jen.Code // the method's leading parameters (before the path arguments)
	leadArg []jen.Code // the arguments passing them on
	result  jen.Code   // the method's result, nil for none
	// body writes the method's body: run the engine for the policy,
	// around call (the inner method's call, its leading arguments those the
	// engine hands on).
	body func(policy string, call func() *jen.Statement) jen.Code
}

// opServer writes the wrapper type of kind and its methods, one per
// idempotent operation protected by operation (none: no type).
func (g *gen) opServer(k opServerKind) {
	var ops []*ir.Operation
	for i, op := range g.spec.Operations {
		if !slices.Contains(g.fallback, i) {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return
	}
	t := g.cfg.Type
	g.docf("%s is the ServerInterface the plain wiring hands oapi-codegen: the service's own, with each idempotent operation's method overridden to run the engine for that operation (its policy chosen by operation, whatever path the router routed on) around the service's method.", k.typ)
	g.f.Type().Id(k.typ).Struct(
		jen.Id("ServerInterface"),
		jen.Id("x").Op("*").Id(t),
	)
	for _, op := range ops {
		goNames := make([]string, len(op.PathParams))
		for i, p := range op.PathParams {
			goNames[i] = p.GoName
		}
		vars := naming.ArgVariables(goNames, opServerLocals...)
		params := slices.Clone(k.lead)
		var args []jen.Code
		for i, v := range vars {
			params = append(params, jen.Id(v).Add(gogen.GoType(op.PathParams[i].GoType)))
			args = append(args, jen.Id(v))
		}
		if op.Names.Params != "" {
			params = append(params, jen.Id("params").Id(op.Names.Params))
			args = append(args, jen.Id("params"))
		}
		call := func() *jen.Statement {
			return jen.Id("s").Dot("ServerInterface").Dot(op.Names.Handler).Call(append(slices.Clone(k.leadArg), args...)...)
		}
		g.docf("%s runs %s (%s) through the engine, then the service's %s.", op.Names.Handler, op.RecordName(), op.Where(), op.Names.Handler)
		s := g.f.Func().Params(jen.Id("s").Id(k.typ)).Id(op.Names.Handler).Params(params...)
		if k.result != nil {
			s.Add(k.result)
		}
		s.Block(k.body(g.policyVar(op), call))
	}
}

// newOpServer is the value of the wrapper type of name around si, or si
// itself when no operation is protected by operation.
func (g *gen) newOpServer(name string) jen.Code {
	if len(g.fallback) == len(g.spec.Operations) {
		return jen.Id("si")
	}
	return jen.Id(name).Values(jen.Dict{jen.Id("ServerInterface"): jen.Id("si"), jen.Id("x"): jen.Id("x")})
}

// byPathFunc writes <px>ByPath(i int) bool, whether the plain wiring
// protects the operation whose policy is <px>Policies[i] by path; nothing
// when it protects every operation by operation.
func (g *gen) byPathFunc() {
	fb := g.fallback
	if len(fb) == 0 {
		return
	}
	var cases []jen.Code
	for _, i := range fb {
		cases = append(cases, jen.Lit(i))
	}
	g.doc(px + "ByPath reports whether the plain wiring protects the idempotent operation whose policy is " + px + "Policies[i] by its path (as HTTPMiddleware does) rather than by operation: idemgen cannot write its ServerInterface method's signature (the Go type of a path parameter).")
	g.f.Func().Id(px+"ByPath").Params(jen.Id("i").Int()).Bool().Block(
		jen.Switch(jen.Id("i")).Block(jen.Case(cases...).Block(jen.Return(jen.True()))),
		jen.Return(jen.False()),
	)
}

// Fallback is what is said of the operations the plain one-line wiring
// of a router protects by path (PathFallback): the generated
// documentation (fallbackDoc) and check's [path-fallback] warning both say
// it (FallbackWiring).
type Fallback struct {
	// Call names the one-line wiring: x.Handler (std-http, chi, gorilla),
	// x.RegisterHandlers (echo, gin).
	Call string
	// How is how it protects them, a phrase about "them"; Caveat what
	// follows from it, a sentence.
	How, Caveat string
	// Hint, for check, is a sentence on the setting that decides How when
	// it is not set ("" when none): server.middleware-first-to-last.
	Hint string
}

// FallbackWiring returns what is said of the operations the plain
// one-line wiring of router protects by path; firstToLast is
// server.middleware-first-to-last (Config.FirstToLast).
func FallbackWiring(router string, firstToLast bool) Fallback {
	switch router {
	case "echo":
		return Fallback{Call: "x.RegisterHandlers", How: "a route middleware on their routes, which reads echo's route", Caveat: "The route middleware is bound to the route when oapi-codegen registers it, so a group's prefix does not matter, and it runs after every other middleware."}
	case "gin":
		return Fallback{Call: "x.RegisterHandlers", How: "the engine's handler on their routes, which marks the request, and a middleware appended to options.Middlewares, which runs the engine for a marked request", Caveat: "The handler is bound to the route when oapi-codegen registers it, so a group's prefix does not matter, and the engine runs after options.Middlewares, as for the other operations."}
	}
	f := Fallback{
		Call:   "x.Handler",
		How:    "a middleware first in options.Middlewares, the innermost, that matches them under options.BaseURL",
		Caveat: "A router that rewrites the path where the matcher cannot see it (a gorilla subrouter as BaseRouter, a prefix options.BaseURL does not give) leaves them unprotected.",
		Hint:   "Set " + FirstToLastOption.String() + " when oapi-codegen applies options.Middlewares first to last (idemgen takes it from oapi-codegen-config).",
	}
	if firstToLast {
		f.How = "a middleware last in options.Middlewares, the innermost (" + FirstToLastOption.String() + ": oapi-codegen applies them first to last), that matches them under options.BaseURL"
		f.Hint = ""
	}
	return f
}

// fallbackDoc is what the plain wiring's documentation says of the
// operations it protects by path, "" when there are none: how they are
// protected, and what follows (FallbackWiring).
func (g *gen) fallbackDoc() string {
	fb := g.fallback
	if len(fb) == 0 {
		return ""
	}
	w := FallbackWiring(g.cfg.Router, g.cfg.FirstToLast)
	s := " These operations are protected by path instead (" + w.How + "), since idemgen cannot tell the Go type of a path parameter of theirs, which their ServerInterface method takes:"
	for n, i := range fb {
		op := g.spec.Operations[i]
		if n > 0 {
			s += ","
		}
		s += " " + op.Where() + " (" + PathFallback(op).Name + ")"
	}
	return s + ". " + w.Caveat
}

// netHTTPOpServer writes the wrapper of the std-http, chi and gorilla
// plain servers.
func (g *gen) netHTTPOpServer() {
	hq := func(id string) *jen.Statement { return jen.Qual("net/http", id) }
	g.opServer(opServerKind{
		typ:     px + "Server",
		lead:    []jen.Code{jen.Id("w").Add(hq("ResponseWriter")), jen.Id("r").Op("*").Add(hq("Request"))},
		leadArg: []jen.Code{jen.Id("w"), jen.Id("r")},
		body: func(policy string, call func() *jen.Statement) jen.Code {
			return jen.Id("s").Dot("x").Dot("serve").Call(jen.Id("w"), jen.Id("r"), jen.Id(policy),
				hq("HandlerFunc").Call(jen.Func().Params(jen.Id("w").Add(hq("ResponseWriter")), jen.Id("r").Op("*").Add(hq("Request"))).Block(call())))
		},
	})
}

func (g *gen) echoOpServer() {
	g.opServer(opServerKind{
		typ:     px + "EchoServer",
		lead:    []jen.Code{jen.Id("ctx").Add(echoQ("Context"))},
		leadArg: []jen.Code{jen.Id("ctx")},
		result:  jen.Error(),
		body: func(policy string, call func() *jen.Statement) jen.Code {
			return jen.Return(jen.Id("s").Dot("x").Dot("serveEcho").Call(jen.Id("ctx"), jen.Id(policy),
				jen.Func().Params(jen.Id("ctx").Add(echoQ("Context"))).Error().Block(jen.Return(call()))))
		},
	})
}

func (g *gen) ginOpServer() {
	g.opServer(opServerKind{
		typ:     px + "GinServer",
		lead:    []jen.Code{jen.Id("ctx").Add(ginCtx())},
		leadArg: []jen.Code{jen.Id("ctx")},
		body: func(policy string, call func() *jen.Statement) jen.Code {
			return jen.Id("s").Dot("x").Dot("runGin").Call(jen.Id("ctx"), jen.Id(policy), jen.Func().Params().Block(call()))
		},
	})
}

// fallbackMethods returns the HTTP methods of the operations protected by
// path (fallbackOps) among a router's registering methods, sorted: the
// methods its router wrapper overrides.
func (g *gen) fallbackMethods(router []string) []string {
	var methods []string
	for _, i := range g.fallback {
		if m := g.spec.Operations[i].Method; slices.Contains(router, m) && !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	slices.Sort(methods)
	return methods
}

// echoRouterMethods are the methods of oapi-codegen's EchoRouter.
var echoRouterMethods = []string{"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"}

// echoByPath writes what echo's RegisterHandlers protects by path: a
// wrapper of the EchoRouter that adds, to the routes oapi-codegen
// registers for those operations, a route middleware running the engine
// (echo's route, not a path of the request). Nothing when there are none.
func (g *gen) echoByPath() {
	if len(g.fallback) == 0 {
		return
	}
	methods := g.fallbackMethods(echoRouterMethods)
	t := g.cfg.Type
	typ := px + "EchoRouter"
	g.doc(typ + " is the EchoRouter RegisterHandlers registers with: it adds to the route of each idempotent operation protected by path (" + px + "ByPath) a route middleware that runs the engine for it.")
	g.f.Type().Id(typ).Struct(jen.Id("EchoRouter"), jen.Id("x").Op("*").Id(t))
	for _, m := range methods {
		g.docf("%s registers the route with the engine's route middleware added when it is one of an operation protected by path.", m)
		g.f.Func().Params(jen.Id("r").Id(typ)).Id(m).Params(jen.Id("path").String(), jen.Id("h").Add(echoQ("HandlerFunc")), jen.Id("m").Op("...").Add(echoQ("MiddlewareFunc"))).Op("*").Add(echoQ("Route")).Block(
			jen.Return(jen.Id("r").Dot("EchoRouter").Dot(m).Call(jen.Id("path"), jen.Id("h"), jen.Id("r").Dot("x").Dot("echoRoute").Call(jen.Lit(m), jen.Id("path"), jen.Id("m")).Op("..."))),
		)
	}
	g.doc("echoRoute returns the route middlewares m, with the engine's innermost when method and path are the route of an idempotent operation protected by path.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("echoRoute").Params(jen.List(jen.Id("method"), jen.Id("path")).String(), jen.Id("m").Index().Add(echoQ("MiddlewareFunc"))).Index().Add(echoQ("MiddlewareFunc")).Block(
		jen.List(jen.Id("i"), jen.Id("ok")).Op(":=").Id(px+"EchoRoutes").Index(jen.Id(px+"EchoRoute").Values(jen.Id("method"), jen.Id("path"))),
		jen.If(jen.Op("!").Id("ok").Op("||").Op("!").Id(px+"ByPath").Call(jen.Id("i"))).Block(jen.Return(jen.Id("m"))),
		jen.Id("p").Op(":=").Id(px+"Policies").Index(jen.Id("i")),
		jen.Return(jen.Append(jen.Id("m").Index(jen.Empty(), jen.Len(jen.Id("m")), jen.Len(jen.Id("m"))), jen.Func().Params(jen.Id("next").Add(echoQ("HandlerFunc"))).Add(echoQ("HandlerFunc")).Block(
			jen.Return(jen.Func().Params(jen.Id("ctx").Add(echoQ("Context"))).Error().Block(
				jen.Return(jen.Id("x").Dot("serveEcho").Call(jen.Id("ctx"), jen.Id("p"), jen.Id("next"))),
			)),
		))),
	)
}

// ginRouterMethods are the methods of gin.IRoutes that register a route
// for one HTTP method.
var ginRouterMethods = []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}

// ginByPath writes what gin's RegisterHandlers protects by path: oapi-codegen's gin wrapper
// calls options.Middlewares one after the other before the operation, not
// around it, so the engine runs in two halves: the last of
// options.Middlewares (ginFallback) begins it, for a request of a route
// marked by the route handler that a wrapper of the router registers for
// the operations protected by path (it marks the request, then ends the
// engine's call when the handler returns). Nothing when there are none.
func (g *gen) ginByPath() {
	if len(g.fallback) == 0 {
		return
	}
	methods := g.fallbackMethods(ginRouterMethods)
	t := g.cfg.Type
	fbType := px + "GinFallback"
	key := px + "GinFallbackKey"
	g.doc(fbType + " is the engine's call for a request of an idempotent operation RegisterHandlers protects by path (" + px + "ByPath): the route handler makes it (with the operation's policy), ginFallback, the last of options.Middlewares, begins the call, and the route handler ends it.")
	g.f.Type().Id(fbType).Struct(
		jen.Id("p").Op("*").Qual(idemPkg, "Policy"),
		jen.Id("c").Op("*").Qual(idemPkg, "Call"),
		jen.Id("orig").Add(ginQ("ResponseWriter")),
		jen.Id("w").Op("*").Id(px+"GinWriter"),
	)
	g.doc(key + " is the key of the " + fbType + " in the gin.Context.")
	g.f.Const().Id(key).Op("=").Lit("github.com/idemgen/idemgen/fallback")
	typ := px + "GinRouter"
	g.doc(typ + " is the gin.IRouter RegisterHandlers registers with: the route of each idempotent operation protected by path (" + px + "ByPath) gets a handler that has ginFallback run the engine for it after options.Middlewares.")
	g.f.Type().Id(typ).Struct(ginQ("IRouter"), jen.Id("x").Op("*").Id(t), jen.Id("baseURL").String())
	for _, m := range methods {
		g.docf("%s registers the route, with the engine's handler when it is one of an operation protected by path.", m)
		g.f.Func().Params(jen.Id("r").Id(typ)).Id(m).Params(jen.Id("path").String(), jen.Id("h").Op("...").Add(ginQ("HandlerFunc"))).Add(ginQ("IRoutes")).Block(
			jen.Return(jen.Id("r").Dot("IRouter").Dot(m).Call(jen.Id("path"), jen.Id("r").Dot("x").Dot("ginRoute").Call(jen.Lit(m), jen.Qual("strings", "TrimPrefix").Call(jen.Id("path"), jen.Id("r").Dot("baseURL")), jen.Id("h")).Op("..."))),
		)
	}
	g.doc("ginRoute returns the handlers h of a route, the last one wrapped when method and path (without options.BaseURL) are the route of an idempotent operation protected by path: it marks the request for ginFallback, which begins the engine's call after options.Middlewares, and ends that call when the operation returns (a panic is answered as the by-operation wiring answers it: 500 IDEMPOTENCY_HANDLER_PANICKED, the key freed).")
	ctx := jen.Id("ctx")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ginRoute").Params(jen.List(jen.Id("method"), jen.Id("path")).String(), jen.Id("h").Index().Add(ginQ("HandlerFunc"))).Index().Add(ginQ("HandlerFunc")).Block(
		jen.List(jen.Id("i"), jen.Id("ok")).Op(":=").Id(px+"GinRoutes").Index(jen.Id(px+"GinRoute").Values(jen.Id("method"), jen.Id("path"))),
		jen.If(jen.Op("!").Id("ok").Op("||").Op("!").Id(px+"ByPath").Call(jen.Id("i")).Op("||").Len(jen.Id("h")).Op("==").Lit(0)).Block(jen.Return(jen.Id("h"))),
		jen.List(jen.Id("p"), jen.Id("last")).Op(":=").List(jen.Id(px+"Policies").Index(jen.Id("i")), jen.Id("h").Index(jen.Len(jen.Id("h")).Op("-").Lit(1))),
		jen.Return(jen.Append(jen.Id("h").Index(jen.Empty(), jen.Len(jen.Id("h")).Op("-").Lit(1), jen.Len(jen.Id("h")).Op("-").Lit(1)), jen.Func().Params(ctx.Clone().Add(ginCtx())).Block(
			jen.Id("f").Op(":=").Op("&").Id(fbType).Values(jen.Dict{jen.Id("p"): jen.Id("p")}),
			ctx.Clone().Dot("Set").Call(jen.Id(key), jen.Id("f")),
			jen.Id("ran").Op(":=").False(),
			jen.Defer().Func().Params().Block(
				jen.If(jen.Id("ran").Op("||").Id("f").Dot("c").Op("==").Nil()).Block(jen.Id("f").Dot("end").Call(ctx.Clone(), jen.Id("ran")), jen.Return()),
				jen.Id("v").Op(":=").Recover(),
				jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Id("f").Dot("end").Call(ctx.Clone(), jen.False()), jen.Return()).Comment("runtime.Goexit: the key is freed"),
				jen.If(jen.Id("f").Dot("w").Op("!=").Nil()).Block(ctx.Clone().Dot("Writer").Op("=").Id("f").Dot("orig")),
				jen.Comment("End deferred directly sees the panic: it answers 500 IDEMPOTENCY_HANDLER_PANICKED (a panic left unanswered drops the connection, and Go's client sends a request with an Idempotency-Key again), or lets it unwind once the status is sent."),
				jen.Func().Params().Block(jen.Defer().Id("f").Dot("c").Dot("End").Call(), jen.Panic(jen.Id("v"))).Call(),
			).Call(),
			jen.Id("last").Call(ctx.Clone()),
			jen.Id("ran").Op("=").True(),
		))),
	)
	g.doc("ginFallback, the last of options.Middlewares, begins the engine's call for a request ginRoute marked: the replay or the problem (the operation does not run), or the operation's writer through the engine's recorder.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ginFallback").Params(ctx.Clone().Add(ginCtx())).Block(
		jen.List(jen.Id("v"), jen.Id("_")).Op(":=").Add(ctx.Clone()).Dot("Get").Call(jen.Id(key)),
		jen.List(jen.Id("f"), jen.Id("_")).Op(":=").Id("v").Assert(jen.Op("*").Id(fbType)),
		jen.If(jen.Id("f").Op("==").Nil().Op("||").Id("f").Dot("c").Op("!=").Nil().Op("||").Id("x").Dot("engine").Dot("Nested").Call(ctx.Clone().Dot("Writer"), jen.Id("f").Dot("p"))).Block(jen.Return()),
		jen.Id("c").Op(":=").Id("x").Dot("engine").Dot("Begin").Call(ctx.Clone().Dot("Request"), jen.Id("f").Dot("p"), jen.Qual(idemPkg, "RequestKey")),
		jen.Id("f").Dot("c").Op("=").Id("c"),
		jen.If(jen.Id("c").Dot("Decision").Call().Op("!=").Qual(idemPkg, "Execute")).Block(
			jen.Id("c").Dot("Respond").Call(ctx.Clone().Dot("Writer")),
			ctx.Clone().Dot("Abort").Call(),
			jen.Return(),
		),
		jen.Id("f").Dot("orig").Op("=").Add(ctx.Clone()).Dot("Writer"),
		jen.Id("f").Dot("w").Op("=").Op("&").Id(px+"GinWriter").Values(jen.Dict{
			jen.Id("ResponseWriter"): jen.Id("f").Dot("orig"),
			jen.Id("rec"):            jen.Id("c").Dot("Writer").Call(jen.Id("f").Dot("orig")),
			jen.Id("status"):         jen.Qual("net/http", "StatusOK"),
			jen.Id("size"):           jen.Lit(-1),
		}),
		jen.List(ctx.Clone().Dot("Writer"), ctx.Clone().Dot("Request")).Op("=").List(jen.Id("f").Dot("w"), jen.Id("c").Dot("Request").Call()),
	)
	g.doc("end ends the engine's call, if ginFallback began one: ran, the operation returned, and its response is stored; else (a panic) the key is freed.")
	g.f.Func().Params(jen.Id("f").Op("*").Id(fbType)).Id("end").Params(ctx.Clone().Add(ginCtx()), jen.Id("ran").Bool()).Block(
		jen.If(jen.Id("f").Dot("c").Op("==").Nil()).Block(jen.Return()),
		jen.If(jen.Id("f").Dot("w").Op("!=").Nil()).Block(
			jen.If(jen.Id("ran")).Block(jen.Id("f").Dot("w").Dot("WriteHeaderNow").Call().Comment("a status set without a body (gin writes it after the handlers)")),
			ctx.Clone().Dot("Writer").Op("=").Id("f").Dot("orig"),
			jen.If(jen.Id("ran")).Block(jen.Id("f").Dot("c").Dot("Finish").Call()),
		),
		jen.Id("f").Dot("c").Dot("End").Call(),
	)
}
