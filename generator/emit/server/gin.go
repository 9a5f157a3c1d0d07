package server

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
)

// gin (server.router: gin): oapi-codegen's gin-server and its strict server
// pass a *gin.Context where the net/http ones pass the writer and the
// request, report parameter errors as text to GinServerOptions.ErrorHandler,
// and register every route with gin, which resolves the route before any
// middleware runs: the plain middleware reads it (ctx.FullPath) instead of
// matching the path itself.

const ginPkg = "github.com/gin-gonic/gin"

func ginQ(name string) *jen.Statement { return jen.Qual(ginPkg, name) }

func ginCtx() *jen.Statement { return jen.Op("*").Add(ginQ("Context")) }

// ginErrorFunc is the type of GinServerOptions.ErrorHandler.
func ginErrorFunc() *jen.Statement {
	return jen.Func().Params(ginCtx(), jen.Error(), jen.Int())
}

func (g *gen) ginStrict() {
	g.frameworkStrict(ginCtx(),
		jen.Id("ctx").Dot("Request"), jen.Id("ctx").Dot("Writer"),
		func(r jen.Code) jen.Code { return jen.Id("ctx").Dot("Request").Op("=").Add(r) },
		"the strict handler reports err", "HandlerErrorFunc")
}

// ginHandlerErrorFunc writes HandlerErrorFunc, the gin strict server's
// error handler adapter (see idem.AnswerHandlerError).
func (g *gen) ginHandlerErrorFunc() {
	t := g.cfg.Type
	sig := func() *jen.Statement { return jen.Func().Params(ginCtx(), jen.Error()) }
	g.doc("HandlerErrorFunc returns the error handler for StrictGinServerOptions.HandlerErrorFunc: next answers the error of an operation (nil: a generic 500 application/problem+json, IDEMPOTENCY_HANDLER_FAILED, and the error logged at Error level with the engine's Logger: idem.Engine.WriteHandlerError; oapi-codegen's own default sends {\"msg\": the error}, whose text may hold internal details and under failures: replay would be replayed for the whole window), and under failures: replay, what it writes for an idempotent operation's error is recorded and replayed to a retry with Idempotent-Replayed: true (a 5xx is stored as a failure, as a plain handler's), so the operation does not run again; next gets the error the strict server hands it, as it is, and ctx.Writer records while it runs. It needs CaptureBody in router.Use (RegisterStrictHandlers adds both). Without it, or when next writes nothing (a status set without a body is written), the key is freed for a retry and the engine warns once per operation. Every other error goes to next as it is.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HandlerErrorFunc").Params(jen.Id("next").Add(sig())).Add(sig()).Block(
		jen.If(jen.Id("next").Op("==").Nil()).Block(
			jen.Id("next").Op("=").Func().Params(jen.Id("ctx").Add(ginCtx()), jen.Err().Error()).Block(
				jen.Id("x").Dot("engine").Dot("WriteHandlerError").Call(jen.Id("ctx").Dot("Writer"), jen.Id("ctx").Dot("Request"), jen.Err()),
			),
		),
		jen.Return(jen.Func().Params(jen.Id("ctx").Add(ginCtx()), jen.Err().Error()).Block(
			jen.Id("orig").Op(":=").Id("ctx").Dot("Writer"),
			jen.Qual(idemPkg, "AnswerHandlerError").Call(jen.Id("orig"), jen.Id("ctx").Dot("Request"), jen.Err(), jen.Func().Params(jen.Id("rec").Qual("net/http", "ResponseWriter"), jen.Err().Error()).Block(
				jen.If(jen.Id("rec").Op("==").Qual("net/http", "ResponseWriter").Call(jen.Id("orig"))).Block(
					jen.Id("next").Call(jen.Id("ctx"), jen.Err()),
					jen.Return(),
				),
				jen.Id("w").Op(":=").Op("&").Id(px+"GinWriter").Values(jen.Dict{
					jen.Id("ResponseWriter"): jen.Id("orig"),
					jen.Id("rec"):            jen.Id("rec"),
					jen.Id("status"):         jen.Qual("net/http", "StatusOK"),
					jen.Id("size"):           jen.Lit(-1),
				}),
				jen.Id("ctx").Dot("Writer").Op("=").Id("w"),
				jen.Id("next").Call(jen.Id("ctx"), jen.Err()),
				jen.If(jen.Op("!").Id("w").Dot("Written").Call().Op("&&").Id("w").Dot("status").Op("!=").Qual("net/http", "StatusOK")).Block(
					jen.Id("w").Dot("WriteHeaderNow").Call().Comment("a status set without a body (gin writes it after the handlers)"),
				),
				jen.Id("ctx").Dot("Writer").Op("=").Id("orig"),
			)),
		)),
	)
}

