package main

import (
	"bytes"
	"crypto/sha256"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
)

// naiveGuard is the idempotency guard the coupon team wrote by hand before
// idemgen, following §3.2 of the seed article: a record per key
// ("idem:coupon:claim:" + key, set if absent) holding PENDING → SUCCESS /
// FAILED, the result, and a hash of the body; a repeated key whose body hash
// differs is refused with 409 IDEMPOTENCY_KEY_CONFLICT, one still PENDING
// gets 409 IDEMPOTENCY_PENDING with Retry-After: 2, a SUCCESS is returned
// again. Its record is as atomic as Redis's SETNX (one mutex).
//
// It makes the one mistake the article warns about: body_hash is the
// SHA-256 of the whole body, client_time included. The app stamps a fresh
// client_time into every attempt, so the retry of a claim whose response was
// lost never matches: the member is told the claim failed (a false
// conflict), taps "claim" again (a new key: a new claim for the guard), and
// gets a second coupon.
type naiveGuard struct {
	next http.Handler

	mu      sync.Mutex
	records map[string]*naiveRecord
	stats   guardStats
}

type naiveRecord struct {
	state  string // PENDING, SUCCESS
	hash   [sha256.Size]byte
	status int
	header http.Header
	result []byte
}

// guardStats is what the guard did, for the report.
type guardStats struct {
	Replays   int // stored responses returned again
	Conflicts int // repeated keys refused as a different request
}

func newNaiveGuard(next http.Handler) *naiveGuard {
	return &naiveGuard{next: next, records: map[string]*naiveRecord{}}
}

func (g *naiveGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if r.Method != http.MethodPost || key == "" {
		g.next.ServeHTTP(w, r) // not a claim, or no key: oapi-codegen's wrapper answers
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	hash := sha256.Sum256(body) // the mistake: client_time is part of the hash
	id := "idem:coupon:claim:" + key

	g.mu.Lock()
	rec, exists := g.records[id]
	switch {
	case !exists:
		g.records[id] = &naiveRecord{state: "PENDING", hash: hash}
		g.mu.Unlock()
	case rec.hash != hash:
		g.stats.Conflicts++
		g.mu.Unlock()
		writeJSON(w, http.StatusConflict, nil, `{"code":"IDEMPOTENCY_KEY_CONFLICT","message":"the same key was sent with a different body: generate a new key and retry"}`)
		return
	case rec.state == "SUCCESS":
		g.stats.Replays++
		status, header, result := rec.status, rec.header, rec.result
		g.mu.Unlock()
		writeJSON(w, status, header, string(result))
		return
	default: // PENDING
		g.mu.Unlock()
		writeJSON(w, http.StatusConflict, http.Header{"Retry-After": {"2"}}, `{"code":"IDEMPOTENCY_PENDING","message":"the previous request is still being processed"}`)
		return
	}

	rw := httptest.NewRecorder()
	g.next.ServeHTTP(rw, r)
	g.mu.Lock()
	if rw.Code < 500 {
		g.records[id] = &naiveRecord{state: "SUCCESS", hash: hash, status: rw.Code, header: rw.Header().Clone(), result: rw.Body.Bytes()}
	} else {
		delete(g.records, id) // FAILED: the article lets a failed claim be retried
	}
	g.mu.Unlock()
	maps.Copy(w.Header(), rw.Header())
	w.WriteHeader(rw.Code)
	_, _ = w.Write(rw.Body.Bytes())
}

func (g *naiveGuard) Stats() guardStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

func writeJSON(w http.ResponseWriter, status int, header http.Header, body string) {
	maps.Copy(w.Header(), header)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
