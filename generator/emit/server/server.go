// Package server is idemgen's server emitter: from the IR of a spec it
// writes one Go file, with github.com/dave/jennifer, into the package that
// holds oapi-codegen's output for the same spec, so that adding
// idempotency is one line of wiring:
//
//	x := api.NewIdempotency(nil, idem.Options{Principal: callerOf}) // in-memory store; pass Redis or PostgreSQL in production
//	h := x.StrictHandler(service, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
//
// where the service had api.HandlerWithOptions(api.NewStrictHandlerWithOptions(service, ...), ...).
//
// The generated file declares the type Idempotency (renamable) with:
//
//   - StrictMiddleware, a StrictMiddlewareFunc for oapi-codegen's strict
//     net/http servers (std-http, chi, gorilla): it switches on the
//     operation, takes the key from the typed <Op>RequestObject's
//     parameters when the spec declares it, runs the engine (package
//     runtime/idem) and records the typed <Op>ResponseObject through its
//     Visit method; a replay or a refusal is written at once and the
//     middleware returns (nil, nil), leaving the strict handler nothing to
//     write;
//   - CaptureBody, the net/http middleware that keeps the raw request bytes
//     the strict handler decodes, so the fingerprint is computed from what
//     the client sent;
//   - HTTPMiddleware, for servers generated without strict mode: it matches
//     the method and path template of the idempotent operations (with the
//     router's precedence over every route of the spec) and leaves every
//     other request untouched;
//   - ErrorHandler, for StdHTTPServerOptions.ErrorHandlerFunc (and chi's and
//     gorilla's) and StrictHTTPServerOptions.RequestErrorHandlerFunc: a
//     key parameter oapi-codegen itself rejects (a malformed uuid-typed
//     header, a missing required one) is answered with the same
//     problem+json codes the engine uses;
//   - StrictHandler (strict) or Handler (plain), the one-call wiring of all of
//     the above for the router chosen by server.router; Handler protects by
//     operation, not by path (perop.go): it hands oapi-codegen a wrapper of
//     the ServerInterface whose idempotent operations' methods run the
//     engine around the service's, falling back to HTTPMiddleware's path
//     matching for an operation whose method signature idemgen cannot write;
//   - Policies and Policy, the compiled policy of each operation.
//
// With server.router echo or gin the same API has the framework's
// signatures (echo.go, gin.go: middleware of the framework, an ErrorHandler
// that recognizes oapi-codegen's error messages) and the one-call wiring is
// RegisterStrictHandlers (strict) or RegisterHandlers (plain, by operation
// as Handler).
//
// Settings (idemgen.yaml `options:` or `idemgen generate -option`):
//
//	server.strict  true (default): strict-server middleware too; false: a
//	               package generated without strict-server (plain wrapper only)
//	server.router  std-http (default), chi or gorilla: the router whose
//	               options StrictHandler/Handler take; none: no such method;
//	               echo: echo v4 (echo-server), gin: gin (gin-server), with
//	               the framework's signatures
//	server.type    the generated type's name (default Idempotency); its
//	               constructor is New<type>
//	server.file    the file name (default idempotency.gen.go)
package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emit/internal/gogen"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/runtime/idem"
)

// Name is the emitter's name in the registry.
const Name = "server"

// DefaultFile is the default name of the generated file.
const DefaultFile = "idempotency.gen.go"

// DefaultType is the default name of the generated type.
const DefaultType = "Idempotency"

const (
	idemPkg = "github.com/idemgen/idemgen/runtime/idem"
	memPkg  = "github.com/idemgen/idemgen/runtime/memstore"
)

// The emitter's settings. TypeOption is exported for the client emitter,
// whose names must not collide with the server wrapper's; StrictOption and
// RouterOption for the command line, which defaults them from
// oapi-codegen's configuration.
var (
	StrictOption = emitter.NewOption("server.strict")
	RouterOption = emitter.NewOption("server.router")
	TypeOption   = emitter.NewOption("server.type")
	optFile      = emitter.NewOption("server.file")
	// FirstToLastOption says that oapi-codegen applies options.Middlewares
	// first to last (its compatibility.apply-chi-middleware-first-to-last,
	// for std-http and chi, or apply-gorilla-middleware-first-to-last):
	// the first is then the outermost, and the plain Handler's middleware
	// for the operations it protects by path goes last, not first, so
	// that it still runs after the others. The command line defaults it
	// from oapi-codegen's configuration.
	FirstToLastOption = emitter.NewOption("server.middleware-first-to-last")
)

func init() { emitter.Register(Name, Emit) }

// Config is the emitter's configuration, read from emitter.Options.Params.
type Config struct {
	Strict bool   // server.strict
	Router string // server.router: std-http, chi, gorilla, echo, gin, or none
	Type   string // server.type
	File   string // server.file
	// FirstToLast: server.middleware-first-to-last (std-http, chi and
	// gorilla: oapi-codegen applies options.Middlewares first to last).
	FirstToLast bool
}

// routerOptions are the server options types of oapi-codegen's net/http routers.
var routerOptions = map[string]string{"std-http": "StdHTTPServerOptions", "chi": "ChiServerOptions", "gorilla": "GorillaServerOptions"}

// ParseConfig reads the server.* settings.
func ParseConfig(params map[string]string) (Config, error) {
	c := Config{Strict: true, Router: "std-http", Type: DefaultType, File: DefaultFile}
	if v, ok := StrictOption.In(params); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("%s: %q is not true or false", StrictOption, v)
		}
		c.Strict = b
	}
	if v, ok := RouterOption.In(params); ok {
		if _, ok := routerOptions[v]; !ok && v != "none" && v != "echo" && v != "gin" {
			return c, fmt.Errorf("%s: %q is not std-http, chi, gorilla, echo, gin or none", RouterOption, v)
		}
		c.Router = v
	}
	if v, ok := TypeOption.In(params); ok {
		c.Type = v
	}
	if v, ok := FirstToLastOption.In(params); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("%s: %q is not true or false", FirstToLastOption, v)
		}
		c.FirstToLast = b
	}
	if v, ok := optFile.In(params); ok {
		c.File = v
	}
	if !gogen.IsExported(c.Type) {
		return c, fmt.Errorf("%s: %q is not an exported Go identifier", TypeOption, c.Type)
	}
	return c, gogen.CheckFile(optFile.String(), c.File)
}

// Emit is the registered emitter: one Go file.
func Emit(spec *ir.Spec, opts emitter.Options) ([]emitter.File, error) {
	return gogen.Emit(spec, opts, ParseConfig, Generate, func(c Config) string { return c.File })
}

