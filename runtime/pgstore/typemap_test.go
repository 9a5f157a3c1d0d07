package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// invertedBytea is a bytea codec of a user's own: it scans a []byte with
// every byte inverted.
type invertedBytea struct{ pgtype.ByteaCodec }

func (c invertedBytea) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if next := c.ByteaCodec.PlanScan(m, oid, format, target); next != nil {
		return invertedPlan{next}
	}
	return nil
}

type invertedPlan struct{ next pgtype.ScanPlan }

func (p invertedPlan) Scan(src []byte, dst any) error {
	if err := p.next.Scan(src, dst); err != nil {
		return err
	}
	if b, ok := dst.(*[]byte); ok {
		for i := range *b {
			(*b)[i] ^= 0xff
		}
	}
	return nil
}

// secondsTimestamptz is a timestamptz codec of a user's own: it scans times
// truncated to the second.
type secondsTimestamptz struct{ *pgtype.TimestamptzCodec }

func (c secondsTimestamptz) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(pgtype.TimestamptzScanner); !ok {
		return nil
	}
	return secondsPlan{c.TimestamptzCodec.PlanScan(m, oid, format, &pgtype.Timestamptz{})}
}

type secondsPlan struct{ next pgtype.ScanPlan }

func (p secondsPlan) Scan(src []byte, dst any) error {
	var v pgtype.Timestamptz
	if err := p.next.Scan(src, &v); err != nil {
		return err
	}
	v.Time = v.Time.Truncate(time.Second)
	return dst.(pgtype.TimestamptzScanner).ScanTimestamptz(v)
}

// TestTypeMapHonoured: with a type map customised per connection (in
// AfterConnect), Get and Begin return the records Scan reads: times in the
// timestamptz codec's ScanLocation (the binary fast path puts them there),
// and what codecs of the user's own make of the columns (the store reads
// those rows with Scan).
func TestTypeMapHonoured(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+05:30", 5*3600+1800)
	for _, tc := range []struct {
		name  string
		typ   *pgtype.Type
		fast  bool           // the binary fast path still applies
		loc   *time.Location // the records' times are in loc (nil: time.Local)
		check func(t *testing.T, rec idem.Record)
	}{
		{name: "ScanLocationUTC", fast: true, loc: time.UTC,
			typ: &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}}},
		{name: "ScanLocationZone", fast: true, loc: zone,
			typ: &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: zone}}},
		{name: "DefaultCodecRegistered", fast: true,
			typ: &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{}}},
		{name: "OwnTimestamptzCodec",
			typ: &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: secondsTimestamptz{&pgtype.TimestamptzCodec{}}},
			check: func(t *testing.T, rec idem.Record) {
				require.Zero(t, rec.LeaseExpiresAt.Nanosecond())
				require.Zero(t, rec.ExpiresAt.Nanosecond())
			}},
		{name: "OwnByteaCodec",
			typ: &pgtype.Type{Name: "bytea", OID: pgtype.ByteaOID, Codec: invertedBytea{}},
			check: func(t *testing.T, rec idem.Record) {
				require.Equal(t, byte(1^0xff), rec.Fingerprint[0])
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
				c.MaxConns = 2
				c.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
					conn.TypeMap().RegisterType(tc.typ)
					return nil
				}
			})
			s := newStoreOn(t, p, Options{})
			f := fp(7)
			begin := func(key string, tok idem.Token) idem.BeginResult {
				res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: f, Token: tok, Lease: time.Minute, TTL: time.Hour})
				require.NoError(t, err)
				return res
			}
			require.True(t, begin("pending", 5).Acquired)
			require.True(t, begin("completed", 5).Acquired)
			require.NoError(t, s.Finish(ctx, "completed", 5, idem.StateCompleted, []byte("HTTP/1.1 200\r\n\r\nbody")))

			wantLoc := tc.loc
			if wantLoc == nil {
				wantLoc = time.Local
			}
			for _, key := range []string{"pending", "completed"} {
				rows, err := p.Query(ctx, s.q.get, key)
				require.NoError(t, err)
				require.True(t, rows.Next())
				loc, fast := fastRow(rows, recordOIDs)
				want, err := scanRecordRow(rows)
				rows.Close()
				require.NoError(t, err)
				require.NoError(t, rows.Err())
				require.Equal(t, wantLoc, want.ExpiresAt.Location())
				if tc.check != nil {
					tc.check(t, want)
				}

				got, found, err := s.Get(ctx, key)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, want, got, key)
				require.Equal(t, wantLoc, got.LeaseExpiresAt.Location(), key)
				require.Equal(t, wantLoc, got.ExpiresAt.Location(), key)

				// A replay or a live lease: the claim returns the record.
				res := begin(key, 6)
				require.False(t, res.Acquired, key)
				require.Equal(t, want, res.Record, key)
				require.Equal(t, wantLoc, res.Record.ExpiresAt.Location(), key)

				// Whether the store read the rows from their raw values.
				require.Equal(t, tc.fast, fast, key)
				require.Equal(t, tc.loc, loc, key)
			}
		})
	}
}

