// Package load reads an OpenAPI 3.0 or 3.1 spec (YAML or JSON, with external
// $refs), applies OpenAPI Overlay 1.0 documents to it, and loads the result
// with kin-openapi, keeping the YAML node trees beside the model so that any
// node can be located (file, line, column), including the nodes an overlay
// put there, which point into the overlay.
//
// kin-openapi's strict Validate is never required: real specs often fail it
// (bad examples, extra sibling fields) and still describe their API.
package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/speakeasy-api/openapi/overlay"
	yaml4 "go.yaml.in/yaml/v4"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/specfile"
)

// Document is a loaded spec.
type Document struct {
	Path     string      // the spec file as given
	Overlays []string    // overlay files applied, in order
	T        *openapi3.T // kin-openapi's model, $refs resolved
	Root     *yaml.Node  // the spec's root mapping, overlays applied
	// HeadComment and FootComment are the comments of the spec file's
	// YAML document, before and after Root.
	HeadComment, FootComment string
	// Format is the spec file's format (specfile.Detect, before the
	// overlays), with Options.Format only.
	Format specfile.Format
	files  map[string]*yaml.Node // other files reached through $ref, by cleaned path
	origin map[*yaml.Node]ir.Pos // nodes an overlay put there: their position in the overlay
}

// Options configure Load.
type Options struct {
	Overlays []string // overlay files, applied in order
	// Format: detect the file's format (Document.Format), to write the
	// document back as the file is written.
	Format bool
	// RemoteTimeout bounds the reading of each remote document a $ref
	// names (http:// or https://), from the request to the end of the
	// body, so that a server that never answers fails the load instead of
	// hanging idemgen (and a build that runs it) forever. Zero is
	// DefaultRemoteTimeout.
	RemoteTimeout time.Duration
	// RemoteMaxBytes bounds the size of each remote document a $ref
	// names: a larger one fails the load. Zero is DefaultRemoteMaxBytes.
	RemoteMaxBytes int
}

// DefaultRemoteTimeout is Options.RemoteTimeout when it is zero.
const DefaultRemoteTimeout = 30 * time.Second

// Load reads the spec at path, applies the overlays and loads the result.
// It returns a nil Document when the spec cannot be loaded at all; the
// diagnostics say why (with a position when one is known) and also carry
// overlay warnings such as an action whose target matched nothing.
func Load(path string, opts Options) (*Document, diag.List) {
	var diags diag.List
	d := &Document{Path: path, Overlays: opts.Overlays, files: map[string]*yaml.Node{}, origin: map[*yaml.Node]ir.Pos{}}
	data, err := os.ReadFile(path)
	if err != nil {
		diags.Errorf(ir.Pos{File: path}, "load-error", "cannot read the spec: %v", unwrapPath(err))
		return nil, diags
	}
	doc, err := parseDocument(data)
	if err != nil {
		pos, msg := parseErr(path, err, data)
		diags.Errorf(pos, "load-error", "cannot parse the spec: %s", msg)
		return nil, diags
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		diags.Errorf(ir.Pos{File: path, Line: root.Line, Col: root.Column}, "load-error", "the spec is not a YAML or JSON object")
		return nil, diags
	}
	if vd := checkVersion(root, path); len(vd) > 0 {
		return nil, vd
	}
	d.Root = root
	d.HeadComment, d.FootComment = doc.HeadComment, doc.FootComment
	d.files[filepath.Clean(path)] = root
	if opts.Format {
		d.Format = specfile.Detect(data, doc)
	}
	if dups := d.duplicateKeys(root, path); len(dups) > 0 {
		return nil, dups
	}

	for _, ovPath := range opts.Overlays {
		diags = append(diags, d.applyOverlay(ovPath)...)
	}
	if diags.HasErrors() {
		return nil, diags
	}

	loader := openapi3.NewLoader()
	loader.IncludeOrigin = true
	loader.IsExternalRefsAllowed = true
	// A cache of this load only: kin-openapi's default reader caches every
	// document it read for the life of the process, so that a spec (or a
	// document it refers to) loaded again after an edit, by a program that
	// runs idemgen in-process (tests, a watcher, cli.Main called twice),
	// came back as it was.
	var refDiags diag.List
	cached := openapi3.URIMapCache(d.readRefs(openapi3.ReadFromURIs(readRemote(opts), openapi3.ReadFromFile), &refDiags))
	// The document kin-openapi asked for last: the one it was reading
	// when it failed to unmarshal one.
	var last string
	loader.ReadFromURIFunc = func(l *openapi3.Loader, loc *url.URL) ([]byte, error) {
		last = refFile(loc)
		return cached(l, loc)
	}
	var t *openapi3.T
	if len(opts.Overlays) == 0 {
		t, err = loader.LoadFromFile(path)
	} else {
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err = enc.Encode(root); err == nil {
			t, err = loader.LoadFromDataWithPath(buf.Bytes(), &url.URL{Path: filepath.ToSlash(path)})
		}
	}
	if err != nil {
		if len(refDiags) > 0 {
			return nil, append(diags, refDiags...)
		}
		diags.Errorf(d.kinErrPos(err, last), "load-error", "cannot load the spec: %v", err)
		return nil, diags
	}
	if t.Paths == nil {
		t.Paths = openapi3.NewPaths()
	}
	d.T = t
	return d, diags
}