// Generate renders the file. It fails with a *diag.ErrorList when a
// generated name collides with one oapi-codegen declares for the spec, or
// when the runtime would refuse a policy. With opts.CheckOnly it renders
// nothing: no error, no data.
func Generate(spec *ir.Spec, opts emitter.Options, cfg Config) ([]byte, error) {
	var diags diag.List
	checkNames(spec, cfg, &diags)
	specs := make([]idem.Spec, len(spec.Operations))
	for i, op := range spec.Operations {
		specs[i] = runtimeSpec(op)
		if _, err := idem.Compile(specs[i]); err != nil {
			// One diagnostic per reason (Compile joins them).
			errs := []error{err}
			if j, ok := errors.Unwrap(err).(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			for _, e := range errs {
				diags.Unsupportedf(op.ContractPos, "runtime-policy", "the runtime cannot enforce the contract of %s: %v", op.Where(), e)
			}
		}
		if cfg.Strict && op.Key.Param != nil && op.Names.Params == "" {
			diags.Errorf(op.Key.Pos, "internal-error", "%s declares its key parameter but has no parameters object", op.Where())
		}
	}
	if diags.HasErrors() {
		return nil, &diag.ErrorList{List: diags.Sorted()}
	}
	if opts.CheckOnly {
		return nil, nil
	}
	g := &gen{spec: spec, opts: opts, cfg: cfg, specs: specs, fallback: fallbackOps(spec), f: gogen.NewFile(spec, opts)}
	g.file()
	return gogen.Render(g.f, cfg.File)
}

type gen struct {
	spec  *ir.Spec
	opts  emitter.Options
	cfg   Config
	specs []idem.Spec
	// fallback are the indexes of the operations the plain wiring
	// protects by path (fallbackOps).
	fallback []int
	f        *jen.File
}

// Unexported identifiers all start with this prefix, which oapi-codegen
// never uses.
const px = "idemgen"

// doc writes a comment (gogen.Doc).
func (g *gen) doc(text string) { gogen.Doc(g.f, text) }

func (g *gen) docf(format string, args ...any) { g.doc(fmt.Sprintf(format, args...)) }

func (g *gen) policyVar(op *ir.Operation) string { return px + "Policy" + op.GoName }

func (g *gen) file() {
	f := g.f
	f.ImportName(idemPkg, "idem")
	f.ImportName(memPkg, "memstore")
	f.ImportAlias(gogen.TypesPkg, "openapi_types") // a path parameter's type, as oapi-codegen spells it

	g.typeDecl()
	g.policies()
	switch g.cfg.Router {
	case "echo":
		if g.cfg.Strict {
			g.echoStrict()
			g.echoCaptureBody()
		}
		g.echoMiddleware()
		g.echoErrorHandler()
		g.echoRegister()
	case "gin":
		if g.cfg.Strict {
			g.ginStrict()
			g.ginCaptureBody()
			g.ginHandlerErrorFunc()
		}
		g.ginMiddleware()
		g.ginErrorHandler()
		g.ginRegister()
	default:
		if g.cfg.Strict {
			g.strict()
			g.captureBody()
			g.responseErrorHandler()
		}
		g.netHTTPMiddleware()
		g.serve()
		g.errorHandler()
		g.handler()
	}
	if g.cfg.Router != "gin" && g.cfg.Router != "echo" { // gin and echo resolve the route before the middleware runs (FullPath, Path)
		g.matcher()
	}
	g.helpers()
}

// handler writes the one-call wiring for the configured router.
func (g *gen) handler() {
	opts, ok := routerOptions[g.cfg.Router]
	if !ok {
		return
	}
	t := g.cfg.Type
	hf := func(id string) *jen.Statement { return jen.Qual("net/http", id) }
	if g.cfg.Strict {
		g.docf("StrictHandler is the one line to change in an existing service: it returns what HandlerWithOptions(NewStrictHandlerWithOptions(ssi, middlewares, strictOptions), options) returns, with idempotency wired in. StrictMiddleware goes first in the strict middlewares, so it runs after the given ones (which may authenticate the request and put what Options.Principal reads into the context) and right before the operation; CaptureBodyWithBaseURL(options.BaseURL) is added to options.Middlewares (outermost); ErrorHandlerWithBaseURL(options.BaseURL, ...) wraps both parameter error handlers and ResponseErrorHandler the strict response error handler (nil ones mean oapi-codegen's defaults).")
		g.doc("")
		g.doc("\th := HandlerWithOptions(NewStrictHandlerWithOptions(service, middlewares, strictOptions), options)")
		g.doc("")
		g.doc("becomes")
		g.doc("")
		g.doc("\th := x.StrictHandler(service, middlewares, strictOptions, options)")
		g.doc("")
		g.doc("and by hand it is")
		g.doc("")
		g.doc("\th := HandlerWithOptions(")
		g.doc("\t\tNewStrictHandlerWithOptions(service, append([]StrictMiddlewareFunc{x.StrictMiddleware}, middlewares...),")
		g.doc("\t\t\tStrictHTTPServerOptions{RequestErrorHandlerFunc: x.ErrorHandler(nil), ResponseErrorHandlerFunc: x.ResponseErrorHandler(nil)}),")
		g.docf("\t\t%s{Middlewares: []MiddlewareFunc{x.CaptureBody}, ErrorHandlerFunc: x.ErrorHandler(nil)})", opts)
		g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("StrictHandler").Params(
			jen.Id("ssi").Id("StrictServerInterface"),
			jen.Id("middlewares").Index().Id("StrictMiddlewareFunc"),
			jen.Id("strictOptions").Id("StrictHTTPServerOptions"),
			jen.Id("options").Id(opts),
		).Add(hf("Handler")).Block(
			jen.Id("middlewares").Op("=").Add(strictFirst()),
			jen.Id("strictOptions").Dot("RequestErrorHandlerFunc").Op("=").Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Id("options").Dot("BaseURL"), jen.Id("strictOptions").Dot("RequestErrorHandlerFunc")),
			jen.Id("strictOptions").Dot("ResponseErrorHandlerFunc").Op("=").Id("x").Dot("ResponseErrorHandler").Call(jen.Id("strictOptions").Dot("ResponseErrorHandlerFunc")),
			jen.Id("options").Dot("ErrorHandlerFunc").Op("=").Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Id("options").Dot("BaseURL"), jen.Id("options").Dot("ErrorHandlerFunc")),
			jen.Id("options").Dot("Middlewares").Op("=").Append(jen.Id("options").Dot("Middlewares").Index(jen.Empty(), jen.Len(jen.Id("options").Dot("Middlewares")), jen.Len(jen.Id("options").Dot("Middlewares"))), jen.Id("x").Dot("CaptureBodyWithBaseURL").Call(jen.Id("options").Dot("BaseURL"))),
			jen.Return(jen.Id("HandlerWithOptions").Call(jen.Id("NewStrictHandlerWithOptions").Call(jen.Id("ssi"), jen.Id("middlewares"), jen.Id("strictOptions")), jen.Id("options"))),
		)
		return
	}
	g.docf("Handler is the one line to change in an existing service: it returns what HandlerWithOptions(si, options) returns, with idempotency wired in. It hands HandlerWithOptions a wrapper of si whose method of each idempotent operation runs the engine for that operation around si's: the protection goes by operation, not by path, so it holds whatever path the router routes on (a gorilla subrouter as BaseRouter, a chi router mounted under a prefix, a BaseURL) and runs after options.Middlewares (which may authenticate the request), right before the operation; every other operation is si's, untouched.%s ErrorHandlerWithBaseURL(options.BaseURL, ...) wraps options.ErrorHandlerFunc (nil means oapi-codegen's default): it matches paths, and under a prefix the router adds and options.BaseURL does not give, a key parameter oapi-codegen refuses gets the default answer instead of the engine's problem.", g.fallbackDoc())
	g.doc("")
	g.doc("\th := HandlerWithOptions(service, options)")
	g.doc("")
	g.doc("becomes")
	g.doc("")
	g.doc("\th := x.Handler(service, options)")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("Handler").Params(
		jen.Id("si").Id("ServerInterface"),
		jen.Id("options").Id(opts),
	).Add(hf("Handler")).BlockFunc(func(b *jen.Group) {
		b.Id("options").Dot("ErrorHandlerFunc").Op("=").Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Id("options").Dot("BaseURL"), jen.Id("options").Dot("ErrorHandlerFunc"))
		switch {
		case len(g.fallback) == 0:
		case g.cfg.FirstToLast:
			// oapi-codegen applies the middlewares first to last: the
			// last is the innermost.
			ms := jen.Id("options").Dot("Middlewares")
			b.Add(ms.Clone()).Op("=").Append(ms.Clone().Index(jen.Empty(), jen.Len(ms.Clone()), jen.Len(ms.Clone())), jen.Id("x").Dot("byPath").Call(jen.Id("options").Dot("BaseURL")))
		default:
			b.Id("options").Dot("Middlewares").Op("=").Append(jen.Index().Id("MiddlewareFunc").Values(jen.Id("x").Dot("byPath").Call(jen.Id("options").Dot("BaseURL"))), jen.Id("options").Dot("Middlewares").Op("..."))
		}
		b.Return(jen.Id("HandlerWithOptions").Call(g.newOpServer(px+"Server"), jen.Id("options")))
	})
	g.netHTTPOpServer()
	g.byPathFunc()
}

func (g *gen) typeDecl() {
	t, title := g.cfg.Type, g.spec.Title
	if g.spec.Version != "" {
		title += " " + g.spec.Version
	}
	var doc strings.Builder
	fmt.Fprintf(&doc, "%s enforces the x-idempotency contracts of %q on the servers oapi-codegen generated in this package.", t, title)
	doc.WriteString(" A retried request with the same idempotency key runs its operation once; every retry gets the first response (with Idempotent-Replayed: true) or an RFC 9457 problem.\n\n")
	doc.WriteString("Idempotent operations:\n\n")
	for _, op := range g.spec.Operations {
		fmt.Fprintf(&doc, "  - %s (%s): %s semantics, window %s, key %s\n", op.Where(), op.RecordName(), op.Policy.Semantics, ir.FormatDuration(op.Policy.Window), keyDoc(op.Key))
	}
	opts, router := routerOptions[g.cfg.Router]
	doc.WriteString("\nWiring:\n\n")
	fmt.Fprintf(&doc, "\tx := New%s(nil, idem.Options{Principal: callerOf}) // nil: an in-memory store; pass a shared one (Redis, PostgreSQL) when several instances serve the API\n", t)
	doc.WriteString("\tdefer x.Close()\n")
	switch {
	case g.cfg.Router == "echo" && g.cfg.Strict:
		doc.WriteString("\tx.RegisterStrictHandlers(e, service, nil) // e is the *echo.Echo\n\n")
		doc.WriteString("RegisterStrictHandlers is RegisterHandlers(e, NewStrictHandler(...)) with StrictMiddleware, CaptureBody and ErrorHandler added.\n\n")
	case g.cfg.Router == "echo":
		doc.WriteString("\tx.RegisterHandlers(e, service) // e is the *echo.Echo, or an *echo.Group\n\n")
	case g.cfg.Router == "gin" && g.cfg.Strict:
		doc.WriteString("\tx.RegisterStrictHandlers(router, service, nil, StrictGinServerOptions{}, GinServerOptions{}) // router is the *gin.Engine or a group\n\n")
		doc.WriteString("RegisterStrictHandlers is RegisterHandlersWithOptions(router, NewStrictHandlerWithOptions(...), options) with StrictMiddleware, CaptureBody, ErrorHandler and HandlerErrorFunc added.\n\n")
	case g.cfg.Router == "gin":
		doc.WriteString("\tx.RegisterHandlers(router, service, GinServerOptions{}) // router is the *gin.Engine or a group\n\n")
	case g.cfg.Strict && router:
		fmt.Fprintf(&doc, "\th := x.StrictHandler(service, nil, StrictHTTPServerOptions{}, %s{})\n\n", opts)
		doc.WriteString("StrictHandler is HandlerWithOptions(NewStrictHandlerWithOptions(...)) with StrictMiddleware, CaptureBody, ErrorHandler and ResponseErrorHandler added to the middlewares and options given; its documentation shows how to add them by hand.\n\n")
	case g.cfg.Strict:
		doc.WriteString("\th := HandlerWithOptions(\n")
		doc.WriteString("\t\tNewStrictHandlerWithOptions(service, []StrictMiddlewareFunc{x.StrictMiddleware}, StrictHTTPServerOptions{RequestErrorHandlerFunc: x.ErrorHandler(nil), ResponseErrorHandlerFunc: x.ResponseErrorHandler(nil)}),\n")
		doc.WriteString("\t\tStdHTTPServerOptions{Middlewares: []MiddlewareFunc{x.CaptureBody}, ErrorHandlerFunc: x.ErrorHandler(nil)}) // or ChiServerOptions, GorillaServerOptions\n\n")
	case router:
		fmt.Fprintf(&doc, "\th := x.Handler(service, %s{})\n\n", opts)
	default:
		doc.WriteString("\th := x.HTTPMiddleware(HandlerWithOptions(service, StdHTTPServerOptions{ErrorHandlerFunc: x.ErrorHandler(nil)}))\n\n")
	}
	kept := "read from the request before the handler runs"
	if g.cfg.Strict {
		kept = "kept by CaptureBody while the strict handler decodes them"
	}
	doc.WriteString("The fingerprint of a request is computed from the raw bytes the client sent (" + kept + "), not from the typed request body re-encoded: members the spec does not declare, which decoding would drop, are part of the fingerprint, so a retry must resend the same document (volatile members aside) and two bodies that decode alike but differ in undeclared members are different requests. Key order, white space and number spelling do not matter.")
	g.doc(doc.String())
	g.f.Type().Id(t).Struct(
		jen.Id("engine").Op("*").Qual(idemPkg, "Engine"),
		jen.Id("owned").Op("*").Qual(memPkg, "Store").Comment("the store New"+t+" made, closed by Close"),
	)

	g.docf("New%s returns the %s of this package over store, or over a new in-memory store (package memstore) when store is nil. opts configure the engine: Principal scopes records per caller (callerOf above: a func(*http.Request) (string, error) that returns who the caller is, from your authentication, and an error for a request without one, never \"\": an empty principal is refused where keys are per caller, unless Principal is idem.Anonymous, for all callers as one principal), Observer sees every decision. Principal is required where keys are per caller: without it the engine cannot tell callers apart, so it refuses every request of the operations whose keys the contract promises per caller (500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE, the handler not run) and logs one error naming them.", t, t)
	g.f.Func().Id("New"+t).Params(jen.Id("store").Qual(idemPkg, "Store"), jen.Id("opts").Qual(idemPkg, "Options")).Op("*").Id(t).Block(
		jen.Id("x").Op(":=").Op("&").Id(t).Values(),
		jen.If(jen.Id("store").Op("==").Nil()).Block(
			jen.Id("x").Dot("owned").Op("=").Qual(memPkg, "New").Call(jen.Qual(memPkg, "Options").Values()),
			jen.Id("store").Op("=").Id("x").Dot("owned"),
		),
		jen.Id("x").Dot("engine").Op("=").Qual(idemPkg, "New").Call(jen.Id("store"), jen.Id("opts")),
		jen.Id("x").Dot("engine").Dot("Serves").Call(jen.Id(px+"Policies").Op("...")),
		jen.Return(jen.Id("x")),
	)
	g.doc("Engine returns the engine, for code that protects other handlers with it.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("Engine").Params().Op("*").Qual(idemPkg, "Engine").Block(jen.Return(jen.Id("x").Dot("engine")))
	g.docf("Close closes the in-memory store New%s made (a store passed in is the caller's to close).", t)
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("Close").Params().Error().Block(
		jen.If(jen.Id("x").Dot("owned").Op("!=").Nil()).Block(jen.Return(jen.Id("x").Dot("owned").Dot("Close").Call())),
		jen.Return(jen.Nil()),
	)
}

func keyDoc(k ir.Key) string {
	s := string(k.Carrier) + " " + k.Name
	if !k.Required {
		s += " (optional)"
	}
	return s + ", " + k.Format
}

func (g *gen) policies() {
	t := g.cfg.Type
	for i, op := range g.spec.Operations {
		g.docf("%s is the policy of %s (%s).", g.policyVar(op), op.Where(), op.RecordName())
		g.f.Var().Id(g.policyVar(op)).Op("=").Qual(idemPkg, "MustCompile").Call(specLiteral(g.specs[i]))
	}
	var list []jen.Code
	for _, op := range g.spec.Operations {
		list = append(list, jen.Id(g.policyVar(op)))
	}
	g.docf("%sPolicies are the policies in spec order (by path, then method).", px)
	g.f.Var().Id(px+"Policies").Op("=").Index().Op("*").Qual(idemPkg, "Policy").ValuesFunc(func(gr *jen.Group) {
		for _, c := range list {
			gr.Line().Add(c)
		}
		if len(list) > 0 {
			gr.Line()
		}
	})

	g.doc("Policies returns the compiled policy of each idempotent operation, in spec order (by path, then method): window, semantics, key and the rest are in each Policy's Spec.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("Policies").Params().Index().Op("*").Qual(idemPkg, "Policy").Block(
		jen.Return(jen.Append(jen.Index().Op("*").Qual(idemPkg, "Policy").Call(jen.Nil()), jen.Id(px+"Policies").Op("..."))),
	)
	g.doc("Policy returns the policy of the operation with this operationId (oapi-codegen's Go name for operations without one), nil when the operation is not idempotent.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("Policy").Params(jen.Id("operationID").String()).Op("*").Qual(idemPkg, "Policy").Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("p")).Op(":=").Range().Id(px+"Policies")).Block(
			jen.If(jen.Id("p").Dot("Operation").Call().Op("==").Id("operationID")).Block(jen.Return(jen.Id("p"))),
		),
		jen.Return(jen.Nil()),
	)
}

