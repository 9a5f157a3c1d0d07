// Package fingerprint computes the versioned, canonical digest of a request
// that decides whether a retry is "the same request again".
//
// A [Hasher] is compiled once per operation from [Options] (the volatile
// and unordered JSON pointers and the headers of the operation's
// x-idempotency contract) and is safe for concurrent use. [Hasher.Sum]
// never fails, never panics on any input, and allocates nothing once warm.
//
// # The digest, version 3
//
// A [Fingerprint] is 33 bytes: byte 0 is [Version] (3), bytes 1..32 are the
// SHA-256 of this stream, where str(x) is the length of x as an unsigned
// varint (encoding/binary.AppendUvarint) followed by the bytes of x:
//
//	"idemgen-fingerprint\x00v3\x00"
//	'M' str(Method)                         as given (methods are case-sensitive)
//	'O' str(Operation)
//	'Q' query                               'F' pairs(RawQuery), or 'R' str(RawQuery)
//	'H' uvarint(#names) then, per name:     str(name) uvarint(#values) str(value)...
//	'P' str(Path)                           as given (the escaped path)
//	'B' str(media type) parameters domain uvarint(len(payload)) payload
//
// Every part has a fixed tag and every variable part its length, so the
// stream decodes unambiguously: two different requests (as canonicalized
// below) never produce the same stream.
//
// Version 2 is the same stream with "v2" in its prefix and without the
// parameters: it left out the Content-Type parameters of every body, so the
// same multipart bytes sent with two boundaries (which split them into
// different fields) looked like the same request. Version 1 is version 2
// with "v1" in its prefix and without the 'P' part: it left the path out,
// so the same key and body sent to two resources of one operation (POST
// /orders/o1/items, /orders/o2/items) looked like the same request.
// [Hasher.SumVersion] computes both still, for records an older service
// made: a service compares a request with such a record's fingerprint in
// the record's version (runtime/idem does).
//
// # Process-local fingerprints
//
// Each version has a process-local variant, of version [Local](v) (0x80|v,
// printed "v3-local:"; [IsLocal] tells it): the same stream, every byte
// of it, prefix included, digested not with SHA-256 but with two 64-bit
// hash/maphash digests under two seeds made once per process (streamed or
// in one piece, which maphash guarantees agree), little-endian in bytes
// 1..16; bytes 17..24 hold a tag of the process, random and made once with
// the seeds (little-endian, never zero), and bytes 25..32 are zero.
// [Hasher.SumVersion] computes it; it costs less than SHA-256 (see the
// package benchmarks), and allocates nothing warm either. Such a
// fingerprint means something only in the process that computed it:
// another process, or this one restarted, has other seeds, and another
// tag, which [Fingerprint.OtherProcess] tells.
//
// runtime/idem computes it for a request with an idempotency key over a
// store whose records never leave the process (an idem.LocalReader:
// memstore), where fingerprints are only ever compared in the process.
// What it promises: two different streams share a local fingerprint by
// accident with a probability of about 2^-128 (a heuristic figure:
// maphash is not a cryptographic hash, and no proof bounds it). Against
// someone who chooses the requests, it rests on maphash's collision
// resistance under the process's secret runtime key, which nobody outside
// the process knows, and which on CPUs without AES hardware is the
// fallback hash keyed by a 64-bit word: the trust runtime/idem already
// places in 64-bit maphash digests for its fingerprint cache and the tags
// of such records. SHA-256 is collision resistant even against someone who
// can compute it, which a record other processes or releases read needs.
// A collision of two keyed requests would stay within that key's caller:
// the second request, which should be refused (422), would be answered
// with the replay of the key's earlier response. A request without a key
// under window semantics names its record by its fingerprint, across the
// callers that share a scope, so a collision there would answer one
// caller's request with another's response: runtime/idem gives such
// requests the SHA-256 fingerprint, over any store. A record whose
// fingerprint carries another process's tag means the store's records
// leave the process (a store that implements idem.LocalReader wrongly):
// runtime/idem answers it as an unreadable record and logs an error.
//
// Headers: the names of Options.Headers, canonicalized with
// http.CanonicalHeaderKey, sorted and without duplicates; for each, the
// values of Input.Header under that name, in order (a missing header has
// zero values, which differs from one empty value).
//
// Media type: Input.ContentType up to its first ';', without surrounding
// spaces and tabs, in ASCII lower case. It selects the domain of the body
// (below) and whether its parameters count.
//
// Parameters: for a media type that selects the JSON or form domain (even
// for a body hashed raw, not being valid JSON or form), 'F' 0: they are
// ignored (JSON is UTF-8 whatever a charset says, RFC 8259, and the form
// type defines no parameters). For every other media type, whose body is
// hashed as raw bytes, parameters such as boundary (which splits a
// multipart body into its parts) and charset (which maps bytes to
// characters) change what the bytes mean: all of them count. The text
// after the first ';' is read as RFC 9110 parameters: each is optional
// white space (SP, HTAB), a token name, '=', a token or a quoted string
// (RFC 9110 qdtext only: no backslash, no control character), optional
// white space, then the end of the text or a ';' and another parameter.
// When the whole text reads so, the part is 'F' uvarint(#parameters) then
// str(name) str(value) per parameter in the order sent, the name in ASCII
// lower case and the value as sent, a quoted string's without its quotes
// (so boundary=A equals Boundary="A" and "; boundary=A" equals
// ";boundary=A", but charset=utf-8 differs from charset=UTF-8). Otherwise
// (an empty parameter, white space around '=', a backslash in a quoted
// string, which parsers unescape differently) it is 'R' str(text after the
// first ';') as it is. Without a ';' it is 'F' 0.
//
//   - 'J', canonical JSON: for application/json and any type whose subtype
//     ends in "+json" (application/problem+json, application/merge-patch+json,
//     ...), when the body is valid JSON within the limits below. The payload
//     is the canonical text that [Hasher.Canonical] returns.
//   - 'F', form: for application/x-www-form-urlencoded, when every percent
//     escape is well formed. The payload is pairs(body), as for the query.
//   - 'R', raw: everything else, including a body that claims JSON or form
//     but is not. The payload is the body's bytes as they are.
//
// Declared media types: a Hasher built with Options.MediaTypes (the
// request media types the operation declares; runtime/idem passes the
// generated policy's) takes the 'J' or 'F' domain only for a media type
// among them, compared without parameters and in ASCII lower case. A body
// of any other media type, application/json or a form included, is hashed
// as the raw domain (its parameters as for any raw body: they count). A
// handler reads the body as the operation declares it, not as the client
// labels it (oapi-codegen's strict handler of an operation with one JSON
// body decodes JSON whatever the Content-Type), so a form-labelled JSON
// body must not be compared as form fields, which ignore the order of its
// '&'-separated parts and its percent-escapes. A range in the list
// ("application/*", "*/*") or an entry that is not a media type selects
// nothing: a body it covers is raw unless its media type is also listed
// exactly. An empty list that is not nil declares no body: every body is
// raw. Without the list (nil) the media type alone selects the domain, as
// above. The stream's layout is the same either way, in every version: the
// list only chooses the domain, so a fingerprint changes only for a body
// whose media type the list leaves out.
//
// Because the media type is part of the stream, the same bytes sent as
// application/json and as application/merge-patch+json differ.
//
// # Canonical JSON, version 1
//
// The canonical form is itself a JSON text (RFC 8259), without white space
// outside strings, and a fixed point: canonicalizing it again returns it.
//
//   - true, false and null stand as they are.
//   - Strings are decoded (every escape, surrogate pairs included) and
//     written between quotes with '"' as \", '\' as \\, U+0008 U+000C
//     U+000A U+000D U+0009 as \b \f \n \r \t, the other characters below
//     U+0020 as \u00xx (lower-case hex), and every other character as its
//     UTF-8 bytes ("/", U+007F and U+2028 included). So "\u0041" equals "A",
//     "\ud83d\ude00" equals "😀" and "\/" equals "/". Input strings must be
//     valid UTF-8 without raw control characters; an unpaired surrogate
//     escape makes the body invalid.
//   - Numbers keep their exact decimal value (no rounding through float64:
//     9007199254740993 and 9007199254740992 differ), and -0 equals 0. Write
//     the value as ±d×10^(p-k) where d has k digits and no leading or
//     trailing zeros (p is where the decimal point goes); the text is, after
//     a '-' for a negative value, the layout of ECMAScript's
//     Number::toString (as RFC 8785 uses it) applied to these exact digits:
//     zero is "0"; if k ≤ p ≤ 21, the digits of d followed by p-k zeros
//     ("100"); if 0 < p ≤ 21, the first p digits, '.', the others ("12.5");
//     if -6 < p ≤ 0, "0." followed by -p zeros and d ("0.000125"); otherwise
//     the first digit, '.' and the others if k > 1, 'e', '+' or '-', and
//     |p-1| ("1e+21", "1.5e-7"). So 1, 1.0, 1e0, 10e-1 and 0.1e1 are all
//     "1". A non-zero number whose written exponent is 10^15 or more in
//     magnitude makes the body invalid (zero with any exponent is "0").
//   - Objects: members sorted by their decoded names as byte strings (UTF-8
//     byte order, which is code point order; RFC 8785 sorts by UTF-16 code
//     units instead, which differs only above U+FFFF). Duplicate names are
//     all kept, in their order of arrival: {"a":1,"a":2} and {"a":2,"a":1}
//     differ, because a parser that takes the first or the last of them
//     sees different requests; {"a":1,"b":0,"a":2} equals
//     {"b":0,"a":1,"a":2}.
//   - Except for an object with two distinct names that are equal under
//     case folding as encoding/json folds them to match a name to a struct
//     field (its foldName, which bytes.EqualFold agrees with: ASCII letters
//     without case, any other rune as the smallest rune of its
//     unicode.SimpleFold orbit, so "amount" equals "Amount" and "AMOUNT",
//     "k" the Kelvin sign "\u212a" and "s" the long s "ſ", but "id" not
//     "İd" nor "ss" "ß"): such an object is not sorted, its members stay in
//     their order of arrival. encoding/json gives a struct field the value
//     of the last member whose name matches it, so {"amount":1,"Amount":2}
//     and {"Amount":2,"amount":1} are different requests (a handler sees 2,
//     then 1), and so is any reordering of such an object. Volatile
//     members are left out first (a pointer matches a name exactly: a case
//     variant of a volatile name is another member, which counts). For an
//     object whose members arrive sorted, that is the sorted order; the
//     canonical form of every object without such names is as above.
//   - Arrays keep their order, except unordered ones (below).
//
// Limits: nesting deeper than [MaxDepth] arrays and objects, any syntax
// error, a byte order mark, data after the value, invalid UTF-8 or an
// invalid escape make the body invalid JSON, hashed in the raw domain. This
// is never an error and needs no recursion: parsing uses an explicit stack.
//
// # Volatile and unordered pointers
//
// Options.Volatile and Options.Unordered hold RFC 6901 JSON pointers, where
// "~1" stands for '/', "~0" for '~', and the token "*" matches any member
// name or array index (so a member literally named "*" cannot be named). A
// token such as "0" matches the member "0" of an object and the element 0 of
// an array. [CheckPointer] validates one; [New] compiles them all into one
// automaton (a trie made deterministic), so parsing follows one state per
// open container and costs nothing where no pointer reaches.
//
//   - A value a volatile pointer matches is left out as if it were absent:
//     an object member with its name, an array element (the array is then
//     shorter; indexes in pointers refer to the request as sent). The root
//     pointer "" is not allowed as volatile (use loose semantics instead).
//   - An array an unordered pointer matches is a multiset: its elements are
//     sorted by their canonical text (bytewise, a prefix first) and
//     duplicates are kept, so [1,2,2] equals [2,1,2] but not [1,2] or
//     [1,1,2]. Elements are canonicalized first (volatile members inside
//     them removed, their own unordered arrays sorted). An unordered pointer
//     that matches something other than an array has no effect.
//   - A value both volatile and unordered is volatile. Pointers that match
//     nothing have no effect.
//
// # Query and form bodies
//
// pairs(x) is uvarint(#pairs) then str(name) str(value) for each pair of the
// application/x-www-form-urlencoded text x: split at '&' (';' is not a
// separator), empty parts skipped, name and value split at the first '='
// ("a" equals "a="), '+' decoded to a space and %XX to the byte XX (hex in
// either case), so "%41" equals "A" and "+" equals "%20". Pairs are ordered
// by decoded name, bytewise; pairs with the same name keep their relative
// order ("a=1&b=2" equals "b=2&a=1", but "a=1&a=2" differs from
// "a=2&a=1", since handlers commonly read the first value or the list in
// order). A malformed escape ("%zz", "%4") makes the text raw: the query as
// 'R' str(RawQuery), a form body in the raw domain.
//
// # Performance
//
// Sum makes one pass over a JSON body with an explicit stack and writes the
// canonical text into pooled scratch memory, hashing a top-level object as
// it closes, from where its members' texts are. Objects are lazy: a member
// whose name and value are already canonical in the input (the common
// case, arrays of such scalars included) is recorded as spans and copied
// once, in order, when the object closes; only names and values that need
// rewriting (escapes, numbers to normalize, nested containers) are written
// out first. Strings are scanned eight or sixteen bytes at a time. Large
// objects and unordered arrays sort compact keys by radix, so that a body
// of a hundred thousand tiny members or elements stays fast. Member order
// is not re-sorted for an
// object whose names arrive sorted, or with the same names in the same
// order as an object seen before (arrays of objects, and the bodies of one
// API, repeat their shapes): a small cache in the pooled scratch state keeps
// recent shapes and their sorted order, always checked against the full
// names. An object guesses its shape from the previous object in the same
// array, or from the last object seen as the value of a member of the same
// name; while the guess holds, each name is checked by comparing its input
// text with the cached one. The stream's header up to the path (what the
// requests to one operation share, whatever resource their path names) is
// kept too, with the digest's state after its whole 64-byte blocks: a
// request with the same method, operation, query and content type as the
// last one on the same scratch state, in the same version (and a hasher
// without named headers, with the same declared media types), reuses
// both. See the
// package benchmarks for numbers.
package fingerprint
