//! apiregistration.k8s.io/v1 resources: the APIServices that say which server answers each
//! group-version (this one, `Local`, or an extension API server behind a Service).

pub mod apiservice;