// runtimeSpec turns an operation's contract into the runtime's Spec.
func runtimeSpec(op *ir.Operation) idem.Spec {
	p := op.Policy
	s := idem.Spec{
		Operation:          op.RecordName(),
		Method:             op.Method,
		Path:               op.Path,
		Window:             p.Window,
		FingerprintHeaders: p.FingerprintHeaders,
		ConflictStatus:     p.ConflictStatus,
		InFlight:           idem.InFlightSpec{Status: p.InFlight.Status, RetryAfter: p.InFlight.RetryAfter, Lease: p.InFlight.Lease, Wait: p.InFlight.Wait},
		Response:           idem.ResponseSpec{MaxBytes: int(p.Response.MaxBytes), Headers: p.Response.Headers},
		Request:            idem.RequestSpec{MaxBytes: p.Request.MaxBytes, MediaTypes: []string{}},
	}
	// The declared request media types: the fingerprint reads a body as
	// JSON or as a form only when sent as one of them (oapi-codegen's
	// handlers decode JSON whatever the Content-Type says). Never nil:
	// nil is a Spec without the list (the Content-Type reading); an
	// operation without a request body declares none.
	if op.Body != nil {
		s.Request.MediaTypes = slices.Clone(op.Body.ContentTypes)
	}
	switch p.Semantics {
	case ir.Strict:
		s.Semantics = idem.Strict
	case ir.Loose:
		s.Semantics = idem.Loose
	case ir.Window:
		s.Semantics = idem.Window
	}
	if !slices.Contains(p.Scope, "principal") {
		s.Scope = idem.ScopeShared // scope: [] (keys shared by all callers)
	}
	s.Volatile, s.Unordered = ir.Pointers(p.Volatile), ir.Pointers(p.Unordered)
	for _, e := range p.CompatibleFingerprints {
		s.CompatibleFingerprints = append(s.CompatibleFingerprints, idem.FingerprintSpec{
			Volatile: ir.Pointers(e.Volatile), Unordered: ir.Pointers(e.Unordered), FingerprintHeaders: e.FingerprintHeaders})
	}
	k := op.Key
	s.Key = idem.KeySpec{Name: k.Name, MaxLength: k.MaxLength, Required: idem.Optional}
	if k.Required {
		s.Key.Required = idem.Required
	}
	switch k.Carrier {
	case ir.CarrierBody:
		s.Key.Carrier = idem.CarrierBody
	case ir.CarrierQuery:
		s.Key.Carrier = idem.CarrierQuery
	default:
		s.Key.Carrier = idem.CarrierHeader
	}
	switch k.Format {
	case ir.FormatUUID:
		s.Key.Format = idem.FormatUUID
	case ir.FormatUUIDv4:
		s.Key.Format = idem.FormatUUIDv4
	case ir.FormatUUIDv7:
		s.Key.Format = idem.FormatUUIDv7
	default:
		s.Key.Format = idem.FormatToken
	}
	if p.Failures == ir.FailuresReplay {
		s.Failures = idem.FailuresReplay
	}
	return s
}

// specLiteral writes s as an idem.Spec literal with every field explicit,
// so the generated file documents the whole policy.
func specLiteral(s idem.Spec) jen.Code {
	q := func(name string) *jen.Statement { return jen.Qual(idemPkg, name) }
	strs := func(l []string) jen.Code {
		if len(l) == 0 {
			return jen.Nil()
		}
		return jen.Index().String().ValuesFunc(func(g *jen.Group) {
			for _, v := range l {
				g.Lit(v)
			}
		})
	}
	sem := map[idem.Semantics]string{idem.Strict: "Strict", idem.Loose: "Loose", idem.Window: "Window"}[s.Semantics]
	carrier := map[idem.Carrier]string{idem.CarrierHeader: "CarrierHeader", idem.CarrierBody: "CarrierBody", idem.CarrierQuery: "CarrierQuery"}[s.Key.Carrier]
	format := map[idem.Format]string{idem.FormatToken: "FormatToken", idem.FormatUUID: "FormatUUID", idem.FormatUUIDv4: "FormatUUIDv4", idem.FormatUUIDv7: "FormatUUIDv7"}[s.Key.Format]
	req := "Optional"
	if s.Key.Required == idem.Required {
		req = "Required"
	}
	failures := "FailuresRetry"
	if s.Failures == idem.FailuresReplay {
		failures = "FailuresReplay"
	}
	all := []jen.Code{
		gogen.Field("Operation", jen.Lit(s.Operation)),
		gogen.Field("Method", jen.Lit(s.Method)),
		gogen.Field("Path", jen.Lit(s.Path)),
		gogen.Field("Semantics", q(sem)),
		gogen.Field("Window", gogen.DurationCode(s.Window)),
		gogen.Field("Key", q("KeySpec").Add(gogen.Fields(
			gogen.Field("Carrier", q(carrier)),
			gogen.Field("Name", jen.Lit(s.Key.Name)),
			gogen.Field("Required", q(req)),
			gogen.Field("Format", q(format)),
			gogen.Field("MaxLength", jen.Lit(s.Key.MaxLength)),
		))),
		gogen.Field("Volatile", strs(s.Volatile)),
		gogen.Field("Unordered", strs(s.Unordered)),
		gogen.Field("FingerprintHeaders", strs(s.FingerprintHeaders)),
		gogen.Field("Scope", q(map[idem.Scope]string{idem.ScopePrincipal: "ScopePrincipal", idem.ScopeShared: "ScopeShared"}[s.Scope])),
		gogen.Field("ConflictStatus", jen.Lit(s.ConflictStatus)),
		gogen.Field("InFlight", q("InFlightSpec").Add(gogen.Fields(
			gogen.Field("Status", jen.Lit(s.InFlight.Status)),
			gogen.Field("RetryAfter", gogen.DurationCode(s.InFlight.RetryAfter)),
			gogen.Field("Lease", gogen.DurationCode(s.InFlight.Lease)),
			gogen.Field("Wait", gogen.DurationCode(s.InFlight.Wait)),
		))),
		gogen.Field("Failures", q(failures)),
		gogen.Field("Response", q("ResponseSpec").Add(gogen.Fields(
			gogen.Field("MaxBytes", jen.Lit(s.Response.MaxBytes)),
			gogen.Field("Headers", strs(s.Response.Headers)),
		))),
		gogen.Field("Request", q("RequestSpec").Add(gogen.Fields(
			gogen.Field("MaxBytes", jen.Lit(int(s.Request.MaxBytes))),
			// Never nil (runtimeSpec): []string{} declares no body.
			gogen.Field("MediaTypes", jen.Index().String().ValuesFunc(func(g *jen.Group) {
				for _, v := range s.Request.MediaTypes {
					g.Lit(v)
				}
			})),
		))),
	}
	// CompatibleFingerprints only when the contract has compatible-fingerprints: the
	// literals of other operations stay as they were.
	if len(s.CompatibleFingerprints) > 0 {
		all = append(all, gogen.Field("CompatibleFingerprints", jen.Index().Add(q("FingerprintSpec")).ValuesFunc(func(g *jen.Group) {
			for _, f := range s.CompatibleFingerprints {
				g.Line().Add(gogen.Fields(
					gogen.Field("Volatile", strs(f.Volatile)),
					gogen.Field("Unordered", strs(f.Unordered)),
					gogen.Field("FingerprintHeaders", strs(f.FingerprintHeaders)),
				))
			}
			g.Line()
		})))
	}
	return q("Spec").Add(gogen.Fields(all...))
}

