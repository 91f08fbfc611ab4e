//! The tests of the real `genplane` executable, one test binary with a module per area (as
//! coreutils' `tests/tests.rs`): every module starts its processes through [`support`].

mod support;

mod admission;
mod admission_authorizer;
mod admission_cost;
mod admission_exemptions;
mod admission_reinvocation;
mod admission_webhook_client;
mod aggregation;
mod all_in_one;
mod all_in_one_ha;
mod apiserver;
mod apiservices;
mod audit;
mod certificates;
mod compose_chaos;
mod controller_manager;
mod crd;
mod crd_conversion;
mod crd_many;
mod crd_scale;
mod dispatch;
mod encryption;
mod etcd_compaction;
mod features;
mod flowcontrol;
mod ha_chaos;
mod hostile_admission;
mod kubectl_acceptance;
mod kubectl_apply;
mod kubectl_strategic;
mod local_up;
mod mutating_admission;
mod namespace_gc;
mod networkregistry;
mod notify;
mod pki_healthcheck;
mod priority_and_fairness;
mod roles;
mod runtime_config;
mod security;
mod shutdown;
mod strategy_gates;
mod systemd;