var openapiVersion = regexp.MustCompile(`^3\.(\d+)(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?$`)

// checkVersion refuses a spec, whose root mapping is root, that is not an
// OpenAPI 3.0 or 3.1 document, at its version field (the root when it has
// none): Swagger 2.0 (kin-openapi would read its paths as OpenAPI 3's,
// and idemgen spec would write a hybrid of the two), a spec without an
// openapi field (read as one without operations), or one whose openapi is
// no 3.x version. OpenAPI 3.2 and later 3.x are not supported yet, as
// docs/contract.md promises 3.0 and 3.1 only: an error of kind
// unsupported, which says how to go on when the spec uses nothing that
// 3.2 added. An unquoted version YAML reads as a number (openapi: 3.1)
// is refused at the field, saying to quote it.
func checkVersion(root *yaml.Node, path string) diag.List {
	var diags diag.List
	at := func(n *yaml.Node, ptr string) ir.Pos {
		return ir.Pos{File: path, Line: n.Line, Col: n.Column, Pointer: ptr}
	}
	if sw := mapValue(root, "swagger"); sw != nil {
		v := "2.0"
		if sw.Kind == yaml.ScalarNode && sw.Value != "" {
			v = sw.Value
		}
		diags.Errorf(at(sw, "/swagger"), "load-error", "Swagger %s is not supported: convert it to OpenAPI 3 (e.g. with swagger2openapi)", v)
		return diags
	}
	v := mapValue(root, "openapi")
	if v == nil {
		diags.Errorf(at(root, ""), "load-error", "the spec has no openapi field: idemgen reads OpenAPI 3.0 and 3.1 documents, which start with openapi: 3.0.3 or 3.1.1 (say)")
		return diags
	}
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!float" || v.ShortTag() == "!!int") {
		// openapi: 3.1 unquoted is a float, which kin-openapi cannot read
		// into its string field (cannot unmarshal !!float, at 1:1).
		want := "3.1.0"
		if openapiVersion.MatchString(v.Value) && !strings.Contains(strings.TrimPrefix(v.Value, "3."), ".") {
			want = v.Value + ".0"
		}
		quoted := "openapi: '" + want + "'"
		if root.Style&yaml.FlowStyle != 0 {
			quoted = `"openapi": "` + want + `"`
		}
		diags.Errorf(at(v, "/openapi"), "load-error", "openapi: %s is read as a number: quote it (%s)", v.Value, quoted)
		return diags
	}
	m := openapiVersion.FindStringSubmatch(v.Value)
	if v.Kind != yaml.ScalarNode || m == nil {
		what := strconv.Quote(v.Value)
		if v.Kind != yaml.ScalarNode {
			what = "not a version string"
		}
		diags.Errorf(at(v, "/openapi"), "load-error", "openapi: %s is no OpenAPI 3 version: idemgen reads OpenAPI 3.0 and 3.1 documents (openapi: 3.0.3 or 3.1.1, say)", what)
		return diags
	}
	if minor, _ := strconv.Atoi(m[1]); minor >= 2 {
		diags.Unsupportedf(at(v, "/openapi"), "load-error", "OpenAPI %s: idemgen reads OpenAPI 3.0 and 3.1 only; a spec that uses nothing OpenAPI 3.%d added can declare openapi: 3.1.1", v.Value, minor)
	}
	return diags
}

// parseYAML parses YAML or JSON into its root node.
func parseYAML(data []byte) (*yaml.Node, error) {
	doc, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	return doc.Content[0], nil
}

// parseDocument parses YAML or JSON into a document node with one child,
// the root (a null scalar for an empty document).
//
// A file holds one document: content after it (a second YAML document,
// or anything but white space after a JSON value) is an error, a
// *trailingError at the place it starts. The YAML parser read only the
// first document and dropped the rest silently.
func parseDocument(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(specfile.LF(data), &doc); err != nil {
		return nil, err
	}
	if err := trailing(data); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Line: 1, Column: 1}}}, nil
	}
	return &doc, nil
}

// trailingError is content after a file's first document: where it
// starts (line and column, in characters) and what it is.
type trailingError struct {
	line, col int
	msg       string
}

func (e *trailingError) Error() string { return e.msg }

