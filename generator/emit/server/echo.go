package server

import (
	"github.com/dave/jennifer/jen"
)

// echo v4 (server.router: echo): oapi-codegen's echo-server and its strict
// server pass an echo.Context where the net/http ones pass the writer and
// the request, and report parameter errors as *echo.HTTPError.

const echoPkg = "github.com/labstack/echo/v4"

func echoQ(name string) *jen.Statement { return jen.Qual(echoPkg, name) }

func (g *gen) echoStrict() {
	g.frameworkStrict(echoQ("Context"),
		jen.Id("ctx").Dot("Request").Call(), jen.Id("ctx").Dot("Response").Call(),
		func(r jen.Code) jen.Code { return jen.Id("ctx").Dot("SetRequest").Call(r) },
		"echo reports err", "ErrorHandler")
}

func (g *gen) echoCaptureBody() {
	t := g.cfg.Type
	g.captureBodies()
	g.doc(px + "EchoCaptureBodies is " + px + "CaptureBodies as echo middleware.")
	g.f.Var().Id(px+"EchoCaptureBodies").Op("=").Func().Params().Index().Add(echoQ("MiddlewareFunc")).Block(
		jen.Id("m").Op(":=").Make(jen.Index().Add(echoQ("MiddlewareFunc")), jen.Len(jen.Id(px+"CaptureBodies"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("c")).Op(":=").Range().Id(px+"CaptureBodies")).Block(
			jen.Id("m").Index(jen.Id("i")).Op("=").Add(echoQ("WrapMiddleware")).Call(jen.Id("c")),
		),
		jen.Return(jen.Id("m")),
	).Call()
	g.doc("CaptureBody is echo middleware (e.Use(x.CaptureBody)) that keeps the raw bytes of a request body while oapi-codegen's strict handler decodes it, so StrictMiddleware fingerprints what the client sent, for handlers registered at the root (else use CaptureBodyWithBaseURL). Safe methods pass untouched. " + captureBoundDoc + " (echo's route, ctx.Path(), tells the operation; CaptureBody answers the error itself.) A request without a body gets an empty body of CaptureBody's own (it reads io.EOF, as http.NoBody, but is not http.NoBody), which a middleware after CaptureBody must not replace for the request to stay bounded. It also bounds the request for an idempotent operation's returned error under failures: replay: echo answers an error with its HTTPErrorHandler after every middleware returned, so CaptureBody has echo answer such an error itself (ctx.Error) and returns nil, and ErrorHandler around e.HTTPErrorHandler records that answer (middleware in front of CaptureBody then sees no error); without ErrorHandler, the key is freed.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("CaptureBody").Params(jen.Id("next").Add(echoQ("HandlerFunc"))).Add(echoQ("HandlerFunc")).Block(
		jen.Return(jen.Id("x").Dot("CaptureBodyWithBaseURL").Call(jen.Lit("")).Call(jen.Id("next"))),
	)
	g.doc("CaptureBodyWithBaseURL is CaptureBody for handlers registered under baseURL (RegisterHandlersWithBaseURL, whose routes are baseURL followed by the spec's paths), as HTTPMiddlewareWithBaseURL takes it: the body of a request routed outside it is kept but not bounded.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("CaptureBodyWithBaseURL").Params(jen.Id("baseURL").String()).Add(echoQ("MiddlewareFunc")).Block(
		jen.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Id("baseURL"), jen.Lit("/")),
		jen.Return(jen.Func().Params(jen.Id("next").Add(echoQ("HandlerFunc"))).Add(echoQ("HandlerFunc")).Block(
			jen.Id("h").Op(":=").Func().Params(jen.Id("ctx").Add(echoQ("Context"))).Error().Block(
				jen.Err().Op(":=").Id("next").Call(jen.Id("ctx")),
				jen.If(jen.Err().Op("==").Nil()).Block(jen.Return(jen.Nil())),
				jen.If(jen.Id("x").Dot("engine").Dot("RefuseTooLarge").Call(jen.Id("ctx").Dot("Response").Call(), jen.Id("ctx").Dot("Request").Call(), jen.Err())).Block(
					jen.Return(jen.Nil()).Comment("a body past its operation's request.max-bytes, which the capture stopped reading"),
				),
				jen.If(jen.Qual(idemPkg, "HandlerErrorPending").Call(jen.Id("ctx").Dot("Request").Call())).Block(
					jen.Id("ctx").Dot("Error").Call(jen.Err()).Comment("answered while CaptureBody still bounds the request: ErrorHandler records it"),
					jen.Return(jen.Nil()),
				),
				jen.Return(jen.Err()),
			),
			jen.Return(jen.Func().Params(jen.Id("ctx").Add(echoQ("Context"))).Error().Block(
				jen.Id("i").Op(":=").Len(jen.Id(px+"Policies")),
				jen.If(jen.List(jen.Id("route"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(jen.Id("ctx").Dot("Path").Call(), jen.Id("baseURL")), jen.Id("ok")).Block(
					jen.If(jen.List(jen.Id("j"), jen.Id("ok")).Op(":=").Id(px+"EchoRoutes").Index(jen.Id(px+"EchoRoute").Values(jen.Id("ctx").Dot("Request").Call().Dot("Method"), jen.Id("route"))), jen.Id("ok")).Block(
						jen.Id("i").Op("=").Id("j"),
					),
				),
				jen.Return(jen.Id(px+"EchoCaptureBodies").Index(jen.Id("i")).Call(jen.Id("h")).Call(jen.Id("ctx"))),
			)),
		)),
	)
}

func (g *gen) echoMiddleware() {
	t := g.cfg.Type
	g.routeTable("Echo", "echo", "Context.Path", echoPath)
	g.doc("HTTPMiddleware is echo middleware (e.Use(x.HTTPMiddleware), not e.Pre: it runs after echo routed the request) for servers generated without strict mode: it protects the requests echo routed to an idempotent operation (it reads the route echo chose, ctx.Path(), so echo's own matching is the rule: the raw path, a last parameter that takes the rest of it) and passes every other request untouched. It reads the key and the body from the request itself. An error the handler returns is turned into its response by echo's HTTPErrorHandler inside the recording, so it is what a retry gets; one marked idem.HandlerNothingDone (nothing of the operation ran) is answered without being recorded, and its key freed for a retry.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HTTPMiddleware").Params(jen.Id("next").Add(echoQ("HandlerFunc"))).Add(echoQ("HandlerFunc")).Block(
		jen.Return(jen.Id("x").Dot("HTTPMiddlewareWithBaseURL").Call(jen.Lit("")).Call(jen.Id("next"))),
	)
	g.doc("HTTPMiddlewareWithBaseURL is HTTPMiddleware for handlers registered under baseURL (RegisterHandlersWithBaseURL, whose routes are baseURL followed by the spec's paths): requests routed outside it pass untouched.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HTTPMiddlewareWithBaseURL").Params(jen.Id("baseURL").String()).Add(echoQ("MiddlewareFunc")).Block(
		jen.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Id("baseURL"), jen.Lit("/")),
		jen.Return(jen.Func().Params(jen.Id("next").Add(echoQ("HandlerFunc"))).Add(echoQ("HandlerFunc")).Block(
			jen.Return(jen.Func().Params(jen.Id("ctx").Add(echoQ("Context"))).Error().Block(
				jen.Id("r").Op(":=").Id("ctx").Dot("Request").Call(),
				jen.List(jen.Id("route"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(jen.Id("ctx").Dot("Path").Call(), jen.Id("baseURL")),
				jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Id("next").Call(jen.Id("ctx")))),
				jen.List(jen.Id("i"), jen.Id("ok")).Op(":=").Id(px+"EchoRoutes").Index(jen.Id(px+"EchoRoute").Values(jen.Id("r").Dot("Method"), jen.Id("route"))),
				jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Id("next").Call(jen.Id("ctx")))),
				jen.Return(jen.Id("x").Dot("serveEcho").Call(jen.Id("ctx"), jen.Id(px+"Policies").Index(jen.Id("i")), jen.Id("next"))),
			)),
		)),
	)
	g.doc("serveEcho runs the request in ctx through the engine for the idempotent operation whose policy is p, next serving it. An error next returns is answered (ctx.Error) inside the recording, so it is what a retry gets; serveEcho then returns nil. An error marked idem.HandlerNothingDone (nothing of the operation ran) is answered outside the recording and its key freed, so a retry runs the operation again. A request the engine already records in front (a doubled wiring: HTTPMiddleware left beside RegisterHandlers) goes straight to next (idem.Engine.Nested).")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("serveEcho").Params(jen.Id("ctx").Add(echoQ("Context")), jen.Id("p").Op("*").Qual(idemPkg, "Policy"), jen.Id("next").Add(echoQ("HandlerFunc"))).Error().Block(
		jen.If(jen.Id("x").Dot("engine").Dot("Nested").Call(jen.Id("ctx").Dot("Response").Call().Dot("Writer"), jen.Id("p"))).Block(
			jen.Return(jen.Id("next").Call(jen.Id("ctx"))),
		),
		jen.Id("c").Op(":=").Id("x").Dot("engine").Dot("Begin").Call(jen.Id("ctx").Dot("Request").Call(), jen.Id("p"), jen.Qual(idemPkg, "RequestKey")),
		jen.Defer().Id("c").Dot("End").Call(),
		jen.Id("resp").Op(":=").Id("ctx").Dot("Response").Call(),
		jen.If(jen.Id("c").Dot("Decision").Call().Op("!=").Qual(idemPkg, "Execute")).Block(
			jen.Id("c").Dot("Respond").Call(jen.Id("resp")),
			jen.Return(jen.Nil()),
		),
		jen.Id("orig").Op(":=").Id("resp").Dot("Writer"),
		jen.Id("resp").Dot("Writer").Op("=").Id("c").Dot("Writer").Call(jen.Id("orig")),
		jen.Defer().Id("ctx").Dot("SetRequest").Call(jen.Id("ctx").Dot("Request").Call()).Comment("put back before End cancels the context DetachHandler kept: the middlewares around see the request's own"),
		jen.Id("ctx").Dot("SetRequest").Call(jen.Id("c").Dot("Request").Call()),
		jen.If(jen.Err().Op(":=").Id("next").Call(jen.Id("ctx")), jen.Err().Op("!=").Nil()).Block(
			jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPkg, "ErrHandlerNothingDone"))).Block(
				jen.Id("_").Op("=").Id("c").Dot("HandlerFailed").Call(jen.Err()).Comment("nothing of the operation ran: End frees the key"),
				jen.Id("resp").Dot("Writer").Op("=").Id("orig"),
				jen.Id("ctx").Dot("Error").Call(jen.Err()).Comment("answered, not recorded: a retry runs the operation again"),
				jen.Return(jen.Nil()),
			),
			jen.Id("ctx").Dot("Error").Call(jen.Err()).Comment("written (and recorded) now, not after the record is finished"),
		),
		jen.Id("resp").Dot("Writer").Op("=").Id("orig"),
		jen.Id("c").Dot("Finish").Call(),
		jen.Return(jen.Nil()),
	)
}