func (g *gen) ginCaptureBody() {
	t := g.cfg.Type
	g.captureBodies()
	g.doc("CaptureBody is gin middleware (router.Use(x.CaptureBody), before the routes are registered) that keeps the raw bytes of a request body while oapi-codegen's strict handler decodes it, so StrictMiddleware fingerprints what the client sent, for routes registered at the root (else use CaptureBodyWithBaseURL). Safe methods pass untouched. " + captureBoundDoc + " (gin's route, ctx.FullPath, tells the operation; RequestErrorHandlerFunc answers the error.) A request without a body gets an empty body of CaptureBody's own (it reads io.EOF, as http.NoBody, but is not http.NoBody) that bounds it for HandlerErrorFunc; a middleware after CaptureBody that replaces that body leaves it unbounded, and its operation's error is then not recorded.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("CaptureBody").Params(jen.Id("ctx").Add(ginCtx())).Block(
		jen.Id(px+"CaptureGin").Call(jen.Id("ctx"), jen.Lit("")),
	)
	g.doc("CaptureBodyWithBaseURL is CaptureBody for routes registered under baseURL, as HTTPMiddlewareWithBaseURL takes it (the router group's path joined with GinServerOptions.BaseURL): the body of a request routed outside it is kept but not bounded.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("CaptureBodyWithBaseURL").Params(jen.Id("baseURL").String()).Add(ginQ("HandlerFunc")).Block(
		jen.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Qual("path", "Join").Call(jen.Lit("/"), jen.Id("baseURL")), jen.Lit("/")),
		jen.Return(jen.Func().Params(jen.Id("ctx").Add(ginCtx())).Block(
			jen.Id(px+"CaptureGin").Call(jen.Id("ctx"), jen.Id("baseURL")),
		)),
	)
	g.doc(px + "CaptureGin runs the handlers after it inside the capture of the request in ctx: " + px + "CaptureBodies' of the idempotent operation gin routed it to under baseURL (clean, without a trailing slash), else the last.")
	g.f.Func().Id(px+"CaptureGin").Params(jen.Id("ctx").Add(ginCtx()), jen.Id("baseURL").String()).Block(
		jen.Id("i").Op(":=").Len(jen.Id(px+"Policies")),
		jen.If(jen.List(jen.Id("route"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(jen.Id("ctx").Dot("FullPath").Call(), jen.Id("baseURL")), jen.Id("ok")).Block(
			jen.If(jen.List(jen.Id("j"), jen.Id("ok")).Op(":=").Id(px+"GinRoutes").Index(jen.Id(px+"GinRoute").Values(jen.Id("ctx").Dot("Request").Dot("Method"), jen.Id("route"))), jen.Id("ok")).Block(
				jen.Id("i").Op("=").Id("j"),
			),
		),
		jen.Id("r").Op(":=").Id("ctx").Dot("Request"),
		jen.Id(px+"CaptureBodies").Index(jen.Id("i")).Call(jen.Qual("net/http", "HandlerFunc").Call(
			jen.Func().Params(jen.Id("_").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request")).Block(
				jen.Id("ctx").Dot("Request").Op("=").Id("r"),
				jen.Id("ctx").Dot("Next").Call(),
			),
		)).Dot("ServeHTTP").Call(jen.Id("ctx").Dot("Writer"), jen.Id("r")),
		jen.Id("ctx").Dot("Request").Op("=").Id("r"),
	)
	g.doc("RequestErrorHandlerFunc returns the error handler for StrictGinServerOptions.RequestErrorHandlerFunc: it answers a body CaptureBody stopped reading past its operation's request.max-bytes with 413 IDEMPOTENCY_REQUEST_TOO_LARGE (idem.Engine.RefuseTooLarge) and hands every other error to next (nil: oapi-codegen's default, 400 and {\"msg\": the error}).")
	sig := func() *jen.Statement { return jen.Func().Params(ginCtx(), jen.Error()) }
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("RequestErrorHandlerFunc").Params(jen.Id("next").Add(sig())).Add(sig()).Block(
		jen.If(jen.Id("next").Op("==").Nil()).Block(
			jen.Id("next").Op("=").Func().Params(jen.Id("ctx").Add(ginCtx()), jen.Err().Error()).Block(
				jen.Id("ctx").Dot("JSON").Call(jen.Qual("net/http", "StatusBadRequest"), ginQ("H").Values(jen.Dict{jen.Lit("msg"): jen.Err().Dot("Error").Call()})),
			),
		),
		jen.Return(jen.Func().Params(jen.Id("ctx").Add(ginCtx()), jen.Err().Error()).Block(
			jen.If(jen.Id("x").Dot("engine").Dot("RefuseTooLarge").Call(jen.Id("ctx").Dot("Writer"), jen.Id("ctx").Dot("Request"), jen.Err())).Block(
				jen.Return(),
			),
			jen.Id("next").Call(jen.Id("ctx"), jen.Err()),
		)),
	)
}

// captureBodies writes <px>CaptureBodies, the capture middlewares of the
// gin and echo strict servers' CaptureBody, which know the operation from
// the route the framework chose: one per policy (idem.CaptureBodyFor,
// bounded by its request.max-bytes), then idem.CaptureBody for every other
// request.
func (g *gen) captureBodies() {
	max := jen.Lit(int(g.maxRequestBytes()))
	g.doc(px + "CaptureBodies holds the capture middleware of the requests of each idempotent operation (in " + px + "Policies' order: idem.CaptureBodyFor, bounded by the operation's request.max-bytes), then, last, that of every other request (idem.CaptureBody, not bounded).")
	g.f.Var().Id(px+"CaptureBodies").Op("=").Func().Params().Index().Add(httpMiddlewareType()).Block(
		jen.Id("m").Op(":=").Make(jen.Index().Add(httpMiddlewareType()), jen.Lit(0), jen.Len(jen.Id(px+"Policies")).Op("+").Lit(1)),
		jen.For(jen.List(jen.Id("_"), jen.Id("p")).Op(":=").Range().Id(px+"Policies")).Block(
			jen.Id("m").Op("=").Append(jen.Id("m"), jen.Qual(idemPkg, "CaptureBodyFor").Call(max, jen.Func().Params(jen.Op("*").Qual("net/http", "Request")).Op("*").Qual(idemPkg, "Policy").Block(jen.Return(jen.Id("p"))))),
		),
		jen.Return(jen.Append(jen.Id("m"), jen.Qual(idemPkg, "CaptureBody").Call(max))),
	).Call()
}

// ginPathParam is oapi-codegen's pattern of a path parameter, which its gin
// server registers as :name (SwaggerUriToGinUri).
var ginPathParam = regexp.MustCompile(`{[.;?]?([^{}*]+)\*?}`)

// ginPath returns the path gin reports (FullPath) for an operation's path
// template registered by oapi-codegen at the root: its parameters as
// :name, literal colons escaped, cleaned as gin joins a route to its group.
func ginPath(p string) string {
	p = ginPathParam.ReplaceAllString(strings.ReplaceAll(p, ":", `\:`), ":$1")
	joined := path.Join("/", p)
	if strings.HasSuffix(p, "/") && !strings.HasSuffix(joined, "/") {
		joined += "/"
	}
	return joined
}

// echoPath returns the path echo reports (Context.Path) for an operation's
// path template registered by oapi-codegen at the root
// (SwaggerUriToEchoUri): its parameters as :name, literal colons escaped,
// not cleaned.
func echoPath(p string) string {
	return ginPathParam.ReplaceAllString(strings.ReplaceAll(p, ":", `\:`), ":$1")
}

func (g *gen) ginRoutes() { g.routeTable("Gin", "gin", "FullPath", ginPath) }

// routeTable writes <px><fw>Route and <px><fw>Routes, the table of the
// routes oapi-codegen registers with a framework that reports the route it
// chose (gin's FullPath, echo's Path), path turning an operation's path
// template into that route.
func (g *gen) routeTable(fw, name, method string, path func(string) string) {
	type entry struct {
		method, path string
		policy       int
	}
	var entries []entry
	for i, op := range g.spec.Operations {
		entries = append(entries, entry{op.Method, path(op.Path), i})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.method, b.method)
	})
	g.doc(px + fw + "Route is a key of " + px + fw + "Routes: a method and a route's path as " + name + " reports it (" + method + "), without the base path.")
	g.f.Type().Id(px + fw + "Route").Struct(jen.List(jen.Id("method"), jen.Id("path")).String())
	g.doc(px + fw + "Routes maps the routes oapi-codegen registers with " + name + " for the idempotent operations to the index of their policy.")
	g.f.Var().Id(px + fw + "Routes").Op("=").Map(jen.Id(px + fw + "Route")).Int().ValuesFunc(func(gr *jen.Group) {
		for _, e := range entries {
			gr.Line().Values(jen.Lit(e.method), jen.Lit(e.path)).Op(":").Lit(e.policy)
		}
		if len(entries) > 0 {
			gr.Line()
		}
	})
}

