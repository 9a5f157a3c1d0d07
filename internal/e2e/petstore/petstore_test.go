package petstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/internal/e2e/petstore"
	"github.com/idemgen/idemgen/runtime/idem"
)

// pets is the petstore's strict server: it counts the pets it adds.
type pets struct{ added, listed atomic.Int64 }

func (p *pets) FindPets(context.Context, petstore.FindPetsRequestObject) (petstore.FindPetsResponseObject, error) {
	p.listed.Add(1)
	return petstore.FindPets200JSONResponse{}, nil
}

func (p *pets) AddPet(_ context.Context, req petstore.AddPetRequestObject) (petstore.AddPetResponseObject, error) {
	return petstore.AddPet200JSONResponse{Id: p.added.Add(1), Name: req.Body.Name}, nil
}

func (p *pets) DeletePet(context.Context, petstore.DeletePetRequestObject) (petstore.DeletePetResponseObject, error) {
	return petstore.DeletePet204Response{}, nil
}

func (p *pets) FindPetById(context.Context, petstore.FindPetByIdRequestObject) (petstore.FindPetByIdResponseObject, error) {
	return petstore.FindPetById200JSONResponse{}, nil
}

// The real petstore spec, annotated by testdata/overlays/petstore.overlay.yaml:
// POST /pets is strict with a uuid key the spec itself does not declare.
func TestAddPet(t *testing.T) {
	x := petstore.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	svc := &pets{}
	h := x.CaptureBody(petstore.Handler(petstore.NewStrictHandler(svc, []petstore.StrictMiddlewareFunc{x.StrictMiddleware})))
	do := func(method, path, key, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const key = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"
	first := do("POST", "/pets", key, `{"name":"Rex","tags":["a","b"]}`)
	assert.Equal(t, http.StatusOK, first.Code, first.Body.String())
	assert.JSONEq(t, `{"id":1,"name":"Rex"}`, first.Body.String())
	again := do("POST", "/pets", key, `{"name":"Rex","tags":["a","b"]}`)
	assert.Equal(t, http.StatusOK, again.Code)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, first.Body.String(), again.Body.String())
	reused := do("POST", "/pets", key, `{"name":"Max"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Code)
	assert.Contains(t, reused.Body.String(), idem.CodeKeyReused)
	missing := do("POST", "/pets", "", `{"name":"Rex"}`)
	assert.Equal(t, http.StatusBadRequest, missing.Code)
	assert.Contains(t, missing.Body.String(), idem.CodeKeyMissing)
	assert.Equal(t, int64(1), svc.added.Load())

	for range 2 {
		assert.Equal(t, http.StatusOK, do("GET", "/pets", key, "").Code)
	}
	assert.Equal(t, int64(2), svc.listed.Load(), "GET /pets untouched")
	assert.Len(t, x.Policies(), 1)
	assert.Equal(t, 36, x.Policy("addPet").Spec().Key.MaxLength)
}
