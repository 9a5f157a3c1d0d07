package middleware

import (
	"encoding/json"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/idempotency"
	"github.com/valyala/fasthttp"

	"github.com/idemgen/idemgen/bench/internal/workload"
)

// fastClient serves requests to a fasthttp handler in-process with one
// reused RequestCtx (fasthttp's own in-memory path; fiber's app.Test goes
// through a net.Conn and costs far more than the middleware).
type fastClient struct {
	ctx fasthttp.RequestCtx
}

func newFastClient(body []byte) *fastClient {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://api.example" + workload.Path)
	req.Header.SetContentType("application/json")
	req.Header.Set("Idempotency-Key", workload.Key)
	req.SetBody(body)
	c := &fastClient{}
	c.ctx.Init(&req, nil, nil)
	return c
}

// set sets the key and the body (not copied) of the next requests.
func (c *fastClient) set(key string, body []byte) {
	c.ctx.Request.Header.Set("Idempotency-Key", key)
	c.ctx.Request.SetBodyRaw(body)
}

func (c *fastClient) do(h fasthttp.RequestHandler) int {
	c.ctx.Response.Reset()
	h(&c.ctx)
	return c.ctx.Response.StatusCode()
}

// fastFloor writes the answer without reading the request.
func fastFloor(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.Header.Set("Location", workload.Location)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	_, _ = ctx.Write(workload.Response)
}

// fiberHandler is workload.Handler in fiber: decode, answer 201.
func fiberHandler(calls *atomic.Int64) fiber.Handler {
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

// fiberApp is a fiber app serving createOrder, with the idempotency
// middleware (in-memory lock and storage, the Idempotency-Key header,
// Location and Content-Type kept) when protected. h replaces the handler.
func fiberApp(protected bool, h fiber.Handler) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if protected {
		app.Use(idempotency.New(idempotency.Config{
			KeyHeader:           "Idempotency-Key",
			KeepResponseHeaders: []string{fiber.HeaderContentType, fiber.HeaderLocation},
		}))
	}
	app.Post(workload.Path, h)
	return app
}
