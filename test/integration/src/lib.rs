//! genplane's integration tests: the whole API server over real HTTPS on loopback, started in
//! the test's own process by `genplane_test_support::server` (assembled as
//! `genplane apiserver` is: TLS, client-certificate authentication, RBAC, admission, an audit
//! log), on SQLite and on a real etcd. The tests are one test binary, `tests/apiserver/`, with
//! a module per area; the crate itself has no code.
