package idemclient

import (
	"cmp"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Route is an operation of an API as a [RouteTable] holds it: its method,
// its path template as the spec writes it (/orders/{orderId}, a parameter
// with literal text around it such as /files/{name}.json allowed), and its
// policy; a nil Policy for an operation that is not idempotent. Such
// routes matter: a static /orders/export that is not idempotent wins over
// an idempotent /orders/{id}, as it does in the server's router.
type Route struct {
	// Method is the operation's HTTP method, upper case (POST).
	Method string
	// Path is the operation's path template as the spec writes it, below
	// the server URL (/orders/{orderId}).
	Path string
	// Policy is the operation's retry policy; nil when it is not idempotent.
	Policy *Policy
}

// RouteTable recognizes the idempotent operations of an API by the method
// and path of a request, to manage requests that no typed helper marked
// with a [Call]: its [RouteTable.Match] is a [Matcher] for a Doer that
// does not know the server URL, [RouteTable.Matcher] makes the exact
// matcher of a known server URL. idemgen's client emitter writes one per
// spec (the generated NewIdempotentDoer and IdempotentMatcher use it).
//
// Paths are compared like with like: each segment of the request's escaped
// path is unescaped and compared with the template's text (a static
// segment /cafés matches /caf%C3%A9s; an escaped slash stays inside its
// segment); a parameter matches a non-empty segment, between its literal
// text. Among the routes of one method and one length, the most specific
// serves a request, as in a router: at the first segment where two
// templates differ in kind, a static segment before a parameter with
// literal text around it, before a bare parameter.
//
// A RouteTable is immutable and safe for concurrent use.
type RouteTable struct {
	bases  []string
	routes map[string][]route // by method: longest first, then most specific
}

// route is a Route with its template split into segments.
type route struct {
	path   string
	segs   []segment
	policy *Policy
}

// segment is a static path segment (prefix), or a parameter with optional
// literal text around it.
type segment struct {
	prefix, suffix string
	param          bool
}

// NewRouteTable returns the table of routes, matched under bases first.
//
// bases are the base paths the API's servers declare (the paths of their
// URLs, such as /api/v1), which a request that [RouteTable.Match] reads is
// tried under before its path's end is. Each is read as a server URL's
// path is by [RouteTable.Matcher] (a slash added when missing, "." and
// ".." resolved, escaped); one that does not parse, and repeats, are
// ignored, and so is the root path "/": every path is under it, whatever
// the base path a client really sends to, so that it is no evidence (POST
// /acme/v1/orders is not tenant acme's POST /{tenant}/v1/orders just
// because a server URL has no path).
//
// routes are the API's operations, idempotent or not, in any order: the
// table sorts them, by method, longest template first, then most specific
// (see [RouteTable]), then by template; routes with the same method and
// template keep their order, and the first one serves. The policies are
// copied, On.Statuses included: later changes to them do not reach the
// table. The policy [RouteTable.Match] and [RouteTable.Matcher] return
// shares the table's On.Statuses (a copy would cost an allocation per
// request): appending to it whole does not reach the table (its capacity
// is its length), but writing its elements does, and so does appending to
// a shorter slice of it (append(s[:1], 504) writes s[1]): treat it as
// read-only, and give a policy that needs other statuses a new slice.
func NewRouteTable(bases []string, routes []Route) *RouteTable {
	t := &RouteTable{routes: map[string][]route{}}
	for _, b := range bases {
		p, err := basePath(b)
		if err != nil || p == "/" || slices.Contains(t.bases, p) {
			continue
		}
		t.bases = append(t.bases, p)
	}
	for _, r := range routes {
		rt := route{path: r.Path, segs: parseTemplate(r.Path)}
		if r.Policy != nil {
			p := *r.Policy
			if p.On.Statuses != nil {
				p.On.Statuses = slices.Clip(slices.Clone(p.On.Statuses))
			}
			rt.policy = &p
		}
		t.routes[r.Method] = append(t.routes[r.Method], rt)
	}
	for _, rs := range t.routes {
		slices.SortStableFunc(rs, compareRoutes)
	}
	return t
}

// basePath returns the base path of a server URL (or of a path): the
// path of server with a slash added when missing, resolved with "./",
// escaped, so that it ends with a slash. It fails when server does not
// parse as a URL.
func basePath(server string) (string, error) {
	if !strings.HasSuffix(server, "/") {
		server += "/"
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	if u, err = u.Parse("./"); err != nil {
		return "", err
	}
	return u.EscapedPath(), nil
}

// parseTemplate splits a path template into segments.
func parseTemplate(path string) []segment {
	var segs []segment
	for s := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
		if i < 0 || j < i {
			segs = append(segs, segment{prefix: s})
			continue
		}
		segs = append(segs, segment{param: true, prefix: s[:i], suffix: s[j+1:]})
	}
	return segs
}

// rank orders segments by specificity: static, then a parameter with
// literal text around it, then a bare parameter.
func (s segment) rank() int {
	switch {
	case !s.param:
		return 0
	case s.prefix != "" || s.suffix != "":
		return 1
	}
	return 2
}

// compareRoutes puts longer templates first (a request is matched on the
// end of its path), then the more specific at the first segment where two
// differ in kind, then sorts by template.
func compareRoutes(a, b route) int {
	if c := cmp.Compare(len(b.segs), len(a.segs)); c != 0 {
		return c
	}
	for i := range a.segs {
		if c := cmp.Compare(a.segs[i].rank(), b.segs[i].rank()); c != 0 {
			return c
		}
	}
	return strings.Compare(a.path, b.path)
}

// ends reports whether path (segments, unescaped) ends with the template
// segments segs.
func ends(segs []segment, path []string) bool {
	if len(segs) > len(path) {
		return false
	}
	for i, v := range path[len(path)-len(segs):] {
		s := segs[i]
		if !s.param {
			if v != s.prefix {
				return false
			}
			continue
		}
		if len(v) <= len(s.prefix)+len(s.suffix) || !strings.HasPrefix(v, s.prefix) || !strings.HasSuffix(v, s.suffix) {
			return false
		}
	}
	return true
}

// splitPath splits an escaped path (without its leading slash) at its
// slashes and unescapes each segment, as the templates' text is.
func splitPath(escaped string) []string {
	path := strings.Split(escaped, "/")
	for i, s := range path {
		if u, err := url.PathUnescape(s); err == nil {
			path[i] = u
		}
	}
	return path
}

// exact matches req by its whole path under base, an escaped path that
// ends with a slash: ok reports whether a route serves the rest of the
// path (routes of its length only, the most specific first, as a router),
// idempotent whether that route is idempotent, and p is its policy then. A
// request outside base is not served.
func (t *RouteTable) exact(req *http.Request, base string) (p Policy, idempotent, ok bool) {
	rest, under := strings.CutPrefix(req.URL.EscapedPath(), base)
	if !under {
		return Policy{}, false, false
	}
	path := splitPath(rest)
	for _, rt := range t.routes[req.Method] {
		if len(rt.segs) != len(path) || !ends(rt.segs, path) {
			continue
		}
		if rt.policy == nil {
			return Policy{}, false, true
		}
		return *rt.policy, true, true
	}
	return Policy{}, false, false
}

// Match is the table's [Matcher] for a Doer that does not know the server
// URL: the policy of the idempotent operation whose route serves req; ok
// is false for every other request.
//
// It first reads req under each of the table's base paths, as
// [RouteTable.Matcher] would: when a route serves the rest of the path
// whole under one of them, that decides (a route that is not idempotent
// means no retry and no key; should routes under two base paths disagree,
// the request is ambiguous, below). A request that no route serves whole
// under them (or every request, without base paths) is matched on the end
// of its path, since the server URL may add a base path. Of the routes of
// one length the most specific that matches serves the request; routes of
// different lengths that match are read under base paths of different
// lengths, which the end of the path cannot tell apart.
//
// When the routes that serve req so include an idempotent one and one that
// is not idempotent (POST /acme/orders is POST /{tenant}/orders, or POST
// /orders under the base path /acme; POST /api/orders is POST /api/orders,
// or POST /orders under /api), req is ambiguous: it is managed under the
// policy of the longest idempotent one, so that it carries a key of its
// own (a new one, or the one it carries, never the nil UUID), but with one
// attempt (MaxAttempts 1), since retrying an operation that is not
// idempotent could run it twice, and marked [Policy.Ambiguous], so that
// the Doer adds no key to its query or body (it only replaces a nil UUID
// there; a header key is added). Under a key in the body, an ambiguous
// request without a JSON body (application/json or a +json media type) is
// not matched: it is the other operation's, and the Doer would refuse it,
// having no body to put the key in.
//
// This costs retries for a common REST shape: with POST /orders not
// idempotent, an idempotent POST /users/{id}/orders is always ambiguous
// (POST /orders under the base path /users/5). Use [RouteTable.Matcher]
// whenever the server URL is known.
//
// The policy returned shares the table's On.Statuses (see
// [NewRouteTable]): read it, or give the policy a new slice, but never
// write its elements, which would change the policy of every later
// request the table matches.
func (t *RouteTable) Match(req *http.Request) (Policy, bool) {
	var (
		p     Policy
		found bool
		plain bool
	)
	for _, base := range t.bases {
		bp, idem, ok := t.exact(req, base)
		switch {
		case !ok:
		case !idem:
			plain = true
		case !found:
			p, found = bp, true
		}
	}
	if !found && !plain {
		path := splitPath(strings.TrimPrefix(req.URL.EscapedPath(), "/"))
		n := -1 // the length of the last route that matched: one route per length
		for _, rt := range t.routes[req.Method] {
			if len(rt.segs) == n || !ends(rt.segs, path) {
				continue
			}
			n = len(rt.segs)
			switch {
			case rt.policy == nil:
				plain = true
			case !found:
				p, found = *rt.policy, true
			}
		}
	}
	if found && plain {
		if p.KeyCarrier == CarrierBody && !jsonRequest(req) {
			return Policy{}, false
		}
		p.MaxAttempts = 1
		p.Ambiguous = true
	}
	return p, found
}

// jsonRequest reports whether req has a body of a JSON media type
// (application/json, or a +json suffix): the only body an operation whose
// key goes in the body sends.
func jsonRequest(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return false
	}
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// Matcher returns the table's exact [Matcher] for the requests a client
// sends to server (a server URL, as given to oapi-codegen's NewClient):
// the policy of the idempotent operation whose route serves the request,
// matched by its whole path under the server URL's base path.
// oapi-codegen's client sends an operation to the server URL, a slash
// added, resolved with "." + the operation's path; the matcher strips
// exactly the base path that gives, escaped as the request's path is, and
// compares the rest with the routes of the same length, the most specific
// first: a route that is not idempotent that serves the request means no
// retry.
//
// A request that no route serves whole under the base path (outside it,
// or its path rewritten, say by a request editor adding a gateway prefix)
// is read as [RouteTable.Match] reads it (the table's base paths, then the
// end of the path, an ambiguous request sent once), rather than sent
// unmanaged, with, say, the nil UUID oapi-codegen writes for an unset uuid
// key, which every such call would share.
//
// The policy it returns shares the table's On.Statuses, as
// [RouteTable.Match]'s does: never write its elements.
//
// It fails when server does not parse as a URL.
func (t *RouteTable) Matcher(server string) (Matcher, error) {
	base, err := basePath(server)
	if err != nil {
		return nil, err
	}
	return func(req *http.Request) (Policy, bool) {
		p, idempotent, ok := t.exact(req, base)
		if !ok {
			return t.Match(req) // a path rewritten (a gateway prefix)
		}
		return p, idempotent
	}, nil
}