// routeMatch writes <px><fw>Match, the lookup of routeTable's table that
// the error handler's key problems use (only when an operation has a key
// parameter): the index of the policy of the idempotent operation name
// serves with a route (as how says), or -1.
func (g *gen) routeMatch(fw, name, how string) {
	if len(g.keyParams()) == 0 {
		return
	}
	g.doc(px + fw + "Match returns the index of the policy of the idempotent operation " + name + " serves with route (" + how + ") for method, or -1.")
	g.f.Func().Id(px+fw+"Match").Params(jen.List(jen.Id("method"), jen.Id("route")).String()).Int().Block(
		jen.If(jen.List(jen.Id("i"), jen.Id("ok")).Op(":=").Id(px+fw+"Routes").Index(jen.Id(px+fw+"Route").Values(jen.Id("method"), jen.Id("route"))), jen.Id("ok")).Block(
			jen.Return(jen.Id("i")),
		),
		jen.Return(jen.Lit(-1)),
	)
}

// ginWriter writes the gin.ResponseWriter the plain middleware puts in
// ctx.Writer while the operation runs: gin's status and size bookkeeping
// over the engine's recorder.
func (g *gen) ginWriter() {
	w := px + "GinWriter"
	recv := jen.Id("w").Op("*").Id(w)
	g.doc(w + " is the gin.ResponseWriter of a protected request: it writes through rec, the engine's recorder over the client's writer (the embedded one, which still serves Hijack, CloseNotify and Pusher), and keeps gin's status and size bookkeeping (status defers to the first write, as gin's own writer does).")
	g.f.Type().Id(w).Struct(
		ginQ("ResponseWriter"),
		jen.Id("rec").Qual("net/http", "ResponseWriter"),
		jen.List(jen.Id("status"), jen.Id("size")).Int(),
	)
	method := func(name string, params []jen.Code, results jen.Code, body ...jen.Code) {
		s := g.f.Func().Params(recv).Id(name).Params(params...)
		if results != nil {
			s.Add(results)
		}
		s.Block(body...)
	}
	method("Header", nil, jen.Qual("net/http", "Header"), jen.Return(jen.Id("w").Dot("rec").Dot("Header").Call()))
	method("WriteHeader", []jen.Code{jen.Id("code").Int()}, nil,
		jen.If(jen.Id("code").Op(">").Lit(0).Op("&&").Id("w").Dot("size").Op("<").Lit(0)).Block(jen.Id("w").Dot("status").Op("=").Id("code")))
	method("WriteHeaderNow", nil, nil,
		jen.If(jen.Id("w").Dot("size").Op("<").Lit(0)).Block(
			jen.Id("w").Dot("size").Op("=").Lit(0),
			jen.Id("w").Dot("rec").Dot("WriteHeader").Call(jen.Id("w").Dot("status")),
		))
	method("Write", []jen.Code{jen.Id("p").Index().Byte()}, jen.Params(jen.Int(), jen.Error()),
		jen.Id("w").Dot("WriteHeaderNow").Call(),
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("w").Dot("rec").Dot("Write").Call(jen.Id("p")),
		jen.Id("w").Dot("size").Op("+=").Id("n"),
		jen.Return(jen.Id("n"), jen.Err()),
	)
	method("WriteString", []jen.Code{jen.Id("s").String()}, jen.Params(jen.Int(), jen.Error()),
		jen.Id("w").Dot("WriteHeaderNow").Call(),
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Qual("io", "WriteString").Call(jen.Id("w").Dot("rec"), jen.Id("s")),
		jen.Id("w").Dot("size").Op("+=").Id("n"),
		jen.Return(jen.Id("n"), jen.Err()),
	)
	method("Flush", nil, nil,
		jen.Id("w").Dot("WriteHeaderNow").Call(),
		jen.If(jen.List(jen.Id("f"), jen.Id("ok")).Op(":=").Id("w").Dot("rec").Assert(jen.Qual("net/http", "Flusher")), jen.Id("ok")).Block(
			jen.Id("f").Dot("Flush").Call(),
		),
	)
	method("Status", nil, jen.Int(), jen.Return(jen.Id("w").Dot("status")))
	method("Size", nil, jen.Int(), jen.Return(jen.Id("w").Dot("size")))
	method("Written", nil, jen.Bool(), jen.Return(jen.Id("w").Dot("size").Op(">=").Lit(0)))
	method("Unwrap", nil, jen.Qual("net/http", "ResponseWriter"), jen.Return(jen.Id("w").Dot("rec")))
}

