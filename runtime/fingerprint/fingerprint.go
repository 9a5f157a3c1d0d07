package fingerprint

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/idemgen/idemgen/runtime/internal/httpsyntax"
	"hash"
	"hash/maphash"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Version is the version of the canonical form and digest computed by this
// package. Version 2 added the request's path, version 3 the Content-Type
// parameters of a body hashed as raw bytes (a multipart body's boundary);
// [Hasher.SumVersion] still computes versions 1 and 2, to compare a request
// with a record made before.
const Version = 3

// localBit marks the version byte of a process-local fingerprint.
const localBit = 0x80

// Local returns the version of the process-local variant of format v (1,
// 2 or [Version]): the same canonical stream as format v, digested with a
// keyed 128-bit hash whose keys are random for each process (see the
// package documentation, "Process-local fingerprints"). Such a fingerprint
// is only ever compared within the process that computed it.
func Local(v int) int { return localBit | v }

// IsLocal reports whether v is the version of a process-local
// fingerprint ([Local]).
func IsLocal(v int) bool { return v&localBit != 0 }

// Fingerprint is a digest: byte 0 is the algorithm version, bytes 1..32 a
// SHA-256; for a process-local version ([Local]), bytes 1..16 its keyed
// digest, bytes 17..24 the tag of the process that computed it and bytes
// 25..32 zero.
type Fingerprint [33]byte

// OtherProcess reports whether f is a process-local fingerprint ([IsLocal]
// version) that another process computed (or this one before a restart):
// its process tag is not this process's. Such a fingerprint cannot be
// compared with any this process computes; finding one in a record means
// the record left the process that made it.
func (f Fingerprint) OtherProcess() bool {
	return IsLocal(int(f[0])) && binary.LittleEndian.Uint64(f[17:]) != localTag
}

// String returns the fingerprint as "v3:" (its version) followed by the
// SHA-256 in hex; a process-local fingerprint as "v3-local:" followed by
// its 16 bytes in hex.
func (f Fingerprint) String() string {
	if IsLocal(int(f[0])) {
		return fmt.Sprintf("v%d-local:%s", f[0]&^localBit, hex.EncodeToString(f[1:17]))
	}
	return fmt.Sprintf("v%d:%s", f[0], hex.EncodeToString(f[1:]))
}

// Options configure a Hasher for one operation; the package documentation
// says precisely what each does.
type Options struct {
	// Volatile lists RFC 6901 JSON pointers of body members left out of the
	// digest; a "*" token matches any member name or array index.
	Volatile []string
	// Unordered lists JSON pointers (with "*") of arrays hashed as multisets.
	Unordered []string
	// Headers lists request header names included in the digest.
	Headers []string
	// MediaTypes lists the request media types the operation declares
	// (the keys of its OpenAPI requestBody's content), or is nil. When it
	// is not nil, a body is canonicalized as JSON or as a form only when
	// its media type is one of them (compared without parameters, in any
	// case); a body of any other media type is hashed in the raw domain,
	// byte for byte, with its Content-Type parameters: a handler that
	// decodes JSON whatever the Content-Type says (oapi-codegen's) must
	// not see two requests where the fingerprint sees one form. A range
	// ("application/*", "*/*") or an entry that is not a media type
	// matches nothing: such a declaration says nothing of how the handler
	// reads the body. An empty list that is not nil declares no body: every
	// body is raw. nil (a Hasher built without the list) canonicalizes
	// every body as its Content-Type says; see the package documentation.
	MediaTypes []string
}

// Input is one request to fingerprint.
type Input struct {
	// Method is the request's HTTP method, compared as given (net/http
	// passes it as the client sent it: "POST").
	Method string
	// Operation is the operation's id; requests of two operations never
	// share a fingerprint.
	Operation string
	// Path is the request's target path as sent, escaped
	// (url.URL.EscapedPath): it tells apart the resources one operation
	// acts on (POST /orders/o1/items and /orders/o2/items). Version 1
	// leaves it out.
	Path string
	// RawQuery is the URL query without the '?' (url.URL.RawQuery).
	RawQuery string
	// Header holds the request headers with canonical names, as net/http
	// provides them; only the names in Options.Headers are read.
	Header http.Header
	// ContentType is the Content-Type header value; it selects how Body is
	// canonicalized.
	ContentType string
	// Body is the request body as read, canonicalized by its media type
	// (see the package doc: a JSON body with Options.Volatile and Unordered
	// applied, a form body as its pairs, any other byte for byte). Sum does
	// not keep it.
	Body []byte
}