// trailing returns a *trailingError when data, which the YAML parser
// reads a first document of, holds more than that document: a second
// YAML document (at its start, a --- line) or, in a document written as
// JSON whose first value encoding/json reads, anything but white space
// after that value (at its first character, with encoding/json's
// message). Other content the YAML parser refuses after the first
// document is reported at the line its message names.
func trailing(data []byte) error {
	lf := specfile.LF(data)
	dec := yaml.NewDecoder(bytes.NewReader(lf))
	var first, second yaml.Node
	if dec.Decode(&first) != nil {
		return nil
	}
	err := dec.Decode(&second)
	if err == io.EOF {
		return nil
	}
	if specfile.IsJSON(data) {
		bom := 0
		if bytes.HasPrefix(data, []byte("\ufeff")) {
			bom = len("\ufeff")
		}
		jd := json.NewDecoder(bytes.NewReader(data[bom:]))
		var v any
		if jd.Decode(&v) == nil {
			off := bom + int(jd.InputOffset())
			rest := data[off:]
			if i := bytes.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) }); i >= 0 {
				off += i
				r, _ := utf8.DecodeRune(data[off:])
				line, col := lineCol(data, off, bom)
				return &trailingError{line, col, "JSON: invalid character " + strconv.QuoteRune(r) + " after top-level value"}
			}
		}
	}
	if err == nil {
		line, col := max(second.Line, 1), max(second.Column, 1)
		return &trailingError{line, col, "a second document starts here: a file holds one document"}
	}
	// go.yaml.in/yaml/v4 names the column (yaml.v3 the line only, or none).
	d4 := yaml4.NewDecoder(bytes.NewReader(lf))
	for range 2 {
		var n yaml4.Node
		var le *yaml4.LoadError
		if e4 := d4.Decode(&n); errors.As(e4, &le) && le.Mark.Line > 0 {
			return &trailingError{le.Mark.Line, max(le.Mark.Column, 1), "content after the document: " + le.Message}
		} else if e4 != nil {
			break
		}
	}
	p := yamlErrPos("", err, nil)
	return &trailingError{max(p.Line, 1), 1, "content after the document: " + cleanYAMLErr(err)}
}

// lineCol is the line and column (in characters) of the byte at off in
// data, which starts with a byte order mark of bom bytes (not a column).
func lineCol(data []byte, off, bom int) (int, int) {
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	col := utf8.RuneCount(data[start:off]) + 1
	if start == 0 && bom > 0 {
		col--
	}
	return line, col
}

// parseErr is the position and message of err, parseDocument's (or, for
// an overlay, parseYAML's) error on data (the file file). The YAML
// parser's line is often the one before the mistake (a ",," found at the
// end of the line above): when go.yaml.in/yaml/v4, parsing data again,
// fails with the same problem, its position (line and column) is taken,
// and the message names that line (and the line of the construct being
// parsed when that is another, as an unclosed flow mapping's). For a document written as JSON (its
// first character other than white space opens an object or array,
// whatever its name) that encoding/json reads as far as the YAML
// parser's mistake at least (to the line before it, or further), the
// position and message are encoding/json's: the YAML parser's message
// about JSON speaks of YAML nodes. YAML in flow style (an unquoted key, a
// comment), or JSON the YAML parser refuses sooner, keeps the YAML error,
// as does a document JSON reads without an error.
func parseErr(file string, err error, data []byte) (ir.Pos, string) {
	if te, ok := err.(*trailingError); ok {
		return ir.Pos{File: file, Line: te.line, Col: te.col}, te.msg
	}
	pos, msg := yamlErrPos(file, err, data), cleanYAMLErr(err)
	var le *yaml4.LoadError
	var n yaml4.Node
	if e4 := yaml4.Unmarshal(specfile.LF(data), &n); errors.As(e4, &le) && le.Mark.Line > 0 &&
		yamlLinePrefix.ReplaceAllString(msg, "") == le.Message {
		pos = ir.Pos{File: file, Line: le.Mark.Line, Col: max(le.Mark.Column, 1)}
		if yamlLinePrefix.MatchString(msg) {
			msg = "line " + strconv.Itoa(le.Mark.Line) + ": " + le.Message
		}
		if le.ContextMsg != "" && le.ContextMark.Line > 0 && le.ContextMark.Line != le.Mark.Line {
			// An unclosed { is found where the next key starts.
			msg += " (" + le.ContextMsg + " at line " + strconv.Itoa(le.ContextMark.Line) + ")"
		}
	}
	if specfile.IsJSON(data) {
		if jpos, jmsg, ok := jsonErr(file, data); ok && (pos.Line == 0 || jpos.Line >= pos.Line-1) {
			return jpos, jmsg
		}
	}
	return pos, msg
}

var yamlLinePrefix = regexp.MustCompile(`^line \d+: `)

