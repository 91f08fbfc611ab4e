//! Who checks features, and what the use log records.

use serde::Serialize;

/// Who checks features through a gate: recorded with every use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UseIdentity {
    /// The component, e.g. `apiserver`.
    pub component: String,
    /// The instance of that component, e.g. a host name with a process id.
    pub instance: String,
}

impl UseIdentity {
    /// The identity of `instance` of `component`.
    pub fn new(component: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            instance: instance.into(),
        }
    }
}

/// One entry of the use log: a component instance checked a feature and saw a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FeatureUse {
    /// The feature that was checked.
    pub feature: String,
    /// The value the check returned.
    pub value: bool,
    /// The component that checked it.
    pub component: String,
    /// The instance of that component.
    pub instance: String,
}
