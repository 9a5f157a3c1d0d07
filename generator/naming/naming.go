// Package naming holds every rule idemgen uses to name the Go identifiers
// oapi-codegen generates for an operation, so generated wrappers and client
// helpers refer to oapi-codegen's types by their exact names.
//
// The rules follow oapi-codegen's (package
// github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen) under one of its name
// normalizers (output-options.name-normalizer: ToCamelCase, the default,
// ToCamelCaseWithDigits or ToCamelCaseWithInitialisms, with its
// additional-initialisms), without type-name collision resolution: a Namer
// holds the normalizer. oapi-codegen keeps the normalizer of the generation
// under way in package state, which its exported SchemaNameToTypeName reads,
// so a Namer never calls the functions that read it: it calls the pure ones
// (ToCamelCase, ToCamelCaseWithDigits) and restates the others
// (SchemaNameToTypeName, ToCamelCaseWithInitialisms and the unexported type
// name prefix); the tests check them against oapi-codegen's generated output.
package naming

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"
)

// Normalizers are the values of name-normalizer a Namer follows, "" (the
// default, ToCamelCase) first.
var Normalizers = []string{"", "ToCamelCase", "ToCamelCaseWithDigits", "ToCamelCaseWithInitialisms"}

// A Namer names identifiers as oapi-codegen does under one name normalizer.
// The zero Namer is Default.
type Namer struct {
	normalizer  string
	initialisms map[string]string // lower case -> as written; ToCamelCaseWithInitialisms only
	additional  []string          // additional-initialisms, sorted (String, Change)
	// skipOptionalPointer is output-options.prefer-skip-optional-pointer:
	// an optional parameter's field is a plain value unless its
	// x-go-type-skip-optional-pointer says otherwise.
	skipOptionalPointer bool
}

// Default is oapi-codegen's default naming: name-normalizer ToCamelCase.
var Default = Namer{}

// initialisms restates oapi-codegen's (unexported) list of the initialisms
// ToCamelCaseWithInitialisms writes in upper case.
var initialisms = []string{
	"ACL", "API", "ASCII", "CPU", "CSS", "DNS", "EOF", "GUID", "HTML", "HTTP", "HTTPS", "ID", "IP", "JSON",
	"QPS", "RAM", "RPC", "SLA", "SMTP", "SQL", "SSH", "TCP", "TLS", "TTL", "UDP", "UI", "GID", "UID", "UUID",
	"URI", "URL", "UTF8", "VM", "XML", "XMPP", "XSRF", "XSS", "SIP", "RTP", "AMQP", "DB", "TS",
}

// New returns the Namer of oapi-codegen's name-normalizer normalizer ("" is
// ToCamelCase) with its additional-initialisms, which, as in oapi-codegen,
// go with ToCamelCaseWithInitialisms only.
func New(normalizer string, additionalInitialisms []string) (Namer, error) {
	if !slices.Contains(Normalizers, normalizer) {
		return Namer{}, fmt.Errorf("name-normalizer %q: oapi-codegen knows %s", normalizer, strings.Join(Normalizers[1:], ", "))
	}
	n := Namer{normalizer: normalizer}
	if normalizer == "ToCamelCase" {
		n.normalizer = ""
	}
	if normalizer != "ToCamelCaseWithInitialisms" {
		if len(additionalInitialisms) > 0 {
			return Namer{}, fmt.Errorf("additional-initialisms goes with name-normalizer ToCamelCaseWithInitialisms only (as in oapi-codegen)")
		}
		return n, nil
	}
	n.initialisms = map[string]string{}
	for _, s := range append(slices.Clone(initialisms), additionalInitialisms...) {
		n.initialisms[strings.ToLower(s)] = s
	}
	if len(additionalInitialisms) > 0 {
		n.additional = slices.Compact(slices.Sorted(slices.Values(additionalInitialisms)))
	}
	return n, nil
}

// String says how n names, in the words of oapi-codegen's settings:
// "name-normalizer ToCamelCase" (the default), "name-normalizer
// ToCamelCaseWithInitialisms, additional-initialisms [K8S]".
func (n Namer) String() string {
	s := "name-normalizer " + normalizerName(n.normalizer)
	if len(n.additional) > 0 {
		s += ", additional-initialisms [" + strings.Join(n.additional, ", ") + "]"
	}
	return s
}

func normalizerName(normalizer string) string {
	if normalizer == "" {
		return "ToCamelCase"
	}
	return normalizer
}

