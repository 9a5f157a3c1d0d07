// Package docs is idemgen's documentation emitter: it renders the API
// documentation of an IR's x-idempotency contracts as one Markdown page,
// IDEMPOTENCY.md, from the templates of package templates (registered as
// emitter "docs"), and the short contract summary that `idemgen spec` writes
// into each operation's description (Summary). Both use the same partials,
// so the page and the spec never disagree.
//
// The page states, per operation, the five things a client must know (key
// carrier and format, semantics in plain words, window, volatile fields,
// the in-flight answer with Retry-After), the problem codes of package
// runtime/idem with their statuses, and how a client calls the operations
// (one key per logical call, the same key on every retry, the retry policy,
// what never to retry). Output is deterministic: it depends on the IR only
// (file names are reduced to their base name), never on maps or time.
package docs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
	"unicode"

	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/templates"
)

// FileName is the file the emitter writes: upper case like README.md and
// CHANGELOG.md, so it stands out in a repository listing, and one page per
// API, so it can be linked from the README and read on GitHub as is.
const FileName = "IDEMPOTENCY.md"

func init() {
	emitter.Register("docs", func(spec *ir.Spec, _ emitter.Options) ([]emitter.File, error) {
		data, err := Render(spec)
		if err != nil {
			return nil, err
		}
		return []emitter.File{{Path: FileName, Data: data}}, nil
	})
}

// codes are the problem codes the templates may name (function "code"):
// every code runtime/idem answers with (TestCodesAreTheRuntimes), each
// in the Errors table.
var codes = map[string]string{
	"KeyMissing":           idem.CodeKeyMissing,
	"KeyInvalid":           idem.CodeKeyInvalid,
	"KeyReused":            idem.CodeKeyReused,
	"KeyInUse":             idem.CodeKeyInUse,
	"StoreUnavailable":     idem.CodeStoreUnavailable,
	"QuotaExceeded":        idem.CodeQuotaExceeded,
	"ResponseUnavailable":  idem.CodeResponseUnavailable,
	"RequestTooLarge":      idem.CodeRequestTooLarge,
	"RequestUnreadable":    idem.CodeRequestUnreadable,
	"RecordUnreadable":     idem.CodeRecordUnreadable,
	"PrincipalUnavailable": idem.CodePrincipalUnavailable,
	"RequestEnded":         idem.CodeRequestEnded,
	"HandlerPanicked":      idem.CodeHandlerPanicked,
	"HandlerFailed":        idem.CodeHandlerFailed,
}

var (
	parseOnce sync.Once
	parsed    *template.Template
	parseErr  error
)

func tmpl() (*template.Template, error) {
	parseOnce.Do(func() {
		t := template.New("docs").Option("missingkey=error")
		t.Funcs(funcs(t))
		parsed, parseErr = t.ParseFS(templates.FS, templates.Shared, templates.Docs, templates.Summary)
	})
	return parsed, parseErr
}

func funcs(t *template.Template) template.FuncMap {
	return template.FuncMap{
		"code": func(name string) (string, error) {
			c, ok := codes[name]
			if !ok {
				return "", fmt.Errorf("unknown problem code %q", name)
			}
			return c, nil
		},
		"problemBase": func() string { return idem.DefaultProblemTypeBase },
		"inUseDetail": func() string { return idem.DetailKeyInUse },
		// alwaysStored: a header the runtime stores whatever the contract
		// lists (the replayed sentence names those apart).
		"alwaysStored": idem.AlwaysStoredHeader,
		"bodyCompare":  bodyCompare,
		"bodyMember":   bodyMember,
		"dur":          ir.FormatDuration,
		"seconds":      func(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) },
		"num":          func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
		"bytes":        formatBytes,
		"ticks":        ticks,
		"pointers":     ir.Pointers,
		"compatible":   compatible,
		"span":         func(r ir.Retry) time.Duration { return r.LongestSpan() },
		"retryOn":      retryOn,
		"title":        Title,
		"anchor":       Anchor,
		"cell":         cell,
		// include renders a named template to a string (for table cells).
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			if err := t.ExecuteTemplate(&b, name, data); err != nil {
				return "", err
			}
			return b.String(), nil
		},
	}
}