// strictFunc declares the generated strict method (its body is the
// caller's), which runs one strict-server request of an idempotent
// operation; handlerParams are the strict handler's own parameters (net/http's
// or echo's).
func (g *gen) strictFunc(handlerParams []jen.Code) *jen.Statement {
	g.doc("strict runs one strict-server request of an idempotent operation; visitor returns the typed response's Visit method, nil for a value of another type.")
	return g.f.Func().Params(jen.Id("x").Op("*").Id(g.cfg.Type)).Id("strict").Params(
		append(handlerParams,
			jen.Id("f").Id("StrictHandlerFunc"),
			jen.Id("p").Op("*").Qual(idemPkg, "Policy"),
			jen.Id("key").Qual(idemPkg, "Key"),
			jen.Id("visitor").Func().Params(jen.Any()).Func().Params(jen.Qual("net/http", "ResponseWriter")).Error(),
		)...,
	).Params(jen.Any(), jen.Error())
}

// strict writes the strict-server middleware.
func (g *gen) strict() {
	handlerParams := []jen.Code{
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("w").Qual("net/http", "ResponseWriter"),
		jen.Id("r").Op("*").Qual("net/http", "Request"),
		jen.Id("request").Any(),
	}
	g.strictMiddleware(handlerParams, []jen.Code{jen.Id("ctx"), jen.Id("w"), jen.Id("r"), jen.Id("request")})

	g.strictFunc(handlerParams).Block(
		jen.If(jen.Id("ctx").Op("!=").Id("r").Dot("Context").Call()).Block(
			jen.Id("r").Op("=").Id("r").Dot("WithContext").Call(jen.Id("ctx")).Comment("keep what earlier strict middleware put in ctx"),
		),
		jen.If(jen.Id("x").Dot("engine").Dot("Nested").Call(jen.Id("w"), jen.Id("p"))).Block(
			jen.Return(jen.Id("f").Call(jen.Id("ctx"), jen.Id("w"), jen.Id("r"), jen.Id("request"))).Comment("the engine in front records the request already (a doubled wiring: HTTPMiddleware around StrictHandler)"),
		),
		jen.Id("c").Op(":=").Id("x").Dot("engine").Dot("Begin").Call(jen.Id("r"), jen.Id("p"), jen.Id("key")),
		jen.Defer().Id("c").Dot("End").Call().Comment("frees the key when the operation fails or panics"),
		jen.If(jen.Id("c").Dot("Decision").Call().Op("!=").Qual(idemPkg, "Execute")).Block(
			jen.Id("c").Dot("Respond").Call(jen.Id("w")).Comment("the replay or the problem"),
			jen.Return(jen.Nil(), jen.Nil()),
		),
		snapshotWriter(),
		jen.Id("hr").Op(":=").Id("r"),
		jen.If(jen.Id("cc").Op(":=").Id("c").Dot("Context").Call(), jen.Id("cc").Op("!=").Id("r").Dot("Context").Call()).Block(
			jen.Id("hr").Op("=").Id("r").Dot("WithContext").Call(jen.Id("cc")).Comment("the store's transaction (transactional mode), or the context DetachHandler keeps: r.Context() is ctx for what runs inside"),
		),
		jen.List(jen.Id("resp"), jen.Err()).Op(":=").Id("f").Call(jen.Id("hr").Dot("Context").Call(), jen.Id("w"), jen.Id("hr"), jen.Id("request")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Id("resp"), jen.Id("c").Dot("HandlerFailed").Call(jen.Err())).Comment("ResponseErrorHandler records the strict server's answer under failures: replay; else End frees the key"),
		),
		noResponse(),
		jen.Id("visit").Op(":=").Id("visitor").Call(jen.Id("resp")),
		jen.If(jen.Id("visit").Op("==").Nil()).Block(
			jen.Return(jen.Id("resp"), jen.Nil()).Comment("not this operation's response type: the strict handler reports it, End frees the key"),
		),
		jen.Return(jen.Nil(), jen.Id("c").Dot("Complete").Call(jen.Id("w"), jen.Id("visit"))),
	)
}

// strictErrorDoc says what becomes of an operation's error.
func (g *gen) strictErrorDoc() string {
	adapter := "ResponseErrorHandler (StrictHTTPServerOptions.ResponseErrorHandlerFunc)"
	switch g.cfg.Router {
	case "gin":
		adapter = "HandlerErrorFunc (StrictGinServerOptions.HandlerErrorFunc)"
	case "echo":
		adapter = "ErrorHandler (e.HTTPErrorHandler; CaptureBody has echo answer it while the request is bounded)"
	}
	return "Under failures: replay, that answer is recorded and replayed when the error handler is wrapped in " + adapter + " and CaptureBody bounds the request; otherwise, and under the other failures policies (or in transactional mode, where the error rolls back), the key is freed for a retry (under failures: replay the engine warns once per operation)."
}

// strictMiddleware writes StrictMiddleware: a switch on the operation that
// returns, for each idempotent one, a handler with handlerParams calling
// x.strict(args..., f, policy, key, visitor).
func (g *gen) strictMiddleware(handlerParams, args []jen.Code) {
	t := g.cfg.Type
	g.doc("StrictMiddleware is a StrictMiddlewareFunc (pass x.StrictMiddleware to NewStrictHandler, first among the strict middlewares) that protects the idempotent operations and returns every other operation's handler untouched.")
	g.doc("")
	g.doc("For an idempotent operation it reads the key from the typed request object when the spec declares the key parameter (but a UUID-typed one, read from the request as sent, so that only the canonical text format: uuid allows is taken) or the key is a top-level string member of the JSON body (else from the request, a body member from the captured wire bytes), fingerprints the body CaptureBody kept, and either runs the operation, recording its typed response through its Visit method, or writes the stored response (a replay) or a problem and returns (nil, nil), so the strict handler has nothing left to write. An error the operation returns is no response: the strict server answers it (its error handler) after StrictMiddleware returned. " + g.strictErrorDoc() + " Without CaptureBody, requests with a body are refused with 400 IDEMPOTENCY_REQUEST_UNREADABLE.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("StrictMiddleware").Params(jen.Id("f").Id("StrictHandlerFunc"), jen.Id("operationID").String()).Id("StrictHandlerFunc").Block(
		jen.Switch(jen.Id("operationID")).BlockFunc(func(sw *jen.Group) {
			for _, op := range g.spec.Operations {
				sw.Case(jen.Lit(op.GoName)).Block(
					jen.Return(jen.Func().Params(handlerParams...).Params(jen.Any(), jen.Error()).BlockFunc(func(b *jen.Group) {
						key := jen.Qual(idemPkg, "RequestKey")
						if p := op.Key.Param; p != nil && op.Key.GoKind == ir.KeyGoUUID {
							b.Comment("The key as sent (idem.RequestKey), not the parsed UUID: oapi-codegen's binding also")
							b.Comment("takes braced, urn:uuid: and dashless forms, which format: uuid refuses (canonical text).")
						} else if p != nil {
							b.Id("key").Op(":=").Add(key)
							conv := keyConv(false, p.Pointer)
							b.If(jen.List(jen.Id("in"), jen.Id("ok")).Op(":=").Id("request").Assert(jen.Id(op.Names.RequestObject)), jen.Id("ok")).Block(
								jen.Id("key").Op("=").Id(conv).Call(jen.Id("in").Dot("Params").Dot(p.GoName)),
							)
							key = jen.Id("key")
						} else if op.Key.BodyField != "" {
							b.Id("key").Op(":=").Add(key)
							b.If(jen.List(jen.Id("in"), jen.Id("ok")).Op(":=").Id("request").Assert(jen.Id(op.Names.RequestObject)), jen.Id("ok").Op("&&").Id("in").Dot("Body").Op("!=").Nil()).Block(
								jen.Id("key").Op("=").Id(px + "BodyKey").Call(jen.Id("in").Dot("Body").Dot(op.Key.BodyField)).Comment("decoded: not the wire bytes, which a middleware inside CaptureBody may have decompressed"),
							)
							key = jen.Id("key")
						}
						b.Return(jen.Id("x").Dot("strict").Call(append(args,
							jen.Id("f"), jen.Id(g.policyVar(op)), key,
							jen.Func().Params(jen.Id("resp").Any()).Func().Params(jen.Qual("net/http", "ResponseWriter")).Error().Block(
								jen.If(jen.List(jen.Id("v"), jen.Id("ok")).Op(":=").Id("resp").Assert(jen.Id(op.Names.ResponseObject)), jen.Id("ok")).Block(
									jen.Return(jen.Id("v").Dot("Visit"+op.GoName+"Response")),
								),
								jen.Return(jen.Nil()),
							),
						)...))
					})),
				)
			}
		}),
		jen.Return(jen.Id("f")),
	)
}

func (g *gen) maxRequestBytes() int64 {
	m := int64(idem.DefaultMaxRequestBytes)
	for _, op := range g.spec.Operations {
		m = max(m, op.Policy.Request.MaxBytes)
	}
	return m
}

