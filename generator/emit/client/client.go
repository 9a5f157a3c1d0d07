// Package client is idemgen's client emitter: from the IR of a spec it
// writes one Go file, with github.com/dave/jennifer, into the package that
// holds oapi-codegen's client (ClientWithResponses) for the same spec. It
// declares typed retry helpers, one per idempotent operation, that make a
// call safe to retry on a flaky network:
//
//	c, err := api.NewIdempotentClient("https://api.example.com", api.WithHTTPClient(httpClient))
//	resp, key, err := c.ClaimCoupon(ctx, couponID, nil, api.Claim{UserId: "u1"})
//
// Each helper is one logical call: one idempotency key (made in the
// contract's format, or given with idemclient.WithKey to resume a call, or
// already in the typed parameters), the same key and the same body bytes
// on every attempt, retries under the operation's contract (its retry
// block, as an idemclient.Policy literal), bounded by the context's
// deadline. The work is done by runtime/idemclient's Doer; the helper
// starts the call, puts the key into oapi-codegen's typed <Op>Params when
// the spec declares the key parameter, calls <Op>WithResponse (or
// <Op>WithBodyWithResponse, <Op>WithFormdataBodyWithResponse) and reports
// the key and any IDEMPOTENCY_* problem.
//
// The file also declares NewIdempotentDoer, the wiring for any client of
// the package (oapi-codegen's Client, ClientWithResponses or a hand-made
// one): an idemclient.Doer whose matcher recognizes the idempotent
// operations by method and path and retries each request under its
// policy, with a new key per request. Without a server URL that matcher
// reads the end of the path; IdempotentMatcher(server) matches the path
// under the server URL's base path exactly, and New<type> uses it.
//
// Settings (idemgen.yaml `options:` or `idemgen generate -option`):
//
//	client.type  the generated type's name (default IdempotentClient); its
//	             constructor is New<type>, the doer's constructor
//	             New<type without a Client suffix>Doer (NewIdempotentDoer),
//	             the exact matcher's <type without a Client suffix>Matcher
//	             (IdempotentMatcher), the policy lookup <type>Policy
//	client.file  the file name (default idempotency_client.gen.go)
//	client.oapi-client-type  oapi-codegen's client type
//	             (output-options.client-type-name; default Client), which
//	             idemgen generate takes from oapi-codegen-config
package client

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emit/internal/gogen"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/naming"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// Name is the emitter's name in the registry.
const Name = "client"

// DefaultFile is the default name of the generated file.
const DefaultFile = "idempotency_client.gen.go"

// DefaultType is the default name of the generated type.
const DefaultType = "IdempotentClient"

const (
	clientPkg = "github.com/idemgen/idemgen/runtime/idemclient"
	typesPkg  = gogen.TypesPkg
)

// The emitter's settings.
var (
	optType = emitter.NewOption("client.type")
	optFile = emitter.NewOption("client.file")
	// OapiTypeOption is oapi-codegen's client type (its
	// output-options.client-type-name), which package cli sets from
	// oapi-codegen-config.
	OapiTypeOption = emitter.NewOption("client.oapi-client-type")
)

func init() { emitter.Register(Name, Emit) }

// Config is the emitter's configuration, read from emitter.Options.Params.
type Config struct {
	Type string // client.type
	File string // client.file
	Oapi string // client.oapi-client-type
}

// Doer is the name of the doer's constructor for the configured type.
func (c Config) Doer() string {
	return "New" + strings.TrimSuffix(c.Type, "Client") + "Doer"
}

// OpConst is the name of the operation ID constant of op: <type>Op<GoName>.
func (c Config) OpConst(op *ir.Operation) string { return c.Type + "Op" + op.GoName }

// HTTPClientOption is the name of the client option that gives
// New<type> its HTTP client with the Doer's options: With, the type
// without a Client suffix, then HTTPClient (WithIdempotentHTTPClient).
func (c Config) HTTPClientOption() string {
	return "With" + strings.TrimSuffix(c.Type, "Client") + "HTTPClient"
}

// PolicyFunc is the name of the policy lookup for the configured type.
func (c Config) PolicyFunc() string { return c.Type + "Policy" }

// Matcher is the name of the exact matcher's constructor for the configured
// type: the type without a Client suffix, then Matcher (IdempotentMatcher).
func (c Config) Matcher() string {
	return strings.TrimSuffix(c.Type, "Client") + "Matcher"
}

// ParseConfig reads the client.* settings.
func ParseConfig(params map[string]string) (Config, error) {
	c := Config{Type: DefaultType, File: DefaultFile, Oapi: "Client"}
	if v, ok := optType.In(params); ok {
		c.Type = v
	}
	if v, ok := optFile.In(params); ok {
		c.File = v
	}
	if v, ok := OapiTypeOption.In(params); ok {
		c.Oapi = v
	}
	if !gogen.IsExported(c.Oapi) {
		return c, fmt.Errorf("%s: %q is not an exported Go identifier", OapiTypeOption, c.Oapi)
	}
	if !gogen.IsExported(c.Type) || c.Type == "Client" || c.Type == c.Oapi { // NewClient is oapi-codegen's
		return c, fmt.Errorf("%s: %q is not an exported Go identifier other than %s", optType, c.Type, strings.Join(slices.Compact([]string{"Client", c.Oapi}), " and "))
	}
	return c, gogen.CheckFile(optFile.String(), c.File)
}

// Emit is the registered emitter: one Go file.
func Emit(spec *ir.Spec, opts emitter.Options) ([]emitter.File, error) {
	return gogen.Emit(spec, opts, ParseConfig, Generate, func(c Config) string { return c.File })
}

// Generate renders the file. It fails with a *diag.ErrorList when a
// generated name collides with one oapi-codegen (or the server emitter)
// declares, or when a helper could not make keys the contract accepts.
// With opts.CheckOnly it renders nothing: no error, no data.
func Generate(spec *ir.Spec, opts emitter.Options, cfg Config) ([]byte, error) {
	var diags diag.List
	checkNames(spec, opts, cfg, &diags)
	for _, op := range spec.Operations {
		k := op.Key
		if k.Format == ir.FormatToken && k.MaxLength < 36 {
			diags.Unsupportedf(k.Pos, "client-key-length", "the client helper of %s creates UUID keys (36 characters), longer than key.max-length %d; raise max-length to 36 or more", op.Where(), k.MaxLength)
		}
		checkKeySchema(op, &diags)
		if k.Param != nil && op.Names.Params == "" {
			diags.Errorf(k.Pos, "internal-error", "%s declares its key parameter but has no parameters object", op.Where())
		}
	}
	if diags.HasErrors() {
		return nil, &diag.ErrorList{List: diags.Sorted()}
	}
	if opts.CheckOnly {
		return nil, nil
	}
	g := &gen{spec: spec, opts: opts, cfg: cfg, f: gogen.NewFile(spec, opts)}
	g.file()
	return gogen.Render(g.f, cfg.File)
}

// sampleKeys are keys the helpers make, per key format (a token key is a
// UUID v7): one of each kind of digit, the lowest and the highest of the
// version, so that a pattern admitting some UUIDs only is caught.
var sampleKeys = map[string][]string{
	ir.FormatToken:  {"0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", "00000000-0000-7000-8000-000000000000", "ffffffff-ffff-7fff-bfff-ffffffffffff"},
	ir.FormatUUID:   {"0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", "00000000-0000-7000-8000-000000000000", "ffffffff-ffff-7fff-bfff-ffffffffffff"},
	ir.FormatUUIDv7: {"0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", "00000000-0000-7000-8000-000000000000", "ffffffff-ffff-7fff-bfff-ffffffffffff"},
	ir.FormatUUIDv4: {"3b241101-e2bb-4255-8caf-4136c566a962", "00000000-0000-4000-8000-000000000000", "ffffffff-ffff-4fff-bfff-ffffffffffff"},
}

