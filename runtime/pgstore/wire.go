package pgstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/runtime/idem"
)

// The statements' arguments live in one struct per call, handed to pgx as
// pointer-shaped values (a struct of one pointer is stored in an interface
// without an allocation) that implement pgtype's valuer interfaces, so pgx
// encodes them without boxing each value: one allocation for all arguments
// instead of one per argument and the variadic slice. A tracer sees these
// values in TraceQueryStartData.Args; they keep the struct alive as long as
// it keeps them.

// claimArgs are the claim statement's $1…$6.
type claimArgs struct {
	key        string
	fp         idem.Fingerprint
	tok        int64
	lease, ttl time.Duration
	args       [6]any
}

func newClaimArgs(req *idem.BeginRequest, typed bool) *claimArgs {
	a := &claimArgs{key: req.Key, fp: req.Fingerprint, tok: int64(req.Token), lease: req.Lease, ttl: req.TTL}
	if typed {
		a.args = [6]any{keyArg{&a.key}, fpArg{&a.fp}, tokArg{&a.tok}, intervalArg{&a.lease}, intervalArg{&a.ttl}, req.SameFingerprintToReclaim}
	} else {
		a.args = [6]any{a.key, a.fp[:], a.tok, a.lease, a.ttl, req.SameFingerprintToReclaim}
	}
	return a
}

// typedArgs reports whether the statements of a connection in mode know their parameter types
// (the modes that describe a statement before executing it, the default
// among them), which the valuer arguments need: without a parameter type,
// pgx could not tell how to encode them, so the other modes get plain Go
// values.
func typedArgs(mode pgx.QueryExecMode) bool {
	switch mode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec:
		return true
	}
	return false
}

// defaultEncodes reports whether the type map m encodes the valuer arguments
// (keyArg, fpArg, bytesArg, tokArg, intervalArg) as it encodes the plain Go
// values: with pgx's default codecs for text, bytea, int8 and interval, which
// take the valuers directly. A codec of the user's own for one of these types
// may take plain values only, so such a connection gets those. Like
// defaultScans, it costs a few map lookups and runs on every statement.
func defaultEncodes(m *pgtype.Map) bool {
	return m != nil && codecIs[pgtype.TextCodec](m, pgtype.TextOID) && codecIs[pgtype.ByteaCodec](m, pgtype.ByteaOID) &&
		codecIs[pgtype.Int8Codec](m, pgtype.Int8OID) && codecIs[pgtype.IntervalCodec](m, pgtype.IntervalOID)
}

// typedOn reports whether a statement on conn may take the store's typed
// arguments: its pool's mode knows the parameters' types (typedArgs) and
// conn has the default codecs they need (defaultEncodes).
func (s *Store) typedOn(conn *pgx.Conn) bool { return s.typed && defaultEncodes(conn.TypeMap()) }

// getArgs are the get statement's $1.
type getArgs struct {
	key  string
	args [1]any
}

// finishArgs are the finish statement's $1…$4.
type finishArgs struct {
	key      string
	tok      int64
	response []byte
	args     [4]any
}

func newFinishArgs(key string, token idem.Token, state idem.State, response []byte, typed bool) *finishArgs {
	a := &finishArgs{key: key, tok: int64(token), response: response}
	if !typed {
		a.args = [4]any{key, a.tok, int16(state), response}
		return a
	}
	// A small int16 and a nil []byte box without allocating.
	var resp any = bytesArg{&a.response}
	if response == nil {
		resp = []byte(nil)
	}
	a.args = [4]any{keyArg{&a.key}, tokArg{&a.tok}, int16(state), resp}
	return a
}

// extendArgs are the extend statement's $1…$3.
type extendArgs struct {
	key   string
	tok   int64
	lease time.Duration
	args  [3]any
}

func newExtendArgs(key string, token idem.Token, lease time.Duration, typed bool) *extendArgs {
	a := &extendArgs{key: key, tok: int64(token), lease: lease}
	if typed {
		a.args = [3]any{keyArg{&a.key}, tokArg{&a.tok}, intervalArg{&a.lease}}
	} else {
		a.args = [3]any{key, a.tok, lease}
	}
	return a
}

// stillLockedArgs are the stillLocked statement's $1…$4: $3, the end of
// the last heartbeat's lease, is NULL (an untyped nil) before the first.
type stillLockedArgs struct {
	key   string
	tok   int64
	last  time.Time
	lease time.Duration
	args  [4]any
}

