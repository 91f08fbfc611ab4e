//! A launcher of real etcd processes for tests.