// responseErrorHandler writes ResponseErrorHandler, the std-http, chi and
// gorilla strict servers' error handler adapter (see
// idem.AnswerHandlerError).
func (g *gen) responseErrorHandler() {
	t := g.cfg.Type
	hf := func(id string) *jen.Statement { return jen.Qual("net/http", id) }
	sig := func() *jen.Statement {
		return jen.Func().Params(hf("ResponseWriter"), jen.Op("*").Add(hf("Request")), jen.Error())
	}
	g.doc("ResponseErrorHandler returns the error handler for StrictHTTPServerOptions.ResponseErrorHandlerFunc: next answers the error of an operation (nil: a generic 500 application/problem+json, IDEMPOTENCY_HANDLER_FAILED, and the error logged at Error level with the engine's Logger: idem.Engine.WriteHandlerError; oapi-codegen's own default sends the error's text, which may hold internal details and under failures: replay would be replayed for the whole window), and under failures: replay, what it writes for an idempotent operation's error is recorded and replayed to a retry with Idempotent-Replayed: true (a 5xx is stored as a failure, as a plain handler's), so the operation does not run again. next gets the error the strict server hands it, as it is (the operation's own, or what a strict middleware made of it). It needs CaptureBody around the router (StrictHandler adds both). Without it, or when next writes nothing, the key is freed for a retry and the engine warns once per operation. Every other error goes to next, writing to w.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ResponseErrorHandler").Params(jen.Id("next").Add(sig())).Add(sig()).Block(
		jen.If(jen.Id("next").Op("==").Nil()).Block(
			jen.Id("next").Op("=").Id("x").Dot("engine").Dot("WriteHandlerError"),
		),
		jen.Return(jen.Func().Params(jen.Id("w").Add(hf("ResponseWriter")), jen.Id("r").Op("*").Add(hf("Request")), jen.Err().Error()).Block(
			jen.Qual(idemPkg, "AnswerHandlerError").Call(jen.Id("w"), jen.Id("r"), jen.Err(), jen.Func().Params(jen.Id("w").Add(hf("ResponseWriter")), jen.Err().Error()).Block(
				jen.Id("next").Call(jen.Id("w"), jen.Id("r"), jen.Err()),
			)),
		)),
	)
}

func (g *gen) captureBody() {
	t := g.cfg.Type
	g.doc("CaptureBody is net/http middleware that keeps the raw bytes of a request body while oapi-codegen's strict handler decodes it, so StrictMiddleware fingerprints what the client sent, for a server mounted at the root (else use CaptureBodyWithBaseURL). Add it to the server options' Middlewares (StdHTTPServerOptions, ChiServerOptions, GorillaServerOptions) or wrap the whole router with it. Safe methods pass untouched. " + captureBoundDoc + " A request without a body gets an empty body of CaptureBody's own (it reads io.EOF, as http.NoBody, but is not http.NoBody) that bounds it for ResponseErrorHandler; a middleware inside CaptureBody that replaces that body (http.MaxBytesReader) leaves it unbounded, and its operation's error is then not recorded.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("CaptureBody").Params(jen.Id("next").Qual("net/http", "Handler")).Qual("net/http", "Handler").Block(
		jen.Return(jen.Id(px + "CaptureBody").Call(jen.Id("next"))),
	)
	g.doc("CaptureBodyWithBaseURL is CaptureBody for a server mounted under baseURL (the BaseURL of the server options, e.g. \"/v1\"): the body of a request outside it is kept but not bounded.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("CaptureBodyWithBaseURL").Params(jen.Id("baseURL").String()).Add(httpMiddlewareType()).Block(
		jen.Return(jen.Qual(idemPkg, "CaptureBodyFor").Call(jen.Lit(int(g.maxRequestBytes())), jen.Id(px+"Captured").Call(jen.Id("baseURL")))),
	)
	g.doc(px + "CaptureBody is CaptureBody's middleware, made once.")
	g.f.Var().Id(px+"CaptureBody").Op("=").Qual(idemPkg, "CaptureBodyFor").Call(jen.Lit(int(g.maxRequestBytes())), jen.Id(px+"Captured").Call(jen.Lit("")))
	g.doc(px + "Captured returns the route function of idem.CaptureBodyFor for a server mounted under baseURL: the policy of the idempotent operation a request is for (matched as HTTPMiddleware matches it), nil for any other request.")
	g.f.Func().Id(px+"Captured").Params(jen.Id("baseURL").String()).Func().Params(jen.Op("*").Qual("net/http", "Request")).Op("*").Qual(idemPkg, "Policy").Block(
		jen.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Id("baseURL"), jen.Lit("/")),
		jen.Return(jen.Func().Params(jen.Id("r").Op("*").Qual("net/http", "Request")).Op("*").Qual(idemPkg, "Policy").Block(
			jen.If(jen.List(jen.Id("path"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(jen.Id(px+"RoutePath").Call(jen.Id("r")), jen.Id("baseURL")), jen.Id("ok")).Block(
				jen.If(jen.Id("i").Op(":=").Id(px+"Match").Call(jen.Id("r").Dot("Method"), jen.Id("path")), jen.Id("i").Op(">=").Lit(0)).Block(
					jen.Return(jen.Id(px+"Policies").Index(jen.Id("i"))),
				),
			),
			jen.Return(jen.Nil()),
		)),
	)
}

// captureBoundDoc is what the generated CaptureBody of every router says
// of the bound it puts on a body.
const captureBoundDoc = "The body of a request of an idempotent operation is bounded on the wire by that operation's request.max-bytes: past it, reading the body fails with an *http.MaxBytesError and the client is not read further, so the strict handler's decoder stops, and the error handler answers 413 IDEMPOTENCY_REQUEST_TOO_LARGE (idem.Engine.RefuseTooLarge); the body of any other request is kept while it fits (up to the largest request.max-bytes) but never bounded."

// route is a route of the matcher table.
type route struct {
	method, path string
	segs         []gogen.Segment
	policy       int // index in the policies, -1 when not idempotent
	order        int // registration order (gorilla): the line of the operation in the spec, 0 when unknown
}

// overlaps reports whether some path matches both a and b.
func overlaps(a, b []gogen.Segment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		switch {
		case !x.Param && !y.Param:
			if x.Prefix != y.Prefix {
				return false
			}
		case !x.Param:
			if !segMatches(y, x.Prefix) {
				return false
			}
		case !y.Param:
			if !segMatches(x, y.Prefix) {
				return false
			}
		}
	}
	return true
}

func segMatches(s gogen.Segment, v string) bool {
	if !s.Param {
		return v == s.Prefix
	}
	return len(v) > len(s.Prefix)+len(s.Suffix) && strings.HasPrefix(v, s.Prefix) && strings.HasSuffix(v, s.Suffix)
}

// before orders a before b when a is the more specific at the first
// segment where they differ in kind (chi's and ServeMux's precedence for
// templates that do not conflict), then by template.
func before(a, b route) int {
	for i := 0; i < len(a.segs) && i < len(b.segs); i++ {
		if ra, rb := a.segs[i].Rank(), b.segs[i].Rank(); ra != rb {
			return ra - rb
		}
	}
	if len(a.segs) != len(b.segs) {
		return len(a.segs) - len(b.segs)
	}
	return strings.Compare(a.path, b.path)
}

// routes returns the matcher table, by method: the idempotent operations
// and the other routes that take precedence over one of them, most
// specific first.
func (g *gen) routes() map[string][]route {
	index := map[string]int{}
	for i, op := range g.spec.Operations {
		index[op.Where()] = i
	}
	all := g.spec.Routes
	if len(all) == 0 { // an IR without routes: the idempotent operations alone
		for _, op := range g.spec.Operations {
			all = append(all, ir.Route{Method: op.Method, Path: op.Path, GoName: op.GoName, Idempotent: true})
		}
	}
	var idemRoutes, other []route
	for _, r := range all {
		rt := route{method: r.Method, path: r.Path, segs: gogen.ParseTemplate(r.Path), policy: -1}
		if r.Pos.File == g.spec.Source {
			rt.order = r.Pos.Line
		}
		if i, ok := index[r.Where()]; ok {
			rt.policy = i
			idemRoutes = append(idemRoutes, rt)
		} else {
			other = append(other, rt)
		}
	}
	precedes := before
	if g.cfg.Router == "gorilla" {
		precedes = registered
	}
	out := map[string][]route{}
	for _, r := range idemRoutes {
		out[r.method] = append(out[r.method], r)
	}
	for _, o := range other {
		for _, r := range idemRoutes {
			if o.method == r.method && overlaps(o.segs, r.segs) && precedes(o, r) < 0 {
				out[o.method] = append(out[o.method], o)
				break
			}
		}
	}
	for m := range out {
		slices.SortStableFunc(out[m], precedes)
	}
	return out
}

// registered orders routes as oapi-codegen registers them (v2.8: in the
// order the spec declares its paths, then by path and method), which is
// gorilla/mux's precedence: the first route that matches serves.
func registered(a, b route) int {
	if a.order != b.order {
		return a.order - b.order
	}
	if c := strings.Compare(a.path, b.path); c != 0 {
		return c
	}
	return strings.Compare(a.method, b.method)
}

