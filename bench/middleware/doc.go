// Package middleware compares idempotency middlewares on one workload
// (package workload: a 1 KB JSON body, a handler that decodes it and answers
// 201 with ~200 bytes), all in-process:
//
//   - net/http: idemgen's runtime (idem.Engine over memstore, strict
//     semantics, UUID keys, the canonical fingerprint with a volatile member
//     excluded, leases and fencing) over the bare handler, served through a
//     minimal reused ResponseWriter (workload.Client);
//   - fasthttp: the idempotency middleware of github.com/gofiber/fiber/v2
//     (middleware/idempotency, in-memory lock and storage), measured on its
//     own stack through app.Handler() with a reused fasthttp.RequestCtx,
//     next to fiber's bare handler and a bare fasthttp handler, its floor
//     (without fiber's app layer, routing and fiber.Ctx, which every fiber
//     row pays on top of it).
//
// Each stack has a floor (the scaffolding and the response write alone, no
// body decoding: no replay can beat it in time) and a bare row (the handler
// without middleware). Rows: first request (a new key every iteration),
// replay (the same request again, which any cache of an implementation
// answers), replay-rotating (workload.Rotation requests made before the
// loop, replayed in rotation: more than any cache holds) and their parallel
// versions (b.RunParallel).
//
// The tests in this package are the correctness side of the comparison:
// concurrent duplicates, a different body under a used key, a resend that
// differs only in member order and a volatile member, a retry after a 500.
// They log one "RESULT {json}" line each, which cmd/report renders.
package middleware
