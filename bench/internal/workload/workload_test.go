package workload

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestPayloads(t *testing.T) {
	var a, b, c Body
	require.NoError(t, json.Unmarshal(Payload, &a))
	require.NoError(t, json.Unmarshal(PayloadOther, &b))
	require.NoError(t, json.Unmarshal(PayloadResent, &c))
	assert.Len(t, Payload, PayloadSize)
	assert.NotEqual(t, a.Customer, b.Customer, "PayloadOther is another request")
	assert.NotEqual(t, a.SentAt, c.SentAt, "PayloadResent differs in sent_at")
	c.SentAt = a.SentAt
	assert.Equal(t, a, c, "PayloadResent is the same request otherwise")
	assert.NotEqual(t, string(Payload[:20]), string(PayloadResent[:20]), "members reordered")
	_, err := idem.Compile(Spec())
	require.NoError(t, err)
}

// TestSpecMediaTypes: the policy declares application/json, as a generated
// policy of an operation with a JSON body does (idem.RequestSpec.MediaTypes;
// nil would be the Content-Type reading no generated code has).
func TestSpecMediaTypes(t *testing.T) {
	assert.Equal(t, []string{"application/json"}, Spec().Request.MediaTypes)
}

func TestKeys(t *testing.T) {
	seen := map[string]bool{}
	for r := range 3 {
		for _, k := range Keys(r, 1<<16) {
			n, err := idem.ParseKey(k, idem.FormatUUIDv7, 255)
			require.NoError(t, err, k)
			require.Equal(t, k, n)
			require.False(t, seen[k], "duplicate %s", k)
			seen[k] = true
		}
	}
}

func TestBodies(t *testing.T) {
	bodies := Bodies(300)
	seen := map[string]bool{}
	for _, b := range bodies {
		require.Len(t, b, PayloadSize)
		var v Body
		require.NoError(t, json.Unmarshal(b, &v), "%s", b)
		require.False(t, seen[string(b)])
		seen[string(b)] = true
	}
}

// The rotating replays make Rotation distinct records, then replay them in
// order, wrapping around: more distinct requests than any cache holds.
func TestRotating(t *testing.T) {
	var sets []string
	bodies := map[string]string{}
	testing.Benchmark(func(b *testing.B) {
		sets = sets[:0]
		Rotating(b, func(k string, body []byte) {
			sets = append(sets, k)
			if prev, ok := bodies[k]; ok && prev != string(body) {
				t.Errorf("key %s sent with two bodies", k)
			}
			bodies[k] = string(body)
		}, func() int { return http.StatusCreated })
	})
	keys, _ := rotation()
	if len(bodies) != Rotation {
		t.Fatalf("%d distinct requests, want %d", len(bodies), Rotation)
	}
	if len(sets) <= Rotation {
		t.Fatalf("only %d requests", len(sets))
	}
	for i, k := range sets {
		if k != keys[i%Rotation] {
			t.Fatalf("request %d: key %s, want %s", i, k, keys[i%Rotation])
		}
	}
}