// notUUIDFormats are the schema formats (OpenAPI's, JSON Schema's, and
// ulid) that the text of a UUID never satisfies. Other formats are not
// judged: idemgen cannot tell what they mean.
var notUUIDFormats = []string{
	"byte", "date", "date-time", "double", "duration", "email", "float", "idn-email", "int32", "int64",
	"ipv4", "ipv6", "iri", "json-pointer", "relative-json-pointer", "time", "ulid", "uri",
}

// checkKeySchema reports a key whose declared schema rejects the keys the
// helper makes: a pattern that does not match a sample of them (only for
// token keys: the compiler checks uuid* keys against their pattern), a
// minLength above their 36 characters, a format they never satisfy (token
// keys: the compiler checks uuid* keys' format). A pattern Go's regexp
// cannot compile (ECMA-262 look-arounds, back references) is not judged.
func checkKeySchema(op *ir.Operation, diags *diag.List) {
	k := op.Key
	if k.Schema == nil {
		return
	}
	pos := k.Pos
	if k.Param != nil {
		pos = k.Param.Pos
	}
	samples := sampleKeys[k.Format]
	if len(samples) == 0 {
		return
	}
	kind := "UUID v7"
	if k.Format == ir.FormatUUIDv4 {
		kind = "UUID v4"
	}
	report := func(what string) {
		diags.Unsupportedf(pos, "client-key-schema", "the client helper of %s creates %s keys such as %s, but %s; the helper cannot make keys of another shape: loosen the key's schema to admit them", op.Where(), kind, samples[0], what)
	}
	s := k.Schema
	if s.MinLength > len(samples[0]) {
		report(fmt.Sprintf("the spec declares the key with minLength %d (a UUID has %d characters)", s.MinLength, len(samples[0])))
	}
	if k.Format != ir.FormatToken {
		return
	}
	if slices.Contains(notUUIDFormats, s.Format) {
		report(fmt.Sprintf("the spec declares the key with format %s", s.Format))
	}
	if re, err := regexp.Compile(s.Pattern); err == nil && s.Pattern != "" {
		for _, key := range samples {
			if !re.MatchString(key) {
				samples = []string{key}
				report(fmt.Sprintf("the spec's pattern %q for the key rejects it", s.Pattern))
				break
			}
		}
	}
}

type gen struct {
	spec *ir.Spec
	opts emitter.Options
	cfg  Config
	f    *jen.File
}

// Unexported identifiers all start with this prefix: oapi-codegen never
// uses it, and the server emitter's (idemgen...) never do.
const px = "idemgenClient"

// doc writes a comment (gogen.Doc).
func (g *gen) doc(text string) { gogen.Doc(g.f, text) }

func (g *gen) docf(format string, args ...any) { g.doc(fmt.Sprintf(format, args...)) }

func (g *gen) policyVar(op *ir.Operation) string { return px + "Policy" + op.GoName }

// typed reports whether the helper of op can be generated: the Go types of
// its path arguments are known.
func typed(op *ir.Operation) (bool, string) {
	if p := gogen.UntypedPathParam(op); p != nil {
		return false, p.Name
	}
	return true, ""
}

func (g *gen) file() {
	f := g.f
	f.ImportName(clientPkg, "idemclient")
	f.ImportAlias(typesPkg, "openapi_types")

	g.typeDecl()
	g.constructors()
	g.callOptions()
	for _, op := range g.spec.Operations {
		if ok, _ := typed(op); ok {
			g.helpers(op)
		}
	}
	g.policies()
	g.keyHelpers()
	g.matcher()
}

func (g *gen) typeDecl() {
	t, title := g.cfg.Type, g.spec.Title
	if g.spec.Version != "" {
		title += " " + g.spec.Version
	}
	var doc strings.Builder
	fmt.Fprintf(&doc, "%s calls the idempotent operations of %q so that they are safe to retry on a flaky network. Each of its typed helpers is one logical call: one idempotency key, sent with every attempt together with the same body bytes, and retries under the operation's x-idempotency contract (attempts, backoff, which failures), honouring Retry-After and Retry-After-Ms, waiting out the in-flight status (IDEMPOTENCY_KEY_IN_USE) without counting it as an attempt, for up to the in-flight lease plus the longest wait between attempts (a first request that crashed loses its key when its lease runs out), never retrying 400, 422, 409 IDEMPOTENCY_RESPONSE_UNAVAILABLE or 500 IDEMPOTENCY_RECORD_UNREADABLE, and never past ctx's deadline. So a request the server handled but whose response was lost is answered, on the retry, with the first response (marked Idempotent-Replayed: true) instead of running twice.\n\n", t, title)
	doc.WriteString("Helpers (the other methods of ClientWithResponses are promoted, and go through the same Doer):\n\n")
	for _, op := range g.spec.Operations {
		ok, bad := typed(op)
		if !ok {
			fmt.Fprintf(&doc, "  - %s (%s): no typed helper (idemgen does not know the Go type of path parameter %s); call %s, which %s retries with a new key per request\n", op.Where(), op.RecordName(), bad, op.Names.WithResponse, g.cfg.Doer())
			continue
		}
		fmt.Fprintf(&doc, "  - %s (%s): %s; %s semantics, window %s, key %s\n", op.Where(), op.RecordName(), strings.Join(helperNames(op), ", "), op.Policy.Semantics, ir.FormatDuration(op.Policy.Window), keyDoc(op))
	}
	doc.WriteString("\nWiring:\n\n")
	fmt.Fprintf(&doc, "\tc, err := New%s(server, WithHTTPClient(httpClient)) // its HTTP client is wrapped in %s\n", t, g.cfg.Doer())
	if op := g.firstTyped(); op != nil {
		fmt.Fprintf(&doc, "\tresp, key, err := c.%s(ctx%s)\n", helperName(op), exampleArgs(op))
	}
	doc.WriteString("\nThe key is returned with the response, and with the error when the call failed: to resume the call later (after the caller's own crash too), call the helper again with idemclient.WithKey(key) and the same arguments; idemclient.WithKeyObserver sees the key before the first attempt is sent, the moment to persist it. The server then replays the first outcome instead of running the operation again.\n\n")
	doc.WriteString("Errors: a *idemclient.Error (with the key, the attempts and the reason: attempts exhausted on connection errors, the deadline, a Retry-After beyond it, an error that is not retried) when no attempt got a final response; a *idemclient.ProblemError, returned with the response, when the server answered with an IDEMPOTENCY_* problem (a reused key: 422 or 409 IDEMPOTENCY_KEY_REUSED; a missing or invalid key: 400; a response the server ran but could not store: 409 IDEMPOTENCY_RESPONSE_UNAVAILABLE, never retried; a stored record the server cannot decode: 500 IDEMPOTENCY_RECORD_UNREADABLE, never retried; the store unavailable after the last attempt; the key still in use under a policy of one attempt; at the deadline, or when the key stayed in use until the policy's InUseWait ran out (idemclient.ErrInUseWaitExhausted), no response but a *idemclient.Error that carries the *idemclient.ProblemError, errors.As finds both). Any other response, whatever its status, is the API's own answer, in the response.")
	doc.WriteString("\n\nCall options (the helpers' last arguments): idemclient.WithKey, WithoutKey (for an operation whose key is optional), WithKeyObserver, WithRequestEditors (per-call request editors, passed on to oapi-codegen's method), WithKeyGenerator, WithPolicyOverride, WithPolicy; WithCallOptions gives some to every call of a client.")
	g.doc(doc.String())
	g.f.Type().Id(t).Struct(
		jen.Op("*").Id("ClientWithResponses"),
		jen.Line().Id("callOptions").Index().Qual(clientPkg, "CallOption"),
	)
}