// Hasher is compiled from Options; it is immutable and safe for concurrent use.
type Hasher struct {
	root    *node    // compiled Volatile and Unordered pointers; nil if none
	headers []string // canonical header names, sorted, without duplicates
	// media holds the JSON and form media types of Options.MediaTypes, nil
	// without the list.
	media *mediaSet
}

// mediaSet is the declared media types of a Hasher that select the JSON
// or form domain: their essences in ASCII lower case, without
// parameters. Its address names it in a state's cached header.
type mediaSet struct{ types []string }

// has reports whether essence (in ASCII lower case) is one of m's types.
func (m *mediaSet) has(essence []byte) bool {
	for _, t := range m.types {
		if string(essence) == t {
			return true
		}
	}
	return false
}

// newMediaSet returns the mediaSet of the declared media types l: those
// that select the JSON or the form domain; a range or an entry that is
// not type/subtype is left out.
func newMediaSet(l []string) *mediaSet {
	m := &mediaSet{}
	for _, mt := range l {
		essence, kind := mediaType(mt)
		if kind == domainRaw || strings.IndexByte(essence, '*') >= 0 || !isMediaType(essence) {
			continue
		}
		essence = strings.ToLower(essence)
		if !slices.Contains(m.types, essence) {
			m.types = append(m.types, essence)
		}
	}
	return m
}

// isMediaType reports whether s is an RFC 9110 type "/" subtype, both
// tokens.
func isMediaType(s string) bool {
	t, sub, ok := strings.Cut(s, "/")
	return ok && isToken(t) && isToken(sub)
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !httpsyntax.IsTchar(s[i]) {
			return false
		}
	}
	return s != ""
}

// New compiles opts; it fails on a malformed pointer with a *[PointerError].
func New(opts Options) (*Hasher, error) {
	root, err := compile(&opts)
	if err != nil {
		return nil, err
	}
	h := &Hasher{root: root}
	if opts.MediaTypes != nil {
		h.media = newMediaSet(opts.MediaTypes)
	}
	for _, name := range opts.Headers {
		h.headers = append(h.headers, http.CanonicalHeaderKey(strings.TrimSpace(name)))
	}
	slices.Sort(h.headers)
	h.headers = slices.Compact(h.headers)
	return h, nil
}