// jsonErr decodes data as JSON and, when that fails on a syntax error,
// returns its position (the line and column, in characters, of the byte
// the decoder stopped at) and message.
func jsonErr(file string, data []byte) (ir.Pos, string, bool) {
	bom := 0
	if bytes.HasPrefix(data, []byte("\ufeff")) {
		bom = len("\ufeff") // YAML allows a byte order mark, JSON decoders not
	}
	var v any
	var se *json.SyntaxError
	if err := json.Unmarshal(data[bom:], &v); !errors.As(err, &se) {
		return ir.Pos{}, "", false
	}
	// Offset counts the bytes read, the offending one included (none
	// at the end of the input: the position is then the end).
	off := bom + int(se.Offset)
	if off > bom && off <= len(data) && se.Offset > 0 && !strings.HasPrefix(se.Error(), "unexpected end") {
		off--
	}
	off = min(off, len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	col := utf8.RuneCount(data[start:off]) + 1
	if start == 0 && bom > 0 {
		col-- // the byte order mark is no column
	}
	return ir.Pos{File: file, Line: line, Col: col}, "JSON: " + se.Error(), true
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

var unknownAnchor = regexp.MustCompile(`unknown anchor '([^']*)' referenced`)

// yamlErrPos is the position of a YAML error: the line the message names.
// gopkg.in/yaml.v3 names none for some errors (an unknown anchor); data,
// when given, is then parsed again with go.yaml.in/yaml/v4, which does,
// and an unknown anchor's column is that of its alias (*name) on the line.
func yamlErrPos(file string, err error, data []byte) ir.Pos {
	p := ir.Pos{File: file}
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil && data != nil {
		var n yaml4.Node
		if err4 := yaml4.Unmarshal(data, &n); err4 != nil {
			m = yamlLine.FindStringSubmatch(err4.Error())
		}
	}
	if m == nil {
		return p
	}
	p.Line, _ = strconv.Atoi(m[1])
	p.Col = 1
	if a := unknownAnchor.FindStringSubmatch(err.Error()); a != nil && data != nil {
		lines := strings.Split(string(data), "\n")
		if p.Line <= len(lines) {
			if i := strings.Index(lines[p.Line-1], "*"+a[1]); i >= 0 {
				p.Col = utf8.RuneCountInString(lines[p.Line-1][:i]) + 1
			}
		}
	}
	return p
}

// duplicateKeys returns a load-error at each mapping key of the tree
// root, read from file, that is written a second time in its mapping,
// where it is written. YAML refuses such a key and the YAML parser that
// reads the node trees lets it through; a JSON decoder keeps the last one
// silently, so that kin-openapi's model and the node trees idemgen reads
// (x-idempotency among them) would describe different members.
func (d *Document) duplicateKeys(root *yaml.Node, file string) diag.List {
	var diags diag.List
	var walk func(n *yaml.Node, ptr string)
	walk = func(n *yaml.Node, ptr string) {
		if n.Kind == yaml.MappingNode {
			// By text, whatever the tag: 200 and '200' are one member of
			// the JSON object kin-openapi reads (which keeps one of them).
			seen := map[string]*yaml.Node{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
					continue
				}
				kp := ptr + "/" + Escape(k.Value)
				first, dup := seen[k.Value]
				if !dup {
					seen[k.Value] = k
					continue
				}
				at, fp := d.Pos(k, file, kp), d.Pos(first, file, kp)
				where := fmt.Sprintf("line %d", fp.Line)
				if fp.File != at.File {
					where = fmt.Sprintf("%s:%d", fp.File, fp.Line)
				}
				diags.Errorf(at, "load-error", "mapping key %q already defined at %s", k.Value, where)
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], ptr+"/"+Escape(n.Content[i].Value))
			}
		}
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				walk(c, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(root, "")
	return diags
}

// readRefs wraps next, the reader of the documents kin-openapi loads, so
// that each document other than the spec itself (a file, or a remote
// document, that a $ref reaches) is parsed here too, once: its node tree is
// kept for Lookup, and its YAML errors and duplicate keys are reported
// (to *diags) with its own path, not the spec's, and refused, as the
// spec's are.
func (d *Document) readRefs(next openapi3.ReadFromURIFunc, diags *diag.List) openapi3.ReadFromURIFunc {
	done := map[string]bool{}
	return func(loader *openapi3.Loader, loc *url.URL) ([]byte, error) {
		data, err := next(loader, loc)
		if err != nil {
			return data, err
		}
		file := refFile(loc)
		if file == filepath.Clean(d.Path) {
			return data, nil
		}
		if done[file] {
			return data, nil
		}
		done[file] = true
		doc, perr := parseDocument(data)
		if perr != nil {
			pos, msg := parseErr(file, perr, data)
			diags.Errorf(pos, "load-error", "cannot parse this document, which a $ref reaches: %s", msg)
			return nil, fmt.Errorf("%s: %w", file, perr)
		}
		root := doc.Content[0]
		if _, ok := d.files[file]; !ok {
			d.files[file] = root
		}
		if dups := d.duplicateKeys(root, file); len(dups) > 0 {
			*diags = append(*diags, dups...)
			return nil, fmt.Errorf("%s: duplicate mapping keys", file)
		}
		return data, nil
	}
}

// refFile is the file (a cleaned path), or the remote document (its URL),
// at loc.
func refFile(loc *url.URL) string {
	if loc.Scheme == "" || loc.Scheme == "file" {
		return filepath.Clean(filepath.FromSlash(loc.Path))
	}
	return loc.String()
}

// kinPointer finds the JSON pointer a kin-openapi error names (bad data in
// "#/a", failed to resolve "a" in fragment in URI: "#/a").
var kinPointer = regexp.MustCompile(`"#(/[^"]*)"`)

// kinRefErr finds the $ref a kin-openapi error could not resolve (error
// resolving reference "paths/missing.yaml#/a": open …: no such file).
var kinRefErr = regexp.MustCompile(`^error resolving reference "([^"]+)"`)

// kinErrPos returns where to report err, the error kin-openapi's load
// returned; last is the document it read last. kin-openapi's errors do
// not name the document they are about, and a line in them is one of the
// document being unmarshalled: a pointer the error names is found among
// the $refs of the documents read (at the node it names, or at the $ref
// when it names none), the same single place in all of them; a line of an
// unmarshal error is one of last (a file or a remote document's URL).
// Otherwise the spec, at the line an error about it gives.
func (d *Document) kinErrPos(err error, last string) ir.Pos {
	msg := err.Error()
	if m := kinPointer.FindStringSubmatch(msg); m != nil {
		if p, ok := d.refPointerPos(m[1]); ok {
			return p
		}
		return ir.Pos{File: d.Path}
	}
	if m := kinRefErr.FindStringSubmatch(msg); m != nil {
		if p, ok := d.refValuePos(m[1]); ok {
			return p
		}
	}
	if strings.HasPrefix(msg, "failed to unmarshal data") && last != "" && last != filepath.Clean(d.Path) {
		if p := yamlErrPos(last, err, nil); p.Line > 0 {
			return p
		}
		return ir.Pos{File: last, Line: 1, Col: 1}
	}
	return yamlErrPos(d.Path, err, nil)
}

// refPointerPos returns the one place the $refs of the documents read
// whose fragment is ptr lead to: the node they name, or the $ref itself
// when that node is not found. ok is false when there is none, or more
// than one.
func (d *Document) refPointerPos(ptr string) (ir.Pos, bool) {
	var found []ir.Pos
	d.eachRef(func(at string, v *yaml.Node) {
		_, frag, ok := strings.Cut(v.Value, "#")
		if !ok {
			return
		}
		if u, err := url.PathUnescape(frag); err == nil {
			frag = u
		}
		if frag != ptr {
			return
		}
		p := d.Pos(v, at, "")
		if t := d.resolveRef(at, v.Value, 0); t.Node != nil {
			p = d.NodePos(t)
		}
		if !slices.Contains(found, p) {
			found = append(found, p)
		}
	})
	if len(found) != 1 {
		return ir.Pos{}, false
	}
	return found[0], true
}

// refValuePos returns the one place a $ref whose value is ref is written
// in the documents read (the $ref kin-openapi could not resolve: a file
// that does not exist). ok is false when there is none, or more than one.
func (d *Document) refValuePos(ref string) (ir.Pos, bool) {
	var found []ir.Pos
	d.eachRef(func(at string, v *yaml.Node) {
		if v.Value == ref {
			found = append(found, d.Pos(v, at, ""))
		}
	})
	if len(found) != 1 {
		return ir.Pos{}, false
	}
	return found[0], true
}

// eachRef calls fn with every $ref value of the documents read, file by
// file in name order, and the file as diagnostics name it.
func (d *Document) eachRef(fn func(at string, v *yaml.Node)) {
	for _, file := range slices.Sorted(maps.Keys(d.files)) {
		at := file
		if file == filepath.Clean(d.Path) {
			at = d.Path // as the spec's other diagnostics name it
		}
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n == nil {
				return
			}
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if k, v := n.Content[i], n.Content[i+1]; k.Value == "$ref" && v.Kind == yaml.ScalarNode {
						fn(at, v)
					}
				}
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(d.files[file])
	}
}