// callOptions writes the client's WithCallOptions and the helpers' plumbing
// of call options and request editors.
func (g *gen) callOptions() {
	t := g.cfg.Type
	g.docf("WithCallOptions returns a copy of c whose helpers apply opts to every call, before the call's own (which win where they set the same thing): a client-wide key generator (idemclient.WithKeyGenerator), policy override (idemclient.WithPolicyOverride) or request editors (idemclient.WithRequestEditors). c is unchanged. It panics when opts supply a key (idemclient.WithKey: every call would share it; idemclient.CheckClientOptions): give WithKey to each call; or say idemclient.WithoutKey (every call would go without a key): give it to each keyless call.")
	g.f.Func().Params(jen.Id("c").Op("*").Id(t)).Id("WithCallOptions").Params(jen.Id("opts").Op("...").Qual(clientPkg, "CallOption")).Op("*").Id(t).Block(
		jen.If(jen.Err().Op(":=").Qual(clientPkg, "CheckClientOptions").Call(jen.Id("opts").Op("...")), jen.Err().Op("!=").Nil()).Block(
			jen.Panic(jen.Err().Dot("Error").Call()),
		),
		jen.Id("cc").Op(":=").Op("*").Id("c"),
		jen.Id("cc").Dot("callOptions").Op("=").Append(jen.Qual("slices", "Clip").Call(jen.Id("c").Dot("callOptions")), jen.Id("opts").Op("...")),
		jen.Return(jen.Op("&").Id("cc")),
	)
	g.doc(px + "Options returns the call options of a helper's call: the client's (WithCallOptions), then the call's.")
	g.f.Func().Params(jen.Id("c").Op("*").Id(t)).Id(px+"Options").Params(jen.Id("opts").Index().Qual(clientPkg, "CallOption")).Index().Qual(clientPkg, "CallOption").Block(
		jen.If(jen.Len(jen.Id("c").Dot("callOptions")).Op("==").Lit(0)).Block(jen.Return(jen.Id("opts"))),
		jen.Return(jen.Append(jen.Qual("slices", "Clip").Call(jen.Id("c").Dot("callOptions")), jen.Id("opts").Op("..."))),
	)
	g.doc(px + "Editors returns the request editors given to a call with idemclient.WithRequestEditors, as oapi-codegen's RequestEditorFn, for the helper to pass to its method.")
	g.f.Func().Id(px+"Editors").Params(jen.Id("call").Op("*").Qual(clientPkg, "Call")).Index().Id("RequestEditorFn").Block(
		jen.Id("fns").Op(":=").Id("call").Dot("RequestEditors").Call(),
		jen.If(jen.Len(jen.Id("fns")).Op("==").Lit(0)).Block(jen.Return(jen.Nil())),
		jen.Id("out").Op(":=").Make(jen.Index().Id("RequestEditorFn"), jen.Len(jen.Id("fns"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("fn")).Op(":=").Range().Id("fns")).Block(
			jen.Id("out").Index(jen.Id("i")).Op("=").Id("RequestEditorFn").Call(jen.Id("fn")),
		),
		jen.Return(jen.Id("out")),
	)
}

func (g *gen) firstTyped() *ir.Operation {
	for _, op := range g.spec.Operations {
		if ok, _ := typed(op); ok {
			return op
		}
	}
	return nil
}

func hasJSONHelper(op *ir.Operation) bool { return op.Body == nil || op.Names.JSONRequestBody != "" }

// formSuffix is the suffix oapi-codegen gives the client methods of an
// application/x-www-form-urlencoded body (<Op>WithFormdataBody, its
// <Op>WithFormdataBodyWithResponse), whose body type is
// <Op>FormdataRequestBody.
const formSuffix = "WithFormdataBody"

// hasFormHelper reports whether oapi-codegen's client has typed methods for
// a form body of the operation, and so the helpers a <Op>WithFormdataBody.
func hasFormHelper(op *ir.Operation) bool {
	return op.Body != nil && slices.Contains(op.Body.ContentTypes, "application/x-www-form-urlencoded")
}

// helperKind is the kind of body a helper takes.
type helperKind int

const (
	helperTyped helperKind = iota // the JSON body type (or no body)
	helperRaw                     // a content type and an io.Reader
	helperForm                    // the form body type
)

// helperKinds are the helpers of op, in the order the file declares them:
// the typed one (JSON body or none), the raw body's, the form body's.
func helperKinds(op *ir.Operation) []helperKind {
	var ks []helperKind
	if hasJSONHelper(op) {
		ks = append(ks, helperTyped)
	}
	if op.Body != nil {
		ks = append(ks, helperRaw)
	}
	if hasFormHelper(op) {
		ks = append(ks, helperForm)
	}
	return ks
}

// names are the name of op's helper of kind k and the ClientWithResponses
// method it calls.
func (k helperKind) names(op *ir.Operation) (name, method string) {
	switch k {
	case helperRaw:
		return op.GoName + "WithBody", op.Names.WithBodyWithResponse
	case helperForm:
		return op.GoName + formSuffix, op.GoName + formSuffix + "WithResponse"
	}
	return op.GoName, op.Names.WithResponse
}

// helperNames are the names of op's helpers, in helperKinds' order.
func helperNames(op *ir.Operation) []string {
	var names []string
	for _, k := range helperKinds(op) {
		name, _ := k.names(op)
		names = append(names, name)
	}
	return names
}

// helperName is op's first helper, the one the type's documentation shows.
func helperName(op *ir.Operation) string { return helperNames(op)[0] }

func exampleArgs(op *ir.Operation) string {
	var b strings.Builder
	for _, v := range pathVars(op) {
		b.WriteString(", " + v)
	}
	if op.Names.Params != "" {
		b.WriteString(", nil")
	}
	switch {
	case op.Body == nil:
	case hasJSONHelper(op):
		b.WriteString(", body")
	default:
		b.WriteString(", contentType, body")
	}
	return b.String()
}

func keyDoc(op *ir.Operation) string {
	k := op.Key
	s := string(k.Carrier) + " " + k.Name
	if k.Param != nil {
		s += " (params." + k.Param.GoName + ")"
	}
	if keyOptional(op) {
		s += " (optional)"
	}
	return s + ", " + k.Format
}

func (g *gen) constructors() {
	t, doer, matcher := g.cfg.Type, g.cfg.Doer(), g.cfg.Matcher()
	q := func(id string) *jen.Statement { return jen.Qual(clientPkg, id) }
	g.docf("New%s returns the typed helpers over a ClientWithResponses for server, built with opts as NewClientWithResponses builds it. Its HTTP client (WithHTTPClient; default a new http.Client) is wrapped with %s, whose matcher is %s of the client's server URL (its Server, after opts such as WithBaseURL): a request of the client that no helper made is matched by its whole path under the server's base path (one no route serves there, say with a gateway prefix a request editor added, as %s alone reads it). An HTTP client that is an *idemclient.Doer already, or wraps one and says so (idemclient.DoerWrapper: an SDK's own HttpRequestDoer adding a User-Agent or tracing around the Doer), is kept as it is: pass WithHTTPClient(%s(httpClient, idemclient.WithMatcher(m), doerOptions...)), m from %s(server), or your wrapper of it, to configure the Doer (its clock, a per-attempt timeout, a logger, an attempt hook) and keep the exact matching; or, simpler, pass %s(httpClient, doerOptions...), which does just that. A wrapper that does not implement idemclient.DoerWrapper is wrapped in a second, default Doer, whose attempts the inner Doer passes through without its options (it logs a warning once). It fails when the server URL does not parse.", t, doer, matcher, doer, doer, matcher, g.cfg.HTTPClientOption())
	g.f.Func().Id("New"+t).Params(jen.Id("server").String(), jen.Id("opts").Op("...").Id("ClientOption")).Params(jen.Op("*").Id(t), jen.Error()).Block(
		jen.List(jen.Id("c"), jen.Err()).Op(":=").Id("NewClientWithResponses").Call(jen.Id("server"), jen.Id("opts").Op("...")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.If(jen.List(jen.Id("inner"), jen.Id("ok")).Op(":=").Id("c").Dot("ClientInterface").Assert(jen.Op("*").Id(cmp.Or(g.cfg.Oapi, "Client"))), jen.Id("ok")).Block(
			jen.List(jen.Id("d"), jen.Id("withOpts")).Op(":=").Id("inner").Dot("Client").Assert(jen.Op("*").Id(px+"HTTPClient")),
			jen.If(jen.Id("withOpts").Op("||").Add(q("FindDoer")).Call(jen.Id("inner").Dot("Client")).Op("==").Nil()).Block(
				jen.List(jen.Id("m"), jen.Err()).Op(":=").Id(matcher).Call(jen.Id("inner").Dot("Server")),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
				jen.If(jen.Id("withOpts")).Block(
					jen.Id("inner").Dot("Client").Op("=").Id(doer).Call(jen.Id("d").Dot("inner"), jen.Append(jen.Index().Add(q("Option")).Values(q("WithMatcher").Call(jen.Id("m"))), jen.Id("d").Dot("opts").Op("...")).Op("...")),
				).Else().Block(
					jen.Id("inner").Dot("Client").Op("=").Id(doer).Call(jen.Id("inner").Dot("Client"), q("WithMatcher").Call(jen.Id("m"))),
				),
			),
		),
		jen.Return(jen.Op("&").Id(t).Values(jen.Dict{jen.Id("ClientWithResponses"): jen.Id("c")}), jen.Nil()),
	)

	g.docf("%s returns an *idemclient.Doer over inner (nil: http.DefaultClient) for any client of this package: give it to WithHTTPClient. Requests of the typed helpers carry their call and its policy; any other request whose method and path are those of an idempotent operation is retried under that operation's policy with a new key per request (or the key the request carries already); every other request passes through untouched. Not knowing the server URL, it reads a request under the base paths the spec's top-level servers declare, if any, as %[2]s does; when no route serves it whole under them, it matches the request on the end of its URL path, so that a server URL with another base path works; a request that an idempotent route and one that is not idempotent both serve, read under base paths of different lengths (with POST /{tenant}/orders or POST /api/orders idempotent and POST /orders not: POST /acme/orders, POST /api/orders), is ambiguous: it gets a key as the idempotent operation would, but one attempt only, since it may be the other. This costs retries for a common REST shape: with POST /orders not idempotent, an idempotent POST /users/{id}/orders is always ambiguous this way (POST /orders under the base path /users/5), so its requests are sent once, never retried (idemclient.RouteTable.Match). Give it idemclient.WithMatcher(m), m from %[2]s(server), to match exactly under the server URL's base path, as New%[3]s does: recommended whenever the server URL is known. The typed helpers are retried either way. opts configure the Doer (idemclient.WithClock, WithAttemptTimeout, WithLogger, WithAttemptHook, ...); a WithMatcher among them replaces the operations' matcher.", doer, matcher, t)
	g.f.Func().Id(doer).Params(jen.Id("inner").Id("HttpRequestDoer"), jen.Id("opts").Op("...").Add(q("Option"))).Op("*").Add(q("Doer")).Block(
		jen.If(jen.Id("inner").Op("==").Nil()).Block(jen.Id("inner").Op("=").Qual("net/http", "DefaultClient")),
		jen.Return(q("NewDoer").Call(jen.Id("inner"), q("Policy").Values(),
			jen.Append(jen.Index().Add(q("Option")).Values(q("WithMatcher").Call(jen.Id(px+"Routes").Dot("Match"))), jen.Id("opts").Op("...")).Op("..."))),
	)

	g.exactMatcher()
	g.httpClientOption()

	g.docf("The operation IDs %s knows, one constant per idempotent operation (its operationId, or oapi-codegen's Go name for an operation without one).", g.cfg.PolicyFunc())
	g.f.Const().DefsFunc(func(d *jen.Group) {
		for _, op := range g.spec.Operations {
			d.Id(g.cfg.OpConst(op)).Op("=").Lit(op.RecordName())
		}
	})
	g.docf("%s returns the client policy of the operation with this operationId (oapi-codegen's Go name for operations without one; the %sOp* constants): attempts, backoff, what is retried, the in-flight wait, and the key's format and carrier, as the contract says. ok is false for an operation that is not idempotent.", g.cfg.PolicyFunc(), g.cfg.Type)
	g.f.Func().Id(g.cfg.PolicyFunc()).Params(jen.Id("operationID").String()).Params(jen.Id("p").Add(q("Policy")), jen.Id("ok").Bool()).Block(
		jen.Switch(jen.Id("operationID")).BlockFunc(func(sw *jen.Group) {
			for _, op := range g.spec.Operations {
				sw.Case(jen.Lit(op.RecordName())).Block(jen.Return(jen.Id(g.policyVar(op)), jen.True()))
			}
		}),
		jen.Return(q("Policy").Values(), jen.False()),
	)
}

// helperLocals are the identifiers a helper declares itself (its receiver,
// parameters and variables): no path argument takes one.
var helperLocals = []string{"c", "ctx", "params", "contentType", "body", "opts", "p", "carried", "given", "set", "call", "key", "err", "resp"}

// pathVars are the names of the helper's path arguments.
func pathVars(op *ir.Operation) []string {
	goNames := make([]string, len(op.PathParams))
	for i, p := range op.PathParams {
		goNames[i] = p.GoName
	}
	return naming.ArgVariables(goNames, helperLocals...)
}

// pathArgs are the helper's path parameters and the arguments passing them on.
func pathArgs(op *ir.Operation) (params, args []jen.Code) {
	for i, v := range pathVars(op) {
		p := op.PathParams[i]
		params = append(params, jen.Id(v).Add(goType(p.GoType)))
		args = append(args, jen.Id(v))
	}
	return params, args
}

// goType writes a type as oapi-codegen spells it in the package.
func goType(t string) jen.Code { return gogen.GoType(t) }

func (g *gen) helpers(op *ir.Operation) {
	for _, k := range helperKinds(op) {
		g.helper(op, k)
	}
}

func (g *gen) helper(op *ir.Operation, kind helperKind) {
	t := g.cfg.Type
	raw := kind == helperRaw
	name, method := kind.names(op)
	q := func(id string) *jen.Statement { return jen.Qual(clientPkg, id) }
	params, args := pathArgs(op)
	params = append([]jen.Code{jen.Id("ctx").Qual("context", "Context")}, params...)
	args = append([]jen.Code{jen.Id("ctx")}, args...)
	kp := op.Key.Param
	if op.Names.Params != "" {
		params = append(params, jen.Id("params").Op("*").Id(op.Names.Params))
		if kp != nil {
			args = append(args, jen.Op("&").Id("p"))
		} else {
			args = append(args, jen.Id("params"))
		}
	}
	switch {
	case raw:
		params = append(params, jen.Id("contentType").String(), jen.Id("body").Qual("io", "Reader"))
		args = append(args, jen.Id("contentType"), jen.Id("body"))
	case kind == helperForm:
		params = append(params, jen.Id("body").Id(op.GoName+"FormdataRequestBody"))
		args = append(args, jen.Id("body"))
	case op.Body != nil:
		params = append(params, jen.Id("body").Id(op.Names.JSONRequestBody))
		args = append(args, jen.Id("body"))
	}
	params = append(params, jen.Id("opts").Op("...").Add(q("CallOption")))
	args = append(args, jen.Id(px+"Editors").Call(jen.Id("call")).Op("..."))

	// Documentation.
	var d strings.Builder
	switch {
	case raw && hasJSONHelper(op):
		fmt.Fprintf(&d, "%s is %s with a body of any content type, through %s: the body is read once (a *bytes.Reader, *bytes.Buffer or *strings.Reader is not copied: every attempt re-reads it from the position it had when the call was made) and the same bytes are sent with every attempt.", name, op.GoName, method)
	case kind == helperForm && hasJSONHelper(op):
		fmt.Fprintf(&d, "%s is %s with a form body (application/x-www-form-urlencoded), through %s: the body is encoded once and the same bytes are sent with every attempt.", name, op.GoName, method)
	case kind == helperForm:
		fmt.Fprintf(&d, "%s is %sWithBody with a form body (application/x-www-form-urlencoded), through %s: the body is encoded once and the same bytes are sent with every attempt.", name, op.GoName, method)
	default:
		fmt.Fprintf(&d, "%s calls %s (%s) as one logical call, through %s.", name, op.Where(), op.RecordName(), method)
		if sum := strings.TrimSpace(op.Summary); sum != "" {
			if !strings.HasSuffix(sum, ".") {
				sum += "."
			}
			d.WriteString(" " + sum)
		}
		fmt.Fprintf(&d, "\n\nContract: %s semantics, window %s. ", op.Policy.Semantics, ir.FormatDuration(op.Policy.Window))
		k := op.Key
		switch {
		case kp != nil:
			fmt.Fprintf(&d, "The key (%s) goes into params.%s, the %s %s: the one given with idemclient.WithKey, else the one params carries, else a new one. ", keyFormatDoc(k.Format), kp.GoName, kp.In, kp.Name)
		case k.Carrier == ir.CarrierBody:
			fmt.Fprintf(&d, "The key (%s) goes into the body member %s, spliced into the encoded bytes once, before the first attempt: the one given with idemclient.WithKey, else the one the body carries, else a new one. ", keyFormatDoc(k.Format), k.Name)
		default:
			fmt.Fprintf(&d, "The key (%s) goes into the %s %s: the one given with idemclient.WithKey, else a new one. ", keyFormatDoc(k.Format), k.Carrier, k.Name)
		}
		d.WriteString(withoutKeyDoc(op))
		d.WriteString(retryDoc(op.Policy.Retry, op.Policy.InUseWait()))
		d.WriteString(inFlightWaitDoc(op.Policy.InFlight.Wait))
		if raw {
			d.WriteString(" The body is read once (a *bytes.Reader, *bytes.Buffer or *strings.Reader is not copied: every attempt re-reads it from the position it had when the call was made) and the same bytes are sent with every attempt.")
		} else if op.Body != nil {
			d.WriteString(" The body is encoded once and the same bytes are sent with every attempt.")
		}
	}
	fmt.Fprintf(&d, " It returns the response, the key, and an error as %s's documentation says.", t)
	g.doc(d.String())

	ret := []jen.Code{jen.Op("*").Id(op.Names.ResponseType), jen.String(), jen.Error()}
	g.f.Func().Params(jen.Id("c").Op("*").Id(t)).Id(name).Params(params...).Params(ret...).BlockFunc(func(b *jen.Group) {
		if kp != nil {
			b.Var().Id("p").Id(op.Names.Params)
			b.If(jen.Id("params").Op("!=").Nil()).Block(jen.Id("p").Op("=").Op("*").Id("params"))
			b.List(jen.Id("carried"), jen.Id("given"), jen.Id("set")).Op(":=").Id(keyAccess(op)).Call(jen.Op("&").Id("p").Dot(kp.GoName))
			b.List(jen.Id("ctx"), jen.Id("call"), jen.Id("key"), jen.Err()).Op(":=").Id(px+"Start").Call(
				jen.Id("ctx"), jen.Id(g.policyVar(op)), jen.Id("carried"), jen.Id("given"), jen.Id("set"), jen.Id("c").Dot(px+"Options").Call(jen.Id("opts")))
			b.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Id("key"), jen.Err()))
			b.List(jen.Id("resp"), jen.Err()).Op(":=").Id("c").Dot(method).Call(args...)
			b.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Id("key"), jen.Err()))
			b.Return(jen.Id("resp"), jen.Id("key"), jen.Id("call").Dot("Check").Call(jen.Id("resp").Dot("HTTPResponse"), jen.Id("resp").Dot("Body")))
			return
		}
		b.List(jen.Id("ctx"), jen.Id("call")).Op(":=").Id(g.policyVar(op)).Dot("Start").Call(jen.Id("ctx"), jen.Id("c").Dot(px+"Options").Call(jen.Id("opts")).Op("..."))
		b.List(jen.Id("resp"), jen.Err()).Op(":=").Id("c").Dot(method).Call(args...)
		b.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Id("call").Dot("Key").Call(), jen.Err()))
		b.Return(jen.Id("resp"), jen.Id("call").Dot("Key").Call(), jen.Id("call").Dot("Check").Call(jen.Id("resp").Dot("HTTPResponse"), jen.Id("resp").Dot("Body")))
	})
}