// Change says what changed from the naming of old to that of n ("" when
// nothing did): "the name normalizer changed from ToCamelCase to
// ToCamelCaseWithInitialisms", "additional-initialisms changed
// from [] to [K8S]", or both.
func (n Namer) Change(old Namer) string {
	var out []string
	if old.normalizer != n.normalizer {
		out = append(out, fmt.Sprintf("the name normalizer changed from %s to %s", normalizerName(old.normalizer), normalizerName(n.normalizer)))
	}
	if !slices.Equal(old.additional, n.additional) {
		out = append(out, fmt.Sprintf("additional-initialisms changed from [%s] to [%s]", strings.Join(old.additional, ", "), strings.Join(n.additional, ", ")))
	}
	return strings.Join(out, " and ")
}

// Normalizer returns the name of n's normalizer, "" for the default.
func (n Namer) Normalizer() string { return n.normalizer }

// PreferSkipOptionalPointer reports whether oapi-codegen declares optional
// parameters without a pointer, unless their x-go-type-skip-optional-pointer
// is false (output-options.prefer-skip-optional-pointer).
func (n Namer) PreferSkipOptionalPointer() bool { return n.skipOptionalPointer }

var camelCaseMatchParts = regexp.MustCompile(`[\p{Lu}\d]+([\p{Ll}\d]+|$)`)

// Normalize is oapi-codegen's nameNormalizer.
func (n Namer) Normalize(s string) string {
	switch n.normalizer {
	case "ToCamelCaseWithDigits":
		return codegen.ToCamelCaseWithDigits(s)
	case "ToCamelCaseWithInitialisms":
		parts := camelCaseMatchParts.FindAllString(codegen.ToCamelCaseWithDigits(s), -1)
		for i, p := range parts {
			if v, ok := n.initialisms[strings.ToLower(p)]; ok {
				parts[i] = v
			}
		}
		return strings.Join(parts, "")
	}
	return codegen.ToCamelCase(s)
}

// TypeName is oapi-codegen's SchemaNameToTypeName: a prefix for a name that
// starts with a symbol or a digit, then the name normalized.
func (n Namer) TypeName(name string) string { return typeNamePrefix(name) + n.Normalize(name) }

// Operation returns oapi-codegen's Go name of an operation: its operationId
// normalized (with a prefix for a leading digit or symbol), or, without an
// operationId, the method and path ("post /pets/{id}" -> PostPetsId); as in
// oapi-codegen, the result is normalized once more.
func (n Namer) Operation(operationID, method, path string) string {
	var id string
	if operationID == "" {
		id = strings.ToLower(method)
		for part := range strings.SplitSeq(path, "/") {
			if part != "" {
				id += "-" + part
			}
		}
		id = n.Normalize(id)
	} else {
		id = n.Normalize(operationID)
	}
	return n.Normalize(typeNamePrefix(id) + id)
}

// typeNamePrefix restates oapi-codegen's unexported prefix rule: "Empty" for
// an empty name, words for leading symbols, "N" before a leading digit.
func typeNamePrefix(name string) (prefix string) {
	if name == "" {
		return "Empty"
	}
	for _, r := range name {
		switch r {
		case '$':
			if len(name) == 1 {
				return "DollarSign"
			}
		case '-':
			prefix += "Minus"
		case '+':
			prefix += "Plus"
		case '&':
			prefix += "And"
		case '|':
			prefix += "Or"
		case '~':
			prefix += "Tilde"
		case '=':
			prefix += "Equal"
		case '>':
			prefix += "GreaterThan"
		case '<':
			prefix += "LessThan"
		case '#':
			prefix += "Hash"
		case '.':
			prefix += "Dot"
		case '*':
			prefix += "Asterisk"
		case '^':
			prefix += "Caret"
		case '%':
			prefix += "Percent"
		case '_':
			prefix += "Underscore"
		default:
			if prefix == "" && unicode.IsDigit(r) {
				return "N"
			}
			return prefix
		}
	}
	return prefix
}

// Param returns the Go field name of a parameter in <Op>Params (and the base
// of a path parameter's argument name); goName is the parameter's
// x-go-name extension, "" when absent.
func (n Namer) Param(name, goName string) string {
	if goName != "" {
		name = goName
	}
	return n.TypeName(name)
}

// ParamVariable returns the Go variable name oapi-codegen gives a path
// parameter's argument, e.g. petId for PetId.
func ParamVariable(goName string) string {
	v := codegen.LowercaseFirstCharacters(goName)
	if codegen.IsGoKeyword(v) {
		v = "p" + codegen.UppercaseFirstCharacter(v)
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		v = "n" + v
	}
	return v
}

