package memstore_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestEngineFloodByColludingPrincipals: the security trial's attack (with nine). Eight
// principals (eight sign-ups), each held to MaxPrincipalShare (1/8) of a
// shard, together fill the store with fresh keys; every other caller's new
// key is then refused with 503 IDEMPOTENCY_STORE_UNAVAILABLE until records
// reach MinRetention (an hour: what the store's hint says). The engine caps
// the Retry-After it sends at what a client waits for (the Go client gives
// up on a Retry-After over idemclient.DefaultRetryAfterLimit): it was 3600,
// so a victim's client gave up at once instead of retrying.
// docs/security.md says how many accounts this takes, and what to use
// instead on a multi-tenant API.
func TestEngineFloodByColludingPrincipals(t *testing.T) {
	s, _ := newClockStore(t, memstore.Options{MaxEntries: 8192})
	eng := idem.New(s, idem.Options{
		Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	executed, post := paymentsServer(eng)
	body := []byte(`{"amount":1}`)
	codes := map[int]int{}
	for i := range 20000 {
		codes[post(fmt.Sprint("attacker-", i%8), fmt.Sprint("k", i), body).Code]++
	}
	t.Logf("attackers' answers: %v", codes)
	w := post("victim", "v-1", body)
	if w.Code != http.StatusServiceUnavailable || executed["victim"] != 0 {
		t.Fatalf("the victim after eight principals filled the store: %d, executed %d (the attack no longer fills it: update docs/security.md)", w.Code, executed["victim"])
	}
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil || ra < 1 || time.Duration(ra)*time.Second > idemclient.DefaultRetryAfterLimit/2 {
		t.Fatalf("Retry-After %q: a client gives up rather than wait that long (idemclient.DefaultRetryAfterLimit %v)", w.Header().Get("Retry-After"), idemclient.DefaultRetryAfterLimit)
	}
}