func keyFormatDoc(f string) string {
	switch f {
	case ir.FormatUUIDv4:
		return "a UUID v4"
	case ir.FormatUUIDv7:
		return "a UUID v7"
	case ir.FormatUUID:
		return "a UUID, v7 when the helper makes it"
	}
	return "a token, a UUID v7 when the helper makes it"
}

func retryDoc(r ir.Retry, inUseWait time.Duration) string {
	var on []string
	if r.Connection {
		on = append(on, "connection errors")
	}
	for _, s := range r.Statuses {
		on = append(on, strconv.Itoa(s))
	}
	if len(on) == 0 || r.MaxAttempts <= 1 {
		return "One attempt: the contract retries nothing."
	}
	b := r.Backoff
	return fmt.Sprintf("Up to %d attempts, retrying %s (never 400 or 422) after a backoff from %s to %s, ×%s, %s, or the server's Retry-After if longer (longest retry span %s). IDEMPOTENCY_KEY_IN_USE answers do not count as attempts: they are waited out for up to %s after the first of them (the in-flight lease plus the longest wait between attempts).",
		r.MaxAttempts, joinList(on), ir.FormatDuration(b.Initial), ir.FormatDuration(b.Max), strconv.FormatFloat(b.Multiplier, 'g', -1, 64), jitterDoc(string(b.Jitter)), ir.FormatDuration(r.LongestSpan()), ir.FormatDuration(inUseWait))
}