// state is the per-call scratch; it is pooled so that Sum allocates nothing
// once warm.
type state struct {
	buf    []byte // output buffer of canonJSON, decoding buffer of parseForm
	out    []byte // canonical body: a part of buf
	tmp    []byte // reordering scratch
	keys   []byte // unescaped member names that had escapes
	num    []byte // digits of a number being normalized
	hdr    []byte // everything hashed before the body
	frames []frame
	mem    []member
	elems  []int // starts of the elements of unordered arrays, in buf
	perm   []int32
	// sortKeys is the scratch of sortByKey.
	sortKeys []sortKey
	// fold holds the case-folded names of an object that foldCollide
	// checks, foldEnd where each ends; foldTab is its hash table.
	fold    []byte
	foldEnd []int32
	foldTab []foldEntry
	shapes  [shapeSlots]shape
	// hints maps a member name (hintSlot) to 1 + the shape slot of the
	// last object seen as its value; 0: none.
	hints [1 << hintBits]int16
	// rootHint is 1 + the shape slot of the last top-level object; 0:
	// none.
	rootHint int16
	// formKeys and formLayout: sortPairs's keys and their layout.
	formKeys   []uint64
	formLayout formLayout
	// direct: canonJSON is called by Sum, which takes a top-level object
	// hashed as it closes (hashObject), with hdr written first; hashed
	// says it was.
	direct, hashed bool
	// flushed: hashObject wrote to d; else summed: it put the digest of
	// the stream in sum.
	flushed, summed bool
	stage           []byte // hashObject's buffer
	// tail is flatShape's copy of the end of the input.
	tail [tailMax + tailPad]byte
	// hdrKey holds the Method, Operation, RawQuery and ContentType (of
	// lengths hdrKeyLens) of the last request that a hasher without named
	// headers summed with this state, in format hdrVersion; s.hdr[:hdrLen]
	// is its header up to the path (the header's part that the requests
	// to one operation share, whatever resource they name), hdrB its media
	// type part and hdrKind its body domain (hdrLen 0: none), which
	// hdrMedia, the hasher's declared media types, took part in choosing. A
	// service sums many requests of one operation, with the same header.
	hdrKey     []byte
	hdrKeyLens [4]int
	hdrVersion byte
	hdrLen     int
	hdrB       []byte
	hdrKind    byte
	hdrMedia   *mediaSet
	// hdrReused: this call's header is the cached one. hdrState is then
	// s.d's state (encoding.BinaryAppender) after the header's first
	// hdrStateLen bytes, its whole 64-byte blocks (hdrStateLen 0: not made
	// yet, at the header's first reuse). (A header built anew is hashed in
	// full: its next request may have another.)
	hdrReused   bool
	hdrState    []byte
	hdrStateLen int
	// blk0 holds the first 64-byte block of the last stream that
	// hashObject hashed whole and, if blk0Saved, blk0State the digest's
	// state (encoding.BinaryAppender) after it (resumeBlock).
	blk0      [sha256.BlockSize]byte
	blk0State []byte
	blk0Saved bool
	err       jsonError
	version   byte // the version of the fingerprint being computed
	// local: the fingerprint is process-local (version has localBit); d
	// is then &loc, else sha. The SHA-256 midstate shortcuts
	// (resetDigest's header state, resumeBlock) are for sha only.
	local bool
	d     hash.Hash
	sha   hash.Hash
	loc   localDigest
	sum   [sha256.Size]byte
}

var statePool = sync.Pool{New: func() any {
	s := &state{sha: sha256.New()}
	s.d = s.sha
	return s
}}

// localSeeds key the process-local digest: made once per process, known
// to no one outside it.
var localSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// localTag names this process in its local fingerprints (bytes 17..24,
// little-endian): random, made once per process with the seeds, never
// zero. A local fingerprint with another tag was computed by another
// process (or this one before a restart): [Fingerprint.OtherProcess].
var localTag = func() uint64 {
	for {
		if t := rand.Uint64(); t != 0 {
			return t
		}
	}
}()

// localDigest is the process-local digest: two 64-bit maphash digests,
// with the two seeds of localSeeds, of the same stream. Streaming writes
// and one maphash.Bytes over the whole stream agree (sumLocal).
type localDigest struct{ a, b maphash.Hash }

func (d *localDigest) Write(p []byte) (int, error) {
	_, _ = d.a.Write(p)
	_, _ = d.b.Write(p)
	return len(p), nil
}

func (d *localDigest) Reset() {
	d.a.SetSeed(localSeeds[0])
	d.b.SetSeed(localSeeds[1])
}

// Sum appends the digest's 16 bytes (the two digests, little-endian).
func (d *localDigest) Sum(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, d.a.Sum64())
	return binary.LittleEndian.AppendUint64(b, d.b.Sum64())
}

func (d *localDigest) Size() int      { return 16 }
func (d *localDigest) BlockSize() int { return d.a.BlockSize() }

// localSum puts in s.sum the process-local digest of the whole stream st
// (what localDigest computes from writes of its pieces), bytes 16..31
// zero (finish adds the process tag).
func (s *state) localSum(st []byte) {
	s.sum = [sha256.Size]byte{}
	binary.LittleEndian.PutUint64(s.sum[:8], maphash.Bytes(localSeeds[0], st))
	binary.LittleEndian.PutUint64(s.sum[8:16], maphash.Bytes(localSeeds[1], st))
	s.summed = true
}

// maxPooled is the largest buffer a state keeps when it goes back to the
// pool, so that one huge request does not pin its memory.
const maxPooled = 4 << 20

