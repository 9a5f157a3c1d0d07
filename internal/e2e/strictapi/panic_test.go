package strictapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/strictapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// panickyOrders panics in CreateOrder while boom is set.
type panickyOrders struct {
	service
	boom *atomic.Bool
}

func (h panickyOrders) CreateOrder(ctx context.Context, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	if h.boom.Load() {
		h.s.Exec("createOrder")
		panic("kaboom")
	}
	return h.service.CreateOrder(ctx, req)
}

// A generated strict server whose operation panics answers the client a
// complete 500 IDEMPOTENCY_HANDLER_PANICKED over a real connection, so
// that Go's http.Transport, which holds a request with an Idempotency-Key
// replayable, does not send it again on every idle connection (the
// operation ran once per idle connection when the engine let the panic
// drop the connection); the key is freed, so the client's retry runs.
func TestOperationPanicAnswered(t *testing.T) {
	svc := couponstest.NewService()
	var boom atomic.Bool
	boom.Store(true)
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.DiscardHandler)})
	h := x.StrictHandler(panickyOrders{service{svc}, &boom}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // net/http logs the panic that goes on
	srv.Start()
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(c.CloseIdleConnections)

	// Keep-alive connections in the pool, as a busy client has.
	done := make(chan struct{})
	for range 16 {
		go func() {
			defer func() { done <- struct{}{} }()
			resp, err := c.Get(srv.URL + "/coupons")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	for range 16 {
		<-done
	}

	post := func() (*http.Response, []byte, error) {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"item":"book"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "once")
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	resp, body, err := post()
	require.NoError(t, err, "the client gets an answer")
	assert.Equal(t, 1, svc.Count("createOrder"), "the operation ran once: the Transport did not send the request again")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p struct{ Code string }
	require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	assert.Equal(t, "IDEMPOTENCY_HANDLER_PANICKED", p.Code)

	boom.Store(false)
	resp, _, err = post()
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "the key was freed: the retry runs")
	assert.Equal(t, 2, svc.Count("createOrder"))
}