// inFlightWaitDoc says what a per-attempt timeout means under the
// operation's in-flight wait ("" without one).
func inFlightWaitDoc(wait time.Duration) string {
	if wait <= 0 {
		return ""
	}
	return fmt.Sprintf(" The server holds a duplicate (a request whose key is in flight) up to %s (in-flight.wait) before it answers: a per-attempt timeout (idemclient.WithAttemptTimeout), which bounds the server's own answer, is extended by %[1]s for every attempt it may hold (every retry, and a first attempt whose key was supplied), so that a held attempt is not counted a failure.", ir.FormatDuration(wait))
}

// jitterDoc names a jitter mode in a sentence.
func jitterDoc(j string) string {
	if j == ir.JitterNone {
		return "no jitter"
	}
	return j + " jitter"
}

func joinList(l []string) string {
	if len(l) <= 1 {
		return strings.Join(l, "")
	}
	return strings.Join(l[:len(l)-1], ", ") + " and " + l[len(l)-1]
}

// Policy converts an operation's contract into the client's policy, every
// field explicit. A retry block that lists nothing to retry becomes a
// single attempt (an idemclient.RetryOn with nothing set means the
// defaults). InUseWait, the longest the helper waits out
// IDEMPOTENCY_KEY_IN_USE answers (the time since the first of them), comes
// from the in-flight block
// (ir.Policy.InUseWait: the lease plus the longest wait between attempts),
// so that a crashed first request's lease runs out before the helper
// gives up; InFlightWait is the block's wait, by which the Doer extends a
// per-attempt timeout for the attempts the server may hold. EnforceKeyFormat
// is set: the key's format is the contract's, which the server requires.
// Operation is the operation's record name (its operationId, or
// oapi-codegen's Go name), as the attempt and call hooks report it.
// Window is the contract's window, against which the Doer checks the
// retry schedule a call really uses (after idemclient.WithPolicyOverride).
func Policy(op *ir.Operation) idemclient.Policy {
	r := op.Policy.Retry
	p := idemclient.Policy{
		MaxAttempts: r.MaxAttempts,
		Backoff: idemclient.Backoff{
			Initial:    r.Backoff.Initial,
			Max:        r.Backoff.Max,
			Multiplier: r.Backoff.Multiplier,
		},
		On:               idemclient.RetryOn{Connection: r.Connection, Statuses: slices.Clone(r.Statuses)},
		InUseWait:        op.Policy.InUseWait(),
		InFlightWait:     op.Policy.InFlight.Wait,
		EnforceKeyFormat: true,
		KeyName:          op.Key.Name,
		KeyMaxLength:     op.Key.MaxLength,
		Operation:        op.RecordName(),
		KeyOptional:      keyOptional(op),
		KeylessDedupe:    keylessDedupe(op),
		Window:           op.Policy.Window,
	}
	if p.On.IsZero() {
		p.MaxAttempts = 1
	}
	switch r.Backoff.Jitter {
	case ir.JitterEqual:
		p.Backoff.Jitter = idemclient.JitterEqual
	case ir.JitterNone:
		p.Backoff.Jitter = idemclient.JitterNone
	default:
		p.Backoff.Jitter = idemclient.JitterFull
	}
	switch op.Key.Format {
	case ir.FormatUUIDv4:
		p.KeyFormat = idemclient.FormatUUIDv4
	case ir.FormatUUIDv7:
		p.KeyFormat = idemclient.FormatUUIDv7
	case ir.FormatUUID:
		p.KeyFormat = idemclient.FormatUUID
	default:
		p.KeyFormat = idemclient.FormatToken
	}
	switch op.Key.Carrier {
	case ir.CarrierQuery:
		p.KeyCarrier = idemclient.CarrierQuery
	case ir.CarrierBody:
		p.KeyCarrier = idemclient.CarrierBody
	default:
		p.KeyCarrier = idemclient.CarrierHeader
	}
	return p
}