func cleanYAMLErr(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// cleanOverlayWarning makes an overlay library warning one line, as every
// diagnostic is (in the JSON format's message too, which Diagnostic.String
// does not reach): it drops the "update action (1 / 1) target=…: " prefix
// (the diagnostic's position is the action's target), the echo of the
// target and the caret line under it, and joins the rest with spaces, with
// a ; where a line ended unpunctuated.
func cleanOverlayWarning(w, target string) string {
	if head, rest, ok := strings.Cut(w, " target="+target+": "); ok && strings.Contains(head, " action (") {
		w = rest
	}
	var parts []string
	for line := range strings.SplitSeq(w, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == target || strings.Trim(line, "^~ ") == "" {
			continue
		}
		if n := len(parts); n > 0 && !strings.ContainsAny(parts[n-1][len(parts[n-1])-1:], ".:;!?") {
			parts[n-1] += ";"
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, " ")
}

// marker tags the nodes of an overlay's updates through kin of comment that
// the overlay library copies when it clones a node (it drops positions), so
// the nodes it inserts can be traced back to the overlay.
const marker = "\x00idemgen-pos:"

func (d *Document) applyOverlay(ovPath string) diag.List {
	var diags diag.List
	data, err := os.ReadFile(ovPath)
	if err != nil {
		diags.Errorf(ir.Pos{File: ovPath}, "overlay-error", "cannot read the overlay: %v", unwrapPath(err))
		return diags
	}
	ovRoot, err := parseYAML(data)
	if err != nil {
		pos, msg := parseErr(ovPath, err, data)
		diags.Errorf(pos, "overlay-error", "cannot parse the overlay: %s", msg)
		return diags
	}
	var ov overlay.Overlay
	if err := ovRoot.Decode(&ov); err != nil {
		diags.Errorf(yamlErrPos(ovPath, err, nil), "overlay-error", "not an overlay document: %v", cleanYAMLErr(err))
		return diags
	}
	at := func(ptr string) ir.Pos {
		n, _, p := lookupIn(ovRoot, ptr)
		if n == nil {
			return ir.Pos{File: ovPath, Line: 1, Col: 1}
		}
		return ir.Pos{File: ovPath, Line: n.Line, Col: n.Column, Pointer: p}
	}
	if err := ov.Validate(); err != nil {
		var verrs overlay.ValidationErrors
		if errors.As(err, &verrs) {
			for _, e := range verrs {
				diags.Errorf(at(""), "overlay-error", "invalid overlay: %v", e)
			}
		} else {
			diags.Errorf(at(""), "overlay-error", "invalid overlay: %v", err)
		}
		return diags
	}
	var positions []ir.Pos
	for i := range ov.Actions {
		base := fmt.Sprintf("/actions/%d/update", i)
		mark(&ov.Actions[i].Update, base, ovPath, &positions)
	}
	for i, a := range ov.Actions {
		one := ov
		one.Actions = []overlay.Action{a}
		target := at(fmt.Sprintf("/actions/%d/target", i))
		legacy, rfc, same, compared := selections(one, d.Root, a.Target)
		warnings, err := one.ApplyToStrict(d.Root)
		switch {
		case err != nil && strings.Contains(err.Error(), "did not match any targets"):
			diags.Warnf(target, "overlay-no-match", "overlay target %s matches nothing in the spec%s", a.Target, suggestTarget(d.Root, a.Target))
		case err != nil:
			diags.Errorf(target, "overlay-error", "cannot apply overlay action: %v", err)
		}
		for _, w := range warnings {
			if strings.Contains(w, "does nothing") {
				continue // an update identical to the spec: harmless
			}
			if strings.HasPrefix(w, legacyFilterWarning) && compared {
				if same {
					// Both JSONPath implementations select the same
					// nodes: the extension would change nothing here.
					continue
				}
				w = fmt.Sprintf("the target's filter expression selects %s with the legacy JSONPath implementation that an overlay: 1.0.0 document gets without `x-speakeasy-jsonpath: rfc9535` (the action changed those, as oapi-codegen's overlay does) and %d with RFC 9535's (that extension at the overlay's root, or overlay: 1.1.0): write the target for RFC 9535 and add the extension", english.Count(legacy, "node"), rfc)
			}
			diags.Warnf(target, "overlay-warning", "%s", cleanOverlayWarning(w, a.Target))
		}
	}
	d.unmark(d.Root, positions)
	return diags
}

// legacyFilterWarning begins the overlay library's warning that an
// overlay without x-speakeasy-jsonpath: rfc9535 has a filter expression,
// which it evaluates with its legacy JSONPath implementation.
const legacyFilterWarning = "overlay has a filter expression but lacks"

// selections returns how many nodes of root the target selects under the
// legacy JSONPath implementation and under RFC 9535, and whether they are
// the same nodes, when ov (one action) uses the legacy one and target has
// a filter expression (compared: false otherwise, or when either cannot
// parse it). The library warns about any
// such target; applyOverlay drops the warning when the two select the
// same nodes (a filter on a parameter's name, as idemgen's hints and the
// overlay playground write) and says how they differ otherwise. Counted
// before the action applies, which may change what a filter selects.
func selections(ov overlay.Overlay, root *yaml.Node, target string) (legacy, rfc int, same, compared bool) {
	if ov.UsesRFC9535() || !strings.Contains(target, "?") {
		return 0, 0, false, false
	}
	lp, err := ov.NewPath(target, nil)
	if err != nil {
		return 0, 0, false, false
	}
	ov.JSONPathVersion = overlay.JSONPathRFC9535
	rp, err := ov.NewPath(target, nil)
	if err != nil {
		return 0, 0, false, false
	}
	ln, rn := lp.Query(root), rp.Query(root)
	same = len(ln) == len(rn) && !slices.ContainsFunc(ln, func(n *yaml.Node) bool { return !slices.Contains(rn, n) })
	return len(ln), len(rn), same, true
}

// pathTargetRE matches an overlay target that names a path item or an
// operation: $.paths['/pets'].post (or "/pets"), and what follows.
var pathTargetRE = regexp.MustCompile(`^\$\.paths\[(?:'([^']*)'|"([^"]*)")\](?:\.([A-Za-z]+))?(.*)$`)

// suggestTarget returns " (did you mean T?)" for a target of the form
// pathTargetRE matches that names no path (or operation) of the spec whose
// root is root, T the nearest that does; "" otherwise. When the path is
// not in the spec, T names the nearest path (diag.Suggest on the paths
// alone, so that a long target is compared by what differs), among those
// that have the target's method if it names one. When the path is there
// but its method is not, T names one of the path's methods a contract may
// target (contractMethods): the nearest, or the only one. When the path
// and its method are there, a deeper part of the target matches nothing:
// no suggestion (T would be the target itself).
func suggestTarget(root *yaml.Node, target string) string {
	m := pathTargetRE.FindStringSubmatch(target)
	if m == nil || root == nil || root.Kind != yaml.MappingNode {
		return ""
	}
	q, path, field, rest := "'", m[1], m[3], m[4]
	if m[1] == "" && m[2] != "" {
		q, path = `"`, m[2]
	}
	paths := mapValue(root, "paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return ""
	}
	method := ""
	if ir.HTTPMethod(field) {
		method = field
	}
	suggest := func(p, f string) string {
		t := "$.paths[" + q + p + q + "]"
		if f != "" {
			t += "." + f
		}
		if t += rest; t == target {
			return ""
		}
		return " (did you mean " + t + "?)"
	}
	if item := mapValue(paths, path); item != nil {
		// The path is there.
		if field == "" || item.Kind != yaml.MappingNode {
			return ""
		}
		var present []string
		ikv := yamlmerge.Pairs(item)
		for j := 0; j+1 < len(ikv); j += 2 {
			if ikv[j].Value == field {
				return "" // a deeper part does not match
			}
			if slices.Contains(contractMethods, ikv[j].Value) {
				present = append(present, ikv[j].Value)
			}
		}
		if s := diag.Suggest(field, present); s != "" {
			return suggest(path, s)
		}
		if method != "" && len(present) == 1 {
			return suggest(path, present[0])
		}
		return ""
	}
	// The path is not there: the nearest that is (with the method).
	var cands []string
	pkv := yamlmerge.Pairs(paths)
	for i := 0; i+1 < len(pkv); i += 2 {
		if method != "" && mapValue(pkv[i+1], method) == nil {
			continue
		}
		cands = append(cands, pkv[i].Value)
	}
	if s := diag.Suggest(path, cands); s != "" {
		return suggest(s, field)
	}
	return ""
}

// contractMethods are the methods whose operations an x-idempotency
// contract may target, as path item keys (the others are safe): compile
// asks ContractMethod, the overlay-no-match suggestion looks among them.
var contractMethods = []string{"post", "patch", "put", "delete"}

// ContractMethod reports whether an x-idempotency contract may target an
// operation of the HTTP method m (any case): an unsafe method.
func ContractMethod(m string) bool {
	return slices.Contains(contractMethods, strings.ToLower(m))
}

// IdempotentMethod reports whether the HTTP method m (any case) is
// idempotent by HTTP semantics among those a contract may target: PUT and
// DELETE. check warns [put-delete] on a contract there; init proposes no
// apply-to for them.
func IdempotentMethod(m string) bool {
	return strings.EqualFold(m, "PUT") || strings.EqualFold(m, "DELETE")
}

// mark appends a position marker to every node's line comment.
func mark(n *yaml.Node, ptr, file string, positions *[]ir.Pos) {
	if n == nil {
		return
	}
	*positions = append(*positions, ir.Pos{File: file, Line: n.Line, Col: n.Column, Pointer: ptr})
	n.LineComment += marker + strconv.Itoa(len(*positions)-1)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			mark(n.Content[i], ptr, file, positions)
			mark(n.Content[i+1], ptr+"/"+Escape(n.Content[i].Value), file, positions)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			mark(c, ptr+"/"+strconv.Itoa(i), file, positions)
		}
	}
}