// ArgVariables returns the Go variable names of path parameters' arguments
// (goNames are the parameters' Go names) in a function that declares the
// reserved names itself: ParamVariable's name, or, for one that is reserved
// or taken by an earlier argument, that name with the suffix Arg (then Arg2,
// Arg3, ...), so no argument shadows the function's own variables or
// another argument.
func ArgVariables(goNames []string, reserved ...string) []string {
	taken := map[string]bool{}
	for _, r := range reserved {
		taken[r] = true
	}
	vars := make([]string, len(goNames))
	for i, g := range goNames {
		v := ParamVariable(g)
		for n := 1; taken[v]; n++ {
			v = ParamVariable(g) + "Arg"
			if n > 1 {
				v += fmt.Sprint(n)
			}
		}
		taken[v] = true
		vars[i] = v
	}
	return vars
}

// Schema returns the Go type name of a component schema; goName is its
// x-go-name extension, "" when absent.
func (n Namer) Schema(component, goName string) string {
	if goName != "" {
		return goName
	}
	return n.TypeName(component)
}

// SchemaRef returns the Go type of a "#/components/schemas/Name" reference,
// "" for any other reference (oapi-codegen then declares a type of its own).
func (n Namer) SchemaRef(ref, goName string) string {
	const prefix = "#/components/schemas/"
	rest, ok := strings.CutPrefix(ref, prefix)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return ""
	}
	return n.Schema(unescape(rest), goName)
}

func unescape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// Op holds the names of one operation's generated identifiers.
type Op struct {
	Handler              string // <Op>: strict and plain server interface method, Client method
	RequestObject        string // <Op>RequestObject (strict server)
	ResponseObject       string // <Op>ResponseObject (strict server)
	Params               string // <Op>Params
	ResponseType         string // <Op>Response (ClientWithResponses)
	WithResponse         string // <Op>WithResponse
	WithBodyWithResponse string // <Op>WithBodyWithResponse
	ClientWithBody       string // <Op>WithBody
	JSONBody             string // <Op>JSONBody: the type declared for an inline JSON body
	JSONRequestBody      string // <Op>JSONRequestBody: alias of the JSON body type
}

// Names returns the identifiers of the operation whose Go name is goName.
func Names(goName string) Op {
	return Op{
		Handler:              goName,
		RequestObject:        codegen.UppercaseFirstCharacter(goName) + "RequestObject",
		ResponseObject:       codegen.UppercaseFirstCharacter(goName) + "ResponseObject",
		Params:               goName + "Params",
		ResponseType:         goName + "Response",
		WithResponse:         goName + "WithResponse",
		WithBodyWithResponse: goName + "WithBodyWithResponse",
		ClientWithBody:       goName + "WithBody",
		JSONBody:             goName + "JSONBody",
		JSONRequestBody:      goName + "JSONRequestBody",
	}
}

// IsJSONMediaType reports whether a media type is JSON as oapi-codegen
// judges it: application/json or any type ending in +json.
func IsJSONMediaType(mediaType string) bool { return util.IsMediaTypeJson(mediaType) }

// ParamType returns the Go type oapi-codegen (v2.8, default type mapping)
// gives a parameter: the type of a path argument of the client's methods, or
// of a field of <Op>Params without its optional pointer. ref is the
// parameter's $ref ("" when declared inline), opGoName the operation's Go
// name, shared whether the parameter is declared on the path item rather
// than on the operation, is31 whether the spec is OpenAPI 3.1.
//
// Types outside the package are written as oapi-codegen writes them:
// openapi_types.X (github.com/oapi-codegen/runtime/types), time.Time,
// json.RawMessage. ParamType returns "" when it cannot tell: x-go-type
// overrides, objects, unions, nullable values, and enums declared on a path
// item or in a component parameter (oapi-codegen derives their names from
// scopes this function does not restate).
func (n Namer) ParamType(ref string, p *openapi3.Parameter, opGoName string, shared, is31 bool) string {
	if p == nil {
		return ""
	}
	if ref != "" {
		name, ok := n.componentParamType(ref, p)
		if !ok || p.Schema == nil || p.Schema.Value == nil || isEnum(p.Schema.Value, is31) && p.Schema.Ref == "" {
			return "" // an inline enum gets an operation-scoped name oapi-codegen then overrides
		}
		return name
	}
	sref := p.Schema
	if sref == nil {
		if len(p.Content) != 1 {
			return "string"
		}
		mt := p.Content.Get("application/json")
		if mt == nil {
			return "string"
		}
		sref = mt.Schema
	}
	if shared && hasInlineEnum(sref, is31) {
		return ""
	}
	return n.schemaType(sref, []string{opGoName + "Params", p.Name}, is31, 0)
}