func (g *gen) policies() {
	for _, op := range g.spec.Operations {
		p := Policy(op)
		g.docf("%s is the client half of the contract of %s (%s): %s semantics, window %s, longest retry span %s.", g.policyVar(op), op.Where(), op.RecordName(), op.Policy.Semantics, ir.FormatDuration(op.Policy.Window), ir.FormatDuration(p.LongestSpan()))
		g.f.Var().Id(g.policyVar(op)).Op("=").Add(policyLiteral(p))
	}
}

// policyLiteral writes p as an idemclient.Policy literal with every field
// explicit, so the generated file documents the whole policy.
func policyLiteral(p idemclient.Policy) jen.Code {
	q := func(name string) *jen.Statement { return jen.Qual(clientPkg, name) }
	jitter := map[idemclient.Jitter]string{idemclient.JitterFull: "JitterFull", idemclient.JitterEqual: "JitterEqual", idemclient.JitterNone: "JitterNone"}[p.Backoff.Jitter]
	format := map[idemclient.KeyFormat]string{idemclient.FormatUUID: "FormatUUID", idemclient.FormatUUIDv4: "FormatUUIDv4", idemclient.FormatUUIDv7: "FormatUUIDv7", idemclient.FormatToken: "FormatToken"}[p.KeyFormat]
	carrier := map[idemclient.KeyCarrier]string{idemclient.CarrierHeader: "CarrierHeader", idemclient.CarrierQuery: "CarrierQuery", idemclient.CarrierBody: "CarrierBody"}[p.KeyCarrier]
	statuses := jen.Code(jen.Nil())
	if len(p.On.Statuses) > 0 {
		statuses = jen.Index().Int().ValuesFunc(func(g *jen.Group) {
			for _, s := range p.On.Statuses {
				g.Lit(s)
			}
		})
	}
	return q("Policy").Add(gogen.Fields(
		gogen.Field("MaxAttempts", jen.Lit(p.MaxAttempts)),
		gogen.Field("Backoff", q("Backoff").Add(gogen.Fields(
			gogen.Field("Initial", gogen.DurationCode(p.Backoff.Initial)),
			gogen.Field("Max", gogen.DurationCode(p.Backoff.Max)),
			gogen.Field("Multiplier", jen.Lit(p.Backoff.Multiplier)),
			gogen.Field("Jitter", q(jitter)),
		))),
		gogen.Field("On", q("RetryOn").Add(gogen.Fields(
			gogen.Field("Connection", jen.Lit(p.On.Connection)),
			gogen.Field("Statuses", statuses),
		))),
		gogen.Field("InUseWait", gogen.DurationCode(p.InUseWait)),
		gogen.Field("InFlightWait", gogen.DurationCode(p.InFlightWait)),
		gogen.Field("KeyFormat", q(format)),
		gogen.Field("EnforceKeyFormat", jen.Lit(p.EnforceKeyFormat)),
		gogen.Field("KeyCarrier", q(carrier)),
		gogen.Field("KeyName", jen.Lit(p.KeyName)),
		gogen.Field("KeyMaxLength", jen.Lit(p.KeyMaxLength)),
		gogen.Field("Operation", jen.Lit(p.Operation)),
		gogen.Field("KeyOptional", jen.Lit(p.KeyOptional)),
		gogen.Field("KeylessDedupe", jen.Lit(p.KeylessDedupe)),
		gogen.Field("Window", gogen.DurationCode(p.Window)),
	))
}

// keylessDedupe says whether the server recognises a keyless retry of op
// by its fingerprint, so that a call given idemclient.WithoutKey may be
// retried: window semantics with an optional key, and no fingerprint
// headers. A fingerprint header (Authorization, say) may change between
// attempts (a transport that re-signs or refreshes a token below the
// Doer): the retry is then another fingerprint, and runs again.
func keylessDedupe(op *ir.Operation) bool {
	return keyOptional(op) && op.Policy.Semantics == ir.Window && len(op.Policy.FingerprintHeaders) == 0
}

// keyOptional says whether a call of op may go without a key (the
// policy's KeyOptional, which idemclient.WithoutKey needs): the contract's
// key.required is false, and the spec does not declare the key parameter
// required. oapi-codegen's client always sends a required parameter (the
// zero UUID or "" when unset, which the server refuses with a 400), and
// its server refuses a request without one: the spec decides, and the call
// is refused before anything is sent (ErrInvalidKey). The compiler reports
// the two disagreeing (key-declared-differently), but not for a parameter
// idemgen spec wrote from an earlier contract (spec-stale).
func keyOptional(op *ir.Operation) bool {
	return !op.Key.Required && (op.Key.Param == nil || !op.Key.Param.Required)
}

// withoutKeyDoc is the helper documentation's sentence on
// idemclient.WithoutKey, for an operation whose key is optional.
func withoutKeyDoc(op *ir.Operation) string {
	switch {
	case op.Key.Required:
		return ""
	case !keyOptional(op):
		return fmt.Sprintf("The contract makes the key optional, but the spec declares the %s parameter %s required, which the client always sends: idemclient.WithoutKey fails with idemclient.ErrInvalidKey, nothing sent. ", op.Key.Param.In, op.Key.Param.Name)
	case keylessDedupe(op):
		return "The key is optional: with idemclient.WithoutKey none is made or sent, and the server recognises a repeat of the request by its fingerprint within the window (a keyless call is retried as a keyed one, and resumed by sending it again within the window; its record is not found under compatible-fingerprints, across a rollout that changes the fingerprint). "
	case op.Policy.Semantics == ir.Window:
		return fmt.Sprintf("The key is optional: with idemclient.WithoutKey none is made or sent, and the call is sent once: the fingerprint covers the header(s) %s, which may change between attempts, so a keyless retry could run the operation again. ", strings.Join(op.Policy.FingerprintHeaders, ", "))
	default:
		return "The key is optional: with idemclient.WithoutKey none is made or sent, and the call is sent once (a keyless retry could run the operation again). "
	}
}

// keyAccess is the function that reads and writes the key of op in its
// typed key parameter, by the parameter's Go kind and pointer-ness.
func keyAccess(op *ir.Operation) string {
	name := px + "String"
	if op.Key.GoKind == ir.KeyGoUUID {
		name = px + "UUID"
	}
	if op.Key.Param.Pointer {
		name += "Ptr"
	}
	return name
}