type page struct {
	Title, Version   string
	Source           string
	Overlays         []string
	Ops              []*ir.Operation
	ConflictStatuses string // of strict operations, e.g. "422" or "409, 422"; "" when none is strict
	InFlightStatuses string
	KeyAdvice        string // what key to create, by the key formats of Ops
}

// Render renders the documentation page of spec.
func Render(spec *ir.Spec) ([]byte, error) {
	t, err := tmpl()
	if err != nil {
		return nil, err
	}
	p := page{Title: spec.Title, Version: spec.Version, Source: filepath.Base(spec.Source), Ops: spec.Operations}
	if p.Title == "" {
		p.Title = "API"
	}
	for _, o := range spec.Overlays {
		p.Overlays = append(p.Overlays, filepath.Base(o))
	}
	var conflict, inflight []int
	for _, op := range spec.Operations {
		if op.Policy.Semantics == ir.Strict {
			conflict = append(conflict, op.Policy.ConflictStatus)
		}
		inflight = append(inflight, op.Policy.InFlight.Status)
	}
	p.KeyAdvice = keyAdvice(spec.Operations)
	p.ConflictStatuses = statusList(conflict)
	p.InFlightStatuses = statusList(inflight)
	if p.InFlightStatuses == "" {
		p.InFlightStatuses = "409"
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, templates.Docs, p); err != nil {
		return nil, err
	}
	return tidy(b.Bytes()), nil
}

// Summary renders the contract summary of op: the Markdown that `idemgen
// spec` writes into the operation's description, without a final newline.
func Summary(op *ir.Operation) (string, error) {
	t, err := tmpl()
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, templates.Summary, op); err != nil {
		return "", err
	}
	return strings.TrimRight(string(tidy(b.Bytes())), "\n"), nil
}

var blankLines = regexp.MustCompile(`\n{3,}`)

// tidy trims trailing white space from every line, collapses runs of blank
// lines and ends the text with exactly one newline.
func tidy(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	s := blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n")
	return []byte(strings.TrimSpace(s) + "\n")
}

// keyAdvice says what key to create for the operations ops, by their key
// formats: a version 4 (or 7) UUID when some operation requires that
// version and none the other, since every format accepts it; a UUID of its
// operation's version when both are required; otherwise any UUID (version
// 7 sorts by time, which the Go client's helper creates).
func keyAdvice(ops []*ir.Operation) string {
	n := map[string]int{}
	for _, op := range ops {
		n[op.Key.Format]++
	}
	v4, v7 := n[ir.FormatUUIDv4], n[ir.FormatUUIDv7]
	which := "some operations below refuse other versions"
	if v4+v7 == len(ops) {
		which = "the operations below refuse other versions"
	}
	switch {
	case v4 > 0 && v7 > 0:
		return "a UUID of the version its operation's Key row names, 4 or 7: another version is refused with 400 `" + idem.CodeKeyInvalid + "`"
	case v4 > 0:
		return "a version 4 UUID: " + which
	case v7 > 0:
		return "a version 7 UUID: " + which
	}
	return "a UUID; version 7 sorts by time"
}

// bodyMember names the member of the JSON request body that a key in the
// body is, ptr its JSON pointer: by its name when it is a top-level member.
func bodyMember(ptr string) string {
	if tok, ok := strings.CutPrefix(ptr, "/"); ok && !strings.Contains(tok, "/") {
		name := strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		return "the member `" + name + "` (JSON pointer `" + ptr + "`)"
	}
	return "the member at JSON pointer `" + ptr + "`"
}

func statusList(ss []int) string {
	slices.Sort(ss)
	ss = slices.Compact(ss)
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}

// Title is an operation's heading: "POST /pets — addPet", the name its
// records are kept under (ir.Operation.RecordName: the Go name when the
// operation has no operationId).
func Title(op *ir.Operation) string {
	return op.Where() + " — " + op.RecordName()
}

