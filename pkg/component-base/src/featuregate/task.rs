//! What a feature's transition runs besides waiting for agreement, and what each task leaves
//! in storage.

/// A resource by group, version, plural name and kind: what a [`Task`] works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceRef {
    /// The API group (`""` for core).
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The plural name.
    pub resource: &'static str,
    /// The kind.
    pub kind: &'static str,
}

impl ResourceRef {
    /// The resource `resource` (kind `kind`) of `group`/`version`.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        kind: &'static str,
    ) -> Self {
        Self {
            group,
            version,
            resource,
            kind,
        }
    }

    /// `resource.group`, or `resource` for the core group, as kubectl names it.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// A task a transition of a feature must run besides waiting for every component to agree
/// (KEP-3920's server flow), declared next to the feature's registration with
/// [`Registry::add_turn_off_task`](super::Registry::add_turn_off_task). The feature-controller runs them in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Task {
    /// Remove fields from every stored object of a resource, so that nothing the feature wrote
    /// is left when it is off. Each field is a dotted path (`spec.strategy`); the objects are
    /// patched with a JSON merge patch that sets each present field to `null`, which the
    /// strategy of a disabled field accepts (it only keeps a field the update still carries).
    ClearField {
        /// The resource.
        target: ResourceRef,
        /// The dotted paths of the fields to clear.
        fields: &'static [&'static str],
    },
    /// Wait until no object of a resource served only while the feature is on is stored. The
    /// objects stay readable and deletable while the cluster turns the feature off (roles whose
    /// gate is off keep serving them and running what removes them); the feature-controller
    /// deletes them itself only when an admin annotated the Feature
    /// `featuregates.genplane.io/delete-objects: "true"`.
    WaitForObjectsRemoved {
        /// The resource.
        target: ResourceRef,
    },
    /// Delete the objects of a resource that the feature's own code made (picked by a label),
    /// once every instance runs with the feature off: nothing renews or removes them any more.
    /// Never for objects users make.
    DeleteObjects {
        /// The resource.
        target: ResourceRef,
        /// The label selector (`key=value`) picking the feature's objects.
        selector: &'static str,
    },
}

impl Task {
    /// The task's type, as the Feature's `status.tasks[].type` names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Task::ClearField { .. } => "ClearField",
            Task::WaitForObjectsRemoved { .. } => "WaitForObjectsRemoved",
            Task::DeleteObjects { .. } => "DeleteObjects",
        }
    }

    /// What the task works on, in words.
    pub fn target(&self) -> String {
        self.stored().describe()
    }

    /// What the task removes from storage.
    pub fn stored(&self) -> Stored {
        match *self {
            Task::ClearField { target, fields } => Stored::Fields { target, fields },
            Task::WaitForObjectsRemoved { target } => Stored::Objects {
                target,
                selector: "",
            },
            Task::DeleteObjects { target, selector } => Stored::Objects { target, selector },
        }
    }
}

/// What a feature leaves in storage while it is on: what must be gone before a version of the
/// binary without the feature runs (`genplane feature-controller check --to-version`), and what
/// "no dangling state" means once it is off. The turn-off tasks declare it
/// ([`Task::stored`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stored {
    /// Fields of the objects of a resource.
    Fields {
        /// The resource.
        target: ResourceRef,
        /// The dotted paths of the fields.
        fields: &'static [&'static str],
    },
    /// Objects of a resource: every one (a resource served only while the feature is on), or
    /// those a label selector picks (objects the feature's code made).
    Objects {
        /// The resource.
        target: ResourceRef,
        /// A label selector (`key=value`); empty for every object.
        selector: &'static str,
    },
}

impl Stored {
    /// The resource the state is in.
    pub fn resource(&self) -> ResourceRef {
        match *self {
            Stored::Fields { target, .. } | Stored::Objects { target, .. } => target,
        }
    }

    /// The state in words: `leases.coordination.k8s.io spec.strategy,spec.preferredHolder`, or
    /// `networkclaims.networkregistry.genplane.io`.
    pub fn describe(&self) -> String {
        let resource = self.resource().group_resource();
        match self {
            Stored::Fields { fields, .. } => format!("{resource} {}", fields.join(",")),
            Stored::Objects { selector: "", .. } => resource,
            Stored::Objects { selector, .. } => format!("{resource} labelled {selector}"),
        }
    }
}