// newStillLockedArgs packs them; typed also needs pgx's default
// timestamptz codec (see defaultEncodes), which takes a timeArg directly.
func newStillLockedArgs(k holdKey, last time.Time, hasLast bool, lease time.Duration, typed bool) *stillLockedArgs {
	a := &stillLockedArgs{key: k.key, tok: int64(k.token), last: last, lease: lease}
	var lastArg any
	if typed {
		if hasLast {
			lastArg = timeArg{&a.last}
		}
		a.args = [4]any{keyArg{&a.key}, tokArg{&a.tok}, lastArg, intervalArg{&a.lease}}
	} else {
		if hasLast {
			lastArg = last
		}
		a.args = [4]any{a.key, a.tok, lastArg, lease}
	}
	return a
}

// stillLockedAnswer is the stillLocked statement's row.
type stillLockedAnswer struct {
	locked bool
	end    time.Time
}

var stillLockedOIDs = []uint32{pgtype.BoolOID, pgtype.TimestamptzOID}

// readStillLocked reads the one row of the stillLocked statement's rows and
// closes them: from the raw values when fastRow allows (as readRecord), with
// Scan otherwise.
func readStillLocked(rows pgx.Rows) (stillLockedAnswer, error) {
	var a stillLockedAnswer
	var err error
	if rows.Next() {
		if loc, ok := fastRow(rows, stillLockedOIDs); ok {
			v := rows.RawValues()
			if len(v) != 2 || len(v[0]) != 1 {
				err = errRecordColumns
			} else {
				a.locked = v[0][0] != 0
				a.end, err = readTimestamptz(v[1], loc)
			}
		} else {
			err = rows.Scan(&a.locked, &a.end)
		}
	} else {
		err = pgx.ErrNoRows
	}
	rows.Close()
	if rerr := rows.Err(); rerr != nil {
		return stillLockedAnswer{}, rerr
	}
	return a, err
}

// keyArg is a text argument.
type keyArg struct{ p *string }

func (a keyArg) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *a.p, Valid: true}, nil }
func (a keyArg) String() string                  { return *a.p }

// fpArg is a fingerprint as a bytea argument.
type fpArg struct{ p *idem.Fingerprint }

func (a fpArg) BytesValue() ([]byte, error) { return a.p[:], nil }

// bytesArg is a non-nil bytea argument.
type bytesArg struct{ p *[]byte }

func (a bytesArg) BytesValue() ([]byte, error) { return *a.p, nil }

// tokArg is a bigint argument.
type tokArg struct{ p *int64 }

func (a tokArg) Int64Value() (pgtype.Int8, error) { return pgtype.Int8{Int64: *a.p, Valid: true}, nil }

// timeArg is a timestamptz argument.
type timeArg struct{ p *time.Time }

func (a timeArg) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: *a.p, Valid: true}, nil
}

// intervalArg is an interval argument, encoded as pgx encodes a time.Duration.
type intervalArg struct{ p *time.Duration }

func (a intervalArg) IntervalValue() (pgtype.Interval, error) {
	return pgtype.Interval{Microseconds: int64(*a.p) / 1000, Valid: true}, nil
}

// The columns of a claim's answer and of a record, as pgx's binary formats
// carry them. readRecord decodes a record from the raw values of a row (no
// Scan plans, no intermediate values) when the row is in these formats and
// the connection's type map scans them as pgx's defaults do (see fastRow); any
// other row (a type map that asks for text, or has codecs of its own) is read
// by Scan instead.
var (
	claimOIDs  = []uint32{pgtype.BoolOID, pgtype.Int4OID, pgtype.Int2OID, pgtype.ByteaOID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.ByteaOID}
	recordOIDs = claimOIDs[2:]
)

// binaryRow reports whether the row's fields are in binary format with the
// given types.
func binaryRow(fds []pgconn.FieldDescription, oids []uint32) bool {
	if len(fds) != len(oids) {
		return false
	}
	for i, fd := range fds {
		if fd.Format != pgtype.BinaryFormatCode || fd.DataTypeOID != oids[i] {
			return false
		}
	}
	return true
}

// fastRow reports whether readRecord (or readClaim) may decode the current
// row of rows, whose columns should have the types oids: the row is in binary
// formats (binaryRow) and the type map of its connection scans it as
// readRecord decodes it (defaultScans). loc is the location to put the
// timestamps in (nil: the local zone).
func fastRow(rows pgx.Rows, oids []uint32) (loc *time.Location, ok bool) {
	if !binaryRow(rows.FieldDescriptions(), oids) {
		return nil, false
	}
	c := rows.Conn()
	if c == nil {
		return nil, false
	}
	return defaultScans(c.TypeMap())
}

