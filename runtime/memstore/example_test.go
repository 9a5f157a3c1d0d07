package memstore_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// An Engine over the in-memory store: the retry of a request, sent with
// the same key, is answered from the record instead of running the
// handler again.
func Example() {
	store := memstore.New(memstore.Options{MaxEntries: 100_000})
	defer store.Close()
	eng := idem.New(store, idem.Options{Principal: idem.Anonymous})
	pay := idem.MustCompile(idem.Spec{Operation: "pay", Method: "POST", Path: "/payments", Semantics: idem.Strict})

	var payments atomic.Int64
	srv := httptest.NewServer(eng.Middleware(pay)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := payments.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d}`+"\n", n)
	})))
	defer srv.Close()

	for range 2 { // the request, then its retry
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(`{"amount":42}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-17-payment")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d replayed=%q %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
	}
	fmt.Println("handler runs:", payments.Load())
	// Output:
	// 201 replayed="" {"payment":1}
	// 201 replayed="true" {"payment":1}
	// handler runs: 1
}