// TestDefaultScans: which type maps the binary fast path reads as Scan does.
func TestDefaultScans(t *testing.T) {
	zone := time.FixedZone("X", 3600)
	for _, tc := range []struct {
		name   string
		tweak  func(m *pgtype.Map)
		loc    *time.Location
		wantOK bool
	}{
		{"Default", func(*pgtype.Map) {}, nil, true},
		{"DefaultCodecsRegistered", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "int8", OID: pgtype.Int8OID, Codec: pgtype.Int8Codec{}})
			m.RegisterType(&pgtype.Type{Name: "bytea", OID: pgtype.ByteaOID, Codec: pgtype.ByteaCodec{}})
			m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{}})
		}, nil, true},
		{"ScanLocation", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: zone}})
		}, zone, true},
		{"OtherTypesCustomised", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "text", OID: pgtype.TextOID, Codec: invertedBytea{}})
			m.TryWrapScanPlanFuncs = append(m.TryWrapScanPlanFuncs, pgtype.TryWrapStructScanPlan)
		}, nil, true},
		{"OwnTimestamptzCodec", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: secondsTimestamptz{&pgtype.TimestamptzCodec{}}})
		}, nil, false},
		{"OwnByteaCodec", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "bytea", OID: pgtype.ByteaOID, Codec: invertedBytea{}})
		}, nil, false},
		{"Int8AsText", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "int8", OID: pgtype.Int8OID, Codec: pgtype.TextCodec{}})
		}, nil, false},
		{"Int4AsInt8", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "int4", OID: pgtype.Int4OID, Codec: pgtype.Int8Codec{}})
		}, nil, false},
		{"BoolAsInt2", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "bool", OID: pgtype.BoolOID, Codec: pgtype.Int2Codec{}})
		}, nil, false},
		{"Int2AsInt4", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "int2", OID: pgtype.Int2OID, Codec: pgtype.Int4Codec{}})
		}, nil, false},
		{"WrapperFirst", func(m *pgtype.Map) {
			m.TryWrapScanPlanFuncs = append([]pgtype.TryWrapScanPlanFunc{pgtype.TryFindUnderlyingTypeScanPlan}, m.TryWrapScanPlanFuncs...)
		}, nil, false},
		{"NoWrappers", func(m *pgtype.Map) { m.TryWrapScanPlanFuncs = nil }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := pgtype.NewMap()
			tc.tweak(m)
			loc, ok := defaultScans(m)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.loc, loc)
		})
	}
	m := pgtype.NewMap()
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = defaultScans(m) }))
}

// plainInt8 and plainBytea are codecs of a user's own that encode only plain
// Go values (int64, []byte), not pgtype's valuers.
type (
	plainInt8  struct{ pgtype.Int8Codec }
	plainBytea struct{ pgtype.ByteaCodec }
)

func (c plainInt8) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(int64); !ok {
		return nil
	}
	return c.Int8Codec.PlanEncode(m, oid, format, value)
}

func (c plainBytea) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.([]byte); !ok {
		return nil
	}
	return c.ByteaCodec.PlanEncode(m, oid, format, value)
}