// maxPooledMembers is the most members a pooled state keeps room for (16
// MiB of them). With the element and sort scratch that goes with it, a
// state keeps at most about 40 MiB besides its buffers (4 MiB each) and
// its form keys (maxPooledFormKeys).
const maxPooledMembers = 1 << 18

// maxPooledFormKeys is the most form sort keys (with their radix scratch)
// a pooled state keeps: 8 MiB, the keys of a 1 MiB form body (idem's
// default limit) of 2-byte pairs "a&" out of order, so that such a body
// costs no allocation warm either.
const maxPooledFormKeys = 1 << 20

func getState() *state { return statePool.Get().(*state) }

func putState(s *state) {
	s.out, s.hdrReused = nil, false
	if cap(s.buf) > maxPooled || cap(s.tmp) > maxPooled || cap(s.hdr) > maxPooled || cap(s.hdrKey) > maxPooled {
		s.buf, s.tmp, s.hdr, s.hdrKey, s.hdrLen = nil, nil, nil, nil, 0
	}
	if cap(s.formKeys) > maxPooledFormKeys {
		s.formKeys = nil
	}
	// The member scratch of a body of up to 1 MiB (idem's default limit)
	// stays, even at its largest (at least five bytes a member, two an
	// element), and so does the sort scratch of its largest object or
	// unordered array: allocating them afresh costs more than the work on
	// such a body.
	if cap(s.mem) > maxPooledMembers || cap(s.elems) > 2*maxPooledMembers {
		s.mem, s.elems = nil, nil
	}
	if cap(s.perm) > 2*maxPooledMembers || cap(s.sortKeys) > 4*maxPooledMembers {
		s.perm, s.sortKeys = nil, nil
	}
	s.direct, s.hashed, s.summed = false, false, false
	if cap(s.keys) > maxPooled || cap(s.num) > maxPooled {
		s.keys, s.num = nil, nil
	}
	if cap(s.fold) > maxPooled || cap(s.foldEnd) > 2*maxPooledMembers || cap(s.foldTab) > 4*maxPooledMembers {
		s.fold, s.foldEnd, s.foldTab = nil, nil, nil
	}
	statePool.Put(s)
}

// The hashed streams of formats v2 and v1 (see the package documentation).
const (
	streamPrefix   = "idemgen-fingerprint\x00v2\x00"
	streamPrefixV1 = "idemgen-fingerprint\x00v1\x00"
)

// Body domains.
const (
	domainJSON = 'J'
	domainForm = 'F'
	domainRaw  = 'R'
)

// Content-Type parameter encodings (format v3, appendParams): a list of
// well-formed parameters, or the text after the first ';' as it is. The
// bytes are those of domainForm and domainRaw, which they are not.
const (
	paramsList = 'F'
	paramsText = 'R'
)

var zeroInput Input

// Sum returns the fingerprint of in. It never fails: a body that is not what
// its content type claims is hashed as bytes, in a separate domain.
func (h *Hasher) Sum(in *Input) Fingerprint {
	return h.sum(in, Version)
}

// SumVersion returns the fingerprint of in in format v (1, 2 or [Version],
// or the process-local variant of one: [Local](v)), and false for a
// version this package does not compute. A service compares a request with
// a record made by an older version of this package with it.
func (h *Hasher) SumVersion(in *Input, v int) (Fingerprint, bool) {
	if v < 1 || v > Local(Version) || v > Version && v < Local(1) {
		return Fingerprint{}, false
	}
	return h.sum(in, v), true
}

