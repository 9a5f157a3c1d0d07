// Package workload is what every comparison in the bench module serves: one
// 1 KB JSON request body (with a volatile member, "sent_at"), a handler that
// decodes it and answers 201 with ~200 bytes and a Location header, the
// idempotency keys (UUIDs, which every peer's validation accepts), and the
// idemgen policy of the operation.
package workload

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Body is the request body of createOrder.
type Body struct {
	Customer string            `json:"customer"`
	SentAt   string            `json:"sent_at"` // volatile: the client's clock, left out of the fingerprint
	Items    []Item            `json:"items"`
	Note     string            `json:"note"`
	Meta     map[string]string `json:"meta"`
}

// Item is a line of an order.
type Item struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

// PayloadSize is the size of Payload.
const PayloadSize = 1024

// Payload is the 1 KB request body; PayloadOther the same size with another
// customer (a different request); PayloadResent the same request as Payload
// with its members in another order and another sent_at (the same request
// under a canonical fingerprint with sent_at volatile).
var Payload, PayloadOther, PayloadResent = payloads()

func payloads() (p, other, resent []byte) {
	in := Body{Customer: "cus_8f2b", SentAt: "2025-06-01T12:00:00.000Z",
		Meta: map[string]string{"channel": "web", "campaign": "spring"}}
	for i := 0; len(in.Items) < 12; i++ {
		in.Items = append(in.Items, Item{SKU: "sku-" + strconv.Itoa(1000+i), Qty: i + 1, Price: 9.99 + float64(i)})
	}
	b, _ := json.Marshal(in)
	in.Note = strings.Repeat("n", PayloadSize-len(b))
	p, _ = json.Marshal(in)
	in.Customer = "cus_9a3c"
	other, _ = json.Marshal(in)
	in.Customer = "cus_8f2b"
	in.SentAt = "2025-06-01T12:00:07.500Z"
	// Same members, reversed order of the top-level object.
	var m map[string]json.RawMessage
	b, _ = json.Marshal(in)
	_ = json.Unmarshal(b, &m)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range []string{"meta", "note", "items", "sent_at", "customer"} {
		if i > 0 {
			sb.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		sb.Write(kb)
		sb.WriteByte(':')
		sb.Write(m[k])
	}
	sb.WriteByte('}')
	resent = []byte(sb.String())
	if len(p) != PayloadSize || len(other) != PayloadSize || len(resent) != PayloadSize {
		panic("workload: payload sizes " + strconv.Itoa(len(p)) + " " + strconv.Itoa(len(other)) + " " + strconv.Itoa(len(resent)))
	}
	return p, other, resent
}

// Bodies returns n distinct request bodies of PayloadSize bytes: Payload
// with the first characters of its note replaced by i in hex. First-request
// benchmarks cycle through many of them, as distinct requests differ in
// content: with one body for every key, idemgen's fingerprint cache would
// answer each first request and hide the cost of canonicalization.
func Bodies(n int) [][]byte {
	at := bytes.Index(Payload, []byte(`"note":"`)) + len(`"note":"`)
	out := make([][]byte, n)
	for i := range out {
		b := bytes.Clone(Payload)
		hex.Encode(b[at:at+8], binary.BigEndian.AppendUint32(nil, uint32(i)))
		out[i] = b
	}
	return out
}

// Response is the body of the handler's 201 answer.
var Response = []byte(`{"id":"ord_7d1f9c2a","status":"created","customer":"cus_8f2b","items":12,"total":217.88,"currency":"EUR","created_at":"2025-06-01T12:00:00Z","links":{"self":"/orders/ord_7d1f9c2a"}}` + "\n")

// Location is the Location header of the handler's answer.
const Location = "/orders/ord_7d1f9c2a"

// Path is the operation's path.
const Path = "/orders"

// Key is a fixed idempotency key (replays).
const Key = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"

// Keys returns n distinct UUIDv7-shaped keys of round r (a fresh set per round).
func Keys(round, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = KeyOf(uint32(round), uint32(i))
	}
	return keys
}

// KeyOf is a canonical UUID (version 7, variant 10) made of round and i.
func KeyOf(round, i uint32) string {
	var u [16]byte
	binary.BigEndian.PutUint32(u[0:], round)
	binary.BigEndian.PutUint32(u[10:], i)
	u[6] = 0x70 // version 7
	u[8] = 0x80 // variant 10
	u[15] = 1   // never the nil UUID
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// Spec is idemgen's policy for createOrder: strict semantics, a UUID key in
// the Idempotency-Key header, the canonical fingerprint of the body with
// sent_at excluded, Location replayed beside Content-Type. Like a generated
// policy it declares the operation's request media type (application/json):
// a body sent with another is compared byte for byte.
func Spec() idem.Spec {
	return idem.Spec{
		Operation: "createOrder", Method: "POST", Path: Path,
		Semantics: idem.Strict,
		Key:       idem.KeySpec{Format: idem.FormatUUID},
		Volatile:  []string{"/sent_at"},
		Response:  idem.ResponseSpec{Headers: []string{"Location"}},
		Request:   idem.RequestSpec{MediaTypes: []string{"application/json"}},
	}
}
