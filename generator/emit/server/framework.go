package server

import (
	"github.com/dave/jennifer/jen"
)

// What the echo and gin variants share: their strict handlers take the
// framework's context instead of the writer and the request, and their
// oapi-codegen wrappers report parameter errors as text.

// frameworkStrict writes StrictMiddleware and the strict method for a
// framework whose StrictHandlerFunc is func(ctx ctxType, request any) (any,
// error): req and w read the request and the writer from ctx, setRequest(r)
// puts r back into ctx, errWho names who reports an operation's error, and
// adapter the generated error handler that records its answer (gin's
// HandlerErrorFunc; echo's ErrorHandler, which echo runs from CaptureBody):
// the operation's error goes through Call.HandlerFailed, which returns it
// unchanged.
func (g *gen) frameworkStrict(ctxType, req, w jen.Code, setRequest func(r jen.Code) jen.Code, errWho, adapter string) {
	failed := jen.Return(jen.Id("resp"), jen.Id("c").Dot("HandlerFailed").Call(jen.Err())).Comment(errWho + ": " + adapter + " records its answer under failures: replay; else End frees the key")
	handlerParams := []jen.Code{jen.Id("ctx").Add(ctxType), jen.Id("request").Any()}
	g.strictMiddleware(handlerParams, []jen.Code{jen.Id("ctx"), jen.Id("request")})

	g.strictFunc(handlerParams).Block(
		jen.List(jen.Id("r"), jen.Id("w")).Op(":=").List(req, w),
		jen.If(jen.Id("x").Dot("engine").Dot("Nested").Call(jen.Id("w"), jen.Id("p"))).Block(
			jen.Return(jen.Id("f").Call(jen.Id("ctx"), jen.Id("request"))).Comment("the engine in front records the request already (a doubled wiring: HTTPMiddleware beside RegisterStrictHandlers)"),
		),
		jen.Id("c").Op(":=").Id("x").Dot("engine").Dot("Begin").Call(jen.Id("r"), jen.Id("p"), jen.Id("key")),
		jen.Defer().Id("c").Dot("End").Call().Comment("frees the key when the operation fails or panics"),
		jen.If(jen.Id("c").Dot("Decision").Call().Op("!=").Qual(idemPkg, "Execute")).Block(
			jen.Id("c").Dot("Respond").Call(jen.Id("w")).Comment("the replay or the problem"),
			jen.Return(jen.Nil(), jen.Nil()),
		),
		snapshotWriter(),
		jen.If(jen.Id("cc").Op(":=").Id("c").Dot("Context").Call(), jen.Id("cc").Op("!=").Id("r").Dot("Context").Call()).Block(
			jen.Add(setRequest(jen.Id("r").Dot("WithContext").Call(jen.Id("cc")))).Comment("the store's transaction (transactional mode), or the context DetachHandler keeps"),
			jen.Defer().Func().Params().Block(setRequest(jen.Id("r"))).Call().Comment("put back before End cancels cc: the middlewares around and the error handler see the request's own"),
		),
		jen.List(jen.Id("resp"), jen.Err()).Op(":=").Id("f").Call(jen.Id("ctx"), jen.Id("request")),
		jen.If(jen.Err().Op("!=").Nil()).Block(failed),
		noResponse(),
		jen.Id("visit").Op(":=").Id("visitor").Call(jen.Id("resp")),
		jen.If(jen.Id("visit").Op("==").Nil()).Block(
			jen.Return(jen.Id("resp"), jen.Nil()).Comment("not this operation's response type: the strict handler reports it, End frees the key"),
		),
		jen.Return(jen.Nil(), jen.Id("c").Dot("Complete").Call(jen.Id("w"), jen.Id("visit"))),
	)
}

// strictFirst is the strict middlewares with StrictMiddleware first:
// append([]StrictMiddlewareFunc{x.StrictMiddleware}, middlewares...).
func strictFirst() jen.Code {
	return jen.Append(jen.Index().Id("StrictMiddlewareFunc").Values(jen.Id("x").Dot("StrictMiddleware")), jen.Id("middlewares").Op("..."))
}