// Anchor returns the fragment GitHub gives a Markdown heading with text s:
// lower case, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces turned into hyphens. (Inline Markdown, which
// GitHub strips first, must not be in s.)
func Anchor(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cell makes s safe inside a Markdown table cell: one line, pipes escaped.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\r\n", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// compatible describes the fingerprint settings of other releases
// (compatible-fingerprints), each entry's lists in
// full, the entries joined by "or".
func compatible(list []ir.FingerprintSettings) string {
	or := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return ticks(l)
	}
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = "volatile " + or(ir.Pointers(e.Volatile)) + ", unordered " + or(ir.Pointers(e.Unordered)) + ", headers " + or(e.FingerprintHeaders)
	}
	return strings.Join(parts, "; or ")
}

// ticks renders a list as code spans separated by commas.
func ticks(list []string) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = "`" + strings.ReplaceAll(s, "`", "'") + "`"
	}
	return strings.Join(parts, ", ")
}

func retryOn(r ir.Retry) string {
	var parts []string
	if r.Connection {
		parts = append(parts, "connection errors")
	}
	if len(r.Statuses) > 0 {
		ss := make([]string, len(r.Statuses))
		for i, s := range r.Statuses {
			ss[i] = strconv.Itoa(s)
		}
		parts = append(parts, strings.Join(ss, ", "))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " and ")
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// bodyCompare says how the fingerprint compares the request body of op, as
// the runtime does with the media types op declares (the generated
// policy's idem.RequestSpec.MediaTypes): a body sent with a declared JSON
// media type as data, with a declared form media type field by field, any
// other byte for byte with its Content-Type's parameters (fingerprint
// version 3): a body of a declared range or other media type, of a media
// type op does not declare, and every body of an operation that declares
// no request body.
func bodyCompare(op *ir.Operation) string {
	var jsonTypes, formTypes, rawTypes []string
	multipart := false
	if op.Body != nil {
		for _, ct := range op.Body.ContentTypes {
			switch ir.MediaTypeReading(ct) {
			case ir.ReadJSON:
				jsonTypes = append(jsonTypes, ct)
			case ir.ReadForm:
				formTypes = append(formTypes, ct)
			default:
				rawTypes = append(rawTypes, ct)
				multipart = multipart || strings.HasPrefix(ir.MediaEssence(ct), "multipart/")
			}
		}
	}
	jsonPhrase := "compared as data: member order, white space, number spelling and the `Content-Type` parameters (such as `charset`) do not matter, members the schema does not declare count like the others"
	if len(op.Policy.Volatile) > 0 {
		jsonPhrase += ", volatile members are ignored"
	}
	if len(op.Policy.Unordered) > 0 {
		jsonPhrase += ", unordered arrays are compared in any order but with their duplicates (`[\"a\",\"a\",\"b\"]` is not `[\"a\",\"b\"]`)"
	}
	const formPhrase = "compared field by field: fields in any order (the values of one field in theirs), `+` and `%20` alike"
	rawPhrase := "compared byte for byte, with the parameters of its `Content-Type` (such as `charset`)"
	if multipart {
		rawPhrase += "; a multipart body's boundary is among those bytes and parameters, so a retry must resend the same bytes and `Content-Type`, boundary included"
	}
	const otherBody = "a body sent with a media type not listed here is compared byte for byte, with the parameters of its `Content-Type`"
	switch {
	case op.Body == nil:
		return "body: the operation declares none, so any body sent is compared byte for byte, with the parameters of its `Content-Type` (such as `charset`)"
	case len(formTypes)+len(rawTypes) == 0:
		return "JSON body (" + ticks(jsonTypes) + "), " + jsonPhrase + "; " + otherBody
	case len(jsonTypes)+len(rawTypes) == 0:
		return "form body (" + ticks(formTypes) + "), " + formPhrase + "; " + otherBody
	case len(jsonTypes)+len(formTypes) == 0:
		return "body (" + ticks(rawTypes) + "), " + rawPhrase
	}
	var parts []string
	if len(jsonTypes) > 0 {
		parts = append(parts, "a JSON body ("+ticks(jsonTypes)+") is "+jsonPhrase)
	}
	if len(formTypes) > 0 {
		parts = append(parts, "a form body ("+ticks(formTypes)+") is "+formPhrase)
	}
	if len(rawTypes) > 0 {
		parts = append(parts, "any other body ("+ticks(rawTypes)+", or a media type not listed here) is "+rawPhrase)
	} else {
		parts = append(parts, otherBody)
	}
	return "body, by its content type: " + strings.Join(parts, "; ")
}