// unmark strips the markers from the tree and records where the marked
// nodes came from.
func (d *Document) unmark(n *yaml.Node, positions []ir.Pos) {
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		if i := strings.Index(n.LineComment, marker); i >= 0 {
			id, _ := strconv.Atoi(n.LineComment[i+len(marker):])
			n.LineComment = n.LineComment[:i]
			if id >= 0 && id < len(positions) {
				p := positions[id]
				n.Line, n.Column = p.Line, p.Col
				d.origin[n] = p
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
}

// Pos returns the position of node n, written in file at pointer ptr: in
// the overlay when an overlay put it there, in file otherwise.
func (d *Document) Pos(n *yaml.Node, file, ptr string) ir.Pos {
	if n == nil {
		return ir.Pos{File: file, Pointer: ptr}
	}
	if p, ok := d.origin[n]; ok {
		return p
	}
	return ir.Pos{File: file, Line: n.Line, Col: n.Column, Pointer: ptr}
}

// KeyPos returns the position of key in the mapping n (after its $refs):
// where the key itself is written (`post:`), which a diagnostic about the
// whole member points at, rather than its value's first field. It is the
// value's position (LookupFrom, NodePos) when an overlay put the value
// there or the key is not found.
func (d *Document) KeyPos(n Node, key string) ir.Pos {
	v := d.LookupFrom(n, "/"+Escape(key))
	m := d.Deref(n)
	if v.Node == nil || m.Node == nil || m.Kind != yaml.MappingNode {
		return d.NodePos(v)
	}
	if _, ok := d.origin[v.Node]; ok {
		return d.NodePos(v)
	}
	kv := yamlmerge.Pairs(m.Node)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i].Value == key && kv[i+1] == v.Node {
			return ir.Pos{File: v.File, Line: kv[i].Line, Col: kv[i].Column, Pointer: v.Pointer}
		}
	}
	return d.NodePos(v)
}