// matcher writes the compiled route table and its matching function.
func (g *gen) matcher() {
	routes := g.routes()
	methods := make([]string, 0, len(routes))
	for m := range routes {
		methods = append(methods, m)
	}
	slices.Sort(methods)

	g.doc(px + "Route is an entry of the matcher: a path template split into segments at init, and the index of its policy (-1: a route that is not idempotent but takes precedence over one that is).")
	g.f.Type().Id(px+"Route").Struct(
		jen.Id("segs").Index().Id(px+"Segment"),
		jen.Id("policy").Int(),
	)
	gogen.SegmentType(g.f, px)
	if g.cfg.Router == "gorilla" {
		g.doc(px + "Routes holds, by method, the idempotent operations and the routes that take precedence over them, in the order oapi-codegen registers them with gorilla/mux, whose first matching route serves (the order the spec declares its paths).")
	} else {
		g.doc(px + "Routes holds, by method, the idempotent operations and the routes that take precedence over them, most specific first (static segments before parameters, as std-http's ServeMux and chi choose).")
	}
	g.f.Var().Id(px + "Routes").Op("=").Map(jen.String()).Index().Id(px + "Route").ValuesFunc(func(outer *jen.Group) {
		for _, m := range methods {
			outer.Line().Lit(m).Op(":").ValuesFunc(func(gr *jen.Group) {
				for _, r := range routes[m] {
					gr.Line().Values(jen.Id(px+"Template").Call(jen.Lit(r.path)), jen.Lit(r.policy))
				}
				gr.Line()
			})
		}
		if len(methods) > 0 {
			outer.Line()
		}
	})

	gogen.TemplateFunc(g.f, px)

	g.routePath()
	unescape := g.cfg.Router != "chi" && g.cfg.Router != "gorilla"
	if unescape {
		g.doc(px + "Match returns the index of the policy of the idempotent operation the router serves method and path with, -1 for any other request. path is " + px + "RoutePath's, without the base URL; it is split at its slashes and each segment unescaped before it is compared with the templates' text, as ServeMux matches (a static segment /cafés arrives as /caf%C3%A9s; an escaped slash stays inside its segment).")
	} else {
		g.doc(px + "Match returns the index of the policy of the idempotent operation the router serves method and path with, -1 for any other request. path is " + px + "RoutePath's, without the base URL; it is split at its slashes and each segment compared with the templates' text as it is, as the router matches.")
	}
	g.f.Func().Id(px+"Match").Params(jen.List(jen.Id("method"), jen.Id("path")).String()).Int().Block(
		jen.If(jen.Op("!").Qual("strings", "HasPrefix").Call(jen.Id("path"), jen.Lit("/"))).Block(jen.Return(jen.Lit(-1))),
		jen.Id("path").Op("=").Id("path").Index(jen.Lit(1), jen.Empty()),
		jen.Id("next").Op(":").For(jen.List(jen.Id("_"), jen.Id("rt")).Op(":=").Range().Id(px+"Routes").Index(jen.Id("method"))).Block(
			jen.Id("rest").Op(":=").Id("path"),
			jen.For(jen.List(jen.Id("i"), jen.Id("s")).Op(":=").Range().Id("rt").Dot("segs")).Block(
				jen.List(jen.Id("v"), jen.Id("after"), jen.Id("more")).Op(":=").Qual("strings", "Cut").Call(jen.Id("rest"), jen.Lit("/")),
				jen.If(jen.Id("more").Op("!=").Parens(jen.Id("i").Op("<").Len(jen.Id("rt").Dot("segs")).Op("-").Lit(1))).Block(jen.Continue().Id("next")),
				jen.Id("rest").Op("=").Id("after"),
				jen.Do(func(st *jen.Statement) {
					if unescape {
						st.If(jen.List(jen.Id("u"), jen.Err()).Op(":=").Qual("net/url", "PathUnescape").Call(jen.Id("v")), jen.Err().Op("==").Nil()).Block(
							jen.Id("v").Op("=").Id("u"),
						)
					}
				}),
				jen.If(jen.Op("!").Id("s").Dot("param")).Block(
					jen.If(jen.Id("v").Op("!=").Id("s").Dot("prefix")).Block(jen.Continue().Id("next")),
					jen.Continue(),
				),
				jen.If(
					jen.Len(jen.Id("v")).Op("<=").Len(jen.Id("s").Dot("prefix")).Op("+").Len(jen.Id("s").Dot("suffix")).Op("||").
						Op("!").Qual("strings", "HasPrefix").Call(jen.Id("v"), jen.Id("s").Dot("prefix")).Op("||").
						Op("!").Qual("strings", "HasSuffix").Call(jen.Id("v"), jen.Id("s").Dot("suffix")),
				).Block(jen.Continue().Id("next")),
			),
			jen.Return(jen.Id("rt").Dot("policy")),
		),
		jen.Return(jen.Lit(-1)),
	)

}

// routePath writes <px>RoutePath(r *http.Request) string: the path the
// configured router matches r's URL on, escaped as it matches it; "" for
// a path it redirects to its clean form (ServeMux, gorilla/mux), which no
// operation serves. The matcher compares it with the templates as the
// router does, so that it claims exactly the requests the router serves
// with an idempotent operation: a request it claims and the router answers
// 404 would have that 404 recorded and replayed, the key burned.
func (g *gen) routePath() {
	hr := jen.Id("r").Op("*").Qual("net/http", "Request")
	clean := func(p jen.Code) jen.Code {
		return jen.If(jen.Id("c").Op(":=").Qual("path", "Clean").Call(p), jen.Id("c").Op("!=").Add(p).Op("&&").Id("c").Op("+").Lit("/").Op("!=").Add(p)).Block(
			jen.Return(jen.Lit("")).Comment("redirected to the clean path"),
		)
	}
	switch g.cfg.Router {
	case "chi":
		g.doc(px + "RoutePath returns the path chi routes r on: the routing context's RoutePath when a chi router set it (a router mounted inside another, with Mount or Route, routes on the rest of the path; StripSlashes, CleanPath and URLFormat rewrite it), else r.URL.RawPath when it is set (the client escaped a character that needs no escaping, or a slash), else r.URL.Path. chi compares its static segments with that text as it is (/ch%61rges is not /charges) and does not clean it.")
		g.f.Func().Id(px+"RoutePath").Params(hr).String().Block(
			jen.If(jen.Id("rc").Op(":=").Qual("github.com/go-chi/chi/v5", "RouteContext").Call(jen.Id("r").Dot("Context").Call()), jen.Id("rc").Op("!=").Nil().Op("&&").Id("rc").Dot("RoutePath").Op("!=").Lit("")).Block(jen.Return(jen.Id("rc").Dot("RoutePath"))),
			jen.If(jen.Id("r").Dot("URL").Dot("RawPath").Op("!=").Lit("")).Block(jen.Return(jen.Id("r").Dot("URL").Dot("RawPath"))),
			jen.Return(jen.Id("r").Dot("URL").Dot("Path")),
		)
	case "gorilla":
		g.doc(px + "RoutePath returns the path gorilla/mux routes r on, as a router from mux.NewRouter() does (oapi-codegen's default; not one set to UseEncodedPath or SkipClean): r.URL.Path, unescaped (an escaped slash separates segments), and \"\" for a path mux redirects to its clean form (a dot segment, a doubled slash).")
		g.f.Func().Id(px+"RoutePath").Params(hr).String().Block(
			jen.Id("p").Op(":=").Id("r").Dot("URL").Dot("Path"),
			clean(jen.Id("p")),
			jen.Return(jen.Id("p")),
		)
	default:
		g.doc(px + "RoutePath returns the path http.ServeMux routes r on: its escaped path (" + px + "Match unescapes each segment, as ServeMux does), and \"\" for a path ServeMux redirects to its clean form (a dot segment, a doubled slash).")
		g.f.Func().Id(px+"RoutePath").Params(hr).String().Block(
			jen.Id("p").Op(":=").Id("r").Dot("URL").Dot("EscapedPath").Call(),
			clean(jen.Id("p")),
			jen.Return(jen.Id("p")),
		)
	}
}

// strictOnly returns s for a strict server (which declares CaptureBody),
// else "": a plain server's documentation does not name what it lacks.
func (g *gen) strictOnly(s string) string {
	if g.cfg.Strict {
		return s
	}
	return ""
}

// netHTTPMiddleware writes the plain net/http wrapper.
func (g *gen) netHTTPMiddleware() {
	t := g.cfg.Type
	g.doc("HTTPMiddleware is net/http middleware for servers generated without strict mode (std-http, chi, gorilla, or any router): it protects the requests whose method and path match an idempotent operation and passes every other request untouched. Wrap the router with it (the router's own matching is reproduced, with every route of the spec, so a static route that is not idempotent still wins over a templated one that is). It reads the key and the body from the request itself" + g.strictOnly(" and needs no CaptureBody") + ".")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HTTPMiddleware").Params(jen.Id("next").Qual("net/http", "Handler")).Qual("net/http", "Handler").Block(
		jen.Return(jen.Id("x").Dot("HTTPMiddlewareWithBaseURL").Call(jen.Lit("")).Call(jen.Id("next"))),
	)
	g.doc("HTTPMiddlewareWithBaseURL is HTTPMiddleware for a server mounted under baseURL (the BaseURL of the server options, e.g. \"/v1\"): requests outside it pass untouched.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("HTTPMiddlewareWithBaseURL").Params(jen.Id("baseURL").String()).Func().Params(jen.Qual("net/http", "Handler")).Qual("net/http", "Handler").Block(
		pathMiddleware(false)...,
	)
	if _, ok := routerOptions[g.cfg.Router]; !ok || g.cfg.Strict || len(g.fallback) == 0 {
		return
	}
	g.doc("byPath is HTTPMiddlewareWithBaseURL for the idempotent operations Handler protects by path (" + px + "ByPath) alone, the requests the router routed to their route (" + px + "Routed): every other request passes untouched.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("byPath").Params(jen.Id("baseURL").String()).Func().Params(jen.Qual("net/http", "Handler")).Qual("net/http", "Handler").Block(
		pathMiddleware(true)...,
	)
	g.routed()
}