func (g *gen) echoErrorHandler() {
	t := g.cfg.Type
	handler := echoQ("HTTPErrorHandler")
	g.doc("ErrorHandler returns an echo.HTTPErrorHandler (e.HTTPErrorHandler = x.ErrorHandler(e.HTTPErrorHandler)) for handlers registered at the root (else use ErrorHandlerWithBaseURL). oapi-codegen's echo wrappers check typed parameters before any middleware runs and return an *echo.HTTPError, so a key they reject (a malformed uuid-typed header, a missing required one, one given twice) never reaches the engine: this handler answers those with the engine's application/problem+json, 400 IDEMPOTENCY_KEY_INVALID or IDEMPOTENCY_KEY_MISSING, when the request is one of an idempotent operation (echo routed it to an idempotent operation: ctx.Path()) and the parameter is that operation's key. It recognizes them by the messages oapi-codegen v2.8 writes, and those of kin-openapi's openapi3filter.RequestError about the key that a request validator in front (oapi-codegen's echo-middleware) returns as an *echo.HTTPError. Every other error goes to next, so routes without contracts behave as before; nil means echo's DefaultHTTPErrorHandler." + g.strictOnly(" With the strict server, it also records what next writes for an idempotent operation's returned error under failures: replay (which CaptureBody has echo answer while the request is bounded), replayed to a retry with Idempotent-Replayed: true; next gets the error as echo hands it, unchanged."))
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ErrorHandler").Params(jen.Id("next").Add(handler)).Add(handler).Block(
		jen.Return(jen.Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Lit(""), jen.Id("next"))),
	)
	g.doc("ErrorHandlerWithBaseURL is ErrorHandler for handlers registered under baseURL (RegisterHandlersWithBaseURL): errors about requests outside it go to next.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ErrorHandlerWithBaseURL").Params(jen.Id("baseURL").String(), jen.Id("next").Add(handler)).Add(handler).BlockFunc(func(b *jen.Group) {
		if len(g.keyParams()) > 0 {
			b.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Id("baseURL"), jen.Lit("/"))
		}
		b.Id("answer").Op(":=").Func().Params(jen.Err().Error(), jen.Id("ctx").Add(echoQ("Context"))).BlockFunc(func(b *jen.Group) {
			r := func() *jen.Statement { return jen.Id("ctx").Dot("Request").Call() }
			g.keyProblem(b, jen.Id("ctx").Dot("Response").Call(), r(), jen.Id("ctx").Dot("Path").Call(), func(path jen.Code) jen.Code {
				return jen.Id(px+"EchoMatch").Call(r().Dot("Method"), path)
			})
			b.If(jen.Id("next").Op("==").Nil()).Block(
				jen.Id("ctx").Dot("Echo").Call().Dot("DefaultHTTPErrorHandler").Call(jen.Err(), jen.Id("ctx")),
				jen.Return(),
			)
			b.Id("next").Call(jen.Err(), jen.Id("ctx"))
		})
		if !g.cfg.Strict {
			b.Return(jen.Id("answer"))
			return
		}
		b.Return(jen.Func().Params(jen.Err().Error(), jen.Id("ctx").Add(echoQ("Context"))).Block(
			jen.Id("res").Op(":=").Id("ctx").Dot("Response").Call(),
			jen.Qual(idemPkg, "AnswerHandlerError").Call(jen.Id("res"), jen.Id("ctx").Dot("Request").Call(), jen.Err(), jen.Func().Params(jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Err().Error()).Block(
				jen.If(jen.Id("w").Op("==").Qual("net/http", "ResponseWriter").Call(jen.Id("res"))).Block(
					jen.Id("answer").Call(jen.Err(), jen.Id("ctx")),
					jen.Return(),
				),
				jen.Id("ctx").Dot("SetResponse").Call(echoQ("NewResponse").Call(jen.Id("w"), jen.Id("ctx").Dot("Echo").Call())).Comment("the engine's recorder: an idempotent operation's error under failures: replay"),
				jen.Id("answer").Call(jen.Err(), jen.Id("ctx")),
				jen.Id("ctx").Dot("SetResponse").Call(jen.Id("res")),
			)),
		))
	})
	g.routeMatch("Echo", "echo", "Context.Path, without the base URL")
	g.textKeyError("the *echo.HTTPError oapi-codegen's wrappers return",
		jen.Var().Id("he").Op("*").Add(echoQ("HTTPError")),
		jen.If(jen.Op("!").Qual("errors", "As").Call(jen.Err(), jen.Op("&").Id("he")).Op("||").Id("he").Dot("Code").Op("!=").Qual("net/http", "StatusBadRequest")).Block(
			jen.Return(jen.Lit(""), jen.Lit("")),
		),
		jen.List(jen.Id("msg"), jen.Id("_")).Op(":=").Id("he").Dot("Message").Assert(jen.String()),
	)
}