func (g *gen) ginMiddleware() {
	t := g.cfg.Type
	g.ginRoutes()
	g.ginWriter()
	g.doc("HTTPMiddleware is gin middleware (router.Use(x.HTTPMiddleware), before the routes are registered) for servers generated without strict mode: it protects the requests gin routed to an idempotent operation (it reads the route gin chose, ctx.FullPath, so gin's precedence is the rule) and passes every other request untouched. It reads the key and the body from the request itself. The operation writes through a recorder in ctx.Writer.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HTTPMiddleware").Params(jen.Id("ctx").Add(ginCtx())).Block(
		jen.Id("x").Dot("serveGin").Call(jen.Id("ctx"), jen.Lit("")),
	)
	g.doc("HTTPMiddlewareWithBaseURL is HTTPMiddleware for routes registered under baseURL: the router group's path joined with GinServerOptions.BaseURL (\"/v1\" for a group \"/v1\" and no BaseURL). Routes outside it pass untouched.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HTTPMiddlewareWithBaseURL").Params(jen.Id("baseURL").String()).Add(ginQ("HandlerFunc")).Block(
		jen.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Qual("path", "Join").Call(jen.Lit("/"), jen.Id("baseURL")), jen.Lit("/")),
		jen.Return(jen.Func().Params(jen.Id("ctx").Add(ginCtx())).Block(
			jen.Id("x").Dot("serveGin").Call(jen.Id("ctx"), jen.Id("baseURL")),
		)),
	)
	g.doc("serveGin runs the request in ctx through the engine when gin routed it to an idempotent operation under baseURL (clean, without a trailing slash).")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("serveGin").Params(jen.Id("ctx").Add(ginCtx()), jen.Id("baseURL").String()).Block(
		jen.List(jen.Id("route"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(jen.Id("ctx").Dot("FullPath").Call(), jen.Id("baseURL")),
		jen.If(jen.Op("!").Id("ok")).Block(jen.Id("ctx").Dot("Next").Call(), jen.Return()),
		jen.List(jen.Id("i"), jen.Id("ok")).Op(":=").Id(px+"GinRoutes").Index(jen.Id(px+"GinRoute").Values(jen.Id("ctx").Dot("Request").Dot("Method"), jen.Id("route"))),
		jen.If(jen.Op("!").Id("ok")).Block(jen.Id("ctx").Dot("Next").Call(), jen.Return()),
		jen.Id("x").Dot("runGin").Call(jen.Id("ctx"), jen.Id(px+"Policies").Index(jen.Id("i")), jen.Id("ctx").Dot("Next")),
	)
	g.doc("runGin runs the request in ctx through the engine for the idempotent operation whose policy is p, next serving it (the handlers after the middleware, or the operation). A request the engine already records in front (a doubled wiring: HTTPMiddleware left beside RegisterHandlers) goes straight to next (idem.Engine.Nested).")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("runGin").Params(jen.Id("ctx").Add(ginCtx()), jen.Id("p").Op("*").Qual(idemPkg, "Policy"), jen.Id("next").Func().Params()).Block(
		jen.If(jen.Id("x").Dot("engine").Dot("Nested").Call(jen.Id("ctx").Dot("Writer"), jen.Id("p"))).Block(
			jen.Id("next").Call(),
			jen.Return(),
		),
		jen.Id("c").Op(":=").Id("x").Dot("engine").Dot("Begin").Call(jen.Id("ctx").Dot("Request"), jen.Id("p"), jen.Qual(idemPkg, "RequestKey")),
		jen.Defer().Id("c").Dot("End").Call(),
		jen.If(jen.Id("c").Dot("Decision").Call().Op("!=").Qual(idemPkg, "Execute")).Block(
			jen.Id("c").Dot("Respond").Call(jen.Id("ctx").Dot("Writer")),
			jen.Id("ctx").Dot("Abort").Call(),
			jen.Return(),
		),
		jen.Id("orig").Op(":=").Id("ctx").Dot("Writer"),
		jen.Id("w").Op(":=").Op("&").Id(px+"GinWriter").Values(jen.Dict{
			jen.Id("ResponseWriter"): jen.Id("orig"),
			jen.Id("rec"):            jen.Id("c").Dot("Writer").Call(jen.Id("orig")),
			jen.Id("status"):         jen.Qual("net/http", "StatusOK"),
			jen.Id("size"):           jen.Lit(-1),
		}),
		jen.Id("r").Op(":=").Id("ctx").Dot("Request"),
		jen.Defer().Func().Params().Block(jen.Id("ctx").Dot("Request").Op("=").Id("r")).Call().Comment("put back before End cancels the context DetachHandler kept: the handlers around see the request's own"),
		jen.List(jen.Id("ctx").Dot("Writer"), jen.Id("ctx").Dot("Request")).Op("=").List(jen.Id("w"), jen.Id("c").Dot("Request").Call()),
		jen.Id("next").Call(),
		jen.Id("w").Dot("WriteHeaderNow").Call().Comment("a status set without a body (gin writes it after the handlers)"),
		jen.Id("ctx").Dot("Writer").Op("=").Id("orig"),
		jen.Id("c").Dot("Finish").Call(),
	)
}

func (g *gen) ginErrorHandler() {
	t := g.cfg.Type
	g.doc("ErrorHandler returns an error handler for GinServerOptions.ErrorHandler, for routes registered at the root (else use ErrorHandlerWithBaseURL). oapi-codegen's gin wrappers check typed parameters before the operation runs and report errors as text, so a key they reject (a malformed uuid-typed header, a missing required one, one given twice) never reaches StrictMiddleware (HTTPMiddleware runs before them and lets the engine judge the key first): this handler answers those with the engine's application/problem+json, 400 IDEMPOTENCY_KEY_INVALID or IDEMPOTENCY_KEY_MISSING, when gin routed the request to an idempotent operation and the parameter is that operation's key. It recognizes them by the messages oapi-codegen v2.8 writes, and those of kin-openapi's openapi3filter.RequestError about the key that a request validator in front (oapi-codegen's gin-middleware) reports, when its Options.ErrorHandler hands them on (docs/server.md, \"Request validators\"). Every other error goes to next, so routes without contracts behave as before; nil means oapi-codegen's default (the status, {\"msg\": the error} as JSON).")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ErrorHandler").Params(jen.Id("next").Add(ginErrorFunc())).Add(ginErrorFunc()).Block(
		jen.Return(jen.Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Lit(""), jen.Id("next"))),
	)
	g.doc("ErrorHandlerWithBaseURL is ErrorHandler for routes registered under baseURL, as HTTPMiddlewareWithBaseURL takes it (the router group's path joined with GinServerOptions.BaseURL): errors about routes outside it go to next.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ErrorHandlerWithBaseURL").Params(jen.Id("baseURL").String(), jen.Id("next").Add(ginErrorFunc())).Add(ginErrorFunc()).BlockFunc(func(b *jen.Group) {
		b.If(jen.Id("next").Op("==").Nil()).Block(
			jen.Id("next").Op("=").Func().Params(jen.Id("ctx").Add(ginCtx()), jen.Err().Error(), jen.Id("statusCode").Int()).Block(
				jen.Id("ctx").Dot("JSON").Call(jen.Id("statusCode"), ginQ("H").Values(jen.Dict{jen.Lit("msg"): jen.Err().Dot("Error").Call()})),
			),
		)
		if len(g.keyParams()) > 0 {
			b.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Qual("path", "Join").Call(jen.Lit("/"), jen.Id("baseURL")), jen.Lit("/"))
		}
		b.Return(jen.Func().Params(jen.Id("ctx").Add(ginCtx()), jen.Err().Error(), jen.Id("statusCode").Int()).BlockFunc(func(b *jen.Group) {
			g.keyProblem(b, jen.Id("ctx").Dot("Writer"), jen.Id("ctx").Dot("Request"), jen.Id("ctx").Dot("FullPath").Call(), func(path jen.Code) jen.Code {
				return jen.Id(px+"GinMatch").Call(jen.Id("ctx").Dot("Request").Dot("Method"), path)
			})
			b.Id("next").Call(jen.Id("ctx"), jen.Err(), jen.Id("statusCode"))
		}))
	})
	g.routeMatch("Gin", "gin", "FullPath, without the base path")
	g.textKeyError("the errors oapi-codegen's gin wrappers report", jen.Id("msg").Op(":=").Err().Dot("Error").Call())
}