// Node is a YAML node with the file it was read from and its JSON pointer there.
type Node struct {
	*yaml.Node
	File    string
	Pointer string
}

// Pos returns n's position (see Document.Pos).
func (d *Document) NodePos(n Node) ir.Pos { return d.Pos(n.Node, n.File, n.Pointer) }

// Lookup finds the node at JSON pointer ptr of the spec, following $refs
// (local and to other files) where the pointer goes through one. It returns
// a Node with a nil *yaml.Node when there is none.
func (d *Document) Lookup(ptr string) Node {
	return d.LookupFrom(Node{Node: d.Root, File: d.Path}, ptr)
}

// LookupFrom finds the node at ptr below from, following $refs.
func (d *Document) LookupFrom(from Node, ptr string) Node {
	if ptr == "" {
		return from
	}
	cur := from
	for _, tok := range splitPointer(ptr) {
		cur = d.child(cur, tok, 0)
		if cur.Node == nil {
			return cur
		}
	}
	return cur
}

func (d *Document) child(n Node, tok string, depth int) Node {
	if n.Node == nil || depth > 32 {
		return Node{}
	}
	y := yamlmerge.Unalias(n.Node)
	switch y.Kind {
	case yaml.MappingNode:
		var ref *yaml.Node
		kv := yamlmerge.Pairs(y) // merge keys expanded
		for i := 0; i+1 < len(kv); i += 2 {
			k := kv[i].Value
			if k == tok {
				return Node{Node: kv[i+1], File: n.File, Pointer: n.Pointer + "/" + Escape(tok)}
			}
			if k == "$ref" {
				ref = kv[i+1]
			}
		}
		if ref != nil && ref.Kind == yaml.ScalarNode {
			target := d.resolveRef(n.File, ref.Value, depth)
			return d.child(target, tok, depth+1)
		}
	case yaml.SequenceNode:
		i, err := strconv.Atoi(tok)
		if err == nil && i >= 0 && i < len(y.Content) {
			return Node{Node: y.Content[i], File: n.File, Pointer: n.Pointer + "/" + tok}
		}
	}
	return Node{}
}