// keyProblem writes, into an error handler's body, the answer to an error
// about a key parameter: the engine's 400 problem written to w, and
// reported to the engine's Observer as a rejected request of the operation
// (Engine.Refuse), when the request r is one of an idempotent operation
// under baseURL and the error is about that operation's key parameter
// (else nothing: the handler goes on to next). route is what the request's
// operation is recognized by (its path, or the route the framework chose),
// baseURL included; index(path) is the index of its policy, -1 for none,
// from route without baseURL. Nothing when the spec declares no key
// parameter.
func (g *gen) keyProblem(b *jen.Group, w, r, route jen.Code, index func(path jen.Code) jen.Code) {
	if len(g.keyParams()) == 0 {
		return
	}
	b.If(jen.List(jen.Id("path"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(route, jen.Id("baseURL")), jen.Id("ok")).Block(
		jen.Id("i").Op(":=").Add(index(jen.Id("path"))),
		// KeyError answers "" for i < 0, so Policies[i] is only read for an operation's index.
		jen.If(jen.List(jen.Id("code"), jen.Id("detail")).Op(":=").Id(px+"KeyError").Call(jen.Id("i"), jen.Err()), jen.Id("code").Op("!=").Lit("")).Block(
			jen.Id("x").Dot("engine").Dot("RefuseWithCause").Call(w, r, jen.Id(px+"Policies").Index(jen.Id("i")), jen.Op("&").Qual(idemPkg, "Problem").Values(jen.Dict{
				jen.Id("Status"): jen.Qual("net/http", "StatusBadRequest"),
				jen.Id("Code"):   jen.Id("code"),
				jen.Id("Detail"): jen.Id("detail"),
			}), jen.Err()),
			jen.Return(),
		),
	)
}

// textKeyError writes <px>KeyError(i int, err error) (code, detail string)
// for oapi-codegen wrappers that report parameter errors as text (echo,
// gin): prelude sets msg from err (what is the error's description), and
// the messages oapi-codegen v2.8 writes about the key parameter of the
// operation whose policy is <px>Policies[i] are mapped to the engine's
// problem codes, and within a format error the runtime's message for a
// query key given more than once (<px>RepeatedQuery) to the engine's
// answer to a repeated key. So are the messages of kin-openapi's
// openapi3filter.RequestError about the key parameter, which a request
// validator in front of the wrappers (oapi-codegen's
// OapiRequestValidator) reports: echo-middleware returns them as an
// *echo.HTTPError (its first line), which reaches echo's HTTPErrorHandler;
// gin-middleware passes them, after its own prefix, to its
// Options.ErrorHandler, which may hand them on (docs/server.md, "Request
// validators"). Nothing when the spec declares no key parameter.
func (g *gen) textKeyError(what string, prelude ...jen.Code) {
	if len(g.keyParams()) == 0 {
		return
	}
	g.keyParamFunc()
	g.docf("%sKeyError maps %s about the key parameter of the operation whose policy is %sPolicies[i] to a problem code and detail, by the messages oapi-codegen v2.8 writes (and, within its format error, the runtime's for a query key given more than once: %sRepeatedQuery), and those of kin-openapi's openapi3filter.RequestError, which oapi-codegen's request validators report (gin-middleware's after its prefix); \"\" for any other error, and for any error when i < 0 or the operation's key is not a parameter.", px, what, px, px)
	g.f.Func().Id(px+"KeyError").Params(jen.Id("i").Int(), jen.Err().Error()).Params(jen.List(jen.Id("code"), jen.Id("detail")).String()).BlockFunc(func(b *jen.Group) {
		b.List(jen.Id("name"), jen.Id("header")).Op(":=").Id(px + "KeyParam").Call(jen.Id("i"))
		b.If(jen.Id("name").Op("==").Lit("")).Block(jen.Return(jen.Lit(""), jen.Lit("")))
		for _, c := range prelude {
			b.Add(c)
		}
		b.Id("invalid").Op(":=").Lit("Invalid format for parameter ").Op("+").Id("name").Op("+").Lit(": ")
		// kin-openapi's RequestError.Error(), as a request validator reports it.
		b.Id("in").Op(":=").Lit("query")
		b.If(jen.Id("header")).Block(jen.Id("in").Op("=").Lit("header"))
		b.Id("kin").Op(":=").Lit("parameter ").Op("+").Qual("strconv", "Quote").Call(jen.Id("name")).Op("+").Lit(" in ").Op("+").Id("in").Op("+").Lit(" has an error: ")
		b.Id("msg").Op("=").Qual("strings", "TrimPrefix").Call(jen.Id("msg"), jen.Lit(ginValidatorPrefix))
		b.Switch().Block(
			jen.Case(jen.Id("msg").Op("==").Lit("Header parameter ").Op("+").Id("name").Op("+").Lit(" is required, but not found"),
				jen.Id("msg").Op("==").Lit("Query argument ").Op("+").Id("name").Op("+").Lit(" is required, but not found")).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyMissing"), jen.Lit("this operation requires an idempotency key")),
			),
			jen.Case(jen.Id("msg").Op("==").Id("kin").Op("+").Lit(kinRequired), jen.Qual("strings", "HasPrefix").Call(jen.Id("msg"), jen.Id("kin").Op("+").Lit(kinRequired+"\n"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyMissing"), jen.Lit("this operation requires an idempotency key")),
			),
			jen.Case(jen.Qual("strings", "HasPrefix").Call(jen.Id("msg"), jen.Id("kin"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Id(px+"Policies").Index(jen.Id("i")).Dot("KeyFormatDetail").Call()),
			),
			// A query key given more than once: the runtime's binder
			// returns a plain error, which the wrapper reports as a
			// format error.
			jen.Case(jen.Op("!").Id("header").Op("&&").Qual("strings", "HasPrefix").Call(jen.Id("msg"), jen.Id("invalid")).Op("&&").Id(px+"RepeatedQuery").Call(jen.Id("msg").Index(jen.Len(jen.Id("invalid")).Op(":")), jen.Id("name"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Lit(detailMany)),
			),
			jen.Case(jen.Qual("strings", "HasPrefix").Call(jen.Id("msg"), jen.Id("invalid"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Id(px+"Policies").Index(jen.Id("i")).Dot("KeyFormatDetail").Call()),
			),
			jen.Case(jen.Qual("strings", "HasPrefix").Call(jen.Id("msg"), jen.Lit("Expected one value for ").Op("+").Id("name").Op("+").Lit(", got "))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Lit(detailMany)),
			),
		)
		b.Return(jen.Lit(""), jen.Lit(""))
	})
	g.repeatedQuery()
}

// kinRequired is kin-openapi's openapi3filter.ErrInvalidRequired, the reason
// of a RequestError about a required parameter the request lacks.
const kinRequired = "value is required but missing"

// ginValidatorPrefix is what oapi-codegen's gin-middleware puts before a
// RequestError's first line.
const ginValidatorPrefix = "error in openapi3filter.RequestError: "

// snapshotWriter is the strict method's c.Writer(w) before the strict
// handler chain runs: the recorder notes then which representation headers
// (Content-Type, Content-Encoding) the middleware in front of the engine
// set on w, and records any that a strict middleware behind it or the
// operation sets later (Complete's own Writer(w) would note them as the
// front middleware's, and a replay would lose them). Only those two are
// told apart: a header response.headers lists is recorded as the response
// carries it, whoever set it, and replayed in place of the value a front
// middleware sets for the retry.
func snapshotWriter() jen.Code {
	return jen.Id("c").Dot("Writer").Call(jen.Id("w")).Comment("notes the Content-Type and Content-Encoding the middleware in front set (not recorded unless changed from here on); a listed response header is recorded whoever set it")
}

// noResponse is the strict method's answer to an operation that returned
// (nil, nil): the strict handler writes nothing, so the client gets the
// implicit empty 200, which is recorded (Complete with <px>WriteNothing) as
// Engine.Handler records a plain handler that wrote nothing: the operation
// may have done its work, and a retry must not run it again.
func noResponse() jen.Code {
	return jen.If(jen.Id("resp").Op("==").Nil()).Block(
		jen.Return(jen.Nil(), jen.Id("c").Dot("Complete").Call(jen.Id("w"), jen.Id(px+"WriteNothing"))).Comment("the implicit empty 200: recorded and replayed, as a plain handler's"),
	)
}