func (h *Hasher) sum(in *Input, version int) Fingerprint {
	if in == nil {
		in = &zeroInput
	}
	s := getState()
	s.version = byte(version)
	s.local = IsLocal(version)
	s.d = s.sha
	if s.local {
		s.d = &s.loc
	}
	v := version &^ localBit // the format of the stream
	var hdr []byte
	var kind byte
	if len(h.headers) == 0 && s.hdrLen > 0 && s.hdrVersion == byte(v) && s.hdrMedia == h.media && s.sameHeader(in) {
		hdr, kind = s.hdr[:s.hdrLen], s.hdrKind
		if v >= 2 {
			hdr = appendString(append(hdr, 'P'), in.Path)
		}
		hdr = append(hdr, s.hdrB...)
		s.hdrReused = true
	} else {
		hdr, kind = h.header(s, in, v)
	}
	body := in.Body
	switch kind {
	case domainJSON:
		s.hdr, s.direct, s.hashed = hdr, true, false
		ok := s.canonJSON(in.Body, h.root)
		s.direct = false
		if !ok {
			s.summed = false // data after the object: hashed again
		}
		if ok && s.hashed {
			// A top-level object, hashed already, header first.
			return s.finish()
		}
		if ok {
			body = s.out
		} else {
			kind = domainRaw
		}
	case domainForm:
		n, sorted, ok := parseForm(s, in.Body)
		if !ok {
			kind = domainRaw
			break
		}
		// The pairs' records go to the hash from where they are.
		var l [binary.MaxVarintLen64]byte
		size := len(binary.AppendUvarint(l[:0], uint64(n))) + len(s.buf)
		hdr = binary.AppendUvarint(append(hdr, kind), uint64(size))
		s.hdr = binary.AppendUvarint(hdr, uint64(n))
		s.d.Write(s.hdr[s.resetDigest():])
		s.writePairs(n, sorted)
		return s.finish()
	}
	hdr = binary.AppendUvarint(append(hdr, kind), uint64(len(body)))

	s.hdr = hdr
	s.d.Write(hdr[s.resetDigest():])
	s.d.Write(body)
	return s.finish()
}

// header builds in s.hdr the part of the stream before the body's domain
// (see the package documentation) and returns it with the body's domain,
// which the content type selects; without named headers, s remembers it.
func (h *Hasher) header(s *state, in *Input, v int) ([]byte, byte) {
	hdr := append(s.hdr[:0], streamPrefixOf(v)...)
	hdr = appendString(append(hdr, 'M'), in.Method)
	hdr = appendString(append(hdr, 'O'), in.Operation)

	hdr = append(hdr, 'Q', domainForm)
	if q, ok := appendPlainQuery(hdr, in.RawQuery); ok {
		hdr = q
	} else if n, sorted, ok := parseForm(s, in.RawQuery); ok {
		hdr = s.appendPairs(hdr, n, sorted)
	} else {
		hdr[len(hdr)-1] = domainRaw
		hdr = appendString(hdr, in.RawQuery)
	}

	hdr = binary.AppendUvarint(append(hdr, 'H'), uint64(len(h.headers)))
	for _, name := range h.headers {
		hdr = appendString(hdr, name)
		vals := in.Header[name]
		hdr = binary.AppendUvarint(hdr, uint64(len(vals)))
		for _, v := range vals {
			hdr = appendString(hdr, v)
		}
	}

	shared := len(hdr) // what the requests of one operation share
	if v >= 2 {
		hdr = appendString(append(hdr, 'P'), in.Path)
	}
	media := len(hdr)
	essence, kind := mediaType(in.ContentType)
	hdr = binary.AppendUvarint(append(hdr, 'B'), uint64(len(essence)))
	lower := len(hdr)
	hdr = append(hdr, essence...)
	if essence != "application/json" { // the common case, lower case already
		for i := lower; i < len(hdr); i++ {
			if c := hdr[i]; c-'A' < 26 {
				hdr[i] = c + 'a' - 'A'
			}
		}
	}
	if kind != domainRaw && h.media != nil && !h.media.has(hdr[lower:]) {
		kind = domainRaw // a media type the operation does not declare
	}
	if v >= 3 {
		if kind == domainRaw {
			hdr = appendParams(hdr, in.ContentType)
		} else {
			hdr = append(hdr, paramsList, 0) // no parameters
		}
	}
	s.hdr, s.hdrLen, s.hdrStateLen, s.hdrReused = hdr, 0, 0, false
	if len(h.headers) == 0 {
		s.hdrKey = append(append(append(append(s.hdrKey[:0], in.Method...), in.Operation...), in.RawQuery...), in.ContentType...)
		s.hdrKeyLens = [4]int{len(in.Method), len(in.Operation), len(in.RawQuery), len(in.ContentType)}
		s.hdrVersion, s.hdrLen, s.hdrKind, s.hdrMedia = byte(v), shared, kind, h.media
		s.hdrB = append(s.hdrB[:0], hdr[media:]...)
	}
	return hdr, kind
}

