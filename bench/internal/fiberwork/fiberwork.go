// Package fiberwork is the benchmark workload (package workload) on fiber
// v2 and fasthttp: an in-process client, the createOrder handler, the floor
// and the idempotency middleware as bench/middleware and bench/stores
// configure it.
package fiberwork

import (
	"encoding/json"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/idempotency"
	"github.com/valyala/fasthttp"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/workload"
)

// Client serves requests to a fasthttp handler in-process with one reused
// RequestCtx (fasthttp's own in-memory path; fiber's app.Test goes through a
// net.Conn and costs far more than the middleware). It is not safe for
// concurrent use: give each goroutine its own.
type Client struct{ ctx fasthttp.RequestCtx }

// NewClient returns a client whose requests are createOrder with this
// Idempotency-Key and body (copied).
func NewClient(key string, body []byte) *Client {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://api.example" + workload.Path)
	req.Header.SetContentType("application/json")
	req.Header.Set("Idempotency-Key", key)
	req.SetBody(body)
	c := &Client{}
	c.ctx.Init(&req, nil, nil)
	return c
}

// Set sets the key and the body (not copied) of the next requests.
func (c *Client) Set(key string, body []byte) {
	c.ctx.Request.Header.Set("Idempotency-Key", key)
	c.ctx.Request.SetBodyRaw(body)
}

// Do serves the request to h and returns the response's status.
func (c *Client) Do(h fasthttp.RequestHandler) int {
	c.ctx.Response.Reset()
	h(&c.ctx)
	return c.ctx.Response.StatusCode()
}

// Response is the last response, valid until the next Do.
func (c *Client) Response() *fasthttp.Response { return &c.ctx.Response }

// Floor writes the answer without reading the request.
func Floor(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.Header.Set("Location", workload.Location)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	_, _ = ctx.Write(workload.Response)
}

// Handler is workload.Handler in fiber: decode, answer 201. It counts its
// runs in calls unless calls is nil.
func Handler(calls *atomic.Int64) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if calls != nil {
			calls.Add(1)
		}
		var in workload.Body
		if err := json.Unmarshal(c.Body(), &in); err != nil {
			return c.Status(fiber.StatusBadRequest).SendString(err.Error())
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		c.Set(fiber.HeaderLocation, workload.Location)
		return c.Status(fiber.StatusCreated).Send(workload.Response)
	}
}

// OpsHandler is Handler for the correctness scenarios: ops decides the
// status of each run (package check).
func OpsHandler(ops *check.Ops) fiber.Handler {
	h := Handler(nil)
	return func(c *fiber.Ctx) error {
		if st := ops.Enter(); st != fiber.StatusCreated {
			return c.Status(st).SendString("failed")
		}
		return h(c)
	}
}

// App is a fiber app serving createOrder with h. With protected, h is behind
// fiber's idempotency middleware: the Idempotency-Key header, Location and
// Content-Type kept, its in-memory lock, and storage (fiber's in-memory one
// when nil).
func App(protected bool, storage fiber.Storage, h fiber.Handler) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if protected {
		app.Use(idempotency.New(idempotency.Config{
			KeyHeader:           "Idempotency-Key",
			KeepResponseHeaders: []string{fiber.HeaderContentType, fiber.HeaderLocation},
			Storage:             storage,
		}))
	}
	app.Post(workload.Path, h)
	return app
}

// Target is a check.Target serving a fasthttp handler with a RequestCtx
// per request (the correctness scenarios send concurrently).
type Target struct{ H fasthttp.RequestHandler }

// Do implements check.Target.
func (t Target) Do(key string, body []byte) check.Response {
	cl := NewClient(key, body)
	cl.Do(t.H)
	resp := cl.Response()
	r := check.Response{Status: resp.StatusCode(), Body: append([]byte(nil), resp.Body()...)}
	check.ParseProblem(&r, string(resp.Header.ContentType()))
	return r
}