// routed writes <px>Routed(r, i), whether the route the router chose for
// r (it runs among options.Middlewares, after the routing) is the one
// oapi-codegen registers for the operation protected by path whose policy
// is <px>Policies[i]: the router's pattern ends with the operation's path
// template as oapi-codegen writes it for the router (under a prefix the
// matcher strips, a template such as /{tenant}/orders also matches the
// path of another route, /v1/orders). True when the router does not say.
func (g *gen) routed() {
	var cases []jen.Code
	for _, i := range g.fallback {
		op := g.spec.Operations[i]
		var tmpl string
		switch g.cfg.Router {
		case "chi":
			tmpl = codegen.SwaggerUriToChiUri(op.Path)
		case "gorilla":
			tmpl = codegen.SwaggerUriToGorillaUri(op.Path)
		default:
			tmpl = codegen.SwaggerUriToStdHttpUri(op.Path)
		}
		cases = append(cases, jen.Case(jen.Lit(i)).Block(jen.Id("tmpl").Op("=").Lit(tmpl)))
	}
	var pattern []jen.Code
	switch g.cfg.Router {
	case "chi":
		pattern = []jen.Code{
			jen.Id("rc").Op(":=").Qual("github.com/go-chi/chi/v5", "RouteContext").Call(jen.Id("r").Dot("Context").Call()),
			jen.If(jen.Id("rc").Op("==").Nil().Op("||").Len(jen.Id("rc").Dot("RoutePatterns")).Op("==").Lit(0)).Block(jen.Return(jen.True())),
			jen.Id("pattern").Op(":=").Id("rc").Dot("RoutePatterns").Index(jen.Len(jen.Id("rc").Dot("RoutePatterns")).Op("-").Lit(1)),
		}
	case "gorilla":
		pattern = []jen.Code{
			jen.Id("rt").Op(":=").Qual("github.com/gorilla/mux", "CurrentRoute").Call(jen.Id("r")),
			jen.If(jen.Id("rt").Op("==").Nil()).Block(jen.Return(jen.True())),
			jen.List(jen.Id("pattern"), jen.Err()).Op(":=").Id("rt").Dot("GetPathTemplate").Call(),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.True())),
		}
	default:
		pattern = []jen.Code{
			jen.If(jen.Id("r").Dot("Pattern").Op("==").Lit("")).Block(jen.Return(jen.True())),
			jen.Id("pattern").Op(":=").Id("r").Dot("Pattern").Index(jen.Qual("strings", "IndexByte").Call(jen.Id("r").Dot("Pattern"), jen.LitRune(' ')).Op("+").Lit(1), jen.Empty()).Comment("without the method"),
		}
	}
	var what string
	switch g.cfg.Router {
	case "chi":
		what = "chi's route pattern (the last of the routing context's RoutePatterns: the route of the router oapi-codegen registered it with)"
	case "gorilla":
		what = "gorilla/mux's path template of the current route (its subrouters' prefixes first)"
	default:
		what = "the pattern ServeMux matched (Request.Pattern), without its method"
	}
	g.doc(px + "Routed reports whether the route the router chose for r is the one oapi-codegen registers for the idempotent operation protected by path whose policy is " + px + "Policies[i]: " + what + " ends with the operation's path template. Under a prefix the matcher strips, a template such as /{tenant}/orders also matches the path of another route (/v1/orders). True when the router does not say.")
	body := []jen.Code{jen.Var().Id("tmpl").String(), jen.Switch(jen.Id("i")).Block(cases...)}
	body = append(body, pattern...)
	body = append(body, jen.Return(jen.Qual("strings", "HasSuffix").Call(jen.Qual("strings", "TrimSuffix").Call(jen.Id("pattern"), jen.Lit("{$}")), jen.Qual("strings", "TrimSuffix").Call(jen.Id("tmpl"), jen.Lit("{$}")))))
	g.f.Func().Id(px+"Routed").Params(jen.Id("r").Op("*").Qual("net/http", "Request"), jen.Id("i").Int()).Bool().Block(body...)
}

// pathMiddleware is the body of a function of baseURL that returns the
// net/http middleware running the engine for the request of an idempotent
// operation matched by its method and path under baseURL (byPath: only
// those of the operations the plain wiring protects by path).
func pathMiddleware(byPath bool) []jen.Code {
	cond := jen.Id("i").Op(">=").Lit(0)
	if byPath {
		cond = jen.Id("i").Op(">=").Lit(0).Op("&&").Id(px+"ByPath").Call(jen.Id("i")).Op("&&").Id(px+"Routed").Call(jen.Id("r"), jen.Id("i"))
	}
	return []jen.Code{
		jen.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Id("baseURL"), jen.Lit("/")),
		jen.Return(jen.Func().Params(jen.Id("next").Qual("net/http", "Handler")).Qual("net/http", "Handler").Block(
			jen.Return(jen.Qual("net/http", "HandlerFunc").Call(jen.Func().Params(jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request")).Block(
				jen.If(jen.List(jen.Id("path"), jen.Id("ok")).Op(":=").Qual("strings", "CutPrefix").Call(jen.Id(px+"RoutePath").Call(jen.Id("r")), jen.Id("baseURL")), jen.Id("ok")).Block(
					jen.If(jen.Id("i").Op(":=").Id(px+"Match").Call(jen.Id("r").Dot("Method"), jen.Id("path")), cond).Block(
						jen.Id("x").Dot("serve").Call(jen.Id("w"), jen.Id("r"), jen.Id(px+"Policies").Index(jen.Id("i")), jen.Id("next")),
						jen.Return(),
					),
				),
				jen.Id("next").Dot("ServeHTTP").Call(jen.Id("w"), jen.Id("r")),
			))),
		)),
	}
}

func (g *gen) serve() {
	t := g.cfg.Type
	g.doc("serve runs one request of an idempotent operation through the engine (what idem.Engine.Handler does, without building a handler per request: oapi-codegen builds its route middleware chains for every request). A request the engine already records in front (a doubled wiring: HTTPMiddleware left in front of Handler) goes straight to next (idem.Engine.Nested).")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("serve").Params(
		jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request"),
		jen.Id("p").Op("*").Qual(idemPkg, "Policy"), jen.Id("next").Qual("net/http", "Handler"),
	).Block(
		jen.If(jen.Id("x").Dot("engine").Dot("Nested").Call(jen.Id("w"), jen.Id("p"))).Block(
			jen.Id("next").Dot("ServeHTTP").Call(jen.Id("w"), jen.Id("r")),
			jen.Return(),
		),
		jen.Id("c").Op(":=").Id("x").Dot("engine").Dot("Begin").Call(jen.Id("r"), jen.Id("p"), jen.Qual(idemPkg, "RequestKey")),
		jen.Defer().Id("c").Dot("End").Call(),
		jen.If(jen.Id("c").Dot("Decision").Call().Op("!=").Qual(idemPkg, "Execute")).Block(
			jen.Id("c").Dot("Respond").Call(jen.Id("w")),
			jen.Return(),
		),
		jen.Id("next").Dot("ServeHTTP").Call(jen.Id("c").Dot("Writer").Call(jen.Id("w")), jen.Id("c").Dot("Request").Call()),
		jen.Id("c").Dot("Finish").Call(),
	)
}

// keyParam is a key parameter and the idempotent operations (indexes of
// their policies) whose key it is.
type keyParam struct {
	name   string
	header bool // a header, matched in any case; else a query parameter
	ops    []int
}

// keyParams returns the key parameters the operations declare, in the
// order of their first operation. Each operation's own parameter only is
// its key: a parameter of the same name elsewhere (an operation without a
// contract, or one keyed otherwise) is none of the engine's business.
func (g *gen) keyParams() []keyParam {
	var ps []keyParam
	for i, op := range g.spec.Operations {
		p := op.Key.Param
		if p == nil || p.In != "header" && p.In != "query" {
			continue
		}
		header := p.In == "header"
		j := slices.IndexFunc(ps, func(k keyParam) bool { return k.header == header && k.name == p.Name })
		if j < 0 {
			ps = append(ps, keyParam{name: p.Name, header: header})
			j = len(ps) - 1
		}
		ps[j].ops = append(ps[j].ops, i)
	}
	return ps
}

// keyParamFunc writes <px>KeyParam(i int) (name string, header bool): the
// key parameter of the operation whose policy is <px>Policies[i]. Nothing
// when no operation has a key parameter.
func (g *gen) keyParamFunc() {
	ps := g.keyParams()
	if len(ps) == 0 {
		return
	}
	g.doc(px + "KeyParam returns the key parameter of the idempotent operation whose policy is " + px + "Policies[i]: its name and whether it is a header (matched in any case) rather than a query parameter; \"\" for an operation whose key is not a parameter, and for i < 0 (a request no idempotent operation serves).")
	g.f.Func().Id(px+"KeyParam").Params(jen.Id("i").Int()).Params(jen.Id("name").String(), jen.Id("header").Bool()).Block(
		jen.Switch(jen.Id("i")).BlockFunc(func(b *jen.Group) {
			for _, p := range ps {
				var cases []jen.Code
				for _, i := range p.ops {
					cases = append(cases, jen.Lit(i))
				}
				b.Case(cases...).Block(jen.Return(jen.Lit(p.name), jen.Lit(p.header)))
			}
		}),
		jen.Return(jen.Lit(""), jen.False()),
	)
}