// resetDigest resets s.d to the state after the start of the stream that
// it returns the length of: for a header reused, its whole 64-byte
// blocks, hashed once for all its reuses (SHA-256 only); else nothing.
func (s *state) resetDigest() int {
	if s.local || !s.hdrReused || s.hdrLen < sha256.BlockSize {
		s.d.Reset()
		return 0
	}
	if s.hdrStateLen > 0 {
		if u, ok := s.d.(encoding.BinaryUnmarshaler); ok && u.UnmarshalBinary(s.hdrState) == nil {
			return s.hdrStateLen
		}
	} else if a, ok := s.d.(encoding.BinaryAppender); ok {
		n := s.hdrLen &^ (sha256.BlockSize - 1)
		s.d.Reset()
		s.d.Write(s.hdr[:n])
		if st, err := a.AppendBinary(s.hdrState[:0]); err == nil {
			s.hdrState, s.hdrStateLen = st, n
			return n
		}
	}
	s.d.Reset()
	return 0
}

// sameHeader reports whether in has the Method, Operation, RawQuery and
// ContentType of the header that s holds (s.hdrLen > 0).
func (s *state) sameHeader(in *Input) bool {
	l, k := &s.hdrKeyLens, s.hdrKey
	if len(in.Method) != l[0] || len(in.Operation) != l[1] || len(in.RawQuery) != l[2] || len(in.ContentType) != l[3] {
		return false
	}
	a, b, c := l[0], l[0]+l[1], l[0]+l[1]+l[2]
	return string(k[:a]) == in.Method && string(k[a:b]) == in.Operation &&
		string(k[b:c]) == in.RawQuery && string(k[c:]) == in.ContentType
}

// finish returns the fingerprint of what s.d was given, and puts s back.
func (s *state) finish() Fingerprint {
	var f Fingerprint
	f[0] = s.version
	if s.summed {
		copy(f[1:], s.sum[:])
	} else {
		copy(f[1:], s.d.Sum(s.sum[:0]))
	}
	if s.local {
		binary.LittleEndian.PutUint64(f[17:], localTag)
	}
	putState(s)
	return f
}