func (g *gen) echoRegister() {
	t := g.cfg.Type
	if g.cfg.Strict {
		g.doc("RegisterStrictHandlers is the one line to change in an existing echo service: it does what RegisterHandlers(e, NewStrictHandler(ssi, middlewares)) does, with idempotency wired in: StrictMiddleware first among the strict middlewares (so it runs after the given ones, right before the operation), CaptureBody in e.Use, and ErrorHandler around e.HTTPErrorHandler.")
		g.doc("")
		g.doc("\tRegisterHandlers(e, NewStrictHandler(service, middlewares))")
		g.doc("")
		g.doc("becomes")
		g.doc("")
		g.doc("\tx.RegisterStrictHandlers(e, service, middlewares)")
		g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("RegisterStrictHandlers").Params(
			jen.Id("e").Op("*").Add(echoQ("Echo")), jen.Id("ssi").Id("StrictServerInterface"), jen.Id("middlewares").Index().Id("StrictMiddlewareFunc"),
		).Block(
			jen.Id("e").Dot("Use").Call(jen.Id("x").Dot("CaptureBody")),
			jen.Id("e").Dot("HTTPErrorHandler").Op("=").Id("x").Dot("ErrorHandler").Call(jen.Id("e").Dot("HTTPErrorHandler")),
			jen.Id("RegisterHandlers").Call(jen.Id("e"), jen.Id("NewStrictHandler").Call(jen.Id("ssi"), strictFirst())),
		)
		return
	}
	g.doc("RegisterHandlers is the one line to change in an existing echo service: it does what the package's RegisterHandlers(router, si) does, with idempotency wired in. It registers a wrapper of si whose method of each idempotent operation runs the engine for that operation around si's: the protection goes by operation, not by path, so it holds on an echo.Group as on the *echo.Echo, and runs after every middleware, right before the operation (an error si's method returns is answered by echo's HTTPErrorHandler inside the recording, and the middlewares see nil); every other operation is si's, untouched." + g.fallbackDoc() + " When router is the *echo.Echo, ErrorHandler wraps e.HTTPErrorHandler; for a group, wrap it yourself with ErrorHandlerWithBaseURL and the group's prefix (e.HTTPErrorHandler = x.ErrorHandlerWithBaseURL(\"/v1\", e.HTTPErrorHandler)), or a key parameter oapi-codegen refuses gets echo's answer instead of the engine's problem.")
	g.doc("")
	g.doc("\tRegisterHandlers(e, service)")
	g.doc("")
	g.doc("becomes")
	g.doc("")
	g.doc("\tx.RegisterHandlers(e, service)")
	router := jen.Id("router")
	if len(g.fallback) > 0 {
		router = jen.Id(px + "EchoRouter").Values(jen.Dict{jen.Id("EchoRouter"): jen.Id("router"), jen.Id("x"): jen.Id("x")})
	}
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("RegisterHandlers").Params(
		jen.Id("router").Id("EchoRouter"), jen.Id("si").Id("ServerInterface"),
	).Block(
		jen.If(jen.List(jen.Id("e"), jen.Id("ok")).Op(":=").Id("router").Assert(jen.Op("*").Add(echoQ("Echo"))), jen.Id("ok")).Block(
			jen.Id("e").Dot("HTTPErrorHandler").Op("=").Id("x").Dot("ErrorHandler").Call(jen.Id("e").Dot("HTTPErrorHandler")),
		),
		jen.Id("RegisterHandlers").Call(router, g.newOpServer(px+"EchoServer")),
	)
	g.echoOpServer()
	g.byPathFunc()
	g.echoByPath()
}