func (g *gen) errorHandler() {
	t := g.cfg.Type
	errFunc := jen.Func().Params(jen.Qual("net/http", "ResponseWriter"), jen.Op("*").Qual("net/http", "Request"), jen.Error())
	g.doc("ErrorHandler returns an error handler for the server options (StdHTTPServerOptions.ErrorHandlerFunc, or chi's and gorilla's) and for StrictHTTPServerOptions.RequestErrorHandlerFunc, for a server mounted at the root (else use ErrorHandlerWithBaseURL). oapi-codegen checks typed parameters before any middleware runs, so a key it rejects (a malformed uuid-typed header, a missing required one, one given twice) never reaches the engine: this handler answers those with the engine's application/problem+json, 400 IDEMPOTENCY_KEY_INVALID or IDEMPOTENCY_KEY_MISSING, when the request is one of an idempotent operation (matched as HTTPMiddleware matches it) and the parameter is that operation's key." + g.strictOnly(" As the strict handler's RequestErrorHandlerFunc, it answers a body CaptureBody stopped reading past its operation's request.max-bytes with 413 IDEMPOTENCY_REQUEST_TOO_LARGE (idem.Engine.RefuseTooLarge).") + " Every other error goes to next, so routes without contracts behave as before; nil means oapi-codegen's default (400, the error as text).")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ErrorHandler").Params(jen.Id("next").Add(errFunc)).Add(errFunc).Block(
		jen.Return(jen.Id("x").Dot("ErrorHandlerWithBaseURL").Call(jen.Lit(""), jen.Id("next"))),
	)
	g.doc("ErrorHandlerWithBaseURL is ErrorHandler for a server mounted under baseURL (the BaseURL of the server options, e.g. \"/v1\"): errors about requests outside it go to next.")
	g.f.Func().Params(jen.Id("x").Op("*").Id(t)).Id("ErrorHandlerWithBaseURL").Params(jen.Id("baseURL").String(), jen.Id("next").Add(errFunc)).Add(errFunc).BlockFunc(func(b *jen.Group) {
		b.If(jen.Id("next").Op("==").Nil()).Block(
			jen.Id("next").Op("=").Func().Params(jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("_").Op("*").Qual("net/http", "Request"), jen.Err().Error()).Block(
				jen.Qual("net/http", "Error").Call(jen.Id("w"), jen.Err().Dot("Error").Call(), jen.Qual("net/http", "StatusBadRequest")),
			),
		)
		if len(g.keyParams()) > 0 {
			b.Id("baseURL").Op("=").Qual("strings", "TrimSuffix").Call(jen.Id("baseURL"), jen.Lit("/"))
		}
		b.Return(jen.Func().Params(jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request"), jen.Err().Error()).BlockFunc(func(b *jen.Group) {
			if g.cfg.Strict {
				b.If(jen.Id("x").Dot("engine").Dot("RefuseTooLarge").Call(jen.Id("w"), jen.Id("r"), jen.Err())).Block(
					jen.Return().Comment("a body past its operation's request.max-bytes, which CaptureBody stopped reading"),
				)
			}
			g.keyProblem(b, jen.Id("w"), jen.Id("r"), jen.Id(px+"RoutePath").Call(jen.Id("r")), func(path jen.Code) jen.Code {
				return jen.Id(px+"Match").Call(jen.Id("r").Dot("Method"), path)
			})
			b.Id("next").Call(jen.Id("w"), jen.Id("r"), jen.Err())
		}))
	})
	ps := g.keyParams()
	if len(ps) == 0 {
		return
	}
	g.keyParamFunc()
	as := func(v string) *jen.Statement { return jen.Qual("errors", "As").Call(jen.Err(), jen.Op("&").Id(v)) }
	isKey := func(v string) *jen.Statement { return jen.Id("isKey").Call(jen.Id(v).Dot("ParamName")) }
	g.docf("%sKeyError maps oapi-codegen's parameter errors about the key parameter of the operation whose policy is %sPolicies[i] to a problem code and detail (a malformed key: what the key must be, not oapi-codegen's message); \"\" for any other error, and for any error when i < 0 or the operation's key is not a parameter.", px, px)
	g.f.Func().Id(px+"KeyError").Params(jen.Id("i").Int(), jen.Err().Error()).Params(jen.List(jen.Id("code"), jen.Id("detail")).String()).Block(
		jen.List(jen.Id("name"), jen.Id("header")).Op(":=").Id(px+"KeyParam").Call(jen.Id("i")),
		jen.If(jen.Id("name").Op("==").Lit("")).Block(jen.Return(jen.Lit(""), jen.Lit(""))),
		jen.Id("isKey").Op(":=").Func().Params(jen.Id("n").String()).Bool().Block(
			jen.Return(jen.Id("n").Op("==").Id("name").Op("||").Id("header").Op("&&").Qual("strings", "EqualFold").Call(jen.Id("n"), jen.Id("name"))),
		),
		jen.Var().Id("missingHeader").Op("*").Id("RequiredHeaderError"),
		jen.Var().Id("missingParam").Op("*").Id("RequiredParamError"),
		jen.Var().Id("invalid").Op("*").Id("InvalidParamFormatError"),
		jen.Var().Id("many").Op("*").Id("TooManyValuesForParamError"),
		jen.Switch().Block(
			jen.Case(jen.Id("header").Op("&&").Add(as("missingHeader")).Op("&&").Add(isKey("missingHeader")), jen.Op("!").Id("header").Op("&&").Add(as("missingParam")).Op("&&").Add(isKey("missingParam"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyMissing"), jen.Lit("this operation requires an idempotency key")),
			),
			// A query key given more than once: the runtime's binder
			// returns a plain error (exploded or not), which the wrapper
			// wraps as a format error.
			jen.Case(jen.Op("!").Id("header").Op("&&").Add(as("invalid")).Op("&&").Add(isKey("invalid")).Op("&&").Id("invalid").Dot("Err").Op("!=").Nil().Op("&&").Id(px+"RepeatedQuery").Call(jen.Id("invalid").Dot("Err").Dot("Error").Call(), jen.Id("name"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Lit(detailMany)),
			),
			jen.Case(as("invalid").Op("&&").Add(isKey("invalid"))).Block(
				// oapi-codegen's error speaks of Go types ("error unmarshaling
				// 'xyz' text as *uuid.UUID: ..."): the client is told what the
				// key must be; the error goes to the Observer and the log.
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Id(px+"Policies").Index(jen.Id("i")).Dot("KeyFormatDetail").Call()),
			),
			jen.Case(as("many").Op("&&").Add(isKey("many"))).Block(
				jen.Return(jen.Qual(idemPkg, "CodeKeyInvalid"), jen.Lit(detailMany)),
			),
		),
		jen.Return(jen.Lit(""), jen.Lit("")),
	)
	g.repeatedQuery()
}

// detailMany is the problem detail for a key given more than once: the
// text runtime/idem answers a repeated key with (its detailMany).
const detailMany = "the idempotency key is given more than once"

// repeatedQuery writes <px>RepeatedQuery(msg, name string) bool: whether
// msg is the error oapi-codegen's runtime (v1.9: BindQueryParameter,
// BindRawQueryParameter) returns for the query parameter name given more
// than once, exploded or not. A key parameter is a string or a UUID, never
// the struct whose comma-separated value gives the first message too.
func (g *gen) repeatedQuery() {
	g.doc(px + "RepeatedQuery reports whether msg is the error oapi-codegen's runtime returns for the query parameter name given more than once (exploded or not), which the wrappers report as a format error.")
	g.f.Func().Id(px + "RepeatedQuery").Params(jen.List(jen.Id("msg"), jen.Id("name")).String()).Bool().Block(
		jen.Return(jen.Id("msg").Op("==").Lit("multiple values for single value parameter '").Op("+").Id("name").Op("+").Lit("'").Op("||").
			Id("msg").Op("==").Lit("parameter '").Op("+").Id("name").Op("+").Lit("' is not exploded, but is specified multiple times")),
	)
}

func (g *gen) helpers() {
	if !g.cfg.Strict {
		return
	}
	g.doc(px + "WriteNothing is the Visit method of no response: an operation that returned (nil, nil) has answered with net/http's implicit empty 200, which is recorded.")
	g.f.Func().Id(px + "WriteNothing").Params(jen.Qual("net/http", "ResponseWriter")).Error().Block(jen.Return(jen.Nil()))
	if slices.ContainsFunc(g.spec.Operations, func(op *ir.Operation) bool { return op.Key.BodyField != "" }) {
		g.doc(px + "BodyKey is a body-carried key as oapi-codegen decoded it: a *string as is (nil: no key), a string as is, but \"\" (what a member that is absent, null or \"\" decodes to) lets the engine tell them apart from the request body's bytes (idem.EmptyBodyKey: \"\" is an invalid key, absent or null no key, and no key when those bytes are not JSON); any other type (which a body key's field never is) lets the engine read the key from the request body's bytes.")
		g.f.Func().Id(px+"BodyKey").Types(jen.Id("T").Any()).Params(jen.Id("v").Id("T")).Qual(idemPkg, "Key").Block(
			jen.Switch(jen.Id("k").Op(":=").Any().Parens(jen.Id("v")).Assert(jen.Type())).Block(
				jen.Case(jen.Op("*").String()).Block(jen.Return(jen.Qual(idemPkg, "KeyFromPtr").Call(jen.Id("k")))),
				jen.Case(jen.String()).Block(
					jen.If(jen.Id("k").Op("==").Lit("")).Block(jen.Return(jen.Qual(idemPkg, "EmptyBodyKey"))),
					jen.Return(jen.Qual(idemPkg, "KeyFrom").Call(jen.Id("k"))),
				),
			),
			jen.Return(jen.Qual(idemPkg, "RequestKey")),
		)
	}
	// One helper per Go kind of key parameter and optionality, as used:
	// a string type (string, an enum type, a named type such as type Key
	// string) converts to its text, never through a String method; a UUID
	// prints its text form.
	type keyHelper struct{ uuid, ptr bool }
	used := map[keyHelper]bool{}
	for _, op := range g.spec.Operations {
		if p := op.Key.Param; p != nil && op.Key.GoKind != ir.KeyGoUUID { // a UUID key is read as sent
			used[keyHelper{false, p.Pointer}] = true
		}
	}
	for _, h := range []keyHelper{{false, false}, {false, true}, {true, false}, {true, true}} {
		if !used[h] {
			continue
		}
		name, constraint := keyConv(h.uuid, h.ptr), jen.Op("~").String()
		text := jen.String().Parens(jen.Id("v"))
		what := "a key parameter of a string type (string, an enum type, a named type such as type Key string) as the engine takes it: its text, never what a String method prints"
		if h.uuid {
			constraint, text = jen.Qual("fmt", "Stringer"), jen.Id("v").Dot("String").Call()
			what = "a UUID key parameter as the engine takes it: its text form"
		}
		if h.ptr {
			g.doc(name + " is " + what + "; no key when the optional parameter is absent.")
			if h.uuid {
				text = jen.Parens(jen.Op("*").Id("v")).Dot("String").Call()
			} else {
				text = jen.String().Parens(jen.Op("*").Id("v"))
			}
			g.f.Func().Id(name).Types(jen.Id("T").Add(constraint)).Params(jen.Id("v").Op("*").Id("T")).Qual(idemPkg, "Key").Block(
				jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Qual(idemPkg, "NoKey"))),
				jen.Return(jen.Qual(idemPkg, "KeyFrom").Call(text)),
			)
			continue
		}
		g.doc(name + " is " + what + ".")
		g.f.Func().Id(name).Types(jen.Id("T").Add(constraint)).Params(jen.Id("v").Id("T")).Qual(idemPkg, "Key").Block(
			jen.Return(jen.Qual(idemPkg, "KeyFrom").Call(text)),
		)
	}
}

// keyConv names the generated helper that turns a key parameter of the
// given Go kind (a UUID, or a string type) and optionality into an idem.Key.
func keyConv(uuid, ptr bool) string {
	name := px + "Key"
	if uuid {
		name += "UUID"
	}
	if ptr {
		name += "Ptr"
	}
	return name
}

// checkNames reports generated package-level names that collide with
// oapi-codegen's (for the spec's components and operations, and its fixed
// ones) or with each other.
func checkNames(spec *ir.Spec, cfg Config, diags *diag.List) {
	theirs := gogen.OapiNames(spec)
	for _, name := range []string{cfg.Type, "New" + cfg.Type} {
		if o, ok := theirs[name]; ok {
			diags.Errorf(o.Pos, "go-name-collision", "the server wrapper's %s collides with the Go identifier oapi-codegen declares for %s; rename it with the option %s", name, o.What, TypeOption)
		}
	}
}

// httpMiddlewareType is the type func(http.Handler) http.Handler.
func httpMiddlewareType() *jen.Statement {
	return jen.Func().Params(jen.Qual("net/http", "Handler")).Qual("net/http", "Handler")
}