// ginBase is the statements that set base, in RegisterHandlers and
// RegisterStrictHandlers, to the path gin's routes are registered under:
// the router group's path joined with options.BaseURL.
func ginBase() []jen.Code {
	return []jen.Code{
		jen.Id("base").Op(":=").Id("options").Dot("BaseURL"),
		jen.If(jen.List(jen.Id("group"), jen.Id("ok")).Op(":=").Id("router").Assert(jen.Interface(jen.Id("BasePath").Params().String())), jen.Id("ok")).Block(
			jen.Id("base").Op("=").Id("group").Dot("BasePath").Call().Op("+").Lit("/").Op("+").Id("base"),
		),
	}
}

func (g *gen) ginRegister() {
	t := g.cfg.Type
	router := jen.Id("router").Add(ginQ("IRouter"))
	if g.cfg.Strict {
		g.doc("RegisterStrictHandlers is the one line to change in an existing gin service: it does what RegisterHandlersWithOptions(router, NewStrictHandlerWithOptions(ssi, middlewares, strictOptions), options) does, with idempotency wired in: CaptureBodyWithBaseURL in router.Use (before the routes), StrictMiddleware first among the strict middlewares (so it runs after the given ones, right before the operation), ErrorHandlerWithBaseURL around options.ErrorHandler (both under the router group's path and options.BaseURL), RequestErrorHandlerFunc around strictOptions.RequestErrorHandlerFunc, and HandlerErrorFunc around strictOptions.HandlerErrorFunc.")
		g.doc("")
		g.doc("\tRegisterHandlersWithOptions(router, NewStrictHandlerWithOptions(service, middlewares, strictOptions), options)")
		g.doc("")
		g.doc("becomes")
		g.doc("")
		g.doc("\tx.RegisterStrictHandlers(router, service, middlewares, strictOptions, options)")
		g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("RegisterStrictHandlers").Params(
			router, jen.Id("ssi").Id("StrictServerInterface"), jen.Id("middlewares").Index().Id("StrictMiddlewareFunc"),
			jen.Id("strictOptions").Id("StrictGinServerOptions"), jen.Id("options").Id("GinServerOptions"),
		).Block(
			ginBase()[0], ginBase()[1],
			jen.Id("router").Dot("Use").Call(jen.Id("x").Dot("CaptureBodyWithBaseURL").Call(jen.Id("base"))),
			jen.Id("options").Dot("ErrorHandler").Op("=").Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Id("base"), jen.Id("options").Dot("ErrorHandler")),
			jen.Id("strictOptions").Dot("RequestErrorHandlerFunc").Op("=").Id("x").Dot("RequestErrorHandlerFunc").Call(jen.Id("strictOptions").Dot("RequestErrorHandlerFunc")),
			jen.Id("strictOptions").Dot("HandlerErrorFunc").Op("=").Id("x").Dot("HandlerErrorFunc").Call(jen.Id("strictOptions").Dot("HandlerErrorFunc")),
			jen.Id("RegisterHandlersWithOptions").Call(jen.Id("router"), jen.Id("NewStrictHandlerWithOptions").Call(jen.Id("ssi"), strictFirst(), jen.Id("strictOptions")), jen.Id("options")),
		)
		return
	}
	g.doc("RegisterHandlers is the one line to change in an existing gin service: it does what RegisterHandlersWithOptions(router, si, options) does, with idempotency wired in. It registers a wrapper of si whose method of each idempotent operation runs the engine for that operation around si's: the protection goes by operation, not by path, and runs after options.Middlewares, right before the operation; every other operation is si's, untouched." + g.fallbackDoc() + " ErrorHandlerWithBaseURL, under the router group's path and options.BaseURL, wraps options.ErrorHandler.")
	g.doc("")
	g.doc("\tRegisterHandlersWithOptions(router, service, options)")
	g.doc("")
	g.doc("becomes")
	g.doc("")
	g.doc("\tx.RegisterHandlers(router, service, options)")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("RegisterHandlers").Params(
		router, jen.Id("si").Id("ServerInterface"), jen.Id("options").Id("GinServerOptions"),
	).BlockFunc(func(b *jen.Group) {
		b.Add(ginBase()[0])
		b.Add(ginBase()[1])
		b.Id("options").Dot("ErrorHandler").Op("=").Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Id("base"), jen.Id("options").Dot("ErrorHandler"))
		if len(g.fallback) == 0 {
			b.Id("RegisterHandlersWithOptions").Call(jen.Id("router"), g.newOpServer(px+"GinServer"), jen.Id("options"))
			return
		}
		ms := func() *jen.Statement { return jen.Id("options").Dot("Middlewares") }
		b.Add(ms()).Op("=").Append(ms().Index(jen.Empty(), jen.Len(ms()), jen.Len(ms())), jen.Id("x").Dot("ginFallback"))
		b.Id("RegisterHandlersWithOptions").Call(jen.Id(px+"GinRouter").Values(jen.Dict{jen.Id("IRouter"): jen.Id("router"), jen.Id("x"): jen.Id("x"), jen.Id("baseURL"): jen.Id("options").Dot("BaseURL")}), g.newOpServer(px+"GinServer"), jen.Id("options"))
	})
	g.ginOpServer()
	g.byPathFunc()
	g.ginByPath()
}
