// Package xproc holds the cross-process tests of idemgen's shared stores:
// several server processes (the test binary itself, started again in
// server mode, see server_test.go) share one Redis or PostgreSQL store, and
// the tests check what exactly-once means across them and under faults:
//
//   - TestExactlyOnceAcrossProcesses: for Redis, PostgreSQL and PostgreSQL
//     in transactional mode, 200 keys with five concurrent duplicates each,
//     spread over three processes, make 200 side effects (rows in a shared
//     table, or entries in a shared Redis list); a process killed (SIGKILL)
//     or stalled (SIGSTOP) in the middle of a request is taken over by
//     another after its lease, with the side effect counts each mode
//     guarantees;
//   - TestMemstoreIsPerProcess: the negative control: with the in-memory
//     store each process executes its own duplicates;
//   - TestStoreOutage: the store stopped under load (a private redis-server
//     or PostgreSQL cluster, so other tests are not disturbed): requests fail
//     closed with 503 IDEMPOTENCY_STORE_UNAVAILABLE, no handler runs, and
//     service resumes when the store is back;
//   - TestStoreHang: the store hangs (a proxy that accepts connections and
//     forwards nothing): requests fail closed within the engine's
//     StoreTimeout, requests in flight end within their bound, and service
//     resumes.
//
// The guarantees these tests establish are documented in docs/runtime.md
// (Stores).
package xproc