// keyHelpers writes the helpers of typed key parameters, when some
// operation has one: the start of a call and the accessors the helpers
// use.
func (g *gen) keyHelpers() {
	used := map[string]bool{}
	for _, op := range g.spec.Operations {
		if ok, _ := typed(op); ok && op.Key.Param != nil {
			used[keyAccess(op)] = true
		}
	}
	if len(used) == 0 {
		return
	}
	q := func(id string) *jen.Statement { return jen.Qual(clientPkg, id) }
	uuid := func() *jen.Statement { return jen.Qual(typesPkg, "UUID") }
	access := jen.Params(jen.String(), jen.Bool(), jen.Func().Params(jen.String()).Error())
	g.doc(px + "Start starts a call under policy p whose key travels in a typed parameter that holds carried (\"\" for none): it fixes the key (the one given with idemclient.WithKey, else carried, else a new one in the policy's format; none under idemclient.WithoutKey) and, when the parameter holds none and there is a key, writes it there with set. given says the parameter was set (an optional parameter's pointer is not nil): a given parameter that holds no key (a pointer to \"\" or to the zero UUID, such as a lost key saved empty) fails with an *idemclient.Error whose Reason is idemclient.ErrInvalidKey, nothing sent, as idemclient.WithKey(\"\") does: a new key would run the operation again.")
	g.f.Func().Id(px+"Start").Params(
		jen.Id("ctx").Qual("context", "Context"), jen.Id("p").Add(q("Policy")), jen.Id("carried").String(), jen.Id("given").Bool(), jen.Id("set").Func().Params(jen.String()).Error(), jen.Id("opts").Index().Add(q("CallOption")),
	).Params(jen.Qual("context", "Context"), jen.Op("*").Add(q("Call")), jen.String(), jen.Error()).Block(
		jen.List(jen.Id("ctx"), jen.Id("call")).Op(":=").Id("p").Dot("Start").Call(jen.Id("ctx"), jen.Id("opts").Op("...")),
		jen.If(jen.Id("given").Op("&&").Id("carried").Op("==").Lit("")).Block(
			jen.Return(jen.Id("ctx"), jen.Id("call"), jen.Lit(""), jen.Op("&").Add(q("Error")).Values(jen.Dict{
				jen.Id("Reason"): q("ErrInvalidKey"),
				jen.Id("Err"):    jen.Qual("errors", "New").Call(jen.Lit("the typed key parameter is set but holds no key (leave it nil to let the call make one)")),
			})),
		),
		jen.List(jen.Id("key"), jen.Err()).Op(":=").Id("call").Dot("FixKey").Call(jen.Id("carried")),
		jen.If(jen.Err().Op("==").Nil().Op("&&").Id("carried").Op("==").Lit("").Op("&&").Id("key").Op("!=").Lit("")).Block(
			jen.Err().Op("=").Id("set").Call(jen.Id("key")),
		),
		jen.Return(jen.Id("ctx"), jen.Id("call"), jen.Id("key"), jen.Err()),
	)
	if used[px+"String"] {
		g.doc(px + "String returns the key a key parameter of a string type holds (\"\" for none), whether it holds one, and the function that writes a key into it. T is the parameter's Go type (string, an enum type, a named type given with x-go-type): the key parameter must have a string type.")
		g.f.Func().Id(px + "String").Types(jen.Id("T").Op("~").String()).Params(jen.Id("field").Op("*").Id("T")).Add(access).Block(
			jen.Return(jen.String().Call(jen.Op("*").Id("field")), jen.Op("*").Id("field").Op("!=").Lit(""), jen.Func().Params(jen.Id("key").String()).Error().Block(
				jen.Op("*").Id("field").Op("=").Id("T").Call(jen.Id("key")),
				jen.Return(jen.Nil()),
			)),
		)
	}
	if used[px+"StringPtr"] {
		g.doc(px + "StringPtr is " + px + "String of an optional parameter: a nil pointer holds no key; a pointer to \"\" is given, holding an empty key.")
		g.f.Func().Id(px+"StringPtr").Types(jen.Id("T").Op("~").String()).Params(jen.Id("field").Op("**").Id("T")).Add(access).Block(
			jen.Id("carried").Op(":=").Lit(""),
			jen.If(jen.Op("*").Id("field").Op("!=").Nil()).Block(jen.Id("carried").Op("=").String().Call(jen.Op("**").Id("field"))),
			jen.Return(jen.Id("carried"), jen.Op("*").Id("field").Op("!=").Nil(), jen.Func().Params(jen.Id("key").String()).Error().Block(
				jen.Id("k").Op(":=").Id("T").Call(jen.Id("key")),
				jen.Op("*").Id("field").Op("=").Op("&").Id("k"),
				jen.Return(jen.Nil()),
			)),
		)
	}
	if used[px+"UUID"] {
		g.doc(px + "UUID returns the key a UUID key parameter holds in its canonical form (\"\" for the zero UUID), whether it holds one, and the function that parses a key into it.")
		g.f.Func().Id(px+"UUID").Params(jen.Id("field").Op("*").Add(uuid())).Add(access).Block(
			jen.Id("carried").Op(":=").Lit(""),
			jen.If(jen.Op("*").Id("field").Op("!=").Parens(uuid().Values())).Block(jen.Id("carried").Op("=").Id("field").Dot("String").Call()),
			jen.Return(jen.Id("carried"), jen.Id("carried").Op("!=").Lit(""), jen.Func().Params(jen.Id("key").String()).Error().Block(
				jen.Return(jen.Id(px+"SetUUID").Call(jen.Id("field"), jen.Id("key"))),
			)),
		)
	}
	if used[px+"UUIDPtr"] {
		g.doc(px + "UUIDPtr is " + px + "UUID of an optional parameter: a nil pointer holds no key; a pointer to the zero UUID is given, holding an empty key.")
		g.f.Func().Id(px+"UUIDPtr").Params(jen.Id("field").Op("**").Add(uuid())).Add(access).Block(
			jen.Id("carried").Op(":=").Lit(""),
			jen.If(jen.Op("*").Id("field").Op("!=").Nil().Op("&&").Op("**").Id("field").Op("!=").Parens(uuid().Values())).Block(jen.Id("carried").Op("=").Parens(jen.Op("*").Id("field")).Dot("String").Call()),
			jen.Return(jen.Id("carried"), jen.Op("*").Id("field").Op("!=").Nil(), jen.Func().Params(jen.Id("key").String()).Error().Block(
				jen.Id("u").Op(":=").New(uuid()),
				jen.Op("*").Id("field").Op("=").Id("u"),
				jen.Return(jen.Id(px+"SetUUID").Call(jen.Id("u"), jen.Id("key"))),
			)),
		)
	}
	if used[px+"UUID"] || used[px+"UUIDPtr"] {
		g.doc(px + "SetUUID parses key into a UUID key parameter; the parameter is sent in canonical form, so key must be in that form already (FixKey lower-cased a UUID given with idemclient.WithKey); else it fails with an *idemclient.Error whose Reason is idemclient.ErrBadKeyCarrier.")
		g.f.Func().Id(px+"SetUUID").Params(jen.Id("u").Op("*").Add(uuid()), jen.Id("key").String()).Error().Block(
			jen.If(jen.Err().Op(":=").Id("u").Dot("UnmarshalText").Call(jen.Index().Byte().Parens(jen.Id("key"))), jen.Err().Op("!=").Nil().Op("||").Id("u").Dot("String").Call().Op("!=").Id("key")).Block(
				jen.Return(jen.Op("&").Add(q("Error")).Values(jen.Dict{
					jen.Id("Key"):    jen.Id("key"),
					jen.Id("Reason"): q("ErrBadKeyCarrier"),
					jen.Id("Err"):    jen.Qual("fmt", "Errorf").Call(jen.Lit("the key %q is not a canonical UUID, which the typed key parameter needs"), jen.Id("key")),
				})),
			),
			jen.Return(jen.Nil()),
		)
	}
}

// routes returns the route table's entries: every route of the methods
// that have an idempotent operation, so a route that is not idempotent
// still wins over an idempotent template it is more specific than, in the
// IR's order (idemclient.NewRouteTable sorts them), with the policy
// variable of the idempotent ones ("" for the others).
func (g *gen) routes() []ir.Route {
	all := g.spec.Routes
	if len(all) == 0 { // an IR without routes: the idempotent operations alone
		for _, op := range g.spec.Operations {
			all = append(all, ir.Route{Method: op.Method, Path: op.Path})
		}
	}
	var out []ir.Route
	for _, r := range all {
		if slices.ContainsFunc(g.spec.Operations, func(op *ir.Operation) bool { return op.Method == r.Method }) {
			out = append(out, r)
		}
	}
	return out
}