// TestTypeMapArguments: on a connection whose type map has codecs of the
// user's own for the arguments' types, the store passes plain Go values,
// which such codecs take, instead of its valuers.
func TestTypeMapArguments(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 2
		c.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
			conn.TypeMap().RegisterType(&pgtype.Type{Name: "int8", OID: pgtype.Int8OID, Codec: plainInt8{}})
			conn.TypeMap().RegisterType(&pgtype.Type{Name: "bytea", OID: pgtype.ByteaOID, Codec: plainBytea{}})
			return nil
		}
	})
	s := newStoreOn(t, p, Options{})
	f := fp(3)
	req := &idem.BeginRequest{Key: "k", Fingerprint: f, Token: 9, Lease: time.Minute, TTL: time.Hour}
	res, err := s.Begin(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 9, idem.StateCompleted, []byte("resp")))
	rec, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, f, rec.Fingerprint)
	require.Equal(t, []byte("resp"), rec.Response)

	req.Key = "tx"
	res, err = s.Begin(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Acquired)
	require.NoError(t, s.ExtendLease(ctx, "tx", 9, time.Minute))
	_, commit, rollback, err := s.BeginTx(ctx, "tx", 9)
	require.NoError(t, err)
	defer rollback()
	require.NoError(t, commit(idem.StateCompleted, []byte("tx resp")))
	rec, found, err = s.Get(ctx, "tx")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, []byte("tx resp"), rec.Response)
}

// TestDefaultEncodes: which type maps take the valuer arguments.
func TestDefaultEncodes(t *testing.T) {
	require.True(t, defaultEncodes(pgtype.NewMap()))
	m := pgtype.NewMap()
	m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
	m.RegisterType(&pgtype.Type{Name: "int8", OID: pgtype.Int8OID, Codec: pgtype.Int8Codec{}})
	require.True(t, defaultEncodes(m))
	for _, typ := range []*pgtype.Type{
		{Name: "int8", OID: pgtype.Int8OID, Codec: plainInt8{}},
		{Name: "bytea", OID: pgtype.ByteaOID, Codec: plainBytea{}},
		{Name: "text", OID: pgtype.TextOID, Codec: invertedBytea{}},
		{Name: "interval", OID: pgtype.IntervalOID, Codec: pgtype.Int8Codec{}},
	} {
		m := pgtype.NewMap()
		m.RegisterType(typ)
		require.False(t, defaultEncodes(m), typ.Name)
	}
	m = pgtype.NewMap()
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = defaultEncodes(m) }))
}

// TestExtendLockedTypeMaps: a heartbeat of a record whose row a transaction
// locks (extendLocked) reads the lease end it grants as Scan does with the
// connection's type map (in the timestamptz codec's ScanLocation; through a
// codec of the user's own), and passes plain arguments to a type map that
// encodes in its own way; the commit writes that lease end.
func TestExtendLockedTypeMaps(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+05:30", 5*3600+1800)
	for _, tc := range []struct {
		name    string
		typ     *pgtype.Type // nil: pgx's defaults
		loc     *time.Location
		seconds bool // the codec truncates to the second
	}{
		{name: "Default", loc: time.Local},
		{name: "ScanLocationZone", loc: zone,
			typ: &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: zone}}},
		{name: "OwnTimestamptzCodec", loc: time.Local, seconds: true,
			typ: &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: secondsTimestamptz{&pgtype.TimestamptzCodec{}}}},
		{name: "OwnInt8Codec", loc: time.Local,
			typ: &pgtype.Type{Name: "int8", OID: pgtype.Int8OID, Codec: plainInt8{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
				c.MaxConns = 2
				c.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
					if tc.typ != nil {
						conn.TypeMap().RegisterType(tc.typ)
					}
					return nil
				}
			})
			s := newStoreOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
			res, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 3, Lease: time.Minute, TTL: time.Hour})
			require.NoError(t, err)
			require.True(t, res.Acquired)
			_, commit, rollback, err := s.BeginTx(ctx, "k", 3)
			require.NoError(t, err)
			defer rollback()
			k := holdKey{"k", 3}
			require.True(t, s.locked.has(k))
			var ends []time.Time
			for range 2 { // without the end of a previous lease ($3 NULL), then with
				require.NoError(t, s.ExtendLease(ctx, "k", 3, 2*time.Hour))
				end, ok := s.locked.leaseEnd(k)
				require.True(t, ok)
				require.Equal(t, tc.loc, end.Location())
				if tc.seconds {
					require.Zero(t, end.Nanosecond())
				}
				ends = append(ends, end)
			}
			require.False(t, ends[1].Before(ends[0]))
			require.NoError(t, commit(idem.StateCompleted, []byte("r")))
			rec, found, err := s.Get(ctx, "k")
			require.NoError(t, err)
			require.True(t, found)
			require.True(t, rec.ExpiresAt.Equal(ends[1]), "expires_at %v, the last heartbeat's lease end %v", rec.ExpiresAt, ends[1])
		})
	}
}