// defaultScans reports whether Scan, with the type map m, reads the binary
// columns of claimOIDs into the destinations of scanClaim and scanRecordRow
// as readRecord does: with pgx's default codecs for bool, int2, int4, int8 and
// bytea, a *pgtype.TimestamptzCodec for timestamptz (whose ScanLocation it
// returns: Scan puts times in that location), and the default wrappers of the
// destinations no codec scans into directly (*time.Time and pointers to
// pointers). A type map customised in any other way, e.g. with a codec of its
// own for one of these types, is read by Scan.
//
// It costs a few map lookups and no allocation, so it runs on every row
// rather than being cached per connection: a type map changed after the
// connection's first statement is honoured too.
func defaultScans(m *pgtype.Map) (loc *time.Location, ok bool) {
	if m == nil || !codecIs[pgtype.BoolCodec](m, pgtype.BoolOID) ||
		!codecIs[pgtype.Int2Codec](m, pgtype.Int2OID) || !codecIs[pgtype.Int4Codec](m, pgtype.Int4OID) ||
		!codecIs[pgtype.Int8Codec](m, pgtype.Int8OID) || !codecIs[pgtype.ByteaCodec](m, pgtype.ByteaOID) {
		return nil, false
	}
	t, ok := m.TypeForOID(pgtype.TimestamptzOID)
	if !ok {
		return nil, false
	}
	tc, ok := t.Codec.(*pgtype.TimestamptzCodec)
	if !ok || tc == nil {
		return nil, false
	}
	// Scan finds no codec plan for a *time.Time (nor for a pointer to a
	// pointer) and tries the wrappers in order; pgx's first two take them.
	w := m.TryWrapScanPlanFuncs
	if len(w) < 2 || !sameFunc(w[0], pgtype.TryPointerPointerScanPlan) || !sameFunc(w[1], pgtype.TryWrapBuiltinTypeScanPlan) {
		return nil, false
	}
	return tc.ScanLocation, true
}

// codecIs reports whether the codec m has for oid is a C. pgx's default
// codecs for the integer types, bool and bytea are empty structs, so any C is
// the default one.
func codecIs[C pgtype.Codec](m *pgtype.Map, oid uint32) bool {
	t, ok := m.TypeForOID(oid)
	if !ok {
		return false
	}
	_, ok = t.Codec.(C)
	return ok
}

func sameFunc(f, g pgtype.TryWrapScanPlanFunc) bool {
	return f != nil && reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer()
}

var errRecordColumns = errors.New("pgstore: malformed record columns")

// readRecord decodes state, fingerprint, token, lease_expires_at, expires_at
// and response (binary formats; see fastRow) into rec, with the timestamps in
// loc (nil: the local zone). The response is copied: the values alias the
// connection's buffer.
func readRecord(rec *idem.Record, v [][]byte, loc *time.Location) error {
	if len(v) != 6 || len(v[0]) != 2 || len(v[2]) != 8 {
		return errRecordColumns
	}
	if len(v[1]) != len(rec.Fingerprint) {
		return fmt.Errorf("pgstore: stored fingerprint has %d bytes, want %d", len(v[1]), len(rec.Fingerprint))
	}
	rec.State = idem.State(int16(binary.BigEndian.Uint16(v[0])))
	copy(rec.Fingerprint[:], v[1])
	rec.Token = idem.Token(binary.BigEndian.Uint64(v[2]))
	var err error
	if rec.LeaseExpiresAt, err = readTimestamptz(v[3], loc); err != nil {
		return err
	}
	if rec.ExpiresAt, err = readTimestamptz(v[4], loc); err != nil {
		return err
	}
	if v[5] != nil {
		rec.Response = append(make([]byte, 0, len(v[5])), v[5]...)
	}
	return nil
}

// readTimestamptz decodes a binary timestamptz to the time.Time pgx's Scan
// makes of it: time.Unix, in the local zone, or in loc (a TimestamptzCodec's
// ScanLocation) when it is not nil.
func readTimestamptz(b []byte, loc *time.Location) (time.Time, error) {
	if len(b) != 8 {
		return time.Time{}, errRecordColumns
	}
	const microsecFromUnixEpochToY2K = 946684800 * 1000000
	us := int64(binary.BigEndian.Uint64(b))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return time.Time{}, errors.New("pgstore: infinite timestamp")
	}
	us += microsecFromUnixEpochToY2K
	t := time.Unix(us/1000000, (us%1000000)*1000)
	if loc != nil {
		t = t.In(loc)
	}
	return t, nil
}

// scanRecordRow reads a record's columns with Scan: the fallback of
// readRecord.
func scanRecordRow(rows pgx.Rows) (idem.Record, error) {
	var (
		rec   idem.Record
		state int16
		fp    []byte
		tok   int64
	)
	if err := rows.Scan(&state, &fp, &tok, &rec.LeaseExpiresAt, &rec.ExpiresAt, &rec.Response); err != nil {
		return idem.Record{}, err
	}
	return rec, fillRecord(&rec, state, fp, tok)
}