// matcher writes the route table, an idemclient.RouteTable built once.
func (g *gen) matcher() {
	q := func(id string) *jen.Statement { return jen.Qual(clientPkg, id) }
	policy := map[string]string{}
	for _, op := range g.spec.Operations {
		policy[op.Where()] = g.policyVar(op)
	}
	bases := jen.Code(jen.Nil())
	basesDoc := ""
	if len(g.spec.BasePaths) > 0 {
		bases = jen.Index().String().ValuesFunc(func(gr *jen.Group) {
			for _, b := range g.spec.BasePaths {
				gr.Lit(b)
			}
		})
		basesDoc = fmt.Sprintf(", under the base paths of the spec's top-level servers first (variables at their default values: %s)", strings.Join(g.spec.BasePaths, ", "))
	}
	g.docf("%sRoutes matches requests to the idempotent operations by method and path%s: every route of the methods that have an idempotent operation, with its policy (nil for a route that is not idempotent), so that a more specific route that is not idempotent wins, as in the server's router. Its Match is %s's matcher, its Matcher(server) %s.", px, basesDoc, g.cfg.Doer(), g.cfg.Matcher())
	g.f.Var().Id(px+"Routes").Op("=").Add(q("NewRouteTable")).Call(bases, jen.Index().Add(q("Route")).ValuesFunc(func(gr *jen.Group) {
		for _, r := range g.routes() {
			pol := jen.Code(jen.Nil())
			if v := policy[r.Where()]; v != "" {
				pol = jen.Op("&").Id(v)
			}
			gr.Line().Values(jen.Id("Method").Op(":").Lit(r.Method), jen.Id("Path").Op(":").Lit(r.Path), jen.Id("Policy").Op(":").Add(pol))
		}
		gr.Line()
	}))
}

// httpClientOption writes With<type>HTTPClient, the client option that
// gives New<type> its HTTP client and the Doer's options, and the HTTP
// client it sets.
func (g *gen) httpClientOption() {
	q := func(id string) *jen.Statement { return jen.Qual(clientPkg, id) }
	name, t, doer, oapi := g.cfg.HTTPClientOption(), g.cfg.Type, g.cfg.Doer(), cmp.Or(g.cfg.Oapi, "Client")
	g.docf("%s is WithHTTPClient for New%s with the options of the Doer it wraps httpClient in (nil: http.DefaultClient): its clock, a per-attempt timeout (idemclient.WithAttemptTimeout), a logger (idemclient.WithLogger), an attempt or call hook, a retry budget (idemclient.WithRetryBudget), idemclient.WithErrorOnExhausted, ..., without building the Doer yourself. New%[2]s builds it as %[3]s(httpClient, idemclient.WithMatcher(m), opts...), m the exact matcher of the client's server URL (a WithMatcher among opts replaces it). Like WithHTTPClient, the last of the two given wins. httpClient is the plain HTTP client below the Doer (an *http.Client, or an HttpRequestDoer of yours that sees every attempt): one that is an *idemclient.Doer already, or wraps one (idemclient.DoerWrapper), fails the option, as two Doers would each run the calls; give that one to WithHTTPClient. Given to NewClient or NewClientWithResponses instead, the HTTP client is a Doer with opts that matches requests as %[3]s alone does.", name, t, doer)
	g.f.Func().Id(name).Params(jen.Id("httpClient").Id("HttpRequestDoer"), jen.Id("opts").Op("...").Add(q("Option"))).Id("ClientOption").Block(
		jen.Return(jen.Func().Params(jen.Id("c").Op("*").Id(oapi)).Error().Block(
			jen.If(jen.Id("httpClient").Op("!=").Nil().Op("&&").Add(q("FindDoer")).Call(jen.Id("httpClient")).Op("!=").Nil()).Block(
				jen.Return(jen.Qual("errors", "New").Call(jen.Lit(name+": the HTTP client is an idemclient.Doer already, or wraps one: give it to WithHTTPClient, or give the plain HTTP client here"))),
			),
			jen.Id("c").Dot("Client").Op("=").Op("&").Id(px+"HTTPClient").Values(jen.Dict{
				jen.Id("Doer"):  jen.Id(doer).Call(jen.Id("httpClient"), jen.Id("opts").Op("...")),
				jen.Id("inner"): jen.Id("httpClient"),
				jen.Id("opts"):  jen.Id("opts"),
			}),
			jen.Return(jen.Nil()),
		)),
	)
	g.docf("%sHTTPClient is the HTTP client %s sets: a Doer with its options, and what New%s needs to build it again with the exact matcher of the client's server URL.", px, name, t)
	g.f.Type().Id(px+"HTTPClient").Struct(
		jen.Op("*").Add(q("Doer")),
		jen.Id("inner").Id("HttpRequestDoer"),
		jen.Id("opts").Index().Add(q("Option")),
	)
}

// exactMatcher writes <type>Matcher, the matcher of a known server URL.
func (g *gen) exactMatcher() {
	q := func(id string) *jen.Statement { return jen.Qual(clientPkg, id) }
	g.docf("%s returns the matcher of the requests a client of this package sends to server (oapi-codegen's Server, as given to New%s or NewClient): the policy of the idempotent operation whose route serves the request, matched by its whole path under the server URL's base path; a route that is not idempotent that serves the request means no retry. A request that no route serves whole under the base path (outside it, or its path rewritten, say by a request editor adding a gateway prefix) is read as %s reads it (the spec's declared base paths, then the end of the path, an ambiguous request sent once). See idemclient.RouteTable.Matcher. Give it to %[3]s with idemclient.WithMatcher. It fails when server does not parse as a URL.", g.cfg.Matcher(), g.cfg.Type, g.cfg.Doer())
	g.f.Func().Id(g.cfg.Matcher()).Params(jen.Id("server").String()).Params(q("Matcher"), jen.Error()).Block(
		jen.Return(jen.Id(px + "Routes").Dot("Matcher").Call(jen.Id("server"))),
	)
}

// checkNames reports generated names that collide: package-level ones
// with oapi-codegen's (for the spec's components and operations, and its
// fixed ones) or the server emitter's, and the helper methods with each
// other or with the embedded ClientWithResponses.
func checkNames(spec *ir.Spec, opts emitter.Options, cfg Config, diags *diag.List) {
	theirs := gogen.OapiNames(spec)
	// The server emitter's exported names, when it writes into the same package.
	serverType := server.DefaultType
	if v, ok := server.TypeOption.In(opts.Params); ok && v != "" {
		serverType = v
	}
	for _, n := range []string{serverType, "New" + serverType} {
		if _, ok := theirs[n]; !ok {
			theirs[n] = gogen.Owner{What: "the server wrapper's " + n + " (option " + server.TypeOption.String() + ")", Pos: ir.Pos{File: spec.Source}}
		}
	}
	names := []string{cfg.Type, "New" + cfg.Type, cfg.Doer(), cfg.PolicyFunc(), cfg.Matcher(), cfg.HTTPClientOption()}
	for _, op := range spec.Operations {
		names = append(names, cfg.OpConst(op))
	}
	for _, name := range names {
		if o, ok := theirs[name]; ok {
			diags.Errorf(o.Pos, "go-name-collision", "the client helper's %s collides with the Go identifier %s declares for %s; rename it with the option %s", name, declarer(o.What), o.What, optType)
		}
	}
	methods := map[string]ir.Pos{"ClientWithResponses": {}, "WithCallOptions": {}}
	for _, op := range spec.Operations {
		if ok, _ := typed(op); !ok {
			continue
		}
		for _, n := range helperNames(op) {
			if first, ok := methods[n]; ok {
				where := "the embedded ClientWithResponses"
				if n == "WithCallOptions" {
					where = "the client's WithCallOptions method"
				}
				if !first.IsZero() {
					where = fmt.Sprintf("the helper of the operation at %s:%d:%d", first.File, first.Line, first.Col)
				}
				diags.Errorf(op.Pos, "go-name-collision", "the client helper %s of %s collides with %s", n, op.Where(), where)
				continue
			}
			methods[n] = op.Pos
		}
	}
}

func declarer(what string) string {
	if strings.HasPrefix(what, "the server wrapper") {
		return "the server emitter"
	}
	return "oapi-codegen"
}