// Deref follows n while it is a {$ref: ...} mapping.
func (d *Document) Deref(n Node) Node {
	for depth := 0; n.Node != nil && depth < 32; depth++ {
		ref := mapValue(n.Node, "$ref")
		if ref == nil || ref.Kind != yaml.ScalarNode {
			return n
		}
		n = d.resolveRef(n.File, ref.Value, depth)
	}
	return n
}

func (d *Document) resolveRef(file, ref string, depth int) Node {
	filePart, frag, _ := strings.Cut(ref, "#")
	target := file
	if filePart != "" {
		if strings.Contains(filePart, "://") {
			return Node{} // remote documents: positions unknown
		}
		target = filepath.Join(filepath.Dir(file), filepath.FromSlash(filePart))
	}
	root := d.file(target)
	if root == nil {
		return Node{}
	}
	cur := Node{Node: root, File: target}
	if frag == "" {
		return cur
	}
	for _, tok := range splitPointer(frag) {
		cur = d.child(cur, tok, depth+1)
		if cur.Node == nil {
			return cur
		}
	}
	return cur
}

func (d *Document) file(path string) *yaml.Node {
	path = filepath.Clean(path)
	if n, ok := d.files[path]; ok {
		return n
	}
	data, err := os.ReadFile(path)
	var root *yaml.Node
	if err == nil {
		root, _ = parseYAML(data)
	}
	d.files[path] = root
	return root
}

func lookupIn(root *yaml.Node, ptr string) (*yaml.Node, string, string) {
	d := &Document{files: map[string]*yaml.Node{}, origin: map[*yaml.Node]ir.Pos{}}
	n := d.LookupFrom(Node{Node: root}, ptr)
	return n.Node, n.File, n.Pointer
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	return yamlmerge.Value(n, key)
}

func splitPointer(ptr string) []string {
	ptr = strings.TrimPrefix(ptr, "/")
	if ptr == "" {
		return []string{""}
	}
	toks := strings.Split(ptr, "/")
	for i, t := range toks {
		toks[i] = Unescape(t)
	}
	return toks
}

var (
	escaper   = strings.NewReplacer("~", "~0", "/", "~1")
	unescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// Escape escapes a JSON pointer token (RFC 6901): ~ as ~0, / as ~1.
func Escape(tok string) string { return escaper.Replace(tok) }

// EscapeAll returns toks, each escaped as Escape does.
func EscapeAll(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = Escape(t)
	}
	return out
}

// Unescape is the token Escape escaped (~1 is /, ~0 is ~).
func Unescape(tok string) string { return unescaper.Replace(tok) }