// componentParamType is oapi-codegen's type name of a "#/components/parameters/Name"
// reference: the parameter's x-go-name, else Name as a type name.
func (n Namer) componentParamType(ref string, p *openapi3.Parameter) (string, bool) {
	const prefix = "#/components/parameters/"
	rest, ok := strings.CutPrefix(ref, prefix)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	if s, ok := p.Extensions["x-go-name"].(string); ok && s != "" {
		return s, true
	}
	return n.TypeName(rest), true
}

func isEnum(s *openapi3.Schema, is31 bool) bool {
	return (len(s.Enum) > 0 || is31 && s.Const != nil) && !primaryType(s, is31).Is("array")
}

func hasInlineEnum(sref *openapi3.SchemaRef, is31 bool) bool {
	for depth := 0; sref != nil && sref.Ref == "" && sref.Value != nil && depth < 8; depth++ {
		if isEnum(sref.Value, is31) {
			return true
		}
		sref = sref.Value.Items
	}
	return false
}

// primaryType is the schema's type with "null" removed (OpenAPI 3.1).
func primaryType(s *openapi3.Schema, is31 bool) *openapi3.Types {
	if s.Type == nil || !is31 || len(s.Type.Slice()) <= 1 {
		return s.Type
	}
	var out openapi3.Types
	for _, t := range s.Type.Slice() {
		if t != "null" {
			out = append(out, t)
		}
	}
	return &out
}

// schemaType restates oapi-codegen's GenerateGoSchema for the schemas a
// parameter can have.
func (n Namer) schemaType(sref *openapi3.SchemaRef, path []string, is31 bool, depth int) string {
	if sref == nil || depth > 8 {
		return ""
	}
	if sref.Ref != "" {
		if _, ok := sref.Extensions["x-go-type"]; ok {
			return ""
		}
		goName := ""
		if sref.Value != nil {
			goName, _ = sref.Value.Extensions["x-go-name"].(string)
		}
		return n.SchemaRef(sref.Ref, goName)
	}
	s := sref.Value
	if s == nil {
		return ""
	}
	for _, ext := range []string{"x-go-type", "x-go-type-name"} {
		if _, ok := s.Extensions[ext]; ok && !(ext == "x-go-type-name" && isEnum(s, is31)) {
			return ""
		}
	}
	if s.AllOf != nil || s.OneOf != nil || s.AnyOf != nil || s.Not != nil || s.Nullable || is31 && s.Type != nil && s.Type.Includes("null") {
		return ""
	}
	t := primaryType(s, is31)
	if t == nil || len(t.Slice()) != 1 {
		return ""
	}
	if isEnum(s, is31) {
		if name, ok := s.Extensions["x-go-type-name"].(string); ok && name != "" {
			return name
		}
		parts := make([]string, len(path))
		for i, p := range path {
			parts[i] = n.Normalize(p)
		}
		return n.TypeName(strings.Join(parts, "_"))
	}
	m := codegen.DefaultTypeMapping
	switch {
	case t.Is("array"):
		item := n.schemaType(s.Items, path, is31, depth+1)
		if item == "" {
			return ""
		}
		return "[]" + item
	case t.Is("integer"):
		return m.Integer.Resolve(s.Format).Type
	case t.Is("number"):
		return m.Number.Resolve(s.Format).Type
	case t.Is("boolean"):
		return m.Boolean.Resolve(s.Format).Type
	case t.Is("string"):
		return StringType(s, is31)
	}
	return ""
}

// StringFormat returns the format oapi-codegen reads from the string
// schema s: its format, or in OpenAPI 3.1 (is31) without one, the 3.1
// forms of binary (contentMediaType) and byte (contentEncoding: base64).
func StringFormat(s *openapi3.Schema, is31 bool) string {
	if is31 && s.Format == "" {
		switch {
		case s.ContentMediaType != "":
			return "binary"
		case s.ContentEncoding == "base64":
			return "byte"
		}
	}
	return s.Format
}

// StringType returns the Go type oapi-codegen's default type mapping
// (codegen.DefaultTypeMapping, the one idemgen requires) gives the string
// schema s (x-go-type and enums aside): string, openapi_types.UUID,
// time.Time, []byte, ... is31 tells whether the spec is OpenAPI 3.1.
func StringType(s *openapi3.Schema, is31 bool) string {
	return codegen.DefaultTypeMapping.String.Resolve(StringFormat(s, is31)).Type
}