// appendString appends s with its length (uvarint) in front.
func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// mediaType returns the media type of a Content-Type value (without
// parameters, trimmed) and the body domain it selects.
func mediaType(ct string) (string, byte) {
	if ct == "application/json" {
		return ct, domainJSON
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	for len(ct) > 0 && (ct[0] == ' ' || ct[0] == '\t') {
		ct = ct[1:]
	}
	for len(ct) > 0 && (ct[len(ct)-1] == ' ' || ct[len(ct)-1] == '\t') {
		ct = ct[:len(ct)-1]
	}
	switch {
	case strings.EqualFold(ct, "application/json"):
		return ct, domainJSON
	case len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json") && strings.IndexByte(ct, '/') > 0:
		return ct, domainJSON
	case strings.EqualFold(ct, "application/x-www-form-urlencoded"):
		return ct, domainForm
	}
	return ct, domainRaw
}

// streamPrefixV3 starts the hashed stream of format v3.
const streamPrefixV3 = "idemgen-fingerprint\x00v3\x00"

// streamPrefixOf returns the start of the hashed stream of format v.
func streamPrefixOf(v int) string {
	switch v {
	case 1:
		return streamPrefixV1
	case 2:
		return streamPrefix
	}
	return streamPrefixV3
}

// appendParams appends the parameters of the Content-Type value ct (format
// v3, for a media type of the raw domain): 'F' and the parameters as pairs
// (names in ASCII lower case, values unquoted), or 'R' and the text after
// the first ';' as it is when it is not a list of well-formed parameters
// (see the package documentation); 'F' 0 without a ';'. It parses the
// parameters once, writing the pairs as it goes after a one-byte count
// (moved on for a count of 128 or more), and writes 'R' over them if one
// is malformed.
func appendParams(dst []byte, ct string) []byte {
	i := strings.IndexByte(ct, ';')
	if i < 0 {
		return append(dst, paramsList, 0)
	}
	text := ct[i+1:]
	start := len(dst)
	dst = append(dst, paramsList, 0)
	n := uint64(0)
	for pos := 0; ; {
		name, value, next, ok := nextParam(text, pos)
		if !ok {
			return appendString(append(dst[:start], paramsText), text)
		}
		n++
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		for j := 0; j < len(name); j++ {
			c := name[j]
			if c-'A' < 26 {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
		dst = appendString(dst, value)
		if next == len(text) {
			break
		}
		pos = next
	}
	if n < 0x80 {
		dst[start+1] = byte(n)
		return dst
	}
	var l [binary.MaxVarintLen64]byte
	count := binary.AppendUvarint(l[:0], n)
	pairs := start + 2
	dst = append(dst, count[1:]...)
	copy(dst[pairs+len(count)-1:], dst[pairs:])
	copy(dst[start+1:], count)
	return dst
}

// nextParam parses the parameter of text that starts at pos: white space
// (SP, HTAB), a token, '=', a token or a quoted string without backslashes,
// white space, then the end of text or a ';' (next is then the position
// after it, and another parameter must follow). It returns the name, the
// value (a quoted string's content), the position of the next parameter
// (len(text) at the end) and false if text is not well formed there.
func nextParam(text string, pos int) (name, value string, next int, ok bool) {
	i := skipOWS(text, pos)
	start := i
	for i < len(text) && httpsyntax.IsTchar(text[i]) {
		i++
	}
	if i == start || i == len(text) || text[i] != '=' {
		return "", "", 0, false
	}
	name = text[start:i]
	i++
	if i < len(text) && text[i] == '"' {
		start = i + 1
		for i = start; i < len(text) && isQuotedTextByte(text[i]); i++ {
		}
		if i == len(text) || text[i] != '"' {
			return "", "", 0, false // unterminated, a backslash or a control character
		}
		value = text[start:i]
		i++
	} else {
		start = i
		for i < len(text) && httpsyntax.IsTchar(text[i]) {
			i++
		}
		if i == start {
			return "", "", 0, false
		}
		value = text[start:i]
	}
	i = skipOWS(text, i)
	switch {
	case i == len(text):
		return name, value, i, true
	case text[i] == ';' && i+1 < len(text):
		return name, value, i + 1, true
	}
	return "", "", 0, false // anything else, or a ';' ending text
}

func skipOWS(text string, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	return i
}

// isQuotedTextByte reports whether c is a qdtext of RFC 9110 (a quoted
// string's byte other than '"' and '\\').
func isQuotedTextByte(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || 0x23 <= c && c <= 0x5b || 0x5d <= c && c != 0x7f
}

// SyntaxError says why a body is not canonicalized as JSON (and would be
// hashed as raw bytes by Sum).
type SyntaxError struct {
	Offset int // byte offset in the body
	Reason string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("fingerprint: body is not canonical-form JSON: %s at offset %d", e.Reason, e.Offset)
}

// Canonical appends to dst the canonical form (v1) of the JSON text body,
// with the hasher's volatile members left out and unordered arrays sorted:
// the exact bytes that Sum hashes for a JSON body. If body is not valid
// JSON, or nests deeper than MaxDepth, it returns dst unchanged and a
// *[SyntaxError]; Sum then hashes the body as raw bytes.
func (h *Hasher) Canonical(dst, body []byte) ([]byte, error) {
	s := getState()
	defer putState(s)
	if !s.canonJSON(body, h.root) {
		return dst, &SyntaxError{Offset: s.err.off, Reason: s.err.reason}
	}
	return append(dst, s.out...), nil
}

var plain = &Hasher{}

// Canonical appends to dst the canonical form (v1) of the JSON text body,
// without volatile or unordered pointers; see [Hasher.Canonical].
func Canonical(dst, body []byte) ([]byte, error) { return plain.Canonical(dst, body) }
