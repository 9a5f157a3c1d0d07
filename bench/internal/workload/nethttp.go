package workload

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Handler is the bare createOrder handler: it decodes the JSON body and
// answers 201 with Location and Response.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in Body
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeCreated(w)
	})
}

// FloorHandler writes the same answer as Handler without reading the
// request: the scaffolding and the response write alone, which no replay
// can beat.
func FloorHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeCreated(w) })
}

func writeCreated(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", Location)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(Response)
}

// Client serves requests to a handler in-process, reusing its request and
// its ResponseWriter so that what is counted is the handler chain. It is
// used by one goroutine.
//
// The writer is minimal (a reused header map; the body is counted and
// dropped), not an httptest.ResponseRecorder, whose per-request header map
// and body buffer would add allocations that are not the middleware's.
type Client struct {
	R    *http.Request
	W    *Writer
	body *reader
	key  []string
	data []byte
}

// Writer is the Client's http.ResponseWriter.
type Writer struct {
	H      http.Header
	Status int
	N      int
	Body   []byte // kept only when Keep is set
	Keep   bool
}

func (w *Writer) Header() http.Header { return w.H }

func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
}

func (w *Writer) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	w.N += len(p)
	if w.Keep {
		w.Body = append(w.Body, p...)
	}
	return len(p), nil
}

type reader struct{ bytes.Reader }

func (*reader) Close() error { return nil }

// NewClient returns a client that POSTs body to Path with Content-Type
// application/json and Idempotency-Key: Key.
func NewClient(body []byte) *Client {
	c := &Client{body: &reader{}, W: &Writer{H: http.Header{}}, key: []string{Key}, data: body}
	r, _ := http.NewRequest(http.MethodPost, "http://api.example"+Path, nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header["Idempotency-Key"] = c.key
	r.ContentLength = int64(len(body))
	c.R = r
	return c
}

// SetKey sets the idempotency key of the next requests.
func (c *Client) SetKey(k string) { c.key[0] = k }

// Set sets the idempotency key and the body (of the same length) of the next requests.
func (c *Client) Set(key string, body []byte) { c.key[0], c.data = key, body }

// Do serves one request to h and returns the status.
func (c *Client) Do(h http.Handler) int {
	c.body.Reset(c.data)
	c.R.Body = c.body
	clear(c.W.H)
	c.W.Status, c.W.N, c.W.Body = 0, 0, c.W.Body[:0]
	h.ServeHTTP(c.W, c.R)
	return c.W.Status
}
