package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idemgen/idemgen/examples/coupons/api"
	"github.com/idemgen/idemgen/runtime/idem"
)

// couponService is the coupon team's service: it implements oapi-codegen's
// strict server interface and knows nothing about idempotency. A claim takes
// one coupon from the stock and records who got it; like the service of the
// seed article it has no "one per member" rule (a business rule cannot tell a
// retry from a second claim the member meant to make: that is the key's job).
type couponService struct {
	mu      sync.Mutex
	coupons map[string]*coupon
	now     func() time.Time
}

type coupon struct {
	title  string
	stock  int
	claims []claim
}

// claim is one coupon issued: what the finance team reconciles.
type claim struct {
	ID     string
	Member string
	Key    string // the Idempotency-Key of the request that made it
}

var _ api.StrictServerInterface = (*couponService)(nil)

func newCouponService(couponID, title string, stock int) *couponService {
	return &couponService{
		coupons: map[string]*coupon{couponID: {title: title, stock: stock}},
		now:     time.Now,
	}
}

func (s *couponService) GetCoupon(_ context.Context, req api.GetCouponRequestObject) (api.GetCouponResponseObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.coupons[req.CouponId]
	if !ok {
		return api.GetCoupon404JSONResponse{Code: api.NOTFOUND, Message: "no coupon " + req.CouponId}, nil
	}
	return api.GetCoupon200JSONResponse{CouponId: req.CouponId, Title: c.title, Stock: c.stock, Remaining: c.stock - len(c.claims)}, nil
}

func (s *couponService) ClaimCoupon(ctx context.Context, req api.ClaimCouponRequestObject) (api.ClaimCouponResponseObject, error) {
	member := memberOf(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.coupons[req.CouponId]
	if !ok {
		return api.ClaimCoupon404JSONResponse{Body: api.Error{Code: api.NOTFOUND, Message: "no coupon " + req.CouponId}}, nil
	}
	if len(c.claims) >= c.stock {
		return api.ClaimCoupon410JSONResponse{Body: api.Error{Code: api.SOLDOUT, Message: "all coupons were claimed"}}, nil
	}
	cl := claim{ID: fmt.Sprintf("%s-%04d", req.CouponId, len(c.claims)+1), Member: member, Key: req.Params.IdempotencyKey.String()}
	c.claims = append(c.claims, cl)
	location := "/coupons/" + req.CouponId + "/claims/" + cl.ID
	return api.ClaimCoupon201JSONResponse{
		Body: api.Claim{
			ClaimId: cl.ID, CouponId: req.CouponId, MemberId: member,
			ClaimedAt: s.now().UTC(), Remaining: c.stock - len(c.claims),
		},
		Headers: api.ClaimCoupon201ResponseHeaders{Location: &location},
	}, nil
}

// ledger returns every claim of a coupon, in order.
func (s *couponService) ledger(couponID string) []claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.coupons[couponID]; ok {
		return append([]claim(nil), c.claims...)
	}
	return nil
}

type memberKey struct{}

// memberOf returns the member authenticate put into ctx.
func memberOf(ctx context.Context) string {
	m, _ := ctx.Value(memberKey{}).(string)
	return m
}

// authenticate is the service's authentication middleware: the bearer token
// is the member's session, here simply the member id. A request without one
// is refused with 401 before anything else runs. The engine's
// idem.Options.Principal reads the member it puts into the context, so
// idempotency keys are scoped per member.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"code":"UNAUTHORIZED","message":"a member session (Authorization: Bearer ...) is required"}`)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), memberKey{}, token)))
	})
}

// principal is idem.Options.Principal: the member authenticate found. A
// request without one (a route left outside authenticate) is refused with
// 401: "" would be the key space that anonymous callers share (the engine
// refuses it too, with a 500).
func principal(r *http.Request) (string, error) {
	if m := memberOf(r.Context()); m != "" {
		return m, nil
	}
	return "", &idem.Problem{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Detail: "a member session (Authorization: Bearer ...) is required"}
}
